"""Exceptions: one per moonlm_status, all deriving from MoonlmError."""

from __future__ import annotations

from typing import Dict, Type


class MoonlmError(Exception):
    """A failed moonlm call. ``status`` is the library's moonlm_status code
    (0 for failures detected before reaching the library, such as a library
    that cannot be loaded) and ``message`` the library's description."""

    status: int = 0

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class InvalidArgumentError(MoonlmError, ValueError):
    """A bad value, or a closed/freed model or session (MOONLM_INVALID_ARGUMENT).
    Also a ValueError, so that a bad option can be caught the usual Python way."""


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type, caught by the binding before any call
    (a str where token ids go, n_threads="four"). Both an InvalidArgumentError
    and a TypeError, so either way of catching it works."""


class MoonlmIOError(MoonlmError):
    """The OS failed a read: a missing or truncated file (MOONLM_IO)."""


class BadFileError(MoonlmError):
    """Not a valid GGUF model: corrupt or inconsistent (MOONLM_BAD_FILE)."""


class UnsupportedError(MoonlmError):
    """A valid file using something moonlm lacks, or no chat template (MOONLM_UNSUPPORTED)."""


class BufferTooSmallError(MoonlmError):
    """An output buffer was short (MOONLM_BUFFER_TOO_SMALL); the binding retries, so rare."""


class ContextFullError(MoonlmError):
    """The session has no room for more tokens (MOONLM_CONTEXT_FULL)."""


class CancelledError(MoonlmError):
    """Session.cancel() stopped the call (MOONLM_CANCELLED)."""


class BusyError(MoonlmError):
    """The session is in use by another thread (MOONLM_BUSY)."""


class OutOfMemoryError(MoonlmError):
    """An allocation failed (MOONLM_OUT_OF_MEMORY)."""


class InternalError(MoonlmError):
    """A bug in moonlm (MOONLM_INTERNAL); please report it."""


class ForkedError(MoonlmError):
    """Called in a fork()ed child, where the library cannot work (MOONLM_FORKED).

    Use multiprocessing's "spawn" or "forkserver" start method instead.
    """


_BY_STATUS: Dict[int, Type[MoonlmError]] = {
    1: InvalidArgumentError,
    2: MoonlmIOError,
    3: BadFileError,
    4: UnsupportedError,
    5: BufferTooSmallError,
    6: ContextFullError,
    7: CancelledError,
    8: BusyError,
    9: OutOfMemoryError,
    10: InternalError,
    11: ForkedError,
}


def error_for_status(status: int, message: str) -> MoonlmError:
    """The exception for a status code (MoonlmError for unknown codes)."""
    cls = _BY_STATUS.get(status, MoonlmError)
    err = cls(status, message)
    return err
