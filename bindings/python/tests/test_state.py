"""Session state: prefix reuse counts what it evaluates, fork continues bit for
bit, and a saved state restores bit for bit, also in another process; bad
states raise the binding's errors."""

import json
import os
import struct
import subprocess
import sys

import pytest

import moonlm
from conftest import REPO, data_path

TEXT = "Once upon a time, there was a little dog named Max. He liked to run and play"


def floats(logits):
    """The logits as a list of floats (bit patterns survive float32 -> float)."""
    return [float(x) for x in logits]


def greedy(sess, logits, n):
    """n greedy decode steps from logits; every step's logits."""
    cur = floats(logits)
    out = []
    for _ in range(n):
        tok = max(range(len(cur)), key=cur.__getitem__)
        cur = floats(sess.decode(tok))
        out.append(cur)
    return out


def bits(rows):
    return [struct.pack(f"{len(r)}f", *r) for r in rows]


@pytest.fixture(scope="module")
def toks(model):
    return model.tokenize(TEXT)


def test_prefill_reuse_evaluates_only_new_tokens(model, toks):
    with model.session(n_ctx=128) as s, model.session(n_ctx=128) as ref:
        s.prefill_reuse(toks[:6])
        assert s.last_evaluated == 6
        got = floats(s.prefill_reuse(toks))
        assert s.last_evaluated == len(toks) - 6
        want = floats(ref.prefill(toks))
        assert bits([got]) == bits([want])
        assert s.tokens == toks
        st = s.stats()
        assert st == moonlm.SessionStats(len(toks), 128, len(toks), 6)
        # all held: the last token again, for its logits
        assert bits([floats(s.prefill_reuse(toks))]) == bits([want])
        assert s.last_evaluated == 1
        # a diverging sequence keeps the shared prefix only
        other = toks[:10] + [toks[10] + 1]
        s.prefill_reuse(other)
        assert s.last_evaluated == 1 and s.position == 11
        with pytest.raises(moonlm.InvalidArgumentError):
            s.prefill_reuse([])
        with pytest.raises(moonlm.InvalidArgumentError):
            s.prefill_reuse([model.vocab_size])
        with pytest.raises(moonlm.ContextFullError):
            s.prefill_reuse([1] * 129)
        assert s.position == 11


def test_fork_continues_bit_for_bit(model, toks):
    with model.session(n_ctx=128) as ref:
        want = greedy(ref, ref.prefill(toks), 6)
    a = model.session(n_ctx=128)
    logits = floats(a.prefill(toks))
    b = a.fork()
    assert b.position == len(toks) and b.n_ctx == 128 and b.kv_type == "f16"
    assert b.stats().n_evaluated == 0
    a.decode(3)
    a.close()
    assert bits(greedy(b, logits, 6)) == bits(want)
    b.close()
    with pytest.raises(moonlm.InvalidArgumentError):
        b.fork()


def test_save_load_bytes_and_file(stories_path, model, toks, tmp_path):
    with model.session(n_ctx=128, kv_type="f32") as s:
        logits = floats(s.prefill(toks))
        data = s.save_state()
        path = tmp_path / "state.bin"
        assert s.save_state(path) is None
        assert path.read_bytes() == data
        want = greedy(s, logits, 6)
    # a second open of the model file
    with moonlm.Model(stories_path, n_threads=1) as m2:
        for src in (data, bytearray(data), memoryview(data), path, str(path)):
            with m2.session(n_ctx=100, kv_type="f32") as r:
                r.load_state(src)
                assert r.tokens == toks
                assert bits(greedy(r, logits, 6)) == bits(want)


def test_bad_states(model, toks, tmp_path):
    with model.session(n_ctx=128) as s:
        s.prefill(toks)
        good = s.save_state()
    with model.session(n_ctx=128) as r:
        r.prefill(toks[:3])
        flipped = bytearray(good)
        flipped[len(good) // 2] ^= 1
        for bad in (good[:-1], bytes(flipped), b"", b"MOONLMKV" + bytes(200)):
            with pytest.raises(moonlm.BadFileError):
                r.load_state(bad)
        with model.session(n_ctx=128, kv_type="f32") as f32:
            with pytest.raises(moonlm.InvalidArgumentError, match="KV cache"):
                f32.load_state(good)
        with model.session(n_ctx=len(toks) - 1) as small:
            with pytest.raises(moonlm.ContextFullError):
                small.load_state(good)
        with pytest.raises(moonlm.MoonlmIOError):
            r.load_state(tmp_path / "absent")
        with pytest.raises(moonlm.InvalidArgumentTypeError):
            r.load_state(42)
        with pytest.raises(moonlm.InvalidArgumentError):
            r.save_state("")
        assert r.position == 3


def test_state_of_another_model(model):
    with moonlm.Model(data_path("models/tiny-random-llama.gguf"), n_threads=1) as other:
        with other.session(n_ctx=64) as o:
            o.prefill([1, 2, 3])
            foreign = o.save_state()
    with model.session(n_ctx=64) as s:
        with pytest.raises(moonlm.InvalidArgumentError, match="another model"):
            s.load_state(foreign)


CHILD = r"""
import json, struct, sys, moonlm
mode, model_path, state_path, text = sys.argv[1:5]
def floats(l): return [float(x) for x in l]
with moonlm.Model(model_path, n_threads=1) as m, m.session(n_ctx=128) as s:
    toks = m.tokenize(text)
    if mode == "save":
        logits = floats(s.prefill(toks))
        s.save_state(state_path)
    else:
        s.load_state(state_path)
        assert s.tokens == toks
        logits = json.loads(sys.stdin.read())
    out = []
    cur = logits
    for _ in range(6):
        tok = max(range(len(cur)), key=cur.__getitem__)
        cur = floats(s.decode(tok))
        out.append(struct.pack(f"{len(cur)}f", *cur).hex())
    print(json.dumps({"start": logits if mode == "save" else None, "steps": out}))
"""


def test_state_across_processes(stories_path, tmp_path):
    """One process saves and runs on; another restores: the same logits, bit for bit."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "bindings" / "python" / "src"))
    state = str(tmp_path / "state.bin")

    def child(mode, stdin=""):
        r = subprocess.run(
            [sys.executable, "-c", CHILD, mode, stories_path, state, TEXT],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout)

    saved = child("save")
    restored = child("load", json.dumps(saved["start"]))
    assert restored["steps"] == saved["steps"]


def test_q8_0_cache_state_and_fork():
    """A Q8_0 KV cache saves, restores and forks bit for bit; a model whose
    head dimension is not a multiple of 32 refuses it."""
    from conftest import default_model

    with moonlm.Model(data_path("models/stories260K.gguf"), n_threads=1) as st:
        with pytest.raises(moonlm.UnsupportedError):
            st.session(n_ctx=16, kv_type="q8_0")
    with moonlm.Model(default_model("SmolLM2-135M-Instruct.Q4_1.gguf")) as m:
        with m.session(n_ctx=64, kv_type="q8_0") as s:
            logits = floats(s.prefill(m.tokenize("The three primary colors are")))
            data = s.save_state()
            f = s.fork()
            want = greedy(s, logits, 3)
        with f, m.session(n_ctx=64, kv_type="q8_0") as r:
            assert f.kv_type == "q8_0"
            r.load_state(data)
            assert bits(greedy(f, logits, 3)) == bits(want)
            assert bits(greedy(r, logits, 3)) == bits(want)
        with m.session(n_ctx=64) as f16:
            with pytest.raises(moonlm.InvalidArgumentError):
                f16.load_state(data)
