"""Errors are exceptions of the right class carrying the library's message."""

import os
import shutil

import pytest

import moonlm


def test_missing_file(lib, tmp_path):
    missing = tmp_path / "nope.gguf"
    with pytest.raises(moonlm.MoonlmIOError) as ei:
        moonlm.Model(missing)
    e = ei.value
    assert isinstance(e, moonlm.MoonlmError)
    assert e.status == 2
    assert "nope.gguf" in str(e) and e.message == str(e)


@pytest.mark.parametrize(
    "content",
    [b"", b"not a gguf file at all" * 10, b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64],
    ids=["empty", "not-gguf", "garbage-header"],
)
def test_corrupt_file(lib, tmp_path, content):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    with pytest.raises((moonlm.BadFileError, moonlm.MoonlmIOError)) as ei:
        moonlm.Model(bad)
    assert "bad.gguf" in str(ei.value)


def test_truncated_model(stories_path, tmp_path):
    data = open(stories_path, "rb").read()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) // 2])  # metadata intact, tensor data missing
    with pytest.raises(moonlm.BadFileError) as ei:
        moonlm.Model(cut)
    assert ei.value.status == 3


def test_context_full(model):
    toks = model.tokenize("Once upon a time, there was a little girl")
    assert len(toks) > 8
    with model.session(n_ctx=8) as s:
        with pytest.raises(moonlm.ContextFullError) as ei:
            s.prefill(toks)
        assert ei.value.status == 6 and ei.value.message
        assert s.position == 0  # nothing happened
        s.prefill(toks[:8])
        with pytest.raises(moonlm.ContextFullError):
            s.decode(toks[8])
        assert s.position == 8


def test_prompt_longer_than_the_model_context(model):
    long_prompt = [model.bos_token_id] + [403] * model.context_length
    with pytest.raises(moonlm.ContextFullError):
        model.generate(long_prompt, max_tokens=4)


def test_generation_ends_quietly_at_the_end_of_its_context(model):
    # An explicit small context ends generation like max_tokens does.
    text = model.generate("Once upon a time", max_tokens=100, temperature=0, n_ctx=8)
    full = model.generate("Once upon a time", max_tokens=4, temperature=0)
    assert text == full  # 5 prompt tokens + 3 decoded + 1 sampled last


def test_bad_arguments(model):
    with model.session() as s:
        with pytest.raises(moonlm.InvalidArgumentError):
            s.decode(model.vocab_size)  # out of the vocabulary
        with pytest.raises(moonlm.InvalidArgumentError):
            s.prefill([])
        assert s.position == 0
    with pytest.raises(moonlm.InvalidArgumentError):
        model.session(n_ctx=0)
    with pytest.raises(moonlm.InvalidArgumentError):
        model.session(kv_type="q4")
    with pytest.raises(moonlm.InvalidArgumentError):
        model.generate("", add_special=False)  # no tokens at all
    with pytest.raises(moonlm.InvalidArgumentError):
        model.apply_chat_template([{"role": "user"}])


def test_use_after_close(stories_path):
    m = moonlm.Model(stories_path)
    s = m.session()
    m.close()
    m.close()  # idempotent
    assert m.closed
    for call in (
        lambda: m.tokenize("hi"),
        lambda: m.detokenize([1]),
        lambda: m.session(),
        lambda: m.generate("hi"),
        lambda: m.is_eog(2),
    ):
        with pytest.raises(moonlm.InvalidArgumentError, match="closed"):
            call()
    # a session outlives its model's handle
    s.prefill([1, 403])
    s.close()
    s.close()
    with pytest.raises(moonlm.InvalidArgumentError, match="closed"):
        s.decode(407)
    with pytest.raises(moonlm.InvalidArgumentError, match="closed"):
        _ = s.position
    s.cancel()  # harmless on a closed session
    sm = moonlm.Sampler()
    sm.close()
    with pytest.raises(moonlm.InvalidArgumentError, match="closed"):
        sm.sample([0.0, 1.0])


def test_no_chat_template(model):
    with pytest.raises(moonlm.UnsupportedError):
        model.chat([{"role": "user", "content": "hi"}])


def test_library_override(tmp_path, monkeypatch):
    # MOONLM_LIBRARY names the library; a bad one gives a clear error.
    from moonlm import _lib

    monkeypatch.setenv("MOONLM_LIBRARY", str(tmp_path / "libmissing.so"))
    assert _lib._candidates() == [tmp_path / "libmissing.so"]
    junk = tmp_path / "libjunk.so"
    junk.write_bytes(b"\x7fELF garbage")
    with pytest.raises(moonlm.MoonlmError, match="cannot load"):
        _lib.Library(str(junk))


def test_error_hierarchy():
    from moonlm._errors import error_for_status

    for status in range(1, 12):
        e = error_for_status(status, "x")
        assert isinstance(e, moonlm.MoonlmError) and e.status == status
        assert type(e) is not moonlm.MoonlmError
    assert type(error_for_status(99, "x")) is moonlm.MoonlmError


def test_model_file_deleted_while_open(stories_path, tmp_path):
    # Opening a copy and deleting it while open is fine (the mapping stays).
    cp = tmp_path / "copy.gguf"
    shutil.copy(stories_path, cp)
    with moonlm.Model(cp) as m:
        os.unlink(cp)
        assert m.generate("Once", max_tokens=4, temperature=0)
