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

from typing import List

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
from ._generate import Completion, TextStream
from ._model import Model, OpenStats, Sampler, Session
from ._structured import Grammar
from ._hub import HubError
from ._conversation import Conversation
from ._state import SessionStats
from ._checkpoint import Checkpoints
from ._batch import BatchEntry, Batcher, decode_batch, max_batch_tokens

__version__ = "0.1.0"


def library_version() -> str:
    """The version of the loaded libmoonlm.so ("MAJOR.MINOR.PATCH")."""
    from ._lib import lib

    v: bytes = lib().version()
    return v.decode()


def builtin_chat_templates() -> List[str]:
    """The built-in chat formats Model.chat(..., template=NAME) and
    apply_chat_template accept ("chatml", "gemma", "llama3", ...), sorted."""
    from ._lib import lib
    from ._model import _TextBuffer

    lb = lib()
    if lb.chat_builtin_templates is None:
        raise UnsupportedError(4, f"builtin_chat_templates: {lb.path} predates built-in templates; rebuild the library")
    return _TextBuffer().call(lb, lb.chat_builtin_templates, "builtin_chat_templates").decode().split(",")


def library_path() -> str:
    """The path libmoonlm.so was loaded from."""
    from ._lib import library_path as _p

    return _p()


__all__ = [
    "Model",
    "Session",
    "Sampler",
    "Grammar",
    "OpenStats",
    "Completion",
    "TextStream",
    "HubError",
    "Conversation",
    "SessionStats",
    "Checkpoints",
    "BatchEntry",
    "Batcher",
    "decode_batch",
    "max_batch_tokens",
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
    "builtin_chat_templates",
]
