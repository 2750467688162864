#!/usr/bin/env python3
"""Makes tools_cases.json: conversations with tools, tool calls and tool
results rendered by the reference Jinja2 (3.1.x), set up as Hugging Face's
apply_chat_template sets it up (as ../gen_cases.py does), with the chat
templates of this folder and of the shared test data that render tools
themselves. The Go tests (tools_test.go) compare chat.ApplyTools with these
outputs. Messages have the shape chat.ParseMessagesJSON gives the template:
content always a string, tool call arguments as objects, optional keys only
when set. Run from this folder: python3 gen_tools.py
"""
import hashlib
import json
import os

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(msg):
    raise TemplateError(msg)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    # A fixed date: the Go test puts the same one in place of today's.
    return "2026-01-02" if fmt == "%Y-%m-%d" else "02 Jan 2026"


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = strftime_now

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Adds two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}},
]


def call(name, args, id="call00000"):
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "What is the weather in Paris, in Celsius?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Paris", "unit": "c"})]}
RESULT = {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}", "tool_call_id": "call00000", "name": "get_weather"}
ANSWER = {"role": "assistant", "content": "It is 21 °C and clear in Paris."}

CASES = [
    # The prompt a model sees before calling.
    ("prompt", [SYSTEM, USER], True),
    ("prompt_no_system", [USER], True),
    # A call as the assistant's turn (the round trip renders this, then parses it back).
    ("call", [SYSTEM, USER, CALL], False),
    # The result goes back, and the model answers.
    ("result", [SYSTEM, USER, CALL, RESULT], True),
    ("answered", [SYSTEM, USER, CALL, RESULT, ANSWER], False),
]

def phi4_messages(msgs):
    """The conversation as Phi-4-mini's template reads it (Microsoft's
    model card): the functions as a JSON text in the system message's
    "tools" key (an empty system message first if there is none), an
    assistant's calls in its content between <|tool_call|> and
    <|/tool_call|>."""
    fns = json.dumps([t["function"] for t in TOOLS], ensure_ascii=False)
    out, system = [], False
    for m in msgs:
        m = dict(m)
        if m["role"] == "system" and not system:
            system = True
            m["tools"] = fns
        if m.get("tool_calls"):
            calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in m.pop("tool_calls")]
            m["content"] = m["content"] + "<|tool_call|>" + json.dumps(calls, ensure_ascii=False) + "<|/tool_call|>"
        out.append(m)
    if not system:
        out.insert(0, {"role": "system", "content": "", "tools": fns})
    return out


# How a template that does not take the tools variable is given them.
ADAPT = {"phi4-mini": phi4_messages}

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("MOONLM_TESTDATA", os.path.join(HERE, "..", "..", "..", "..", "..", "shared", "testdata"))
TEMPLATES = {
    # name: (path, bos, eos)
    "qwen2.5": (os.path.join(HERE, "qwen2.5.jinja"), "", "<|im_end|>"),
    "hermes3": (os.path.join(HERE, "hermes3.jinja"), "<|begin_of_text|>", "<|im_end|>"),
    "llama3.1": (os.path.join(HERE, "llama3.1.jinja"), "<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": (os.path.join(HERE, "llama3.2.jinja"), "<|begin_of_text|>", "<|eot_id|>"),
    "mistral-nemo": (os.path.join(HERE, "mistral-nemo.jinja"), "<s>", "</s>"),
    "mistral-small-3.2": (os.path.join(HERE, "mistral-small-3.2.jinja"), "<s>", "</s>"),
    "gpt-oss": (os.path.join(HERE, "gpt-oss.jinja"), "<|startoftext|>", "<|return|>"),
    "qwen3": (os.path.join(SHARED, "templates", "qwen3.jinja"), "", "<|im_end|>"),
    "phi4-mini": (os.path.join(HERE, "phi4-mini.jinja"), "<|endoftext|>", "<|endoftext|>"),
    "qwen3-coder": (os.path.join(HERE, "qwen3-coder.jinja"), "", "<|im_end|>"),
    "qwen3.5": (os.path.join(HERE, "qwen3.5.jinja"), "", "<|im_end|>"),
}

out = {"tools": TOOLS, "templates": {}}
for name, (path, bos, eos) in TEMPLATES.items():
    src = open(path, encoding="utf-8").read()
    entry = {"sha256": hashlib.sha256(src.encode()).hexdigest(), "bos_token": bos, "eos_token": eos, "cases": []}
    for cname, msgs, gen in CASES:
        given = ADAPT.get(name, lambda m: m)(json.loads(json.dumps(msgs)))
        vars = dict(tools=TOOLS, documents=None, add_generation_prompt=gen, bos_token=bos, eos_token=eos,
                    messages=given)
        case = {"name": cname, "messages": msgs, "gen": gen}
        try:
            case["out"] = env.from_string(src).render(**vars)
        except TemplateError as e:
            case["err"] = str(e)
        entry["cases"].append(case)
    out["templates"][name] = entry
with open(os.path.join(HERE, "tools_cases.json"), "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(len(out["templates"]), "templates")
