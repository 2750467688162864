"""parallel_tool_calls: several forced calls, returned as a list."""

import json

import pytest

import moonlm
from conftest import default_model
from test_structured import ASK, TOOLS, _schema_of

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema validates the calls' arguments")


@pytest.fixture(scope="module")
def smol(lib):
    with moonlm.Model(default_model("SmolLM2-135M-Instruct.Q4_1.gguf"), n_threads=2) as m:
        yield m


def test_parallel_tool_calls_true_allows_several_calls(smol):
    multi = 0
    for seed in (1, 2, 3):
        c = smol.chat(
            ASK, 300, tools=TOOLS, tool_choice="required", parallel_tool_calls=True, temperature=1.0, seed=seed, details=True
        )
        assert c.tool_call_error is None, c.text
        assert c.tool_calls, c.text
        multi += len(c.tool_calls) > 1
        for call in c.tool_calls:
            fn = call["function"]
            jsonschema.validate(json.loads(fn["arguments"]), _schema_of(fn["name"]))
    assert multi > 0, "no reply made several calls"


def test_parallel_tool_calls_false_keeps_one(smol):
    c = smol.chat(
        ASK, 300, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, temperature=1.0, seed=1, details=True
    )
    assert len(c.tool_calls) == 1
    with pytest.raises(TypeError):
        smol.chat(ASK, 5, tools=TOOLS, parallel_tool_calls="yes")
