"""Structured output and the sampler's newer options: compiled grammars,
JSON schemas, OpenAI's response_format, and the checks of typical-p, XTC,
mirostat, DRY and logit bias before they cross the C ABI."""

from __future__ import annotations

import ctypes
import json
import weakref
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import _args as A
from . import _lib as L
from ._handle import OwnedHandle
from ._errors import InvalidArgumentError, UnsupportedError

# The options Sampler takes besides the classic ones, as (name, kind).
FLOAT_OPTIONS = (
    "typical_p",
    "xtc_probability",
    "xtc_threshold",
    "mirostat_tau",
    "mirostat_eta",
    "dry_multiplier",
    "dry_base",
)
INT_OPTIONS = {  # name: (lo, hi) as the library accepts them
    "mirostat": (0, 2),
    "dry_allowed_length": (0, A.INT32_MAX),
    "dry_penalty_last_n": (-1, A.INT32_MAX),
}


def _free_grammar(free: Any, h: int) -> None:
    free(h)


class Grammar(OwnedHandle):
    """A grammar compiled for one model's vocabulary, reusable across
    generations of that model (one generation at a time).

    Grammar(model, gbnf) parses GBNF (llama.cpp's format, start rule
    "root"); a parse error raises InvalidArgumentError with "line:col".
    Grammar.from_json_schema(model, schema) builds the grammar of the JSON
    values valid against schema (a dict or JSON text).
    """

    _kind = "grammar"

    def __init__(self, model: Any, gbnf: str, _schema: bool = False, _tools: Optional[Tuple[Any, ...]] = None):
        what = "tool_choice" if _tools is not None else "json_schema" if _schema else "grammar"
        from ._model import Model  # the modules import each other

        if not isinstance(model, Model):
            raise A.type_error(what, "model", f"must be a moonlm.Model, got {type(model).__name__}")
        lib = self._lib = model._lib
        handle = ctypes.c_void_p()
        if _tools is not None:
            if lib.grammar_for_tool_calls is None:
                raise UnsupportedError(4, f"{what}: this library has no tool-call grammars (it predates them)")
            template, tools_json, name, parallel = _tools
            if parallel:
                if lib.grammar_for_tool_calls_ex is None:
                    raise UnsupportedError(4, f"{what}: this library has no parallel tool-call grammars (it predates them)")
                st = lib.grammar_for_tool_calls_ex(
                    model._h(what), template, tools_json, name, L.TOOL_CALLS_PARALLEL, ctypes.byref(handle)
                )
            else:
                st = lib.grammar_for_tool_calls(model._h(what), template, tools_json, name, ctypes.byref(handle))
            lib.check(st, what)
        else:
            fn = lib.grammar_from_json_schema if _schema else lib.grammar_new
            if fn is None:
                raise UnsupportedError(4, f"{what}: this library has no grammars (it predates them)")
            data = A.string(what, what, gbnf).encode("utf-8")
            if len(data) > L.MAX_GRAMMAR_BYTES:
                raise A.range_error(what, what, f"has {len(data)} bytes; at most {L.MAX_GRAMMAR_BYTES}")
            lib.check(fn(model._h(what), data, len(data), ctypes.byref(handle)), what)
        h = int(handle.value or 0)
        self._handle: Optional[int] = h
        self._finalizer = weakref.finalize(self, _free_grammar, lib.grammar_free, h)
        self.model = model  # the grammar is for this model's sessions only

    @classmethod
    def from_json_schema(cls, model: Any, schema: Any) -> "Grammar":
        return cls(model, schema_text("json_schema", schema), _schema=True)

    @classmethod
    def for_tool_calls(
        cls,
        model: Any,
        tools: Any,
        tool_name: Optional[str] = None,
        template: Optional[str] = None,
        parallel: bool = False,
    ) -> "Grammar":
        """The grammar of one call (with parallel=True one or more) of one
        of tools (OpenAI-style function specs; only tool_name if given) in
        the syntax of the model's template (or the built-in format
        template): hermes, llama3, mistral, phi4, harmony, qwen3coder or gemma4 (one call: a
        harmony call ends the message); its arguments valid against the
        function's parameters schema."""
        what = "tool_choice"
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, (list, tuple)):
            raise A.type_error(what, "tools", f"must be a list of dicts, got {type(tools).__name__}")
        try:
            tj = json.dumps(list(tools), ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise A.type_error(what, "tools", f"must be JSON-serialisable: {e}") from None
        name = None if tool_name is None else A.string(what, "tool_name", tool_name, nul=False).encode("utf-8")
        tmpl = None if template is None else A.string(what, "template", template, nul=False).encode("utf-8")
        if b"\0" in tj:
            raise A.range_error(what, "tools", "must not contain NUL characters")
        A.boolean(what, "parallel", parallel)
        return cls(model, "", _tools=(tmpl, tj, name, parallel))




def schema_text(what: str, schema: Any) -> str:
    """A JSON schema (a dict, or JSON text) as JSON text."""
    if isinstance(schema, str):
        return schema
    if isinstance(schema, (Mapping, bool)):
        try:
            return json.dumps(schema, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise A.type_error(what, "json_schema", f"is not JSON-serializable: {e}") from None
    raise A.type_error(what, "json_schema", f"must be a dict or a str, got {type(schema).__name__}")


# JSON of any shape whose top level is an object: response_format json_object.
_ANY_OBJECT = {"type": "object"}


def resolve(
    what: str, model: Any, grammar: Any, json_schema: Any, response_format: Any
) -> Tuple[Optional[Grammar], bool]:
    """The grammar the options ask for (at most one of them), and whether
    it was made here (and so is closed after the call)."""
    given = [n for n, v in (("grammar", grammar), ("json_schema", json_schema), ("response_format", response_format)) if v is not None]
    if len(given) > 1:
        raise A.range_error(what, given[1], f"cannot be combined with {given[0]}")
    if grammar is not None:
        if isinstance(grammar, Grammar):
            if grammar.model is not model:
                raise A.range_error(what, "grammar", "was compiled for another model")
            return grammar, False
        if not isinstance(grammar, str):
            raise A.type_error(what, "grammar", f"must be GBNF text or a moonlm.Grammar, got {type(grammar).__name__}")
        return Grammar(model, grammar), True
    if json_schema is not None:
        return Grammar.from_json_schema(model, json_schema), True
    if response_format is not None:
        if not isinstance(response_format, Mapping):
            raise A.type_error(what, "response_format", f"must be a dict, got {type(response_format).__name__}")
        kind = response_format.get("type")
        if kind == "text":
            return None, False
        if kind == "json_object":
            schema = response_format.get("schema", _ANY_OBJECT)
            return Grammar.from_json_schema(model, schema), True
        if kind == "json_schema":
            js = response_format.get("json_schema")
            schema = js.get("schema") if isinstance(js, Mapping) else None
            if schema is None:
                schema = response_format.get("schema")
            if schema is None:
                raise A.range_error(what, "response_format", 'of type "json_schema" needs {"json_schema": {"schema": ...}}')
            return Grammar.from_json_schema(model, schema), True
        raise A.range_error(what, "response_format", f'type must be "text", "json_object" or "json_schema", got {kind!r}')
    return None, False


def set_sampler_options(what: str, p: L.SamplerParams, opts: Mapping[str, Any]) -> List[Any]:
    """Checks the newer options into p; returns the buffers p points into
    (kept alive until moonlm_sampler_new has read them)."""
    keep: List[Any] = []
    for k in FLOAT_OPTIONS:
        v = opts.get(k)
        if v is not None:
            setattr(p, k, A.number(what, k, v))
    for k, (lo, hi) in INT_OPTIONS.items():
        v = opts.get(k)
        if v is not None:
            setattr(p, k, A.integer(what, k, v, lo, hi))
    br = opts.get("dry_sequence_breakers")
    if br is not None:
        items = [s.encode("utf-8") for s in A.strings(what, "dry_sequence_breakers", br)]
        if len(items) > L.MAX_DRY_BREAKERS:
            raise A.range_error(what, "dry_sequence_breakers", f"has {len(items)} strings; at most {L.MAX_DRY_BREAKERS}")
        if any(b"\0" in s for s in items):
            raise A.range_error(what, "dry_sequence_breakers", "must not contain NUL characters")
        arr = (ctypes.c_char_p * max(len(items), 1))(*items)
        keep.append(arr)
        p.dry_sequence_breakers = arr  # non-NULL with 0 entries: none
        p.n_dry_sequence_breakers = len(items)
    bias = opts.get("logit_bias")
    if bias is not None:
        if not isinstance(bias, Mapping):
            raise A.type_error(what, "logit_bias", f"must be a dict {{token: bias}}, got {type(bias).__name__}")
        if len(bias) > L.MAX_LOGIT_BIAS:
            raise A.range_error(what, "logit_bias", f"has {len(bias)} entries; at most {L.MAX_LOGIT_BIAS}")
        pairs = (L.LogitBias * max(len(bias), 1))()
        for i, (t, b) in enumerate(bias.items()):
            if isinstance(t, str) and t.lstrip("-").isdigit():  # OpenAI's JSON keys
                t = int(t)
            pairs[i].token = A.token(what, "logit_bias token", t)
            pairs[i].bias = A.number(what, "logit_bias bias", b)
        keep.append(pairs)
        p.logit_bias = ctypes.cast(pairs, ctypes.c_void_p)
        p.n_logit_bias = len(bias)
    return keep


def sampler_kwargs(opts: Dict[str, Any]) -> Dict[str, Any]:
    """The sampler options among a call's keyword arguments (removed from opts)."""
    names = FLOAT_OPTIONS + tuple(INT_OPTIONS) + ("dry_sequence_breakers", "logit_bias")
    return {k: opts.pop(k) for k in names if k in opts}


def tool_choice_name(tool_choice: Any) -> Tuple[str, Optional[str]]:
    """tool_choice as (mode, name): mode "auto", "none" or "required", name
    the function a named choice asks for."""
    what = "chat"
    if isinstance(tool_choice, str):
        if tool_choice not in ("auto", "none", "required"):
            raise A.range_error(what, "tool_choice", f'must be "auto", "none", "required" or a named tool, got {tool_choice!r}')
        return tool_choice, None
    if isinstance(tool_choice, Mapping):
        fn = tool_choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if tool_choice.get("type", "function") != "function" or not isinstance(name, str) or not name:
            raise A.range_error(what, "tool_choice", 'must be {"type": "function", "function": {"name": NAME}}')
        return "required", name
    raise A.type_error(what, "tool_choice", f"must be a str or a dict, got {type(tool_choice).__name__}")
