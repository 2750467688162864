"""Batched decoding: decode_batch advances several sessions in one step with
each session's logits bit for bit those it gets alone; a bad entry fails
alone; the asyncio Batcher runs one step for every waiting task."""

import asyncio
import struct

import pytest

import moonlm
from conftest import synth_model

PROMPTS = [
    "Once upon a time, there was a little dog named Max.",
    "The cat sat",
    "Tom and Lily went to the park to play",
]


def bits(x):
    return struct.pack(f"{len(x)}f", *[float(v) for v in x])


def argmax(x):
    x = [float(v) for v in x]
    return max(range(len(x)), key=x.__getitem__)


def alone(model, toks, n, n_ctx=128):
    """Prefill then n greedy decodes on a fresh session: every step's logits."""
    with model.session(n_ctx=n_ctx) as s:
        out = [bits(s.prefill(toks))]
        for _ in range(n):
            out.append(bits(s.decode(argmax_bits(out[-1]))))
        return out


def argmax_bits(b):
    return argmax(struct.unpack(f"{len(b) // 4}f", b))


def test_decode_batch_matches_alone(model):
    check_matches_alone(model)


# The synthetic gemma4 (layers of different shapes) and Qwen3.5 (recurrent
# layers beside attention, whose state each session keeps) batch too. The
# sha256 are those engine/synth_models_test.go records.
SYNTH = [
    ("synth-gemma4-Q8_0.gguf", "c79c939b0cf5f1dc2fbc89ededb1f9f5a719d8bdb61abc7122c658946b2c1947"),
    ("synth-qwen35-Q8_0.gguf", "ff75b3713cc28c5ae9f04279e1b1b5c2181fa3ec68fd351b02f9153dd89ca615"),
]


@pytest.mark.parametrize("name,sha256", SYNTH)
def test_decode_batch_synth_matches_alone(lib, name, sha256):
    with moonlm.Model(synth_model(name, sha256), n_threads=2) as m:
        check_matches_alone(m)


def check_matches_alone(model):
    """Three sessions stepped together for six steps (the prompts
    prefilled in the first) equal each alone, bit for bit."""
    prompts = [model.tokenize(p) for p in PROMPTS]
    want = [alone(model, t, 5) for t in prompts]
    sessions = [model.session(n_ctx=128) for _ in prompts]
    try:
        got = [[] for _ in prompts]
        entries = list(zip(sessions, prompts))
        for _ in range(6):
            assert moonlm.decode_batch(model, entries) == [None] * len(entries)
            for i, s in enumerate(sessions):
                got[i].append(bits(s.logits))
            entries = [(s, argmax(s.logits)) for s in sessions]
        assert got == want
        assert [s.position for s in sessions] == [len(p) + 5 for p in prompts]
    finally:
        for s in sessions:
            s.close()


def test_decode_batch_entry_errors(model):
    with model.session(n_ctx=16) as a, model.session(n_ctx=16) as b, model.session(n_ctx=16) as c:
        errs = moonlm.decode_batch(model, [(a, [1, 2]), (b, [model.vocab_size - 1 + 1]), (a, 3), (c, 5)])
        assert errs[0] is None and errs[3] is None
        assert isinstance(errs[1], moonlm.InvalidArgumentError)
        assert isinstance(errs[2], moonlm.BusyError)
        assert (a.position, b.position, c.position) == (2, 0, 1)
        with pytest.raises(moonlm.InvalidArgumentError):
            moonlm.decode_batch(model, [(b, [model.vocab_size])], raise_first=True)
        with pytest.raises(moonlm.ContextFullError):
            moonlm.decode_batch(model, [(c, list(range(1, 17)))], raise_first=True)
        with pytest.raises(TypeError):
            moonlm.decode_batch(model, [(a, "text")])
        assert moonlm.decode_batch(model, []) == []
    assert moonlm.max_batch_tokens(model) >= 8


def test_batcher_shares_steps(model):
    prompts = [model.tokenize(p) for p in PROMPTS]
    n = 6
    want = [alone(model, t, n) for t in prompts]

    async def run():
        b = moonlm.Batcher(model)
        sessions = [model.session(n_ctx=128) for _ in prompts]

        async def one(s, toks):
            out = [bits(await b.decode(s, toks))]
            for _ in range(n):
                out.append(bits(await b.decode(s, argmax_bits(out[-1]))))
            return out

        try:
            got = await asyncio.gather(*(one(s, t) for s, t in zip(sessions, prompts)))
        finally:
            for s in sessions:
                s.close()
        return got, b.steps

    got, steps = asyncio.run(run())
    assert got == want
    assert steps == n + 1, "every task's tokens went in the same steps"


def test_batcher_long_prompt_in_chunks(model):
    toks = model.tokenize(" ".join(PROMPTS * 8))
    b_max = moonlm.max_batch_tokens(model)
    assert len(toks) > b_max
    want = alone(model, toks, 0, n_ctx=512)[0]

    async def run():
        b = moonlm.Batcher(model)
        with model.session(n_ctx=512) as s:
            return bits(await b.decode(s, toks)), b.steps

    got, steps = asyncio.run(run())
    assert got == want and steps >= 2


QWEN35 = SYNTH[1]


def checkpoint_positions(model, chunks):
    """The checkpoints a fresh session holds after one prefill per chunk."""
    with model.session(n_ctx=512) as s:
        for c in chunks:
            s.prefill(c)
        return s.checkpoints().positions


def test_decode_batch_continues(lib):
    """A prompt fed in chunks to the synthetic Qwen3.5 (a hybrid model,
    whose sessions keep checkpoints of their recurrent state): marked
    continues but the last, the chunks are checkpointed as one prefill;
    unmarked, as one prefill each. The logits are the same either way."""
    with moonlm.Model(synth_model(*QWEN35), n_threads=2) as m:
        toks = m.tokenize(PROMPTS[0])
        assert len(toks) >= 12
        toks = toks[:12]
        chunks = [toks[i:i + 4] for i in range(0, 12, 4)]
        joined, split = checkpoint_positions(m, [toks]), checkpoint_positions(m, chunks)
        assert joined != split, "the test needs chunks that leave checkpoints of their own"
        with m.session(n_ctx=128) as a, m.session(n_ctx=128) as b, m.session(n_ctx=128) as c:
            for k, ch in enumerate(chunks):
                more = k + 1 < len(chunks)
                errs = moonlm.decode_batch(m, [moonlm.BatchEntry(a, ch, continues=more), (b, ch), (c, ch, more)])
                assert errs == [None, None, None]
            assert a.checkpoints().positions == joined
            assert b.checkpoints().positions == split
            assert c.checkpoints().positions == joined
            assert bits(a.logits) == bits(b.logits)
            with pytest.raises(TypeError):
                moonlm.decode_batch(m, [(a, 1, "yes")])
            with pytest.raises(TypeError):
                moonlm.decode_batch(m, [(a, 1, True, 4)])


def test_batcher_prompt_chunks_are_one_prefill(lib):
    """The Batcher marks the chunks of a prompt longer than a step
    continues, and a caller's own chunks when it says continues=True: the
    hybrid session holds one prefill's checkpoints."""
    with moonlm.Model(synth_model(*QWEN35), n_threads=2) as m:
        toks = m.tokenize(" ".join(PROMPTS * 4))
        step = moonlm.max_batch_tokens(m)
        assert step < len(toks) <= 512
        joined = checkpoint_positions(m, [toks])
        assert joined != checkpoint_positions(m, [toks[i:i + step] for i in range(0, len(toks), step)])

        async def run():
            b = moonlm.Batcher(m)
            with m.session(n_ctx=512) as s, m.session(n_ctx=512) as t:
                await b.decode(s, toks)
                await b.decode(t, toks[:5], continues=True)
                await b.decode(t, toks[5:])
                with pytest.raises(TypeError):
                    await b.decode(t, 1, continues=1)
                return b.steps, s.checkpoints().positions, t.checkpoints().positions

        steps, got_s, got_t = asyncio.run(run())
        assert steps >= 2
        assert got_s == joined and got_t == joined
