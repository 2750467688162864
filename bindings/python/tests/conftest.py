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


def real_model_path(name: str = "SmolLM2-135M-Instruct.Q4_1.gguf"):
    """A real model where scripts/fetch-model.sh keeps it ($MOONLM_MODELS, else
    $XDG_CACHE_HOME/moonlm/models or ~/.cache/moonlm/models), or a skip."""
    d = os.environ.get("MOONLM_MODELS")
    if not d:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(cache, "moonlm", "models")
    p = Path(d) / name
    if not p.is_file():
        pytest.skip(f"{name} absent from {d}: run scripts/fetch-model.sh")
    return str(p)
