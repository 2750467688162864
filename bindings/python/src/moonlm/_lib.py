"""Loading libmoonlm.so and declaring the C ABI (include/moonlm.h) for ctypes.

The library is loaded with ctypes.CDLL, which releases the GIL for the
duration of every foreign call: threads using different sessions compute in
parallel.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import (
    POINTER,
    Structure,
    c_char_p,
    c_float,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any, List, Optional

from ._errors import MoonlmError, error_for_status

LIBNAME = "libmoonlm.so"
ABI_VERSION = 1  # MOONLM_ABI_VERSION this module was written against

OK = 0
BUFFER_TOO_SMALL = 5

TOKENIZE_ADD_SPECIAL = 1
TOKENIZE_PARSE_SPECIAL = 2

KV_F16 = 0
KV_F32 = 1
KV_Q8_0 = 2

SEED_RANDOM = (1 << 64) - 1


PACK_DEFAULT, PACK_ON, PACK_OFF = 0, 1, 2  # moonlm_pack_mode and moonlm_packed_cache_mode

# moonlm_numerics
NUMERICS_DEFAULT, NUMERICS_LLAMACPP, NUMERICS_LLAMACPP_NOREPACK, NUMERICS_IK = 0, 1, 2, 3


# moonlm_pooling and moonlm_embed_params.flags
POOLINGS = {"model": 0, "none": 1, "mean": 2, "cls": 3, "last": 4, "rank": 5}
EMBED_NORMALIZE = 1


class EmbedParams(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("pooling", c_int32),
        ("flags", c_uint32),
    ]


# int (*)(float fraction, void *user_data): moonlm_model_params.progress.
ProgressCallback = ctypes.CFUNCTYPE(c_int, ctypes.c_float, c_void_p)


class ModelParams(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("n_threads", c_int32),
        ("flags", c_uint32),
        ("pack", c_int32),
        ("packed_cache", c_int32),
        ("packed_cache_dir", c_char_p),
        ("packed_cache_bytes", c_uint64),
        ("numerics", c_int32),
        ("progress", ProgressCallback),
        ("progress_user_data", c_void_p),
    ]


class ModelInfo(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("n_vocab", c_int32),
        ("n_ctx_train", c_int32),
        ("n_embd", c_int32),
        ("n_layer", c_int32),
        ("n_head", c_int32),
        ("n_head_kv", c_int32),
        ("token_bos", c_int32),
        ("token_eos", c_int32),
        ("token_eot", c_int32),
        ("reserved", c_int32),
    ]


class OpenStats(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("pack_source", c_int32),
        ("packed_matrices", c_int32),
        ("packed_bytes", ctypes.c_int64),
        ("map_ms", ctypes.c_double),
        ("parse_ms", ctypes.c_double),
        ("tensors_ms", ctypes.c_double),
        ("pack_ms", ctypes.c_double),
    ]


# moonlm_pack_source, by value: the engine's names for where packed weights came from.
PACK_SOURCES = ("off", "none", "packed", "packed+cache-write", "cache-hit")


class Message(Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class SessionParams(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("n_ctx", c_int32),
        ("n_threads", c_int32),
        ("kv_type", c_int32),
        ("flags", c_uint32),
        ("checkpoint_every", c_int32),
        ("reserved", c_uint32),
        ("checkpoint_bytes", c_int64),
    ]


class SamplerParams(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("presence_penalty", c_float),
        ("frequency_penalty", c_float),
        ("penalty_last_n", c_int32),
        ("seed", c_uint64),
        ("typical_p", c_float),
        ("xtc_probability", c_float),
        ("xtc_threshold", c_float),
        ("mirostat", c_int32),
        ("mirostat_tau", c_float),
        ("mirostat_eta", c_float),
        ("mirostat_m", c_int32),
        ("dry_multiplier", c_float),
        ("dry_base", c_float),
        ("dry_allowed_length", c_int32),
        ("dry_penalty_last_n", c_int32),
        ("dry_sequence_breakers", POINTER(c_char_p)),
        ("n_dry_sequence_breakers", c_size_t),
        ("logit_bias", c_void_p),
        ("n_logit_bias", c_size_t),
    ]


class LogitBias(Structure):
    _fields_ = [("token", c_int32), ("bias", c_float)]


# Bounds of moonlm_sampler_params' logit biases and DRY breakers.
MAX_LOGIT_BIAS = 1 << 20
MAX_DRY_BREAKERS = 1024
MAX_TOP_LOGPROBS = 20
MAX_GRAMMAR_BYTES = 1 << 24


class TopLogprob(Structure):
    _fields_ = [("token", c_int32), ("logprob", c_float)]


class TokenLogprob(Structure):
    _fields_ = [
        ("token", c_int32),
        ("logprob", c_float),
        ("n_top", c_int32),
        ("top", TopLogprob * MAX_TOP_LOGPROBS),
    ]


# The piece is a pointer, not c_char_p: its len bytes may contain NUL.
PieceCallback = ctypes.CFUNCTYPE(c_int, c_void_p, c_size_t, c_int32, c_void_p)

CANCELLED = 7

# moonlm_finish_reason, by value.
FINISH_REASONS = ("none", "stop", "length", "eog", "context", "cancelled")
FINISH_CANCELLED = 5

# The bounds of moonlm_generate_params' stop strings.
MAX_STOP_STRINGS = 1024
MAX_STOP_BYTES = 1 << 20


class GenerateParams(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("max_tokens", c_int32),
        ("flags", c_uint32),
        ("stop", POINTER(c_char_p)),
        ("stop_len", POINTER(c_size_t)),
        ("n_stop", c_size_t),
        ("callback", PieceCallback),
        ("user_data", c_void_p),
        ("logprobs", POINTER(TokenLogprob)),
        ("logprobs_cap", c_size_t),
        ("top_logprobs", c_int32),
        ("grammar", c_void_p),
        ("draft", c_int32),
        ("draft_tokens", c_int32),
        ("draft_session", c_void_p),
    ]


# moonlm_generate_params.flags: control tokens rendered as their text.
GENERATE_KEEP_SPECIAL = 2

# moonlm_generate_params.draft and its bounds.
DRAFT_NONE, DRAFT_LOOKUP, DRAFT_MODEL = 0, 1, 2
MAX_DRAFT_TOKENS = 64


class GenerateResult(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("finish_reason", c_int32),
        ("last_token", c_int32),
        ("n_prompt", c_size_t),
        ("n_generated", c_size_t),
        ("n_evaluated", c_size_t),
        ("n_drafted", c_size_t),
        ("n_draft_accepted", c_size_t),
    ]

_status = c_int
_handle = c_void_p
_i32p = POINTER(c_int32)
_f32p = POINTER(c_float)
_sizep = POINTER(c_size_t)

# name: (restype, argtypes)
_PROTOTYPES = {
    "moonlm_version": (c_char_p, []),
    "moonlm_abi_version": (c_int, []),
    "moonlm_status_string": (c_char_p, [c_int]),
    "moonlm_last_error": (c_char_p, []),
    "moonlm_model_params_init": (None, [POINTER(ModelParams), c_size_t]),
    "moonlm_model_open": (_status, [c_char_p, POINTER(ModelParams), POINTER(_handle)]),
    "moonlm_model_free": (_status, [_handle]),
    "moonlm_model_get_info": (_status, [_handle, POINTER(ModelInfo)]),
    "moonlm_model_architecture": (_status, [_handle, c_void_p, c_size_t, _sizep]),
    "moonlm_model_chat_template": (_status, [_handle, c_void_p, c_size_t, _sizep]),
    "moonlm_model_is_eog": (c_int, [_handle, c_int32]),
    "moonlm_tokenize": (_status, [_handle, c_char_p, c_size_t, c_uint32, c_void_p, c_size_t, _sizep]),
    "moonlm_token_to_piece": (_status, [_handle, c_int32, c_void_p, c_size_t, _sizep]),
    "moonlm_detokenize": (_status, [_handle, c_void_p, c_size_t, c_void_p, c_size_t, _sizep]),
    "moonlm_chat_apply_template": (
        _status,
        [_handle, POINTER(Message), c_size_t, c_int, c_void_p, c_size_t, _sizep],
    ),
    "moonlm_session_params_init": (None, [POINTER(SessionParams), c_size_t]),
    "moonlm_session_new": (_status, [_handle, POINTER(SessionParams), POINTER(_handle)]),
    "moonlm_session_free": (_status, [_handle]),
    "moonlm_prefill": (_status, [_handle, c_void_p, c_size_t, c_void_p, c_size_t]),
    "moonlm_decode": (_status, [_handle, c_int32, c_void_p, c_size_t]),
    "moonlm_session_rewind": (_status, [_handle, c_size_t]),
    "moonlm_session_position": (_status, [_handle, _sizep]),
    "moonlm_session_cancel": (_status, [_handle]),
    "moonlm_sampler_params_init": (None, [POINTER(SamplerParams), c_size_t]),
    "moonlm_sampler_new": (_status, [POINTER(SamplerParams), POINTER(_handle)]),
    "moonlm_sampler_free": (_status, [_handle]),
    "moonlm_sampler_accept": (_status, [_handle, c_int32]),
    "moonlm_sampler_reset": (_status, [_handle]),
    "moonlm_sample": (_status, [_handle, c_void_p, c_size_t, _i32p]),
    "moonlm_generate": (
        _status,
        [_handle, _handle, c_void_p, c_size_t, c_size_t, PieceCallback, c_void_p, _sizep],
    ),
    "moonlm_generate_params_init": (None, [POINTER(GenerateParams), c_size_t]),
    "moonlm_generate_ex": (
        _status,
        [_handle, _handle, c_void_p, c_size_t, POINTER(GenerateParams), POINTER(GenerateResult)],
    ),
}


# Compatible additions to ABI 1: a library built before them lacks the
# symbol, and the attribute is then None.
_OPTIONAL_PROTOTYPES = {
    "moonlm_model_open_stats": (_status, [_handle, POINTER(OpenStats)]),
    "moonlm_chat_apply_template_named": (
        _status,
        [_handle, c_char_p, POINTER(Message), c_size_t, c_int, c_void_p, c_size_t, _sizep],
    ),
    "moonlm_chat_builtin_templates": (_status, [c_void_p, c_size_t, _sizep]),
    "moonlm_chat_apply_template_json": (
        _status,
        [_handle, c_char_p, c_char_p, c_char_p, c_int, c_void_p, c_size_t, _sizep],
    ),
    "moonlm_chat_parse_tool_calls": (_status, [_handle, c_char_p, c_char_p, c_size_t, c_void_p, c_size_t, _sizep]),
    "moonlm_embed_params_init": (None, [POINTER(EmbedParams), c_size_t]),
    "moonlm_embed_size": (_status, [_handle, c_int32, _sizep]),
    "moonlm_embed": (
        _status,
        [_handle, POINTER(c_char_p), _sizep, c_size_t, POINTER(EmbedParams), _f32p, c_size_t, _sizep],
    ),
    "moonlm_embed_tokens": (
        _status,
        [_handle, POINTER(_i32p), _sizep, c_size_t, POINTER(EmbedParams), _f32p, c_size_t, _sizep],
    ),
    "moonlm_rerank": (_status, [_handle, c_char_p, POINTER(c_char_p), c_size_t, _f32p, c_size_t, _sizep]),
    "moonlm_grammar_new": (_status, [_handle, c_char_p, c_size_t, POINTER(_handle)]),
    "moonlm_grammar_from_json_schema": (_status, [_handle, c_char_p, c_size_t, POINTER(_handle)]),
    "moonlm_grammar_free": (_status, [_handle]),
    "moonlm_grammar_for_tool_calls": (_status, [_handle, c_char_p, c_char_p, c_char_p, POINTER(_handle)]),
    "moonlm_grammar_for_tool_calls_ex": (_status, [_handle, c_char_p, c_char_p, c_char_p, c_uint32, POINTER(_handle)]),
}

# moonlm_grammar_for_tool_calls_ex flags.
TOOL_CALLS_PARALLEL = 1


def _candidates() -> List[Path]:
    """Where to look for the library, in order of preference."""
    env = os.environ.get("MOONLM_LIBRARY")
    if env:
        return [Path(env)]  # an explicit choice is never second-guessed
    here = Path(__file__).resolve().parent
    out = [here / LIBNAME]
    # A source checkout: bindings/python/src/moonlm -> <repo>/build.
    repo = here.parent.parent.parent.parent
    out.append(repo / "build" / LIBNAME)
    found = ctypes.util.find_library("moonlm")
    if found:
        out.append(Path(found))
    return out


class Library:
    """The loaded library with its prototypes declared: each moonlm_NAME
    function is the attribute NAME (e.g. lib.prefill)."""

    def __getattr__(self, name: str) -> Any:  # the foreign functions, set in __init__
        raise AttributeError(f"libmoonlm has no function moonlm_{name}")

    def __init__(self, path: str):
        self.path = path
        try:
            self.dll = ctypes.CDLL(path)
        except OSError as e:
            raise MoonlmError(0, f"moonlm: cannot load {path}: {e}") from e
        for name, (restype, argtypes) in _PROTOTYPES.items():
            try:
                fn = getattr(self.dll, name)
            except AttributeError as e:
                raise MoonlmError(0, f"moonlm: {path} lacks {name}: wrong or old library") from e
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name[len("moonlm_"):], fn)
        for name, (restype, argtypes) in _OPTIONAL_PROTOTYPES.items():
            opt = getattr(self.dll, name, None)
            if opt is not None:
                opt.restype = restype
                opt.argtypes = argtypes
            setattr(self, name[len("moonlm_"):], opt)
        abi = self.abi_version()
        if abi != ABI_VERSION:
            raise MoonlmError(
                0, f"moonlm: {path} has ABI version {abi}, this package needs {ABI_VERSION}"
            )

    def check(self, status: int, what: str) -> None:
        """Raises the exception for a non-OK status with the library's message.

        Must run on the thread that made the call: the message is per thread.
        """
        if status != OK:
            raise self.error(status, what)

    def error(self, status: int, what: str) -> MoonlmError:
        msg = self.last_error()
        msg = msg.decode("utf-8", "replace") if msg else ""
        if not msg:
            name = self.status_string(status)
            msg = f"{what}: {name.decode() if name else 'status %d' % status}"
        return error_for_status(status, msg)


_lock = threading.Lock()
_loaded: Optional[Library] = None


def lib() -> Library:
    """Loads the library once (thread-safe) and returns it."""
    global _loaded
    if _loaded is not None:
        return _loaded
    with _lock:
        if _loaded is None:
            tried = []
            for cand in _candidates():
                if cand.is_file():
                    _loaded = Library(str(cand))
                    break
                tried.append(str(cand))
            else:
                raise MoonlmError(
                    0,
                    "moonlm: libmoonlm.so not found (looked at %s); build it with `make lib` "
                    "or set MOONLM_LIBRARY" % ", ".join(tried),
                )
    return _loaded


def library_path() -> str:
    """The file the library was loaded from."""
    return lib().path
