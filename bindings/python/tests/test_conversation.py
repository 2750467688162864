"""Conversation: the history is kept, each turn evaluates only the tokens the
session does not already hold, and (on stories260K, whose kernels round a
row the same in any batch) the replies equal Model.chat's fresh sessions."""

import pytest

import moonlm


def common_prefix(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def test_turns_reuse_the_prefix(model):
    with moonlm.Conversation(model, system="Tell a story.", template="chatml", n_ctx=512) as chat:
        r1 = chat.send("Once upon a time", max_tokens=12, temperature=0)
        assert chat.last_evaluated == chat.last_prompt_tokens  # nothing held before
        first = chat.last_prompt_tokens
        assert chat.messages[-1] == {"role": "assistant", "content": r1}
        # The reply equals a fresh session's.
        assert r1 == model.chat(chat.messages[:-1], max_tokens=12, temperature=0, template="chatml")

        for turn in ("And then?", "Who was there?"):
            held = chat.session.tokens
            before = chat.session.stats()
            prompt = chat.messages + [{"role": "user", "content": turn}]
            want = model.chat(prompt, max_tokens=12, temperature=0, template="chatml")
            reply = chat.send(turn, max_tokens=12, temperature=0)
            assert reply == want
            toks = chat.session.tokens[: chat.last_prompt_tokens]
            kept = common_prefix(held, toks)
            # Only what the session did not hold was evaluated: the earlier
            # turns were all reused.
            assert chat.last_evaluated == chat.last_prompt_tokens - kept
            assert kept >= first
            assert chat.session.stats().n_reused - before.n_reused == kept
            first = chat.last_prompt_tokens
        assert [m["role"] for m in chat.messages] == ["system", "user", "assistant"] * 1 + ["user", "assistant"] * 2


def test_streaming_and_fork(model):
    chat = moonlm.Conversation(model, template="chatml", n_ctx=512)
    pieces = list(chat.send("Once upon a time", max_tokens=8, temperature=0, stream=True))
    assert chat.messages[-1]["content"] == "".join(pieces)
    branch = chat.fork()
    assert branch.session.tokens == chat.session.tokens
    assert branch.session.stats().n_evaluated == 0
    a = chat.send("Then a cat came.", max_tokens=8, temperature=0)
    b = branch.send("Then a cat came.", max_tokens=8, temperature=0)
    assert a == b
    assert branch.last_evaluated == chat.last_evaluated
    branch.send("Something else", max_tokens=4, temperature=0)
    assert len(branch.messages) == len(chat.messages) + 2
    chat.close()
    branch.close()


def test_bad_arguments(model):
    with pytest.raises(moonlm.InvalidArgumentTypeError):
        moonlm.Conversation("not a model")
    with moonlm.Conversation(model, template="chatml", n_ctx=64) as chat:
        with pytest.raises(moonlm.InvalidArgumentTypeError):
            chat.send("hi", max_tokens=4, temprature=0)
        with pytest.raises(moonlm.ContextFullError):
            chat.send("word " * 200, max_tokens=4)
        # a failed turn leaves the history as it was
        assert chat.messages == []
        assert chat.send("hi", max_tokens=2, temperature=0) is not None
        assert [m["role"] for m in chat.messages] == ["user", "assistant"]


def test_turns_reuse_the_prefix_smollm2():
    """The same with a real instruct model and its own template."""
    from conftest import default_model

    with moonlm.Model(default_model("SmolLM2-135M-Instruct.Q4_1.gguf")) as m:
        with moonlm.Conversation(m, system="Answer in one short sentence.", n_ctx=1024) as chat:
            chat.send("What is the capital of France?", max_tokens=16, temperature=0)
            prev = chat.last_prompt_tokens
            assert chat.last_evaluated == prev
            held = chat.session.tokens
            chat.send("And of Italy?", max_tokens=16, temperature=0)
            kept = common_prefix(held, chat.session.tokens[: chat.last_prompt_tokens])
            assert kept >= prev, "the first turn's prompt is reused"
            assert chat.last_evaluated == chat.last_prompt_tokens - kept
            # new tokens only: the reply and the new message, not the history
            assert chat.last_evaluated < chat.last_prompt_tokens - prev + 20
