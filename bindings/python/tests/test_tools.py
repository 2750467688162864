"""Tool calling: tools and tool calls through the chat template, replies
parsed back into calls (moonlm_chat_apply_template_json and
moonlm_chat_parse_tool_calls)."""

import json

import pytest

import moonlm
from conftest import REPO
from test_chat import copy_with_template

gguf = pytest.importorskip("gguf", reason="the gguf package writes the test model")

TOOLDATA = REPO / "engine" / "chat" / "testdata" / "tools"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
# A template that shows what it receives.
SHOW = (
    "{% for t in tools or [] %}[tool {{ t.function.name }}]{% endfor %}"
    "{% for m in messages %}{{ m.role }}: {{ m.content }}"
    "{% for c in m.tool_calls %}<call {{ c.function.name }} {{ c.function.arguments | tojson }}>{% endfor %}"
    "{% if m.tool_call_id %}(for {{ m.tool_call_id }}){% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@pytest.fixture(scope="module")
def qwen(stories_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("tools") / "stories-qwen.gguf"
    copy_with_template(stories_path, path, (TOOLDATA / "qwen2.5.jinja").read_text())
    with moonlm.Model(path, n_threads=2) as m:
        yield m


@pytest.fixture(scope="module")
def show(stories_path, tmp_path_factory):
    path = tmp_path_factory.mktemp("tools") / "stories-show.gguf"
    copy_with_template(stories_path, path, SHOW)
    with moonlm.Model(path, n_threads=2) as m:
        yield m


def test_renders_like_jinja2(qwen):
    cases = json.loads((TOOLDATA / "tools_cases.json").read_text())
    for c in cases["templates"]["qwen2.5"]["cases"]:
        got = qwen.apply_chat_template(c["messages"], add_assistant=c["gen"], tools=cases["tools"])
        assert got == c["out"], c["name"]


def test_template_receives_tools_calls_and_results(show):
    msgs = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}],
        },
        {"role": "tool", "content": "cold", "tool_call_id": "c1", "name": "get_weather"},
    ]
    assert show.apply_chat_template(msgs, tools=TOOLS) == (
        '[tool get_weather]user: Weather?\nassistant: <call get_weather {"city": "Oslo"}>\n'
        "tool: cold(for c1)\nassistant:"
    )
    # Tool messages without tools= still go through the template with their keys.
    assert "(for c1)" in show.apply_chat_template(msgs)


def test_unknown_or_bad_message_keys_are_errors(show):
    with pytest.raises(moonlm.InvalidArgumentTypeError, match="unknown key 'images'"):
        show.apply_chat_template([{"role": "user", "content": "x", "images": []}])
    with pytest.raises(moonlm.InvalidArgumentError, match="arguments"):
        show.apply_chat_template(
            [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}], tools=TOOLS
        )
    with pytest.raises(moonlm.InvalidArgumentError, match="unknown key 'strict'"):
        show.apply_chat_template([{"role": "user", "content": "x"}], tools=[{**TOOLS[0], "strict": True}])
    with pytest.raises(moonlm.InvalidArgumentTypeError, match="tools"):
        show.apply_chat_template([{"role": "user", "content": "x"}], tools="get_weather")


def test_parse_tool_calls(qwen, model):
    text = 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    p = qwen.parse_tool_calls(text)
    assert p["format"] == "hermes" and p["content"] == "Let me look."
    assert p["tool_calls"] == [
        {"id": "call00000", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    ]
    assert "error" not in p
    bad = qwen.parse_tool_calls("<tool_call>{nope</tool_call>")
    assert bad["tool_calls"] == [] and "<tool_call>" in bad["error"]
    # A built-in format is Hermes; a model without a template needs one.
    assert model.parse_tool_calls(text, template="chatml")["tool_calls"][0]["function"]["name"] == "get_weather"
    with pytest.raises(moonlm.UnsupportedError):
        model.parse_tool_calls(text)


def test_chat_with_tools_reports_the_calls(show):
    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    c = show.chat(msgs, max_tokens=24, temperature=0, tools=TOOLS, details=True)
    assert isinstance(c.tool_calls, list)
    p = show.parse_tool_calls(c.text)
    assert c.tool_calls == p["tool_calls"] and c.content == p["content"]
    assert c.tool_call_error == p.get("error")
    # The same through a stream, and plain text without details.
    it = show.chat(msgs, max_tokens=24, temperature=0, tools=TOOLS, stream=True)
    assert "".join(it) == c.text
    assert it.completion.tool_calls == c.tool_calls
    assert show.chat(msgs, max_tokens=24, temperature=0, tools=TOOLS) == c.text
    # Without tools there is nothing to report.
    assert show.chat(msgs, max_tokens=4, temperature=0, details=True).tool_calls is None
