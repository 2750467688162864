"""Argument checks: every value is checked here before it crosses the C ABI.

ctypes would otherwise wrap it without a word (decode(2**32+5) decoding
token 5, n_ctx=2**32+16 meaning 16) or cut it (a path with a NUL). A value of
the wrong type raises InvalidArgumentTypeError (an InvalidArgumentError and a
TypeError), a value out of range InvalidArgumentError (a ValueError); both
name the call and the parameter.
"""

from __future__ import annotations

import ctypes
import math
import operator
import os
from array import array
from typing import Any, Collection, List, Mapping, Optional, Sequence, Tuple

from ._errors import InvalidArgumentError, InvalidArgumentTypeError

_np: Any
try:
    import numpy as _np
except ImportError:  # pragma: no cover - exercised by tests that hide numpy
    _np = None

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
UINT64_MAX = (1 << 64) - 1
SIZE_MAX = (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1
FLOAT32_MAX = 3.4028234663852886e38

_BOOLS: Tuple[type, ...] = (bool,) if _np is None else (bool, _np.bool_)
_BYTES = (bytes, bytearray, memoryview)


def type_error(what: str, param: str, msg: str) -> InvalidArgumentTypeError:
    return InvalidArgumentTypeError(1, f"{what}: {param} {msg}")


def range_error(what: str, param: str, msg: str) -> InvalidArgumentError:
    return InvalidArgumentError(1, f"{what}: {param} {msg}")


def _shown(v: Any) -> str:
    if isinstance(v, (str, bytes)) and len(v) > 40:
        v = v[:40]
    r = repr(v)
    return r if len(r) <= 60 else f"a {type(v).__name__}"


def integer(what: str, param: str, v: Any, lo: int, hi: int) -> int:
    """v (an int or a NumPy integer, not a bool) as an int in [lo, hi]."""
    if type(v) is int and lo <= v <= hi:  # the common case, cheap per token
        return v
    if isinstance(v, _BOOLS):
        raise type_error(what, param, f"must be an int, got {v!r}")
    try:
        i = operator.index(v)
    except TypeError:
        raise type_error(what, param, f"must be an int, got {type(v).__name__} {_shown(v)}") from None
    if not lo <= i <= hi:
        raise range_error(what, param, f"must be in [{lo}, {hi}], got {i}")
    return i


def token(what: str, param: str, v: Any) -> int:
    """A token id: an int in [0, 2**31-1] (the library checks the vocabulary)."""
    return integer(what, param, v, 0, INT32_MAX)


def number(what: str, param: str, v: Any) -> float:
    """A finite real number that fits a C float."""
    if isinstance(v, _BOOLS) or isinstance(v, (str, bytes)):
        raise type_error(what, param, f"must be a number, got {type(v).__name__} {_shown(v)}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise type_error(what, param, f"must be a number, got {type(v).__name__} {_shown(v)}") from None
    if not math.isfinite(f) or abs(f) > FLOAT32_MAX:
        raise range_error(what, param, f"must be a finite number, got {v!r}")
    return f


def boolean(what: str, param: str, v: Any) -> bool:
    if not isinstance(v, _BOOLS):
        raise type_error(what, param, f"must be a bool, got {type(v).__name__} {_shown(v)}")
    return bool(v)


def string(what: str, param: str, v: Any, nul: bool = True) -> str:
    """A str; nul=False refuses NUL characters, where a C string would end."""
    if not isinstance(v, str):
        raise type_error(what, param, f"must be a str, got {type(v).__name__} {_shown(v)}")
    if not nul and "\0" in v:
        raise range_error(what, param, "must not contain NUL characters")
    return v


def path(what: str, param: str, v: Any) -> bytes:
    """A file system path (str, bytes or os.PathLike) as bytes, without NUL."""
    try:
        b = os.fsencode(v)
    except TypeError:
        raise type_error(
            what, param, f"must be a str, bytes or os.PathLike, got {type(v).__name__} {_shown(v)}"
        ) from None
    if b"\0" in b:
        raise range_error(what, param, "must not contain NUL characters")
    return b


def tokens(what: str, param: str, v: Any) -> Tuple[int, int, Any]:
    """Token ids as (pointer, count, keepalive) for an int32_t* argument.

    A C-contiguous NumPy int32 array or an array('i') is passed without a
    copy; other integer arrays and iterables of ints are checked and copied.
    Text (str, bytes) is refused: it is never taken for token ids.
    """
    if isinstance(v, (str,) + _BYTES):
        raise type_error(
            what, param, f"must be token ids (ints), got {type(v).__name__}: tokenize text first"
        )
    if _np is not None and isinstance(v, _np.ndarray):
        if v.dtype.kind not in "iu":
            raise type_error(what, param, f"must hold integers, got a {v.dtype} array")
        if v.ndim != 1:
            raise range_error(what, param, f"must be 1-dimensional, got shape {v.shape}")
        if v.dtype != _np.int32 or not v.flags.c_contiguous:
            if v.size and (v.min() < 0 or v.max() > INT32_MAX):
                i = int(_np.flatnonzero((v < 0) | (v > INT32_MAX))[0])
                raise range_error(what, f"{param}[{i}]", f"must be in [0, {INT32_MAX}], got {v[i]}")
            v = _np.ascontiguousarray(v, dtype=_np.int32)
        return v.ctypes.data, v.size, v
    if isinstance(v, array) and v.typecode == "i" and v.itemsize == 4:
        addr, n = v.buffer_info()
        return addr, n, v
    try:
        items: Sequence[Any] = v if isinstance(v, (list, tuple)) else list(v)
    except TypeError:
        raise type_error(
            what, param, f"must be a sequence of token ids, got {type(v).__name__} {_shown(v)}"
        ) from None
    for i, t in enumerate(items):
        if type(t) is not int or not 0 <= t <= INT32_MAX:
            token(what, f"{param}[{i}]", t)  # raises, or accepts a NumPy integer
    buf = (ctypes.c_int32 * len(items))(*items)
    return ctypes.addressof(buf), len(items), buf


def token_list(what: str, param: str, v: Any) -> List[int]:
    """Token ids as a list of ints, checked like tokens()."""
    _, _, keep = tokens(what, param, v)
    return list(keep) if isinstance(keep, ctypes.Array) else keep.tolist()


def strings(what: str, param: str, v: Optional[Any]) -> List[str]:
    """None, a str, or an iterable of str (such as stop strings), as a list."""
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    if isinstance(v, _BYTES) or isinstance(v, Mapping):
        raise type_error(what, param, f"must be a str or a list of str, got {type(v).__name__}")
    try:
        out = list(v)
    except TypeError:
        raise type_error(what, param, f"must be a str or a list of str, got {type(v).__name__}") from None
    for i, s in enumerate(out):
        string(what, f"{param}[{i}]", s)
    return out


# The keys of an OpenAI-style message the library knows; others are refused.
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
TOOL_KEYS = MESSAGE_KEYS[2:]


def messages(what: str, v: Any) -> List[Tuple[bytes, bytes]]:
    """OpenAI-style messages as (role, content) UTF-8 pairs: a sequence of
    mappings with a str role and a str content (None: ""), and no keys
    beyond MESSAGE_KEYS (the tool keys are checked by the library)."""
    if isinstance(v, (str, Mapping) + _BYTES) or not isinstance(v, Collection):
        raise type_error(what, "messages", f"must be a list of dicts, got {type(v).__name__}")
    out = []
    for i, m in enumerate(v):
        if not isinstance(m, Mapping):
            raise type_error(what, f"messages[{i}]", f"must be a dict, got {type(m).__name__}")
        for key in m:
            if key not in MESSAGE_KEYS:
                raise type_error(
                    what, f"messages[{i}]", f"has an unknown key {key!r} (known: {', '.join(MESSAGE_KEYS)})"
                )
        for key in ("role", "content"):
            if key not in m and not (key == "content" and "tool_calls" in m):
                raise type_error(what, f"messages[{i}]", f"needs a {key!r}")
        role = string(what, f"messages[{i}]['role']", m["role"], nul=False)
        content = m.get("content")
        content = "" if content is None else string(what, f"messages[{i}]['content']", content, nul=False)
        out.append((role.encode("utf-8"), content.encode("utf-8")))
    return out


def uses_tools(msgs: Any) -> bool:
    """Whether checked messages carry tool calls or results."""
    return any(k in m for m in msgs for k in TOOL_KEYS) or any(m.get("role") == "tool" for m in msgs)
