"""Shared fixtures: the library, the shared test data, the stories260K model.

The test data is found as the Go tests find it: $MOONLM_TESTDATA, or
../shared/testdata beside the repository; tests that need it skip with a
reason when it is absent. The library is libmoonlm.so as the package finds it
(MOONLM_LIBRARY, set by `make test-python`, or <repo>/build after `make lib`);
if MOONLM_LIBRARY is set and cannot be loaded that is a failure, not a skip.
"""

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

# Models opened with default options must not fill the user's packed-weight
# cache: point it at a temporary folder before the library is loaded (the
# library reads its environment when it loads).
if not os.environ.get("MOONLM_PACKED_CACHE_DIR"):
    _cache_dir = tempfile.mkdtemp(prefix="moonlm-pytest-cache-")
    os.environ["MOONLM_PACKED_CACHE_DIR"] = _cache_dir
    atexit.register(shutil.rmtree, _cache_dir, True)


def testdata_root():
    env = os.environ.get("MOONLM_TESTDATA")
    if env:
        return Path(env) if Path(env).is_dir() else None
    d = REPO.parent / "shared" / "testdata"
    return d if d.is_dir() else None


def data_path(rel: str) -> str:
    root = testdata_root()
    if root is None:
        pytest.skip("shared test data not found: set MOONLM_TESTDATA or place it at ../shared/testdata")
    p = root / rel
    if not p.exists():
        pytest.skip(f"test data file {rel} absent")
    return str(p)


def default_model(name: str) -> str:
    """The path of a default model, by the name scripts/fetch-model.sh gives
    it (SmolLM2-135M-Instruct.Q4_1.gguf, gemma-3-270m-q4_k_m.gguf), searched
    as the Go tests search (internal/shareddata): $MOONLM_MODELS (the Makefile
    sets build/models), build/models of the repository, then
    ~/.cache/moonlm/models (only read). Skips the test when it is absent."""
    dirs = []
    if os.environ.get("MOONLM_MODELS"):
        dirs.append(Path(os.environ["MOONLM_MODELS"]))
    dirs.append(REPO / "build" / "models")
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        dirs.append(Path(xdg) / "moonlm" / "models")
    dirs.append(Path.home() / ".cache" / "moonlm" / "models")
    for d in dirs:
        p = d / name
        if p.is_file() and p.stat().st_size > 0:
            return str(p)
    pytest.skip(f"model {name} not found in {', '.join(map(str, dirs))}: run scripts/fetch-model.sh (or make test)")


def synth_model(name: str, sha256: str) -> str:
    """The path of a synthetic model the engine's tests generate (for example
    synth-bert-Q8_0.gguf), in $MOONLM_SYNTH_DIR (the Makefile sets
    build/synth) or build/synth of the repository, after checking it is the
    file whose sha256 its references record. Skips the test when it is
    absent (`make synth-models` generates it; `make test` runs that first)."""
    import hashlib

    d = Path(os.environ.get("MOONLM_SYNTH_DIR") or REPO / "build" / "synth")
    p = d / name
    if not p.is_file():
        pytest.skip(f"synthetic model {name} absent from {d}: run `make synth-models`, which generates it")
    assert hashlib.sha256(p.read_bytes()).hexdigest() == sha256, f"{p} is not the file its references were made from"
    return str(p)


@pytest.fixture(scope="session")
def lib():
    import moonlm
    from moonlm import _lib

    try:
        return _lib.lib()
    except moonlm.MoonlmError as e:
        if os.environ.get("MOONLM_LIBRARY"):
            raise  # asked for explicitly: a broken library must fail the run
        pytest.skip(f"libmoonlm.so not available (run `make lib`): {e}")


@pytest.fixture(scope="session")
def stories_path(lib):
    return data_path("models/stories260K.gguf")


@pytest.fixture(scope="module")
def model(stories_path):
    import moonlm

    with moonlm.Model(stories_path, n_threads=2) as m:
        yield m


@pytest.fixture(scope="session")
def ref():
    """llama.cpp's reference for stories260K (F16 KV cache), one dict per prompt."""
    with open(data_path("reference/stories260K.ref.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def ref_f32():
    """The same with an F32 KV cache."""
    with open(data_path("reference/stories260K.kvf32.ref.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def golden():
    with open(data_path("models/stories260K.golden.txt"), encoding="utf-8") as f:
        return f.read()
