"""Hostile files and parameters raise the binding's error: no crash, no hang,
no allocation bomb. Each runs in a child process with a 4 GiB address-space
limit (a huge allocation then fails fast instead of eating the machine) and
a timeout, so that a crash is a failed test rather than a dead test run."""

import json
import os
import resource
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

CHILD = r"""
import json, sys, moonlm
kind, model, other = sys.argv[1:4]
try:
    if kind == "file":
        moonlm.Model(other).close()
    elif kind == "model_threads":
        moonlm.Model(model, n_threads=2**31 - 1).close()
    elif kind == "session_threads":
        with moonlm.Model(model, n_threads=2) as m:
            m.session(n_threads=2**31 - 1).close()
    elif kind == "penalty_last_n":
        moonlm.Sampler(penalty_last_n=2**31 - 1).close()
    out = {"ok": True}
except moonlm.MoonlmError as e:
    out = {"error": type(e).__name__, "message": str(e)}
print(json.dumps(out))
"""

LIMIT = 4 << 30


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def hostile(kind, model, other=""):
    env = dict(os.environ, PYTHONPATH=str(REPO / "bindings" / "python" / "src"))
    try:
        r = subprocess.run(
            [sys.executable, "-c", CHILD, kind, model, other],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
            preexec_fn=_limit,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{kind}: still running after 30 s (blocked?)")
    assert r.returncode == 0, f"{kind}: exit {r.returncode}; stderr: {r.stderr[:1500]}"
    return json.loads(r.stdout)


def edited(src, dst, key, value):
    """A copy of the GGUF file src with the integer metadata key set to value in place."""
    import gguf

    shutil.copy(src, dst)
    r = gguf.GGUFReader(str(dst), "r+")
    field = r.fields[key]
    field.parts[field.data[0]][0] = value
    r.data.flush()
    del r
    return str(dst)


@pytest.mark.parametrize("n", [2147483647, 100000000])
def test_huge_block_count_is_bad_file(stories_path, tmp_path, n):
    f = edited(stories_path, tmp_path / f"blocks-{n}.gguf", "llama.block_count", n)
    r = hostile("file", stories_path, f)
    assert r.get("error") == "BadFileError", r
    assert "blocks-" in r["message"]


def test_the_editor_makes_a_file_that_opens_when_nothing_is_hostile(stories_path, tmp_path):
    f = edited(stories_path, tmp_path / "blocks-5.gguf", "llama.block_count", 5)
    assert hostile("file", stories_path, f) == {"ok": True}


def test_a_fifo_is_refused_not_waited_on(stories_path, tmp_path):
    fifo = tmp_path / "model.fifo"
    os.mkfifo(fifo)
    r = hostile("file", stories_path, str(fifo))
    assert r.get("error") == "MoonlmIOError", r


@pytest.mark.parametrize("kind", ["model_threads", "session_threads", "penalty_last_n"])
def test_huge_counts_are_invalid_arguments(stories_path, kind):
    r = hostile(kind, stories_path)
    assert r.get("error") == "InvalidArgumentError", r
