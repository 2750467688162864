"""Speculative decoding (draft=...) and the structured-output and
log-probability options of Session.generate."""

import json

import pytest

import moonlm
from conftest import data_path, default_model

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema validates the constrained output")

CODE = (
    "Rewrite this Python function with the variable `result` renamed to `squares`.\n\n"
    "def even_squares(numbers):\n"
    "    result = []\n"
    "    for n in numbers:\n"
    "        if n % 2 == 0:\n"
    "            result.append(n * n)\n"
    "    return result\n"
)


@pytest.fixture(scope="module")
def smol(lib):
    with moonlm.Model(default_model("SmolLM2-135M-Instruct.Q4_1.gguf"), n_threads=2) as m:
        yield m


@pytest.fixture(scope="module")
def stories(lib):
    with moonlm.Model(data_path("models/stories260K.gguf"), n_threads=1) as m:
        yield m


def test_generate_with_drafts_matches_plain(stories):
    prompt = "Once upon a time, there was a little dog named Max. He liked to run"
    plain = stories.generate(prompt, 80, temperature=0, details=True)
    look = stories.generate(prompt, 80, temperature=0, details=True, draft="lookup")
    model = stories.generate(prompt, 80, temperature=0, details=True, draft=stories, draft_tokens=4)
    assert look.tokens == plain.tokens and look.text == plain.text
    assert model.tokens == plain.tokens
    assert plain.drafted == 0
    assert look.drafted > 0 and 0 <= look.draft_accepted <= look.drafted
    assert model.draft_accepted > 0


def test_chat_passes_draft(smol):
    c = smol.chat([{"role": "user", "content": CODE}], 60, temperature=0, details=True, draft="lookup")
    assert c.drafted > 0 and c.completion_tokens > 0


def test_session_generate_with_draft_session(stories):
    toks = stories.tokenize("Once upon a time")
    with stories.session(n_ctx=256) as s, stories.session(n_ctx=256) as ds:
        it = s.generate(toks, 40, sampler=moonlm.Sampler(temperature=0), draft=ds, draft_tokens=5)
        text = "".join(it)
        c = it.completion
        assert c.draft_accepted > 0
        assert text == stories.generate(toks, 40, temperature=0)
        with pytest.raises(ValueError, match="session of its own"):
            s.generate(toks, 4, draft=s)


def test_draft_option_errors(stories, smol):
    with pytest.raises(ValueError, match="'lookup'"):
        stories.generate("Hi", 4, draft="ngram")
    with pytest.raises(TypeError, match="moonlm.Model"):
        stories.generate("Hi", 4, draft=3)
    with pytest.raises(ValueError, match="draft_tokens"):
        stories.generate("Hi", 4, draft="lookup", draft_tokens=65)
    with pytest.raises(ValueError, match="needs draft"):
        stories.generate("Hi", 4, draft_tokens=4)
    with pytest.raises(moonlm.InvalidArgumentError, match="vocabularies differ"):
        stories.generate("Hi", 4, draft=smol)


def test_session_generate_json_schema_and_logprobs(smol):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    prompt = smol.apply_chat_template([{"role": "user", "content": "A person as JSON."}], add_assistant=True)
    toks = smol.tokenize(prompt, parse_special=True)
    with smol.session(n_ctx=512) as s:
        sampler = moonlm.Sampler(temperature=1.2, seed=5)
        it = s.generate(toks, 200, sampler=sampler, json_schema=schema, logprobs=True, top_logprobs=3)
        text = "".join(it)
        c = it.completion
        assert c.finish_reason == "eog"
        jsonschema.validate(json.loads(text), schema)
        entries = c.logprobs["content"]
        assert len(entries) == c.completion_tokens
        assert all(len(e["top_logprobs"]) <= 3 and e["logprob"] <= 0 for e in entries)
        s.rewind(0)
        g = moonlm.Grammar(smol, 'root ::= "yes" | "no"')
        out = "".join(s.generate(toks, 10, sampler=sampler, grammar=g))
        assert out in ("yes", "no")
        g.close()
        with pytest.raises(ValueError, match="needs logprobs"):
            s.generate(toks, 4, top_logprobs=2)


def test_keep_special_and_reasoning(stories, smol):
    # BOS forced mid-text by a grammar: rendered only with keep_special.
    g = 'root ::= "Once" <[1]> "up"'
    assert stories.generate("Hi", 10, grammar=g, temperature=0) == "Onceup"
    assert stories.generate("Hi", 10, grammar=g, temperature=0, keep_special=True) == "Once<s>up"
    # A reply that reasons first: chat splits it off (here forced by a grammar).
    think = 'root ::= "<think>Add them.</think>" "5"'
    c = smol.chat([{"role": "user", "content": "2+3?"}], 40, grammar=think, temperature=0, details=True)
    assert c.reasoning == "Add them."
    assert c.content == "5"
    p = smol.parse_tool_calls("<think>x</think>y")
    assert p["reasoning"] == "x" and p["content"] == "y"
