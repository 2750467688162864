"""Embeddings and reranking (moonlm_embed, moonlm_embed_tokens,
moonlm_rerank) on the engine's synthetic BERT (generated into build/synth by
`make synth-models`), against llama.cpp's vectors
(engine/testdata/synth/synth-bert-Q8_0.embed.json)."""

import json
import math

import pytest

import moonlm
from conftest import REPO, synth_model

SYNTH = REPO / "engine" / "testdata" / "synth"
REF = json.loads((SYNTH / "synth-bert-Q8_0.embed.json").read_text())

try:
    import numpy as np
except ImportError:  # the binding works without NumPy: lists
    np = None


def rows(x):
    return x.tolist() if np is not None and isinstance(x, np.ndarray) else x


def cosine(a, b):
    dot = sum(p * q for p, q in zip(a, b))
    return dot / math.sqrt(sum(p * p for p in a) * sum(q * q for q in b))


@pytest.fixture(scope="module")
def bert(lib):
    with moonlm.Model(synth_model("synth-bert-Q8_0.gguf", REF["sha256"]), n_threads=2) as m:
        yield m


def case(pooling, normalize):
    return next(c for c in REF["cases"] if c["pooling"] == pooling and c["normalize"] == normalize)


@pytest.mark.parametrize("pooling,normalize", [("mean", 2), ("mean", -1), ("cls", -1), ("last", 2)])
def test_embed_matches_llamacpp(bert, pooling, normalize):
    c = case(pooling, normalize)
    got = bert.embed(c["texts"], pooling=pooling, normalize=normalize == 2)
    if np is not None:
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        assert got.shape == (len(c["texts"]), 256)
    got = rows(got)
    assert len(got) == len(c["embeddings"])
    for g, w in zip(got, c["embeddings"]):
        assert cosine(g, w) >= 0.999


def test_embed_default_pooling_is_the_files(bert):
    c = case("mean", 2)
    assert rows(bert.embed(c["texts"][:2], normalize=True)) == rows(bert.embed(c["texts"][:2], pooling="mean", normalize=True))
    one = rows(bert.embed(c["texts"][0], normalize=True))
    assert len(one) == 256 and isinstance(one[0], float)
    assert abs(sum(x * x for x in one) - 1) < 1e-5
    assert bert.embedding_length() == 256
    assert bert.embedding_length("rank") == 1


def test_embed_none_gives_each_tokens_vector(bert):
    c = case("none", -1)
    got = bert.embed(c["texts"][:2], pooling="none")
    assert len(got) == 2
    for g, w, toks in zip(got, c["embeddings"], c["tokens"]):
        g = rows(g)
        assert len(g) == len(toks) == len(w)
        for gr, wr in zip(g, w):
            assert cosine(gr, wr) >= 0.999


def test_embed_tokens_equal_texts(bert):
    c = case("cls", -1)
    by_text = rows(bert.embed(c["texts"], pooling="cls"))
    by_tokens = rows(bert.embed_tokens(c["tokens"], pooling="cls"))
    assert by_text == by_tokens


def test_rerank_matches_llamacpp(bert):
    c = case("rank", -1)
    for (q, d), w in zip(c["pairs"], c["embeddings"]):
        (s,) = bert.rerank(q, [d])
        assert isinstance(s, float)
        assert abs(s - w[0]) <= 3e-2
    assert bert.rerank("q", []) == []


def test_embed_errors(bert, model):
    assert rows(bert.embed([])) == [] or np is not None and bert.embed([]).shape == (0, 256)
    with pytest.raises(moonlm.InvalidArgumentError):
        bert.embed(["a"], pooling="max")
    with pytest.raises(TypeError):
        bert.embed([b"bytes"])
    with pytest.raises(TypeError):
        bert.embed(["a"], normalize="yes")
    with pytest.raises(moonlm.InvalidArgumentError):
        bert.embed_tokens([[101, 10**6, 102]])
    with pytest.raises(moonlm.InvalidArgumentError):
        bert.embed_tokens([[]])
    with pytest.raises(moonlm.ContextFullError):
        bert.embed_tokens([[101] * 513])
    # A decoder embeds (mean by default) but has no reranker head.
    v = rows(model.embed(["Once upon a time"], pooling="last"))
    assert len(v) == 1 and len(v[0]) == model.embedding_size
    with pytest.raises(moonlm.UnsupportedError):
        model.rerank("q", ["d"])


def test_embed_without_numpy_gives_lists(bert, monkeypatch):
    from moonlm import _args

    c = case("mean", 2)
    want = rows(bert.embed(c["texts"][:2], normalize=True))
    monkeypatch.setattr(_args, "_np", None)
    got = bert.embed(c["texts"][:2], normalize=True)
    assert type(got) is list and type(got[0]) is list and type(got[0][0]) is float
    assert got == want
    none = bert.embed(["hi"], pooling="none")
    assert type(none[0]) is list and len(none[0][0]) == 256


XLMR_REF = json.loads((SYNTH / "synth-xlmr-Q8_0.embed.json").read_text())


def test_xlmr_rerank_and_embed_match_llamacpp(lib):
    # XLM-RoBERTa-shaped (bge-reranker-v2-m3, bge-m3): a Unigram vocabulary
    # with its character map, pairs as <s> query </s> document </s>.
    with moonlm.Model(synth_model("synth-xlmr-Q8_0.gguf", XLMR_REF["sha256"]), n_threads=2) as m:
        rank = next(c for c in XLMR_REF["cases"] if c["pooling"] == "rank")
        docs = [d for _, d in rank["pairs"]]
        for (q, d), w in zip(rank["pairs"], rank["embeddings"]):
            (s,) = m.rerank(q, [d])
            assert abs(s - w[0]) <= 3e-2
        # Several documents in one call score as they do alone.
        q = rank["pairs"][0][0]
        together = m.rerank(q, docs[:2])
        alone = [m.rerank(q, [d])[0] for d in docs[:2]]
        assert together == pytest.approx(alone, abs=1e-5)
        c = next(c for c in XLMR_REF["cases"] if c["pooling"] == "cls")
        got = rows(m.embed(c["texts"]))  # the file's pooling: cls
        for g, w in zip(got, c["embeddings"]):
            assert cosine(g, w) >= 0.999
        assert m.tokenize(c["texts"][0]) == c["tokens"][0]
