"""Model(path, progress=callable): the load-progress callback of the open."""

import ctypes
import os
import shutil
import subprocess

import pytest

import moonlm
from moonlm import _lib

from conftest import REPO, default_model


def rising(fs):
    assert fs, "no progress calls"
    assert all(0.0 <= f <= 1.0 for f in fs), fs
    assert all(b >= a for a, b in zip(fs, fs[1:])), fs
    assert len(fs) <= 102, fs


def test_progress_rises_to_one(stories_path):
    got = []
    with moonlm.Model(stories_path, n_threads=1, progress=got.append) as m:  # append returns None: go on
        assert m.architecture == "llama"
    rising(got)
    assert got[0] == 0.0 and got[-1] == 1.0


def test_progress_while_packing():
    path = default_model("SmolLM2-135M-Instruct.Q4_1.gguf")
    got = []
    with moonlm.Model(path, n_threads=1, pack=True, packed_cache=False, progress=lambda f: got.append(f) or True):
        pass
    rising(got)
    assert got[-1] == 1.0
    assert len([f for f in got if 0.2 < f < 1.0]) > 10, got


def test_progress_false_cancels(stories_path):
    full = []
    moonlm.Model(stories_path, n_threads=1, progress=full.append).close()
    for stop in range(1, len(full) + 1):
        calls = []

        def cb(f):
            calls.append(f)
            return len(calls) < stop  # False at call `stop`

        with pytest.raises(moonlm.CancelledError, match="progress callback stopped the open"):
            moonlm.Model(stories_path, n_threads=1, progress=cb)
        assert len(calls) == stop


def test_progress_cancel_while_packing():
    path = default_model("SmolLM2-135M-Instruct.Q4_1.gguf")
    got = []

    def cb(f):
        got.append(f)
        return f < 0.5

    with pytest.raises(moonlm.CancelledError):
        moonlm.Model(path, n_threads=1, pack=True, packed_cache=False, progress=cb)
    assert 0.5 <= got[-1] < 1.0
    with open("/proc/self/maps") as f:
        assert path not in f.read(), "a cancelled open left the model mapped"


def test_progress_exception_cancels_and_propagates(stories_path):
    class Boom(Exception):
        pass

    def cb(f):
        if f > 0.05:
            raise Boom("from the callback")

    with pytest.raises(Boom, match="from the callback"):
        moonlm.Model(stories_path, n_threads=1, progress=cb)


def test_progress_must_be_callable(stories_path):
    with pytest.raises(TypeError, match="progress"):
        moonlm.Model(stories_path, progress=1)


def test_progress_layout(lib, tmp_path):
    """The ctypes mirror's progress members match the C compiler's."""
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler (cc, gcc, clang) on PATH")
    src = tmp_path / "layout.c"
    src.write_text(
        '#include <stdio.h>\n#include <stddef.h>\n#include "moonlm.h"\n'
        'int main(void) { printf("size %zu progress %zu user_data %zu\\n", sizeof(moonlm_model_params),\n'
        "offsetof(moonlm_model_params, progress), offsetof(moonlm_model_params, progress_user_data)); return 0; }\n"
    )
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", str(REPO / "include"), "-o", str(exe), str(src)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    P = _lib.ModelParams
    assert got == f"size {ctypes.sizeof(P)} progress {P.progress.offset} user_data {P.progress_user_data.offset}\n"
