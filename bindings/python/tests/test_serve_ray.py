"""moonlm.serve.ray on a local Ray instance: two replicas of `moonlm serve`
behind Ray Serve's proxy on loopback, 32 requests spread across them, one
replica killed mid-run, its requests retried on the other by the openai
client, none lost. Skipped with the reason when ray[serve], the CLI or the
model is absent (ray is not in requirements-test.txt: it is large; install
it with `pip install "ray[serve]"` to run this test)."""

import logging
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest

from conftest import default_model
from test_serve import SMOL, cli_path

ray = pytest.importorskip("ray", reason='ray is not installed (pip install "ray[serve]" to run the Ray Serve test)')
serve = pytest.importorskip("ray.serve", reason='ray[serve] is not installed (pip install "ray[serve]")')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_app():
    from moonlm.serve import ray as moonlm_ray

    cli = cli_path()
    model = default_model(SMOL)
    tmp = tempfile.mkdtemp(prefix="ray")
    src = str(Path(__file__).resolve().parents[1] / "src")
    # A token of the test's own: without one Ray writes a new one into
    # ~/.ray, and tests never write into the home folder.
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    ray.init(address="local", num_cpus=4, include_dashboard=False, _temp_dir=tmp,
             runtime_env={"env_vars": {"PYTHONPATH": src, "MOONLM_PACKED_CACHE": "off"}})
    port = free_port()
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(moonlm_ray.app(model, replicas=2, parallel=2, ctx=1024, threads=1, cli=cli, alias="smol",
                                 extra_args=["--packed-cache", "off"]), route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.time() < deadline, "the Ray Serve app was not ready in 120 s"
            time.sleep(0.2)
        yield url
    finally:
        serve.shutdown()
        ray.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(tmp, ignore_errors=True)


def replica_actors():
    """The (name, namespace) of the app's live replica actors."""
    return [(a["name"], a["namespace"]) for a in ray.util.list_named_actors(all_namespaces=True)
            if "REPLICA" in a["name"].upper() and "moonlm" in a["name"]]


def test_models_and_chat_through_ray(ray_app):
    c = openai.OpenAI(base_url=ray_app + "/v1", api_key="unused", max_retries=2)
    assert [m.id for m in c.models.list()] == ["smol"]
    r = c.chat.completions.create(model="smol", messages=[{"role": "user", "content": "What is the capital of Germany?"}],
                                  temperature=0, max_tokens=24)
    assert "Berlin" in r.choices[0].message.content
    text = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model="smol", messages=[{"role": "user", "content": "What is the capital of Germany?"}],
        temperature=0, max_tokens=24, stream=True) if ch.choices)
    assert text == r.choices[0].message.content


def test_replica_killed_mid_run_loses_nothing(ray_app):
    retries = []  # the client's retries, from its log

    class Retries(logging.Handler):
        def emit(self, record):
            if record.getMessage().startswith("Retrying request"):
                retries.append(record.getMessage())

    handler = Retries(logging.INFO)
    log = logging.getLogger("openai")
    old_level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    c = openai.OpenAI(base_url=ray_app + "/v1", api_key="unused", max_retries=8, timeout=120)
    prompts = [f"Say one sentence about {t}." for t in ("the sea", "a cat", "winter", "bread")]

    def ask(p):
        return c.chat.completions.create(model="smol", messages=[{"role": "user", "content": p}],
                                         temperature=0, max_tokens=24).choices[0].message.content

    want = {p: ask(p) for p in prompts}
    actors = replica_actors()
    assert len(actors) == 2, actors

    done = []
    lock = threading.Lock()

    def one(i):
        p = prompts[i % len(prompts)]
        got = ask(p)
        with lock:
            done.append(i)
        return p, got

    killed = threading.Event()

    def killer():
        while len(done) < 6:
            time.sleep(0.01)
        name, namespace = actors[0]
        ray.kill(ray.get_actor(name, namespace=namespace), no_restart=True)
        killed.set()

    threading.Thread(target=killer, daemon=True).start()
    with ThreadPoolExecutor(8) as ex:
        results = list(ex.map(one, range(32)))
    log.removeHandler(handler)
    log.setLevel(old_level)
    assert killed.is_set()
    # The killed replica had requests in flight; the client retried them.
    assert retries, "no request was retried: the kill hit no request in flight"
    assert actors[0] not in replica_actors(), "the killed replica is still listed"
    assert len(results) == 32
    for p, got in results:
        assert got == want[p], p
