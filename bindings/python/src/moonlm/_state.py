"""Session state: prefix reuse, fork, and saving and loading a state.

The methods here are mixed into moonlm.Session; they call the session-state
section of moonlm.h, declared for ctypes on first use (a library built
before it lacks the functions, and the methods then raise UnsupportedError).
"""

from __future__ import annotations

import ctypes
import os
import weakref
from ctypes import POINTER, Structure, c_char_p, c_int32, c_size_t, c_uint64, c_void_p
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Union

from . import _args as A
from . import _lib as L
from ._errors import UnsupportedError

if TYPE_CHECKING:  # pragma: no cover
    from ._model import Session


class _SessionStats(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("n_pos", c_uint64),
        ("n_ctx", c_uint64),
        ("n_evaluated", c_uint64),
        ("n_reused", c_uint64),
    ]


class SessionStats(NamedTuple):
    """A session's counters (moonlm_session_stats)."""

    n_pos: int  # positions held
    n_ctx: int  # the session's context size
    n_evaluated: int  # tokens run through the model since it was made or its state loaded
    n_reused: int  # tokens prefill_reuse found held and did not evaluate


_h = c_void_p
_sizep = POINTER(c_size_t)
_PROTOTYPES = {
    "moonlm_prefill_reuse": [_h, c_void_p, c_size_t, c_void_p, c_size_t, _sizep],
    "moonlm_session_stats_get": [_h, POINTER(_SessionStats)],
    "moonlm_session_tokens": [_h, c_void_p, c_size_t, _sizep],
    "moonlm_session_fork": [_h, POINTER(_h)],
    "moonlm_session_state_size": [_h, _sizep],
    "moonlm_session_state_save": [_h, c_void_p, c_size_t, _sizep],
    "moonlm_session_state_load": [_h, c_void_p, c_size_t],
    "moonlm_session_state_save_file": [_h, c_char_p],
    "moonlm_session_state_load_file": [_h, c_char_p],
}

_declared: Dict[int, Dict[str, Any]] = {}


def _fn(lib: L.Library, name: str, what: str) -> Any:
    """The library's function moonlm_NAME with its prototype declared."""
    fns = _declared.get(id(lib))
    if fns is None:
        fns = {}
        for full, argtypes in _PROTOTYPES.items():
            f = getattr(lib.dll, full, None)
            if f is not None:
                f.restype = ctypes.c_int
                f.argtypes = argtypes
            fns[full[len("moonlm_") :]] = f
        _declared[id(lib)] = fns
    f = fns[name]
    if f is None:
        raise UnsupportedError(4, f"{what}: {lib.path} predates session state functions; rebuild the library")
    return f


def _path(what: str, path: Any) -> bytes:
    if not isinstance(path, (str, os.PathLike)):
        raise A.type_error(what, "path", f"must be a str or os.PathLike, got {type(path).__name__}")
    p = os.fsencode(path)
    if not p:
        raise A.range_error(what, "path", "is empty")
    if b"\0" in p:
        raise A.range_error(what, "path", "contains a NUL byte")
    return p


class SessionStateMixin:
    """Prefix reuse, fork, save and load for moonlm.Session."""

    #: Tokens the last prefill_reuse evaluated (0 before the first).
    last_evaluated: int = 0

    def prefill_reuse(self: "Session", tokens: Any, *, logits: bool = True) -> Any:
        """Makes the session hold exactly tokens, evaluating only what it
        does not already hold: the longest common prefix of its tokens and
        these is kept, the rest evaluated. Returns the last position's
        logits (like prefill); the last token is always evaluated for them,
        again if it was held. last_evaluated says how many were evaluated.
        On an error before any work nothing changes; if the evaluation
        itself fails, the session holds the common prefix. With
        logits=False no logits are wanted: tokens already held are not
        evaluated again, and None is returned."""
        A.boolean("prefill_reuse", "logits", logits)
        h = self._h("prefill_reuse")
        ptr, n, keep = A.tokens("prefill_reuse", "tokens", tokens)
        lib = self._lib
        f = _fn(lib, "prefill_reuse", "prefill_reuse")
        n_eval = c_size_t(0)
        if logits:
            st = f(h, ptr, n, self._logits_ptr, self.n_vocab, ctypes.byref(n_eval))
        else:
            st = f(h, ptr, n, None, 0, ctypes.byref(n_eval))
        del keep
        lib.check(st, "prefill_reuse")
        self.last_evaluated = n_eval.value
        return self._logits if logits else None

    def stats(self: "Session") -> SessionStats:
        """The session's counters."""
        s = _SessionStats(size=ctypes.sizeof(_SessionStats))
        lib = self._lib
        lib.check(_fn(lib, "session_stats_get", "stats")(self._h("stats"), ctypes.byref(s)), "stats")
        return SessionStats(s.n_pos, s.n_ctx, s.n_evaluated, s.n_reused)

    @property
    def tokens(self: "Session") -> List[int]:
        """The tokens the session holds, one per position."""
        h = self._h("tokens")
        lib = self._lib
        f = _fn(lib, "session_tokens", "tokens")
        n = c_size_t(0)
        for _ in range(3):  # a position that moved in between (another thread's call) is retried
            buf = (c_int32 * max(n.value, 1))()
            st = f(h, buf, n.value, ctypes.byref(n))
            if st == L.BUFFER_TOO_SMALL:
                continue
            lib.check(st, "tokens")
            return list(buf[: n.value])
        raise lib.error(st, "tokens")  # pragma: no cover

    def fork(self: "Session") -> "Session":
        """A new session holding the same positions and tokens, which then
        continues independently (same model, n_ctx and KV type). The KV
        cache is copied, not shared: the cost is the held positions only,
        and nothing is recomputed."""
        from ._model import Session, _free_handle

        h = self._h("fork")
        lib = self._lib
        out = c_void_p()
        lib.check(_fn(lib, "session_fork", "fork")(h, ctypes.byref(out)), "fork")
        fh = int(out.value or 0)
        try:
            # A Session object (its buffers and finalizer) around an empty
            # session, whose handle is then swapped for the fork's.
            new = Session(self.model, n_ctx=self.n_ctx, kv_type=self.kv_type)
        except BaseException:
            lib.session_free(fh)
            raise
        new._finalizer()  # frees the empty session
        new._handle = fh
        new._finalizer = weakref.finalize(new, _free_handle, lib.session_free, fh)
        return new

    def save_state(self: "Session", path: Any = None) -> Optional[bytes]:
        """Saves the session's state (its tokens and KV cache, in a
        versioned, checksummed format that names the model it belongs to).
        Returns the bytes, or with path writes the file (through a temporary
        file renamed at the end) and returns None."""
        h = self._h("save_state")
        lib = self._lib
        if path is not None:
            p = _path("save_state", path)
            lib.check(_fn(lib, "session_state_save_file", "save_state")(h, p), "save_state")
            return None
        f = _fn(lib, "session_state_save", "save_state")
        n = c_size_t(0)
        lib.check(_fn(lib, "session_state_size", "save_state")(h, ctypes.byref(n)), "save_state")
        for _ in range(3):
            buf = ctypes.create_string_buffer(max(n.value, 1))
            st = f(h, buf, n.value, ctypes.byref(n))
            if st == L.BUFFER_TOO_SMALL:
                continue
            lib.check(st, "save_state")
            return buf.raw[: n.value]
        raise lib.error(st, "save_state")  # pragma: no cover

    def load_state(self: "Session", state: Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]) -> None:
        """Replaces the session's positions with a saved state: bytes from
        save_state(), or the path of a file it wrote. The state must come
        from the same model file (opened in any process), KV type and
        numerics, and fit in n_ctx; otherwise, or if it is truncated or
        corrupted, an error is raised (BadFileError, InvalidArgumentError,
        ContextFullError) and the session is unchanged."""
        h = self._h("load_state")
        lib = self._lib
        if isinstance(state, (bytes, bytearray, memoryview)):
            data = bytes(state)
            f = _fn(lib, "session_state_load", "load_state")
            lib.check(f(h, data, len(data)), "load_state")
            return
        p = _path("load_state", state)
        lib.check(_fn(lib, "session_state_load_file", "load_state")(h, p), "load_state")
