"""Checkpoint settings of a hybrid model's session: a tiny Qwen3.5 (one
gated DeltaNet layer, one attention layer) written with the gguf package
over stories260K's tokenizer."""

import math

import pytest

import moonlm

gguf = pytest.importorskip("gguf", reason="the gguf package writes the test model")
np = pytest.importorskip("numpy", reason="the gguf package writes NumPy arrays")


def write_tiny_hybrid(src, dst):
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(str(dst), arch="qwen35")
    for key, f in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(key, f.contents(), f.types[0])
    dim, heads, hd, ff, vocab = 64, 2, 32, 64, 512
    conv_k, state, k_heads, v_heads = 4, 16, 2, 2
    inner = v_heads * state
    conv_dim = 2 * k_heads * state + inner
    u32 = gguf.GGUFValueType.UINT32
    for k, v in {
        "context_length": 256, "embedding_length": dim, "block_count": 2, "feed_forward_length": ff,
        "attention.head_count": heads, "attention.head_count_kv": 1, "attention.key_length": hd,
        "attention.value_length": hd, "rope.dimension_count": 8, "full_attention_interval": 2,
        "ssm.conv_kernel": conv_k, "ssm.state_size": state, "ssm.group_count": k_heads,
        "ssm.time_step_rank": v_heads, "ssm.inner_size": inner,
    }.items():
        w.add_key_value("qwen35." + k, v, u32)
    w.add_key_value("qwen35.attention.layer_norm_rms_epsilon", 1e-6, gguf.GGUFValueType.FLOAT32)
    seed = [0]

    def add(name, *shape, value=None):
        # GGUF shapes are ggml's (row length first); NumPy's are reversed.
        seed[0] += 1
        n = math.prod(shape)
        if value is None:
            data = 0.08 * np.sin(np.arange(n) * 0.7 + seed[0] * 1.3)
        else:
            data = np.full(n, value)
        w.add_tensor(name, data.astype(np.float32).reshape(tuple(reversed(shape))))

    add("token_embd.weight", dim, vocab)
    for il in range(2):
        p = f"blk.{il}."
        add(p + "attn_norm.weight", dim, value=1.0)
        if il == 1:
            add(p + "attn_q.weight", dim, 2 * heads * hd)
            add(p + "attn_k.weight", dim, hd)
            add(p + "attn_v.weight", dim, hd)
            add(p + "attn_q_norm.weight", hd, value=1.0)
            add(p + "attn_k_norm.weight", hd, value=1.0)
            add(p + "attn_output.weight", heads * hd, dim)
        else:
            add(p + "attn_qkv.weight", dim, conv_dim)
            add(p + "attn_gate.weight", dim, inner)
            add(p + "ssm_beta.weight", dim, v_heads)
            add(p + "ssm_alpha.weight", dim, v_heads)
            add(p + "ssm_conv1d.weight", conv_k, conv_dim)
            add(p + "ssm_dt.bias", v_heads, value=0.0)
            add(p + "ssm_a", v_heads, value=-0.5)
            add(p + "ssm_norm.weight", state, value=1.0)
            add(p + "ssm_out.weight", inner, dim)
        add(p + "post_attention_norm.weight", dim, value=1.0)
        add(p + "ffn_gate.weight", dim, ff)
        add(p + "ffn_up.weight", dim, ff)
        add(p + "ffn_down.weight", ff, dim)
    add("output_norm.weight", dim, value=1.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def hybrid(stories_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("hybrid") / "tiny-hybrid.gguf"
    write_tiny_hybrid(stories_path, path)
    with moonlm.Model(path, n_threads=1) as m:
        yield m


PROMPT = [1, 403, 407, 261, 378, 290, 330, 324]


def run(sess):
    logits = sess.prefill(PROMPT)
    for _ in range(10):
        logits = sess.decode(int(max(range(len(logits)), key=logits.__getitem__)))


def test_checkpoint_every_and_rewind(hybrid):
    with hybrid.session(n_ctx=128, checkpoint_every=4) as s:
        run(s)
        cp = s.checkpoints()
        assert cp.every == 4 and cp.max_count >= 2 and cp.bytes_held > 0
        assert cp.positions == (8, 12, 16)
        before = s.stats().n_evaluated
        s.rewind(12)  # a checkpoint: nothing evaluated
        assert s.stats().n_evaluated == before
        assert s.checkpoints().positions == (8, 12)


def test_checkpoint_defaults_and_none(hybrid):
    with hybrid.session(n_ctx=128) as s:
        run(s)
        cp = s.checkpoints()
        assert (cp.every, cp.positions) == (32, (8,))
        assert cp.max_count >= 2
    with moonlm.Session(hybrid, n_ctx=128, checkpoint_every=1, checkpoint_bytes=-1) as s:
        run(s)
        assert s.checkpoints() == moonlm.Checkpoints(0, 0, 0, ())


def test_dense_model_has_none(model):
    with model.session(n_ctx=64, checkpoint_every=4) as s:
        s.prefill([1, 2, 3])
        assert s.checkpoints() == moonlm.Checkpoints(0, 0, 0, ())


def test_checkpoint_arguments_checked(hybrid):
    with pytest.raises(TypeError):
        hybrid.session(checkpoint_every="often")
    with pytest.raises(ValueError):
        hybrid.session(checkpoint_every=1 << 40)
    with pytest.raises(ValueError):
        hybrid.session(checkpoint_bytes=1 << 70)
