"""Every value crossing the ABI is checked by the binding, never wrapped by
ctypes (decode(2**32+5) decoding token 5) or cut (a path at a NUL): a wrong
type raises an error that is both a TypeError and InvalidArgumentError, an
out-of-range value an InvalidArgumentError (a ValueError); each names the
parameter."""

from array import array

import numpy as np
import pytest

import moonlm


def wrong_type(param):
    """pytest.raises for a wrong type naming param."""
    return pytest.raises(moonlm.InvalidArgumentTypeError, match=param)


def out_of_range(param):
    """pytest.raises for a value out of range naming param (not a type error)."""
    return _NotTypeError(param)


class _NotTypeError:
    def __init__(self, param):
        self.ctx = pytest.raises(moonlm.InvalidArgumentError, match=param)

    def __enter__(self):
        self.info = self.ctx.__enter__()
        return self.info

    def __exit__(self, *exc):
        suppressed = self.ctx.__exit__(*exc)
        e = self.info.value
        assert not isinstance(e, TypeError), f"{e!r} is a TypeError"
        assert isinstance(e, ValueError) and e.status == 1
        return suppressed


def test_the_error_classes():
    assert issubclass(moonlm.InvalidArgumentTypeError, TypeError)
    assert issubclass(moonlm.InvalidArgumentTypeError, moonlm.InvalidArgumentError)
    assert issubclass(moonlm.InvalidArgumentError, ValueError)
    assert issubclass(moonlm.InvalidArgumentError, moonlm.MoonlmError)


def test_token_ids_are_range_checked(model):
    with model.session(n_ctx=64) as s:
        s.prefill([1])
        for bad in (2**32 + 5, -1, 2**31):
            with out_of_range("token"):
                s.decode(bad)
        for bad in (5.0, "5", None, True):
            with wrong_type("token"):
                s.decode(bad)
        assert s.position == 1
        s.decode(np.int64(403))  # NumPy integers in range are fine
        with out_of_range("token"):
            s.decode(np.int64(2**32 + 5))
        with out_of_range(r"tokens\[1\]"):
            s.prefill([403, 2**32 + 403])
        with out_of_range(r"tokens\[1\]"):
            s.prefill(np.array([403, 2**32 + 403], dtype=np.int64))
        with out_of_range(r"tokens\[0\]"):
            s.prefill(np.array([-1], dtype=np.int64))
        with out_of_range(r"tokens\[0\]"):
            s.prefill(array("q", [2**33]))
        with wrong_type("tokens"):
            s.prefill(np.array([1.0, 2.0]))
        with wrong_type(r"tokens\[1\]"):
            s.prefill([1, 2.5])
        with wrong_type("tokens"):
            s.prefill(b"Hello")
        with wrong_type("tokens"):
            s.prefill("Hello")
        with wrong_type("tokens"):
            s.prefill(5)
        assert s.position == 2
        s.prefill(np.array([407, 1], dtype=np.int64))  # converted when in range
        assert s.position == 4
    with out_of_range("token"):
        model.is_eog(2**32 + 2)
    assert model.is_eog(2) is True and model.is_eog(403) is False
    with out_of_range("token"):
        model.token_to_piece(2**32 + 403)
    with out_of_range(r"tokens\[0\]"):
        model.detokenize([2**32 + 403])
    with wrong_type("tokens"):
        model.detokenize("abc")
    with moonlm.Sampler() as sm:
        with out_of_range("token"):
            sm.accept(2**32 + 5)
        with wrong_type("logits"):
            sm.sample("abc")
        with wrong_type("logits"):
            sm.sample([0.0, "x"])


def test_bytes_are_never_token_ids(model):
    for prompt in (b"Hello", bytearray(b"Hello"), memoryview(b"Hello")):
        with wrong_type("prompt"):
            model.generate(prompt, max_tokens=2)
    with model.session() as s:
        with wrong_type("tokens"):
            s.generate(b"Hello")


def test_options_are_checked(model, stories_path):
    with wrong_type("n_threads"):
        moonlm.Model(stories_path, n_threads="four")
    with out_of_range("n_threads"):
        moonlm.Model(stories_path, n_threads=2**32 + 2)
    with out_of_range("n_threads"):
        moonlm.Model(stories_path, n_threads=-1)
    with wrong_type("pack"):
        moonlm.Model(stories_path, pack=1)
    with out_of_range("pack"):
        moonlm.Model(stories_path, pack="yes")
    with wrong_type("numerics"):
        moonlm.Model(stories_path, numerics=1)
    with out_of_range("packed_cache_bytes"):
        moonlm.Model(stories_path, packed_cache_bytes=2**63)
    with wrong_type("packed_cache_bytes"):
        moonlm.Model(stories_path, packed_cache_bytes=1.5)
    with out_of_range("packed_cache_dir"):
        moonlm.Model(stories_path, packed_cache_dir="a\0b")
    with out_of_range("path"):
        moonlm.Model(stories_path + "\0.txt")
    with wrong_type("path"):
        moonlm.Model(5)
    with out_of_range("n_ctx"):
        model.session(n_ctx=2**32 + 16)
    with out_of_range("n_ctx"):
        model.session(n_ctx=0)
    with wrong_type("n_ctx"):
        model.session(n_ctx=16.0)
    with out_of_range("n_threads"):
        model.session(n_threads=2**32)
    with out_of_range("kv_type"):
        model.session(kv_type="q4")
    with wrong_type("kv_type"):
        model.session(kv_type=1)
    with wrong_type("model"):
        moonlm.Session("model.gguf")
    with out_of_range("top_k"):
        moonlm.Sampler(top_k=2**32 - 5)
    with out_of_range("penalty_last_n"):
        moonlm.Sampler(penalty_last_n=2**31)
    with wrong_type("temperature"):
        moonlm.Sampler(temperature="hot")
    with out_of_range("temperature"):
        moonlm.Sampler(temperature=float("nan"))
    with out_of_range("top_p"):
        moonlm.Sampler(top_p=1e39)
    with out_of_range("seed"):
        moonlm.Sampler(seed=2**64 - 1)
    with out_of_range("seed"):
        moonlm.Sampler(seed=-1)
    with wrong_type("seed"):
        moonlm.Sampler(seed="1")
    with out_of_range("top_k"):
        model.generate("Once", top_k=2**32 - 5)
    with out_of_range("max_tokens"):
        model.generate("Once", max_tokens=-1)
    with wrong_type("max_tokens"):
        model.generate("Once", max_tokens="5")
    with out_of_range("n_ctx"):
        model.generate("Once", n_ctx=2**32 + 16)
    with wrong_type("stop"):
        model.generate("Once", stop=5)
    with wrong_type(r"stop\[1\]"):
        model.generate("Once", stop=["ok", 5])
    with wrong_type("add_special"):
        model.generate("Once", add_special="no")
    with wrong_type("stream"):
        model.generate("Once", stream="yes")
    with wrong_type("text"):
        model.tokenize(b"Once")
    with wrong_type("parse_special"):
        model.tokenize("Once", parse_special=None)
    with model.session() as s:
        with out_of_range("n_keep"):
            s.rewind(2**64)
        with wrong_type("n_keep"):
            s.rewind("0")
        with wrong_type("sampler"):
            s.generate([1], sampler="greedy")
        with out_of_range("max_tokens"):
            s.generate([1], max_tokens=-1)
    with pytest.raises(TypeError, match="max_tokenz"):
        model.generate("Once", max_tokenz=5)  # Python's own check of keyword names


def test_messages_are_checked(model):
    def apply(msgs):
        return model.apply_chat_template(msgs)

    with wrong_type("messages"):
        apply({"role": "user", "content": "hi"})
    with wrong_type("messages"):
        apply("hi")
    with wrong_type(r"messages\[0\]"):
        apply(["hi"])
    with wrong_type(r"messages\[0\].*content"):
        apply([{"role": "user"}])
    with wrong_type(r"messages\[1\].*role"):
        apply([{"role": "user", "content": "a"}, {"content": "b"}])
    with wrong_type(r"messages\[0\]\['role'\]"):
        apply([{"role": 5, "content": "hi"}])
    with wrong_type(r"messages\[0\]\['content'\]"):
        apply([{"role": "user", "content": b"hi"}])
    with out_of_range(r"messages\[0\]\['content'\]"):
        apply([{"role": "user", "content": "a\0b"}])
    with wrong_type("add_assistant"):
        model.apply_chat_template([], add_assistant="yes")
    with wrong_type("template"):
        model.apply_chat_template([], template=5)
    with out_of_range("template"):
        model.chat([{"role": "user", "content": "hi"}], template="chat\0ml")


def test_good_values_still_work(model):
    text = model.generate(np.array([1, 403], dtype=np.int64), max_tokens=3, temperature=0, seed=np.uint64(5))
    assert isinstance(text, str)
    assert model.generate(array("i", [1, 403]), max_tokens=3, temperature=0) == text
    assert model.generate((1, 403), max_tokens=3, temperature=0, top_k=np.int32(40)) == text
    with moonlm.Sampler(top_k=5, penalty_last_n=-1, temperature=0) as sm:
        assert sm.sample([0.0, 1.0, 0.5]) == 1


def test_stop_strings_may_come_from_an_iterator(model):
    want = model.generate("Once upon a time", max_tokens=20, temperature=0)
    cut = want[len(want) // 2 :][:3]
    assert cut and cut in want
    got = model.generate("Once upon a time", max_tokens=20, temperature=0, stop=iter([cut]))
    assert got == want[: want.index(cut)]
