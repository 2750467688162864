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
    r = ask(server.client, "What is the capital of France?", max_tokens=24)
    assert r.object == "chat.completion" and r.model == "smol"
    ch = r.choices[0]
    assert ch.message.role == "assistant"
    assert "Paris" in ch.message.content
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
    for kw in ({"response_format": {"type": "json_object"}},
               {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}},
               {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
               {"logprobs": True, "top_logprobs": 2}):
        with pytest.raises(openai.BadRequestError) as ei:
            ask(c, "hi", **kw)
        body = error_body(ei.value)
        assert body["code"] == "unsupported_parameter" and "not supported by this server build" in body["message"]
    # Malformed JSON, which the client cannot send.
    req = urllib.request.Request(server.url + "/v1/chat/completions", data=b'{"messages": [',
                                 headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req)
    assert ei.value.code == 400
    assert json.loads(ei.value.read())["error"]["code"] == "invalid_json"
