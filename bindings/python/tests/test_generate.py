"""The details form of generation (Completion) and its finish reasons: the
library's one loop (moonlm_generate_ex) as the binding reports it."""

import threading

import pytest

import moonlm
from conftest import default_model

PROMPT = "Once upon a time"


def test_details_match_the_text_form(model):
    text = model.generate(PROMPT, max_tokens=24, temperature=0)
    c = model.generate(PROMPT, max_tokens=24, temperature=0, details=True)
    assert isinstance(c, moonlm.Completion)
    assert c.text == text
    assert c.finish_reason == "length"
    assert c.completion_tokens == len(c.tokens) == 24
    prompt = model.tokenize(PROMPT)
    assert c.prompt_tokens == len(prompt)
    # The token ids are the ones the text was made of.
    whole = model.detokenize(prompt + c.tokens)
    assert whole.endswith(text) and len(whole) > len(text)
    # Greedy from the same prompt: the first token is what a Sampler picks.
    with model.session() as s, moonlm.Sampler(temperature=0) as sm:
        assert sm.sample(s.prefill(prompt)) == c.tokens[0]


def test_finish_reason_stop(model):
    full = model.generate(PROMPT, max_tokens=64, temperature=0, details=True)
    assert "Lily" in full.text
    c = model.generate(PROMPT, max_tokens=64, temperature=0, stop=["Lily"], details=True)
    assert c.finish_reason == "stop"
    assert c.text == full.text[: full.text.index("Lily")]
    # The token that completed the stop string was generated, and no more.
    assert c.tokens == full.tokens[: len(c.tokens)]
    assert len(c.tokens) < 64
    assert "Lily" in model.detokenize(c.tokens) and "Lily" not in model.detokenize(c.tokens[:-1])


def test_finish_reason_context(model):
    # 5 prompt tokens in a context of 8: 3 decoded + 1 sampled last.
    c = model.generate(PROMPT, max_tokens=100, temperature=0, n_ctx=8, details=True)
    assert c.finish_reason == "context"
    assert c.prompt_tokens == 5 and c.completion_tokens == 4


def test_max_tokens_zero_evaluates_the_prompt_only(model):
    c = model.generate(PROMPT, max_tokens=0, details=True)
    assert (c.text, c.finish_reason, c.tokens, c.completion_tokens) == ("", "length", [], 0)
    assert c.prompt_tokens == 5


def test_finish_reason_eog():
    # The instruct model ends its short answer with its end-of-turn token.
    with moonlm.Model(default_model("SmolLM2-135M-Instruct.Q4_1.gguf"), n_threads=2) as m:
        c = m.chat([{"role": "user", "content": "Say hello."}], max_tokens=128, temperature=0, details=True)
        assert c.finish_reason == "eog"
        assert 0 < c.completion_tokens < 128
        assert not any(m.is_eog(t) for t in c.tokens)  # the end token is not one of them
        assert m.chat([{"role": "user", "content": "Say hello."}], max_tokens=128, temperature=0) == c.text


def test_stream_completion(model):
    it = model.generate(PROMPT, max_tokens=20, temperature=0, stream=True, stop=["park"])
    assert isinstance(it, moonlm.TextStream)
    assert it.completion is None
    pieces = list(it)
    assert it.completion is not None
    assert it.completion.text == "".join(pieces)
    assert it.completion.finish_reason in ("stop", "length")
    with pytest.raises(moonlm.InvalidArgumentTypeError, match="details"):
        model.generate(PROMPT, stream=True, details=True)


def test_session_generate_continues_in_its_session(model):
    prompt = model.tokenize(PROMPT)
    want = model.generate(PROMPT, max_tokens=12, temperature=0, details=True)
    with model.session() as s:
        it = s.generate(prompt, 6, sampler=moonlm.Sampler(temperature=0))
        first = "".join(it)
        c1 = it.completion
        assert c1.finish_reason == "length" and len(c1.tokens) == 6
        # The last token is not evaluated: pass it first to continue.
        assert s.position == len(prompt) + 5
        it2 = s.generate([c1.tokens[-1]], 6, sampler=moonlm.Sampler(temperature=0))
        second = "".join(it2)
        assert c1.tokens + it2.completion.tokens == want.tokens
        assert first + second == want.text


def test_cancel_from_another_thread_carries_the_partial_completion(model):
    with model.session() as s:
        it = s.generate(model.tokenize(PROMPT), 1900, sampler=moonlm.Sampler(temperature=0))
        got = [next(it)]
        # The library runs at most a few dozen pieces ahead of the reader,
        # so this lands long before the 1900 tokens are done.
        threading.Thread(target=s.cancel).start()
        with pytest.raises(moonlm.CancelledError) as ei:
            for p in it:
                got.append(p)
        c = ei.value.completion
        assert c.finish_reason == "cancelled"
        assert c.text == "".join(got)
        assert 0 < c.completion_tokens < 1900
        # No request left behind: the session's next call runs.
        pos = s.position
        s.decode(403)
        assert s.position == pos + 1


def test_closing_a_session_stream_early_leaves_the_session_usable(model):
    with model.session() as s:
        it = s.generate(model.tokenize(PROMPT), 200, sampler=moonlm.Sampler(temperature=0))
        assert next(it)
        it.close()
        assert it.completion is None
        with pytest.raises(StopIteration):
            next(it)
        pos = s.position
        assert pos > 5
        s.decode(403)
        assert s.position == pos + 1


def test_stop_string_bounds_are_checked_at_the_call(model):
    with pytest.raises(moonlm.InvalidArgumentError, match="stop"):
        model.generate(PROMPT, stop=["x"] * 1025)
    with pytest.raises(moonlm.InvalidArgumentError, match="stop"):
        model.generate(PROMPT, stop=["x" * (1 << 20), "y"])
    # Stop strings with NUL or non-ASCII text are bytes to the library.
    assert model.generate(PROMPT, max_tokens=8, temperature=0, stop=["\0", "é"]) == model.generate(
        PROMPT, max_tokens=8, temperature=0
    )
