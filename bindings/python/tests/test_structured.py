"""Grammar / JSON-schema constrained output, log-probabilities and the newer
sampler options."""

import json
import math

import pytest

import moonlm
from conftest import default_model

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema validates the constrained output")

SCHEMA = {
    "$defs": {
        "pet": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 12},
                "kind": {"enum": ["cat", "dog", "fish"]},
            },
            "required": ["name", "kind"],
            "additionalProperties": False,
        }
    },
    "type": "object",
    "properties": {
        "owner": {"type": "string", "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pets": {"type": "array", "items": {"$ref": "#/$defs/pet"}, "minItems": 1, "maxItems": 3},
    },
    "required": ["owner", "age", "pets"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def smol(lib):
    with moonlm.Model(default_model("SmolLM2-135M-Instruct.Q4_1.gguf"), n_threads=2) as m:
        yield m


def _prompt(smol):
    return smol.apply_chat_template(
        [{"role": "user", "content": "Describe a pet owner as JSON."}], add_assistant=True
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_json_schema_at_high_temperature_validates(smol, seed):
    c = smol.generate(
        _prompt(smol), 400, json_schema=SCHEMA, temperature=1.5, seed=seed, details=True, parse_special=True
    )
    assert c.finish_reason == "eog", c  # the grammar completed, not cut by max_tokens
    jsonschema.validate(json.loads(c.text), SCHEMA)


def test_response_format_json_schema_and_compiled_grammar(smol):
    rf = {"type": "json_schema", "json_schema": {"name": "owner", "schema": SCHEMA}}
    text = smol.generate(_prompt(smol), 400, response_format=rf, temperature=1.0, seed=3, parse_special=True)
    jsonschema.validate(json.loads(text), SCHEMA)
    g = moonlm.Grammar.from_json_schema(smol, json.dumps(SCHEMA))
    with g:
        for seed in (4, 5):  # one compiled grammar, reused
            text = smol.generate(_prompt(smol), 400, grammar=g, temperature=1.0, seed=seed, parse_special=True)
            jsonschema.validate(json.loads(text), SCHEMA)


def test_response_format_json_object(smol):
    text = smol.generate(
        _prompt(smol), 200, response_format={"type": "json_object"}, temperature=0.7, seed=1, parse_special=True
    )
    assert isinstance(json.loads(text), dict)


def test_grammar_with_one_string_yields_it(smol):
    for seed in (1, 2, 3):
        c = smol.generate("Say anything:", 50, grammar='root ::= "moon river"', temperature=1.5, seed=seed, details=True)
        assert c.text == "moon river"
        assert c.finish_reason == "eog"


def test_grammar_parse_error_names_line_and_column(smol):
    with pytest.raises(moonlm.InvalidArgumentError, match=r"2:\d+"):
        smol.generate("x", 5, grammar='root ::= "a"\nfoo ::= ( "b"\n')
    with pytest.raises(moonlm.InvalidArgumentError):
        smol.generate("x", 5, json_schema={"type": "object", "properties": 5})


def test_structured_options_are_checked(smol):
    with pytest.raises(moonlm.InvalidArgumentError, match="cannot be combined"):
        smol.generate("x", 5, grammar='root ::= "a"', json_schema={})
    with pytest.raises(TypeError):
        smol.generate("x", 5, grammar=5)
    with pytest.raises(moonlm.InvalidArgumentError, match="response_format"):
        smol.generate("x", 5, response_format={"type": "yaml"})
    with pytest.raises(moonlm.InvalidArgumentError, match="json_schema"):
        smol.generate("x", 5, response_format={"type": "json_schema"})


def test_grammar_of_another_model_is_refused(smol, model):
    with moonlm.Grammar(model, 'root ::= "a"') as g:
        with pytest.raises(moonlm.InvalidArgumentError, match="another model"):
            smol.generate("x", 5, grammar=g)
    with pytest.raises(moonlm.InvalidArgumentError, match="closed"):
        model.generate("x", 5, grammar=g)


def _log_softmax(xs):
    m = max(xs)
    s = math.fsum(math.exp(x - m) for x in xs)
    return [x - m - math.log(s) for x in xs]


def test_logprobs_match_log_softmax_of_the_logits(model):
    prompt = model.tokenize("Once upon a time")
    c = model.generate(prompt, 6, temperature=0, logprobs=True, top_logprobs=5, details=True)
    content = c.logprobs["content"]
    assert [e["id"] for e in content] == c.tokens
    assert len(content) == 6
    with model.session() as s:
        logits = s.prefill(prompt)
        for tok, e in zip(c.tokens, content):
            lsm = _log_softmax([float(x) for x in logits])
            order = sorted(range(len(lsm)), key=lambda i: (-lsm[i], i))
            assert tok == order[0]  # greedy
            assert e["logprob"] == pytest.approx(lsm[tok], abs=1e-4)
            assert e["token"] == model.token_to_piece(tok).decode("utf-8", "replace")
            assert [t["id"] for t in e["top_logprobs"]] == order[:5]
            for t in e["top_logprobs"]:
                assert t["logprob"] == pytest.approx(lsm[t["id"]], abs=1e-4)
                assert bytes(t["bytes"]) == model.token_to_piece(t["id"])
            logits = s.decode(tok)


def test_logprobs_options_are_checked(model):
    with pytest.raises(moonlm.InvalidArgumentError, match="top_logprobs"):
        model.generate("x", 3, logprobs=True, top_logprobs=21)
    with pytest.raises(moonlm.InvalidArgumentError, match="top_logprobs"):
        model.generate("x", 3, top_logprobs=2)
    # No limit: the context ends it, with an entry per token.
    c = model.generate("x", 2**40, temperature=0.8, seed=1, logprobs=True, details=True)
    assert c.finish_reason in ("context", "eog")
    assert len(c.logprobs["content"]) == c.completion_tokens == len(c.tokens)
    c = model.generate("x", 3, temperature=0, logprobs=True, details=True)
    assert all(e["top_logprobs"] == [] for e in c.logprobs["content"])
    assert model.generate("x", 3, temperature=0, details=True).logprobs is None


def test_logit_bias_bans_and_forces(model):
    free = model.generate("Once upon a time", 8, temperature=0, details=True)
    banned = free.tokens[0]
    c = model.generate("Once upon a time", 8, temperature=0, logit_bias={banned: -1e30}, details=True)
    assert banned not in c.tokens
    forced = model.tokenize(" moon", add_special=False)[0]
    c = model.generate("Once upon a time", 4, temperature=0, logit_bias={str(forced): 100.0}, details=True)
    assert c.tokens == [forced] * 4


def test_new_sampler_options_run_and_are_seeded(model):
    kw = dict(
        temperature=1.0,
        typical_p=0.9,
        xtc_probability=0.5,
        xtc_threshold=0.1,
        dry_multiplier=0.8,
        dry_base=1.75,
        dry_allowed_length=2,
        dry_penalty_last_n=-1,
        dry_sequence_breakers=["\n", "."],
        seed=7,
    )
    a = model.generate("Once upon a time", 24, **kw)
    assert a == model.generate("Once upon a time", 24, **kw)
    for v in (1, 2):
        m = model.generate("Once upon a time", 24, mirostat=v, mirostat_tau=3.0, mirostat_eta=0.2, seed=7)
        assert m == model.generate("Once upon a time", 24, mirostat=v, mirostat_tau=3.0, mirostat_eta=0.2, seed=7)
    with moonlm.Sampler(mirostat=2, dry_multiplier=1.0, dry_sequence_breakers=[], logit_bias={1: -2.5}) as s:
        assert s.params.mirostat == 2


def test_dry_penalises_repeats(model):
    # Greedy text repeats phrases ("to play ... to the park"); DRY without
    # breakers penalises extending them, which changes the greedy path.
    plain = model.generate("Once upon a time", 80, temperature=0, details=True).tokens
    kw = dict(temperature=0, dry_multiplier=3.0, dry_allowed_length=1, dry_penalty_last_n=-1, details=True)
    dry = model.generate("Once upon a time", 80, dry_sequence_breakers=[], **kw).tokens
    assert plain != dry
    off = model.generate("Once upon a time", 80, dry_sequence_breakers=[], **dict(kw, dry_multiplier=0.0)).tokens
    assert off == plain


@pytest.mark.parametrize(
    "kw, exc",
    [
        ({"mirostat": 3}, moonlm.InvalidArgumentError),
        ({"mirostat": -1}, moonlm.InvalidArgumentError),
        ({"mirostat": True}, TypeError),
        ({"dry_allowed_length": -1}, moonlm.InvalidArgumentError),
        ({"dry_allowed_length": 2**31}, moonlm.InvalidArgumentError),
        ({"dry_penalty_last_n": -2}, moonlm.InvalidArgumentError),
        ({"typical_p": float("nan")}, moonlm.InvalidArgumentError),
        ({"xtc_threshold": "0.1"}, TypeError),
        ({"dry_sequence_breakers": b"x"}, TypeError),
        ({"dry_sequence_breakers": ["a\0b"]}, moonlm.InvalidArgumentError),
        ({"logit_bias": [(1, 2.0)]}, TypeError),
        ({"logit_bias": {-1: 1.0}}, moonlm.InvalidArgumentError),
        ({"logit_bias": {2**31: 1.0}}, moonlm.InvalidArgumentError),
        ({"logit_bias": {1: float("inf")}}, moonlm.InvalidArgumentError),
        ({"logit_bias": {1.5: 1.0}}, TypeError),
    ],
)
def test_new_sampler_options_are_range_checked(model, kw, exc):
    with pytest.raises(exc):
        moonlm.Sampler(**kw)
    with pytest.raises(exc):
        model.generate("x", 2, **kw)


def test_unknown_keyword_is_a_type_error(model):
    with pytest.raises(TypeError, match="bogus"):
        model.generate("x", 2, bogus=1)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 24},
                    "unit": {"$ref": "#/$defs/unit"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7},
                },
                "required": ["city", "unit"],
                "additionalProperties": False,
                "$defs": {"unit": {"enum": ["celsius", "fahrenheit"]}},
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {
                "type": "object",
                "properties": {"zone": {"type": "string", "maxLength": 24}},
                "required": ["zone"],
                "additionalProperties": False,
            },
        },
    },
]
ASK = [{"role": "user", "content": "What is the weather like in Paris?"}]


def _schema_of(name):
    return next(t["function"]["parameters"] for t in TOOLS if t["function"]["name"] == name)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tool_choice_required_yields_a_valid_call(smol, seed):
    c = smol.chat(ASK, 200, tools=TOOLS, tool_choice="required", temperature=1.2, seed=seed, details=True)
    assert c.tool_call_error is None, c.text
    assert len(c.tool_calls) == 1, c.text
    fn = c.tool_calls[0]["function"]
    assert fn["name"] in ("get_weather", "get_time")
    jsonschema.validate(json.loads(fn["arguments"]), _schema_of(fn["name"]))


def test_tool_choice_named_calls_that_tool(smol):
    for seed in (1, 2):
        choice = {"type": "function", "function": {"name": "get_time"}}
        c = smol.chat(ASK, 200, tools=TOOLS, tool_choice=choice, temperature=1.2, seed=seed, details=True)
        assert [t["function"]["name"] for t in c.tool_calls] == ["get_time"], c.text
        jsonschema.validate(json.loads(c.tool_calls[0]["function"]["arguments"]), _schema_of("get_time"))
    s = smol.chat(ASK, 200, tools=TOOLS, tool_choice=choice, temperature=0, stream=True)
    text = "".join(s)
    assert s.completion.tool_calls[0]["function"]["name"] == "get_time", text


def test_tool_choice_none_and_auto(smol):
    c = smol.chat(ASK, 20, tools=TOOLS, tool_choice="none", temperature=0, details=True)
    assert c.tool_calls == [] and c.content == c.text
    # "none" renders without the tools: the same prompt as no tools at all.
    assert c.prompt_tokens == smol.chat(ASK, 1, temperature=0, details=True).prompt_tokens
    a = smol.chat(ASK, 20, tools=TOOLS, temperature=0, details=True)
    assert a.text == smol.chat(ASK, 20, tools=TOOLS, tool_choice="auto", temperature=0, details=True).text


def test_tool_choice_is_checked(smol):
    with pytest.raises(moonlm.InvalidArgumentError, match="tool_choice"):
        smol.chat(ASK, 5, tools=TOOLS, tool_choice="always")
    with pytest.raises(moonlm.InvalidArgumentError, match="tool_choice"):
        smol.chat(ASK, 5, tools=TOOLS, tool_choice={"type": "function", "function": {}})
    with pytest.raises(TypeError):
        smol.chat(ASK, 5, tools=TOOLS, tool_choice=1)
    with pytest.raises(moonlm.InvalidArgumentError, match="needs tools"):
        smol.chat(ASK, 5, tool_choice="required")
    with pytest.raises(moonlm.InvalidArgumentError, match="nosuch"):
        smol.chat(ASK, 5, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nosuch"}})
    with pytest.raises(moonlm.InvalidArgumentError, match="cannot be combined"):
        smol.chat(ASK, 5, tools=TOOLS, tool_choice="required", json_schema={})


def test_conversation_takes_the_new_sampler_options(model):
    tok = model.tokenize("Once", add_special=False)[0]
    piece = model.token_to_piece(tok).decode("utf-8")
    replies = []
    for bias in ({}, {tok: 100.0}):
        with moonlm.Conversation(model, template="chatml") as chat:
            chat.add("user", "Hi")
            replies.append(chat.reply(6, temperature=0, logit_bias=bias))
    assert replies[1] != replies[0]
    assert replies[1].strip() and replies[1].replace(piece, "").strip() == "", replies
