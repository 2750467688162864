"""The numerics open option: validation, the struct member it travels in,
that it reaches the engine (ik_llama.cpp's reference logits), and that an
invalid MOONLM_NUMERICS still fails a default open."""

import ctypes
import json
import math
import os
import shutil
import subprocess
import sys

import pytest

import moonlm
from moonlm import _lib

from conftest import REPO, data_path

IK_MODEL = "synth/synth-qwen3-Q4_K_M.gguf"
IK_REFS = "synth/synth-qwen3-Q4_K_M.ref.jsonl"


@pytest.mark.parametrize("value", ["fast", "IK", "llama.cpp", "", 0, 3, True, b"ik"])
def test_bad_values_are_refused(lib, tmp_path, value):
    # Refused before the file is looked at: the path does not exist.
    with pytest.raises(ValueError) as e:
        moonlm.Model(tmp_path / "missing.gguf", numerics=value)
    assert isinstance(e.value, moonlm.InvalidArgumentError)
    assert "numerics" in str(e.value)
    assert '"llamacpp-norepack"' in str(e.value), "the message lists the accepted values"


@pytest.mark.parametrize("value", [None, "default", "llamacpp", "llamacpp-norepack", "ik"])
def test_good_values_reach_the_file(lib, tmp_path, value):
    # Accepted by the binding and the library: the open fails on the file.
    with pytest.raises(moonlm.MoonlmIOError):
        moonlm.Model(tmp_path / "missing.gguf", numerics=value)


def test_library_rejects_out_of_range(lib, tmp_path):
    """The library's own check, past the binding's: a raw out-of-range value."""
    p = _lib.ModelParams()
    lib.model_params_init(ctypes.byref(p), ctypes.sizeof(p))
    assert p.numerics == _lib.NUMERICS_DEFAULT
    p.numerics = 4
    h = ctypes.c_void_p()
    st = lib.model_open(os.fsencode(tmp_path / "missing.gguf"), ctypes.byref(p), ctypes.byref(h))
    with pytest.raises(moonlm.InvalidArgumentError, match=r"moonlm_model_params\.numerics is 4"):
        lib.check(st, "open")
    assert not h.value


def test_numerics_layout(lib, tmp_path):
    """The ctypes mirror's numerics member and constants match the C compiler's."""
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler (cc, gcc, clang) on PATH")
    src = tmp_path / "layout.c"
    src.write_text(
        '#include <stdio.h>\n#include <stddef.h>\n#include "moonlm.h"\n'
        'int main(void) { printf("size %zu numerics %zu values %d %d %d %d\\n", sizeof(moonlm_model_params),\n'
        "offsetof(moonlm_model_params, numerics), MOONLM_NUMERICS_DEFAULT, MOONLM_NUMERICS_LLAMACPP,\n"
        "MOONLM_NUMERICS_LLAMACPP_NOREPACK, MOONLM_NUMERICS_IK); return 0; }\n"
    )
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", str(REPO / "include"), "-o", str(exe), str(src)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    P = _lib.ModelParams
    want = (
        f"size {ctypes.sizeof(P)} numerics {P.numerics.offset} values {_lib.NUMERICS_DEFAULT} "
        f"{_lib.NUMERICS_LLAMACPP} {_lib.NUMERICS_LLAMACPP_NOREPACK} {_lib.NUMERICS_IK}\n"
    )
    assert got == want


def worst_top_diff(logits, dist):
    """The largest log-probability difference over the reference's top 10."""
    xs = [float(v) for v in logits]
    m = max(xs)
    lse = m + math.log(sum(math.exp(v - m) for v in xs))
    return max(abs((xs[int(tok)] - lse) - (lp - dist["lse"])) for tok, lp in dist["top"][:10])


def first_position_logits(path, numerics, token):
    with moonlm.Model(path, n_threads=2, numerics=numerics) as m:
        with m.session(n_ctx=64) as s:
            return list(s.prefill([token]))


def test_ik_matches_reference_and_default_does_not(lib):
    """numerics="ik" gives ik_llama.cpp's logits at the first prompt position
    of the synthetic Q4_K_M model exactly (1e-4 leaves room for the float64
    log-sum-exp only), while the default (fast) mode is measurably off there
    (the C ABI test measured 0.05), so the check tells the modes apart."""
    env = os.environ.get("MOONLM_NUMERICS")
    if env:
        pytest.skip(f"MOONLM_NUMERICS={env!r} is set: the library took it in at load, so the default is not the fast mode")
    path = data_path(IK_MODEL)
    with open(data_path(IK_REFS)) as f:
        ref = json.loads(f.readline())
    dist = ref["prompt_logits"][0]
    tok = ref["tokens"][0]
    ik = worst_top_diff(first_position_logits(path, "ik", tok), dist)
    fast = worst_top_diff(first_position_logits(path, None, tok), dist)
    llamacpp = worst_top_diff(first_position_logits(path, "llamacpp", tok), dist)
    assert ik <= 1e-4, f"ik: worst top-10 log-probability difference {ik}"
    assert fast > 1e-4, f"default: {fast}, as close as ik: the test cannot tell the modes apart"
    assert fast <= 0.5 and llamacpp <= 0.5, f"default {fast}, llamacpp {llamacpp}: the same model"


def test_invalid_environment_fails_default_open(lib):
    """MOONLM_NUMERICS is read when the library loads: in a fresh process
    with an invalid value, a default open fails and an explicit mode works."""
    path = data_path("models/stories260K.gguf")
    code = f"""
import moonlm
try:
    moonlm.Model({path!r})
except moonlm.InvalidArgumentError as e:
    assert "MOONLM_NUMERICS" in str(e), str(e)
else:
    raise SystemExit("default open succeeded with MOONLM_NUMERICS=bogus")
with moonlm.Model({path!r}, numerics="llamacpp") as m:
    assert m.numerics == "llamacpp"
print("child ok")
"""
    src = os.path.dirname(os.path.dirname(moonlm.__file__))
    env = dict(os.environ, MOONLM_NUMERICS="bogus", MOONLM_LIBRARY=lib.path,
               PYTHONPATH=os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "child ok" in r.stdout, r.stdout + r.stderr
