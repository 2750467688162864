"""The packing open options (pack, packed_cache, packed_cache_dir,
packed_cache_bytes): validation, the struct they travel in, and that they
reach the engine (its packed-weight cache on disk)."""

import ctypes
import os
import shutil
import subprocess

import pytest

import moonlm
from moonlm import _lib

from conftest import REPO, data_path


@pytest.mark.parametrize(
    "kwargs",
    [
        {"pack": 1},
        {"pack": "yes"},
        {"packed_cache": 0},
        {"packed_cache": "ON"},
        {"packed_cache_bytes": -1},
        {"packed_cache_bytes": 1 << 63},
        {"packed_cache_bytes": 1.5},
        {"packed_cache_bytes": True},
    ],
)
def test_bad_values_are_refused(lib, tmp_path, kwargs):
    # Refused before the file is looked at: the path does not exist.
    with pytest.raises(moonlm.InvalidArgumentError) as e:
        moonlm.Model(tmp_path / "missing.gguf", **kwargs)
    assert next(iter(kwargs)) in str(e.value)


@pytest.mark.parametrize("value", [None, True, False, "default", "on", "off"])
def test_good_values_reach_the_file(lib, tmp_path, value):
    # Accepted by the binding and the library: the open fails on the file.
    with pytest.raises(moonlm.MoonlmIOError):
        moonlm.Model(
            tmp_path / "missing.gguf",
            pack=value,
            packed_cache=value,
            packed_cache_dir=tmp_path,
            packed_cache_bytes=(1 << 63) - 1,
        )


def test_model_params_layout(lib, tmp_path):
    """The ctypes mirror of moonlm_model_params matches the C compiler's."""
    cc = next((c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c and shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler (cc, gcc, clang) on PATH")
    src = tmp_path / "layout.c"
    src.write_text(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"moonlm.h\"\n"
        "#define F(m) printf(#m \" %zu\\n\", offsetof(moonlm_model_params, m))\n"
        "int main(void) { printf(\"size %zu\\n\", sizeof(moonlm_model_params));\n"
        "F(n_threads); F(flags); F(pack); F(packed_cache); F(packed_cache_dir); F(packed_cache_bytes);\n"
        "printf(\"on %d off %d cache_on %d cache_off %d\\n\", MOONLM_PACK_ON, MOONLM_PACK_OFF,\n"
        "MOONLM_PACKED_CACHE_ON, MOONLM_PACKED_CACHE_OFF); return 0; }\n"
    )
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", str(REPO / "include"), "-o", str(exe), str(src)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    P = _lib.ModelParams
    want = f"size {ctypes.sizeof(P)}\n" + "".join(
        f"{name} {getattr(P, name).offset}\n"
        for name in ("n_threads", "flags", "pack", "packed_cache", "packed_cache_dir", "packed_cache_bytes")
    )
    want += f"on {_lib.PACK_ON} off {_lib.PACK_OFF} cache_on {_lib.PACK_ON} cache_off {_lib.PACK_OFF}\n"
    assert got == want


# Shared synth models with matrix types that may have packed layouts.
PACKABLE = [
    "synth/synth-llama-Q8_0.gguf",
    "synth/synth-llama-Q4_K_M.gguf",
    "synth/synth-qwen3-Q8_0.gguf",
    "synth/synth-qwen3-Q4_K_M.gguf",
]


def stats_or_skip(model):
    try:
        return model.open_stats()
    except moonlm.UnsupportedError as e:
        pytest.skip(str(e))


def packable_model(skip=()):
    """The path of a synth model the library packs something of (with the
    cache off), or a skip: no packed layout exists for its matrix types on
    this CPU. skip: paths not to return."""
    tried = []
    for rel in PACKABLE:
        path = data_path(rel)
        if path in skip:
            continue
        with moonlm.Model(path, n_threads=1, pack=True, packed_cache=False) as m:
            if stats_or_skip(m).pack_source != "none":
                return path
        tried.append(rel)
    pytest.skip(f"no packed layout for the matrices of {tried} with this CPU's kernels: nothing to pack or cache")


def cache_files(d):
    """The cache's entries: its files without the .ok stamps beside them."""
    if not d.exists():
        return []
    return sorted(p for p in d.rglob("*") if p.is_file() and p.suffix != ".ok")


def logits_of(model):
    with model.session(n_ctx=32) as s:
        return list(s.prefill([1, 40, 90, 200, 7, 311]))


def test_open_stats_of_an_unpackable_model(lib, tmp_path):
    # stories260K is all F32: no packed layout, so nothing is packed or cached.
    with moonlm.Model(data_path("models/stories260K.gguf"), pack="on", packed_cache="on",
                      packed_cache_dir=tmp_path) as m:
        s = stats_or_skip(m)
    assert s.pack_source == "none"
    assert s.packed_matrices == 0 and s.packed_bytes == 0
    assert min(s.map_ms, s.parse_ms, s.tensors_ms, s.pack_ms) >= 0
    assert cache_files(tmp_path) == []


def test_packed_cache_dir_receives_entry_and_is_reused(lib, tmp_path):
    path = packable_model()
    d = tmp_path / "cache"
    with moonlm.Model(path, n_threads=2, pack=True, packed_cache=True, packed_cache_dir=d) as m:
        cold = m.open_stats()
        cold_logits = logits_of(m)
    assert cold.pack_source == "packed+cache-write"
    assert cold.packed_matrices > 0 and cold.packed_bytes > 0
    entries = cache_files(d)
    assert entries, f"no cache entry in packed_cache_dir {d}"

    with moonlm.Model(path, n_threads=2, pack="on", packed_cache="on", packed_cache_dir=str(d)) as m:
        warm = m.open_stats()
        warm_logits = logits_of(m)
    assert warm.pack_source == "cache-hit"
    assert warm.packed_bytes == cold.packed_bytes
    assert cache_files(d) == entries
    assert warm_logits == cold_logits


def test_packed_cache_off_and_pack_off_write_nothing(lib, tmp_path):
    path = packable_model()
    d = tmp_path / "cache"
    with moonlm.Model(path, n_threads=2, pack=True, packed_cache="off", packed_cache_dir=d) as m:
        assert m.open_stats().pack_source == "packed"
    assert cache_files(d) == []
    with moonlm.Model(path, n_threads=2, pack="off", packed_cache=True, packed_cache_dir=d) as m:
        s = m.open_stats()
    assert s.pack_source == "off" and s.packed_bytes == 0
    assert cache_files(d) == []


def test_packed_cache_bytes_evicts(lib, tmp_path):
    first = packable_model()
    second = packable_model(skip=[first])
    roomy, tight = tmp_path / "roomy", tmp_path / "tight"
    for p in (first, second):
        moonlm.Model(p, n_threads=1, pack=True, packed_cache=True, packed_cache_dir=roomy).close()
        moonlm.Model(p, n_threads=1, pack=True, packed_cache=True, packed_cache_dir=tight,
                     packed_cache_bytes=1).close()
    assert len(cache_files(roomy)) == 2
    # The newest entry stays even though it alone exceeds the budget.
    assert len(cache_files(tight)) == 1
