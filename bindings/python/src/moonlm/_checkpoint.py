"""Checkpoints of a hybrid model's recurrent state.

A hybrid model (recurrent layers beside attention: qwen35, qwen35moe,
qwen3next) cannot cut its recurrent state back to a position, so a session
keeps checkpoints, copies of that state: at the end of every prefill and
every checkpoint_every decoded positions (Session's keyword), within
checkpoint_bytes of memory. rewind() restores the last one at or before the
position and evaluates the tokens after it again. The method here is mixed
into moonlm.Session; it calls the checkpoint section of moonlm.h, declared
for ctypes on first use (a library built before it lacks the functions, and
the method then raises UnsupportedError).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_int32, c_size_t, c_uint32, c_uint64, c_void_p
from typing import TYPE_CHECKING, Any, Dict, NamedTuple, Tuple

from . import _lib as L
from ._errors import UnsupportedError

if TYPE_CHECKING:  # pragma: no cover
    from ._model import Session


class _CheckpointInfo(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("every", c_int32),
        ("max_count", c_int32),
        ("n_held", c_int32),
        ("reserved", c_uint32),
        ("bytes_held", c_uint64),
    ]


class Checkpoints(NamedTuple):
    """A session's checkpoints (moonlm_checkpoint_info and their positions);
    all zero and empty for a model without recurrent layers."""

    every: int  # decoded positions between checkpoints in effect (0: none while decoding)
    max_count: int  # the most kept at once (0: none)
    bytes_held: int  # the memory the held ones take
    positions: Tuple[int, ...]  # the positions held, ascending; a rewind to one evaluates nothing


_PROTOTYPES = {
    "moonlm_session_checkpoints": [c_void_p, POINTER(_CheckpointInfo)],
    "moonlm_session_checkpoint_positions": [c_void_p, c_void_p, c_size_t, POINTER(c_size_t)],
}

_declared: Dict[int, Dict[str, Any]] = {}


def _fn(lib: L.Library, name: str) -> Any:
    fns = _declared.get(id(lib))
    if fns is None:
        fns = {}
        for full, argtypes in _PROTOTYPES.items():
            f = getattr(lib.dll, full, None)
            if f is not None:
                f.restype = ctypes.c_int
                f.argtypes = argtypes
            fns[full] = f
        _declared[id(lib)] = fns
    f = fns[name]
    if f is None:
        raise UnsupportedError(4, f"checkpoints: {lib.path} predates the checkpoint functions; rebuild the library")
    return f


class CheckpointMixin:
    """Session.checkpoints()."""

    def checkpoints(self: "Session") -> Checkpoints:
        """The checkpoints of the session's recurrent state: the settings in
        effect and the positions held."""
        lib = self._lib
        h = self._h("checkpoints")
        info = _CheckpointInfo(size=ctypes.sizeof(_CheckpointInfo))
        lib.check(_fn(lib, "moonlm_session_checkpoints")(h, ctypes.byref(info)), "checkpoints")
        n = c_size_t(0)
        buf = (c_size_t * max(info.n_held, 1))()
        lib.check(
            _fn(lib, "moonlm_session_checkpoint_positions")(h, buf, len(buf), ctypes.byref(n)), "checkpoints"
        )
        return Checkpoints(info.every, info.max_count, info.bytes_held, tuple(buf[: n.value]))
