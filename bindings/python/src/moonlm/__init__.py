"""moonlm: a CPU inference engine for GGUF language models (Python binding).

    import moonlm
    with moonlm.Model("stories260K.gguf") as model:
        print(model.generate("Once upon a time", max_tokens=32, temperature=0))

The engine is libmoonlm.so, shipped inside this package (or the file named
by MOONLM_LIBRARY), called through ctypes: calls release the GIL, so threads
with separate sessions run in parallel. The library does not survive fork():
in a child started with fork every call raises ForkedError; use the
"spawn" (or "forkserver") multiprocessing start method.
"""

from ._errors import (
    BadFileError,
    BufferTooSmallError,
    BusyError,
    CancelledError,
    ContextFullError,
    ForkedError,
    InternalError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    MoonlmError,
    MoonlmIOError,
    OutOfMemoryError,
    UnsupportedError,
)
from ._model import Model, OpenStats, Sampler, Session

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the loaded libmoonlm.so ("MAJOR.MINOR.PATCH")."""
    from ._lib import lib

    v: bytes = lib().version()
    return v.decode()


def library_path() -> str:
    """The path libmoonlm.so was loaded from."""
    from ._lib import library_path as _p

    return _p()


__all__ = [
    "Model",
    "Session",
    "Sampler",
    "OpenStats",
    "MoonlmError",
    "InvalidArgumentError",
    "InvalidArgumentTypeError",
    "MoonlmIOError",
    "BadFileError",
    "UnsupportedError",
    "BufferTooSmallError",
    "ContextFullError",
    "CancelledError",
    "BusyError",
    "OutOfMemoryError",
    "InternalError",
    "ForkedError",
    "library_version",
    "library_path",
]
