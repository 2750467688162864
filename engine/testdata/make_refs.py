#!/usr/bin/env python3
"""Make llama.cpp reference logits in the shared test data's *.ref.jsonl format.

Usage: make_refs.py MODEL.gguf PROMPTS.txt [--greedy N] [--kv-f32 | --kv-q8] [--no-repack]
                    [--parse-special] > OUT.ref.jsonl

Needs llama-cpp-python (0.3.36 made the files here) on PYTHONPATH. Runs the
CPU backend with 2 threads, n_ctx 512, the prompt as one batch, flash
attention off; the KV cache is F16 unless --kv-f32, or Q8_0 (K and V,
with flash attention on) with --kv-q8. --no-repack turns off
llama.cpp's repacked weight layouts (use_extra_bufts; on x86 with AVX2 it
repacks Q4_K into q4_K_8x8, which sums the dot products in another order).
Prompts are one a line with \\n standing for a newline; an empty line is BOS
alone. BOS is added; special tokens are parsed only with --parse-special.
"""
import argparse, ctypes, json, sys

import numpy as np
import llama_cpp as L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("prompts")
    ap.add_argument("--greedy", type=int, default=24)
    ap.add_argument("--kv-f32", action="store_true")
    ap.add_argument("--kv-q8", action="store_true", help="Q8_0 K and V caches (flash attention on, as llama.cpp needs for a quantized V)")
    ap.add_argument("--no-repack", action="store_true")
    ap.add_argument("--parse-special", action="store_true")
    a = ap.parse_args()

    global _quiet  # the callback must outlive the call
    _quiet = L.llama_log_callback(lambda level, text, ud: None)
    L.llama_log_set(_quiet, None)
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    if a.no_repack:
        mp.use_extra_bufts = False
    model = L.llama_model_load_from_file(a.model.encode(), mp)
    vocab = L.llama_model_get_vocab(model)
    nv = L.llama_vocab_n_tokens(vocab)

    def tokenize(text):
        b = text.encode()
        buf = (L.llama_token * (len(b) + 16))()
        n = L.llama_tokenize(vocab, b, len(b), buf, len(buf), True, a.parse_special)
        assert n >= 0
        return list(buf[:n])

    def piece(tok):
        buf = ctypes.create_string_buffer(256)
        n = L.llama_token_to_piece(vocab, tok, buf, len(buf), 0, False)
        return buf.raw[:n]

    def dist(row):
        row = row.astype(np.float64)
        m = row.max()
        lse = m + np.log(np.exp(row - m).sum())
        top = np.argsort(-row, kind="stable")[:10]
        return {"lse": float(lse), "top": [[int(t), float(np.float32(row[t]))] for t in top]}

    with open(a.prompts, encoding="utf-8") as f:
        prompts = [l.rstrip("\n").replace("\\n", "\n") for l in f]
    for prompt in prompts:
        cp = L.llama_context_default_params()
        cp.n_ctx = 512
        cp.n_batch = cp.n_ubatch = 512
        cp.n_threads = cp.n_threads_batch = 2
        cp.flash_attn_type = 0
        if a.kv_f32:
            cp.type_k = cp.type_v = 0
        if a.kv_q8:
            cp.type_k = cp.type_v = 8  # GGML_TYPE_Q8_0
            cp.flash_attn_type = 1  # enabled
        ctx = L.llama_init_from_model(model, cp)
        toks = tokenize(prompt)
        batch = L.llama_batch_init(max(len(toks), 1), 0, 1)

        def run(tokens, pos0, all_logits):
            for i, t in enumerate(tokens):
                batch.token[i] = t
                batch.pos[i] = pos0 + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if all_logits or i == len(tokens) - 1 else 0
            batch.n_tokens = len(tokens)
            assert L.llama_decode(ctx, batch) == 0
            n = len(tokens) if all_logits else 1
            return np.ctypeslib.as_array(L.llama_get_logits(ctx), shape=(n * nv,)).reshape(n, nv).copy()

        lg = run(toks, 0, True)
        rec = {"prompt": prompt, "tokens": toks, "prompt_logits": [dist(r) for r in lg]}
        greedy, glog = [], []
        last = lg[-1]
        pos = len(toks)
        for _ in range(a.greedy):
            t = int(np.argmax(last))
            greedy.append(t)
            if L.llama_vocab_is_eog(vocab, t):
                break
            last = run([t], pos, False)[0]
            pos += 1
            glog.append(dist(last))
        rec["greedy"] = greedy
        rec["greedy_text"] = b"".join(piece(t) for t in greedy).decode("utf-8", "replace")
        rec["greedy_logits"] = glog
        print(json.dumps(rec), flush=True)
        L.llama_batch_free(batch)
        L.llama_free(ctx)


if __name__ == "__main__":
    main()
