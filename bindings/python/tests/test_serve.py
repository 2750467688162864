"""`moonlm serve` against the official openai client.

The test starts the CLI (build/moonlm, or $MOONLM_CLI) on a free loopback
port with SmolLM2 and talks to it only through the openai package (raw HTTP
only for what the client cannot send: malformed JSON). It skips with a
reason when the CLI or the model is absent.
"""

import json
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest

from conftest import REPO, default_model

KEY = "test-key-123"
SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cli_path():
    p = Path(os.environ.get("MOONLM_CLI") or REPO / "build" / "moonlm")
    if not p.is_file():
        pytest.skip(f"the moonlm CLI is not built at {p} (run `make cli`)")
    return str(p)


class Server:
    def __init__(self, proc, url):
        self.proc, self.url = proc, url
        self.client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=120)

    def metric(self, name):
        with urllib.request.urlopen(self.url + "/metrics") as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise AssertionError(f"no {name} in /metrics")

    def wait_metric(self, name, want, timeout=10):
        deadline = time.time() + timeout
        while True:
            v = self.metric(name)
            if v == want:
                return
            assert time.time() < deadline, f"{name} is {v}, want {want}"
            time.sleep(0.01)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = default_model(SMOL)
    cache = tmp_path_factory.mktemp("packed-cache")
    env = dict(os.environ, MOONLM_PACKED_CACHE_DIR=str(cache))
    proc = subprocess.Popen(
        [cli_path(), "serve", "-m", model, "--port", "0", "--parallel", "4", "--ctx", "2048",
         "--api-key", KEY, "--alias", "smol"],
        stderr=subprocess.PIPE, text=True, env=env)
    url = None
    lines = []
    while url is None:
        line = proc.stderr.readline()
        if not line:
            proc.wait()
            pytest.fail("moonlm serve exited: " + "".join(lines))
        lines.append(line)
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            url = m.group(1)
    # Keep draining stderr so the server never blocks on it.
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    deadline = time.time() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/health") as r:
                if r.status == 200:
                    break
        except (urllib.error.HTTPError, urllib.error.URLError):
            pass
        assert time.time() < deadline, "the server was not ready in 60 s"
        time.sleep(0.02)
    yield Server(proc, url)
    proc.terminate()
    assert proc.wait(timeout=60) == 0


@pytest.fixture(scope="module")
def no_eog():
    """A logit_bias banning SmolLM2's end-of-generation tokens, so that a
    generation runs until max_tokens or the client leaves."""
    import moonlm

    try:
        with moonlm.Model(default_model(SMOL), n_threads=1) as m:
            return {str(t): -100 for t in range(m.vocab_size) if m.is_eog(t)}
    except moonlm.MoonlmError as e:
        if os.environ.get("MOONLM_LIBRARY"):
            raise
        pytest.skip(f"libmoonlm.so not available (run `make lib`): {e}")


def ask(c, text, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 16)
    return c.chat.completions.create(model="anything", messages=[{"role": "user", "content": text}], **kw)


def stream_text(stream):
    text, finish, usage = {}, {}, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for ch in chunk.choices:
            text[ch.index] = text.get(ch.index, "") + (ch.delta.content or "")
            if ch.finish_reason:
                finish[ch.index] = ch.finish_reason
    return text, finish, usage


def test_models(server):
    ids = [m.id for m in server.client.models.list()]
    assert ids == ["smol"]


def test_chat(server):
    r = ask(server.client, "What is the capital of Germany?", max_tokens=24)
    assert r.object == "chat.completion" and r.model == "smol"
    ch = r.choices[0]
    assert ch.message.role == "assistant"
    assert "Berlin" in ch.message.content
    assert ch.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 5 and r.usage.completion_tokens >= 1
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_stream_equals_whole(server):
    whole = ask(server.client, "Name three colours.", max_tokens=20)
    text, finish, usage = stream_text(ask(server.client, "Name three colours.", max_tokens=20, stream=True,
                                          stream_options={"include_usage": True}))
    assert text[0] == whole.choices[0].message.content
    assert finish[0] == whole.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens
    assert usage.prompt_tokens == whole.usage.prompt_tokens


def test_completion(server):
    r = server.client.completions.create(model="x", prompt="Once upon a time", max_tokens=6, temperature=0)
    assert r.object == "text_completion"
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 6
    assert r.choices[0].text
    pieces = [c.choices[0].text for c in server.client.completions.create(
        model="x", prompt="Once upon a time", max_tokens=6, temperature=0, stream=True) if c.choices]
    assert "".join(pieces) == r.choices[0].text


def test_stop(server):
    full = ask(server.client, "Write a sentence about the sea.", max_tokens=40).choices[0].message.content
    words = full.split()
    assert len(words) >= 4, full
    stop = " " + words[3]
    r = ask(server.client, "Write a sentence about the sea.", max_tokens=40, stop=[stop])
    assert r.choices[0].message.content == full[:full.index(stop)]
    assert r.choices[0].finish_reason == "stop"


def test_n_and_seed(server):
    a = ask(server.client, "Tell me a story.", temperature=1.2, n=3, seed=7, max_tokens=10)
    b = ask(server.client, "Tell me a story.", temperature=1.2, n=3, seed=7, max_tokens=10)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]
    assert len({c.message.content for c in a.choices}) > 1


def test_16_concurrent_streams_equal_alone(server):
    topics = ["the sea", "a cat", "winter", "bread", "music", "a robot", "the moon", "trains",
              "rain", "a garden", "coffee", "mountains", "a library", "fire", "bicycles", "the desert"]

    def one(t):
        text, finish, _ = stream_text(ask(server.client, f"Say one sentence about {t}.", stream=True))
        return text[0], finish[0]

    alone = [one(t) for t in topics]
    with ThreadPoolExecutor(16) as ex:
        together = list(ex.map(one, topics))
    assert together == alone
    assert all(t for t, _ in alone)


def test_cancelled_stream_frees_slot(server, no_eog):
    stream = server.client.completions.create(model="x", prompt="Once upon a time", max_tokens=1500,
                                              temperature=0, stream=True, logit_bias=no_eog)
    next(iter(stream))
    server.wait_metric("moonlm_active_sequences", 1)
    stream.close()
    server.wait_metric("moonlm_active_sequences", 0, timeout=5)


def error_body(e):
    assert isinstance(e.body, dict), e.body
    for k in ("message", "type", "param", "code"):
        assert k in e.body, e.body
    return e.body


def test_errors(server):
    c = server.client
    with pytest.raises(openai.BadRequestError) as ei:
        c.chat.completions.create(model="x", messages=[{"role": "user"}])
    assert error_body(ei.value)["code"] == "missing_content"
    with pytest.raises(openai.APIStatusError) as ei:
        ask(c, "x" * (5 << 20))
    assert ei.value.status_code == 413 and error_body(ei.value)["code"] == "request_too_large"
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as ei:
        ask(bad, "hi")
    assert error_body(ei.value)["code"] == "invalid_api_key"
    # A schema feature the grammar converter lacks is a 400 naming it.
    with pytest.raises(openai.BadRequestError) as ei:
        ask(c, "hi", response_format={"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "string", "format": "email"}}})
    body = error_body(ei.value)
    assert body["code"] == "unsupported_schema" and "format" in body["message"], body
    with pytest.raises(openai.BadRequestError) as ei:
        ask(c, "hi", logprobs=True, top_logprobs=21)
    assert error_body(ei.value)["param"] == "top_logprobs"
    # Malformed JSON, which the client cannot send.
    req = urllib.request.Request(server.url + "/v1/chat/completions", data=b'{"messages": [',
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req)
    assert ei.value.code == 400
    assert json.loads(ei.value.read())["error"]["code"] == "invalid_json"


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "role": {"enum": ["admin", "user", "guest"]},
        "address": {"$ref": "#/$defs/address"},
        "pets": {"type": "array", "maxItems": 3, "items": {
            "type": "object",
            "properties": {"kind": {"enum": ["cat", "dog"]},
                           "age": {"type": "integer", "minimum": 0, "maximum": 30}},
            "required": ["kind", "age"], "additionalProperties": False}},
    },
    "required": ["name", "role", "address", "pets"],
    "additionalProperties": False,
    "$defs": {"address": {"type": "object",
                          "properties": {"city": {"type": "string", "maxLength": 20}, "zip": {"type": "integer"}},
                          "required": ["city", "zip"], "additionalProperties": False}},
}


@pytest.mark.parametrize("stream", [False, True])
def test_json_schema(server, stream):
    jsonschema = pytest.importorskip("jsonschema", reason="validating the output needs the jsonschema package")
    rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    for seed in (1, 2, 3):
        kw = dict(temperature=1.0, seed=seed, max_tokens=400, response_format=rf)
        if stream:
            text, finish, _ = stream_text(ask(server.client, "Describe a person as JSON.", stream=True, **kw))
            text, finish = text[0], finish[0]
        else:
            r = ask(server.client, "Describe a person as JSON.", **kw)
            text, finish = r.choices[0].message.content, r.choices[0].finish_reason
        assert finish == "stop", text
        jsonschema.validate(json.loads(text), PERSON)
    r = ask(server.client, "Say hi as JSON.", temperature=0.7, seed=1, max_tokens=400,
            response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    assert isinstance(json.loads(r.choices[0].message.content), dict)


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "maxLength": 30},
                                  "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}]


def test_tool_round_trip(server):
    jsonschema = pytest.importorskip("jsonschema", reason="validating the arguments needs the jsonschema package")
    c = server.client
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = c.chat.completions.create(model="smol", messages=messages, tools=TOOLS, tool_choice="required",
                                  temperature=1.0, seed=4, max_tokens=200)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch
    call = ch.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather" and call.id
    jsonschema.validate(json.loads(call.function.arguments), TOOLS[0]["function"]["parameters"])
    # Streamed: the same call in tool_call deltas.
    calls = {}
    finish = None
    for chunk in c.chat.completions.create(model="smol", messages=messages, tools=TOOLS, temperature=1.0, seed=4,
                                           max_tokens=200, stream=True,
                                           tool_choice={"type": "function", "function": {"name": "get_weather"}}):
        for cc in chunk.choices:
            for d in cc.delta.tool_calls or []:
                cur = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                cur["id"] = cur["id"] or d.id
                cur["name"] += d.function.name or ""
                cur["arguments"] += d.function.arguments or ""
            finish = cc.finish_reason or finish
    assert finish == "tool_calls" and calls[0]["name"] == "get_weather" and calls[0]["id"]
    jsonschema.validate(json.loads(calls[0]["arguments"]), TOOLS[0]["function"]["parameters"])
    # The call and its result go back in.
    messages += [ch.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 21})}]
    r = c.chat.completions.create(model="smol", messages=messages, tools=TOOLS, temperature=0, max_tokens=30)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    r = c.chat.completions.create(model="smol", messages=messages, tools=TOOLS, tool_choice="none",
                                  temperature=0, max_tokens=30)
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content


def test_logprobs(server):
    c = server.client
    r = ask(c, "The capital of France is", max_tokens=8, logprobs=True, top_logprobs=5)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens and len(content) > 0
    text = b""
    for e in content:
        assert len(e.top_logprobs) == 5
        tops = [t.logprob for t in e.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        # Greedy: the chosen token is the most likely one.
        assert e.logprob == pytest.approx(tops[0], abs=1e-6) and e.token == e.top_logprobs[0].token
        assert bytes(e.bytes) == e.token.encode() or not e.token.isprintable()
        text += bytes(e.bytes)
    assert text.decode(errors="replace") == r.choices[0].message.content
    # Streamed: the same entries.
    streamed = []
    for chunk in ask(c, "The capital of France is", max_tokens=8, logprobs=True, top_logprobs=5, stream=True):
        for ch in chunk.choices:
            if ch.logprobs and ch.logprobs.content:
                streamed += ch.logprobs.content
    assert [(e.token, round(e.logprob, 4)) for e in streamed] == [(e.token, round(e.logprob, 4)) for e in content]
    # Completions: the legacy shape.
    r = c.completions.create(model="smol", prompt="The capital of France is", max_tokens=6, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 6
    assert "".join(lp.tokens) == r.choices[0].text
    for i, tok in enumerate(lp.tokens):
        assert max(lp.top_logprobs[i].values()) == pytest.approx(lp.token_logprobs[i], abs=1e-6)


def test_sampler_extras(server):
    extra = {"typical_p": 0.9, "mirostat": 2, "mirostat_tau": 4.0, "mirostat_eta": 0.2,
             "dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2,
             "xtc_probability": 0.5, "xtc_threshold": 0.1}
    a = ask(server.client, "Tell me a story.", temperature=1.0, seed=9, extra_body=extra)
    b = ask(server.client, "Tell me a story.", temperature=1.0, seed=9, extra_body=extra)
    assert a.choices[0].message.content and a.choices[0].message.content == b.choices[0].message.content
    with pytest.raises(openai.BadRequestError) as ei:
        ask(server.client, "hi", extra_body={"mirostat": 5})
    assert error_body(ei.value)["param"] == "mirostat"
