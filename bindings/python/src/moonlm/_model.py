"""Model, Session and Sampler: the Python face of the C ABI."""

from __future__ import annotations

import ctypes
import json
import os
import threading
import weakref
from array import array
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _args as A
from . import _generate as G
from . import _lib as L
from ._handle import OwnedHandle
from ._errors import ContextFullError, InternalError, InvalidArgumentError, UnsupportedError
from ._generate import Completion, TextStream
from ._state import SessionStateMixin
from ._checkpoint import CheckpointMixin
from . import _structured as S

_np: Any
try:  # NumPy is optional: logits are NumPy views when present, array('f') otherwise.
    import numpy as _np
except ImportError:  # pragma: no cover - exercised by tests that hide numpy
    _np = None

PathLike = Union[str, "os.PathLike[str]"]
Tokens = Union[Sequence[int], "array[int]", Any]
Logits = Any  # numpy.ndarray (float32) when NumPy is installed, else array('f')

_KV_TYPES = {"f16": L.KV_F16, "f32": L.KV_F32, "q8_0": L.KV_Q8_0}

# Tri-state open options (pack, packed_cache): None or "default" leaves the
# choice to the library (its environment variables, else on).
Switch = Union[None, bool, str]
_SWITCHES: Dict[Any, int] = {
    None: L.PACK_DEFAULT,
    "default": L.PACK_DEFAULT,
    True: L.PACK_ON,
    "on": L.PACK_ON,
    False: L.PACK_OFF,
    "off": L.PACK_OFF,
}

# The numerics open option: the names of moonlm_numerics. None or "default"
# leaves the choice to the library (MOONLM_NUMERICS, else the fast kernels).
_NUMERICS: Dict[Optional[str], int] = {
    None: L.NUMERICS_DEFAULT,
    "default": L.NUMERICS_DEFAULT,
    "llamacpp": L.NUMERICS_LLAMACPP,
    "llamacpp-norepack": L.NUMERICS_LLAMACPP_NOREPACK,
    "ik": L.NUMERICS_IK,
}


class OpenStats(NamedTuple):
    """Model.open_stats(): how a model was opened (times in milliseconds)."""

    pack_source: str
    packed_matrices: int
    packed_bytes: int
    map_ms: float
    parse_ms: float
    tensors_ms: float
    pack_ms: float


def _switch(name: str, v: Switch) -> int:
    """The C value of a tri-state option; only bools, None and the three
    names are accepted (1 or 0 would be ambiguous next to the C numbering)."""
    ok = v is None or isinstance(v, (bool, str))
    c = _SWITCHES.get(v) if ok else None
    if c is not None:
        return c
    err = A.range_error if ok else A.type_error
    raise err("Model", name, f'must be None, True, False, "default", "on" or "off", got {v!r}')


def _numerics(v: Optional[str]) -> int:
    """The C value of the numerics option; only None and the four names."""
    ok = v is None or isinstance(v, str)
    c = _NUMERICS.get(v) if ok else None
    if c is not None:
        return c
    err = A.range_error if ok else A.type_error
    raise err(
        "Model", "numerics", f'must be None, "default", "llamacpp", "llamacpp-norepack" or "ik", got {v!r}'
    )


def _free_handle(free: Callable[[int], int], handle: int) -> None:
    """Finalizer: frees a handle; errors (e.g. FORKED in a child) are ignored
    because there is nobody to report them to."""
    try:
        free(handle)
    except Exception:  # pragma: no cover
        pass


def _tokenize_flags(what: str, add_special: Any, parse_special: Any) -> int:
    """moonlm_tokenize's flags, the two options checked to be bools."""
    add = A.boolean(what, "add_special", add_special)
    parse = A.boolean(what, "parse_special", parse_special)
    return (L.TOKENIZE_ADD_SPECIAL if add else 0) | (L.TOKENIZE_PARSE_SPECIAL if parse else 0)


def _check_loop(what: str, max_tokens: Any, stop: Any) -> "tuple[int, List[bytes]]":
    """Checks a generation loop's own options before anything is allocated;
    returns max_tokens as the library takes it and the stop strings as UTF-8
    (an iterator is read once, here)."""
    return G.check_max_tokens(what, max_tokens), G.check_stops(what, stop)


_WAIT_SLICE = 0.05  # seconds: the longest a Ctrl-C waits to be seen during a call


def _interruptible(
    lib: L.Library, h: int, what: str, call: Callable[[], int], undo: Callable[[], None]
) -> Optional[Exception]:
    """Runs call() (a long native call on session h) so that Ctrl-C stops it;
    returns the call's error (made on the thread that called: the library's
    message is per thread), or None.

    Python runs signal handlers only in the main thread, between bytecodes,
    so a KeyboardInterrupt would wait for the native call to return. On the
    main thread the call therefore runs on a worker thread while the main
    thread waits in short slices (SIGINT may land on any thread, one of the
    library's included, and then interrupts no wait: the handler runs at the
    next slice). A KeyboardInterrupt cancels the session's call, waits for
    it to stop (within one layer's work), undo()es a call that finished all
    the same, and propagates. Other threads call directly.
    """

    def direct() -> Optional[Exception]:
        st = call()
        return None if st == L.OK else lib.error(st, what)

    if threading.current_thread() is not threading.main_thread():
        return direct()
    # [error, done]: done is set by the worker when the call is over; the
    # lock, held until then, is only what the main thread sleeps on.
    # (Thread.join is no use here: before Python 3.13 a KeyboardInterrupt
    # inside join() can mark a running thread as stopped.)
    state: List[Any] = [None, False]
    wake = threading.Lock()
    wake.acquire()

    def run() -> None:
        try:
            state[0] = direct()
        finally:
            state[1] = True
            wake.release()

    try:
        threading.Thread(target=run, name=f"moonlm {what}", daemon=True).start()
    except RuntimeError:  # no new threads at interpreter shutdown
        return direct()
    try:
        while not state[1]:
            wake.acquire(timeout=_WAIT_SLICE)
    except KeyboardInterrupt:
        if not state[1]:
            lib.session_cancel(h)
        while not state[1]:  # the call must be over before its buffers may go
            try:
                wake.acquire(timeout=_WAIT_SLICE)
            except KeyboardInterrupt:
                continue
        if state[0] is None:
            undo()
        raise
    err: Optional[Exception] = state[0]
    return err


class _TextBuffer:
    """A growable char buffer for the (buf, cap, n_out) protocol, reused
    across calls so that a generation loop does not allocate one per token."""

    __slots__ = ("buf", "n_out")

    def __init__(self, cap: int = 256):
        self.buf = ctypes.create_string_buffer(cap)
        self.n_out = ctypes.c_size_t(0)

    def call(self, lib: L.Library, fn: Callable[..., int], what: str, *args: Any) -> bytes:
        for _ in range(3):  # a second try always has the size the library asked for
            st = fn(*args, self.buf, len(self.buf), ctypes.byref(self.n_out))
            if st == L.BUFFER_TOO_SMALL:
                self.buf = ctypes.create_string_buffer(self.n_out.value + 1)
                continue
            lib.check(st, what)
            data: bytes = self.buf.raw[: self.n_out.value]
            return data
        raise lib.error(st, what)  # pragma: no cover - the library changed its mind twice


class Model:
    """A GGUF model opened with moonlm.

    Use as a context manager, or call close(). Sessions made from the model
    stay usable after the model is closed (the library keeps the weights
    alive until the last session is freed). A Model may be shared between
    threads; give each thread its own Session.
    """

    @classmethod
    def from_pretrained(
        cls,
        repo_id: str,
        filename: Optional[str] = None,
        *,
        revision: str = "main",
        cache_dir: Optional[PathLike] = None,
        token: Optional[str] = None,
        progress: bool = True,
        **kwargs: Any,
    ) -> "Model":
        """Downloads a GGUF file of a Hugging Face Hub repository (unless the
        Hub cache has it) and opens it; kwargs go to Model().

        filename: the file's name, a glob ("*Q4_K_M.gguf") or a quantization
        its name contains (any case, "q8_0"); None takes the repository's only
        GGUF file, or its Q4_K_M one. The cache is the Hub's own
        (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub) unless
        cache_dir names another; token defaults to HF_TOKEN (or HF_HOME/token);
        HF_ENDPOINT names another Hub; HF_HUB_OFFLINE=1 uses the cache only.
        Downloads resume, LFS files are checked against their sha256, and
        progress goes to stderr (progress=False: none). Raises
        moonlm.HubError (an OSError) when the Hub refuses or is unreachable
        and the cache lacks the file.
        """
        from . import _hub

        hub = _hub.Hub(
            cache=cache_dir, token=token, revision=revision,
            progress=_hub.TerminalProgress() if progress else None,
        )
        return cls(hub.fetch(repo_id, filename), **kwargs)

    def __init__(
        self,
        path: PathLike,
        n_threads: Optional[int] = None,
        *,
        pack: Switch = None,
        packed_cache: Switch = None,
        packed_cache_dir: Optional[PathLike] = None,
        packed_cache_bytes: Optional[int] = None,
        numerics: Optional[str] = None,
        progress: Optional[Callable[[float], Optional[bool]]] = None,
    ):
        """Opens the model at path.

        n_threads: the worker pool its sessions share (default one per core).
        pack: repack weight matrices into the CPU kernels' faster layouts at
        open (True/"on", False/"off", None/"default": on unless MOONLM_PACK=0).
        packed_cache: keep packed weights in an on-disk cache so the next open
        maps them (same values; default on unless MOONLM_PACKED_CACHE=0).
        packed_cache_dir: the cache's own folder (default
        $MOONLM_PACKED_CACHE_DIR, else ~/.cache/moonlm/packed).
        packed_cache_bytes: the cache's eviction budget (default
        $MOONLM_PACKED_CACHE_BYTES, else 8 GiB).
        numerics: the arithmetic: None/"default" ($MOONLM_NUMERICS as it was
        when the library loaded, else the fastest kernels), or a reference
        implementation's bit for bit, several times slower: "llamacpp",
        "llamacpp-norepack" (llama.cpp without repacked weights) or "ik"
        (ik_llama.cpp). Other values raise InvalidArgumentError (a ValueError).
        progress: called during the open, on this thread, with the fraction
        done (a float in [0, 1], never decreasing, at most about a hundred
        calls, ending with 1.0); returning False cancels the open, which then
        raises CancelledError (True or None continue). An exception it raises
        cancels the open too and is raised from here.
        """
        bpath = A.path("Model", "path", path)
        if progress is not None and not callable(progress):
            raise A.type_error("Model", "progress", f"must be callable, got {type(progress).__name__}")
        self._lib = lib = L.lib()
        params = L.ModelParams()
        lib.model_params_init(ctypes.byref(params), ctypes.sizeof(params))
        # The members this binding knows: a library older than it then refuses
        # a nonzero option it lacks (numerics) instead of ignoring it.
        params.size = ctypes.sizeof(L.ModelParams)
        if n_threads is not None:
            params.n_threads = A.integer("Model", "n_threads", n_threads, 0, A.INT32_MAX)
        params.pack = _switch("pack", pack)
        params.packed_cache = _switch("packed_cache", packed_cache)
        params.numerics = _numerics(numerics)
        if packed_cache_dir is not None:
            # kept alive by self: params holds a pointer into it
            self._cache_dir = A.path("Model", "packed_cache_dir", packed_cache_dir)
            params.packed_cache_dir = self._cache_dir
        if packed_cache_bytes is not None:  # 0: the default
            params.packed_cache_bytes = A.integer(
                "Model", "packed_cache_bytes", packed_cache_bytes, 0, (1 << 63) - 1
            )
        raised: List[BaseException] = []
        if progress is not None:

            def on_progress(fraction: float, _ud: Any) -> int:
                # Inside the library's call: nothing may raise through C.
                try:
                    return 1 if progress(fraction) is False else 0
                except BaseException as e:
                    raised.append(e)
                    return 1

            # kept alive until model_open returns (the library calls it only then)
            params.progress = L.ProgressCallback(on_progress)
        handle = ctypes.c_void_p()
        st = lib.model_open(bpath, ctypes.byref(params), ctypes.byref(handle))
        params.progress = L.ProgressCallback()
        if raised:
            raise raised[0]
        lib.check(st, f"open {os.fsdecode(bpath)}")
        h = int(handle.value or 0)
        self._handle: Optional[int] = h
        self._finalizer = weakref.finalize(self, _free_handle, lib.model_free, h)
        self.path = os.fsdecode(bpath)
        self.n_threads = params.n_threads
        self.numerics: str = numerics or "default"
        info = L.ModelInfo()
        info.size = ctypes.sizeof(L.ModelInfo)
        lib.check(lib.model_get_info(self._handle, ctypes.byref(info)), "model info")
        self._info = info
        tb = _TextBuffer()
        self.architecture: str = tb.call(
            lib, lib.model_architecture, "model architecture", self._handle
        ).decode("utf-8", "replace")
        tmpl = tb.call(lib, lib.model_chat_template, "model chat template", self._handle)
        self.chat_template: Optional[str] = tmpl.decode("utf-8", "replace") or None
        self._tls = threading.local()

    # -- lifetime ---------------------------------------------------------

    def close(self) -> None:
        """Releases the model. Idempotent. Open sessions keep working."""
        self._handle = None
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.architecture}, vocab {self.vocab_size}"
        return f"<moonlm.Model {self.path!r} ({state})>"

    def _h(self, what: str) -> int:
        h = self._handle
        if h is None:
            raise InvalidArgumentError(1, f"{what}: the model is closed")
        return h

    def _textbuf(self) -> _TextBuffer:
        tb = getattr(self._tls, "tb", None)
        if tb is None:
            tb = self._tls.tb = _TextBuffer()
        return tb

    # -- facts ------------------------------------------------------------

    def open_stats(self) -> "OpenStats":
        """How the model was opened: where its packed weights came from
        (pack_source: "off", "none" (nothing packable on this CPU),
        "packed", "packed+cache-write" or "cache-hit"), how many matrices
        and bytes are packed, and each phase's time in milliseconds."""
        lib = self._lib
        if lib.model_open_stats is None:
            raise UnsupportedError(
                4, f"open_stats: {lib.path} predates moonlm_model_open_stats; rebuild the library"
            )
        st = L.OpenStats()
        st.size = ctypes.sizeof(L.OpenStats)
        lib.check(lib.model_open_stats(self._h("open_stats"), ctypes.byref(st)), "open_stats")
        if not 0 <= st.pack_source < len(L.PACK_SOURCES):
            raise InternalError(10, f"open_stats: unknown pack source {st.pack_source}")
        return OpenStats(
            L.PACK_SOURCES[st.pack_source],
            int(st.packed_matrices),
            int(st.packed_bytes),
            float(st.map_ms),
            float(st.parse_ms),
            float(st.tensors_ms),
            float(st.pack_ms),
        )

    @property
    def vocab_size(self) -> int:
        return int(self._info.n_vocab)

    @property
    def context_length(self) -> int:
        """The context length the model was trained with (the default n_ctx)."""
        return int(self._info.n_ctx_train)

    @property
    def embedding_size(self) -> int:
        return int(self._info.n_embd)

    @property
    def n_layers(self) -> int:
        return int(self._info.n_layer)

    @property
    def n_heads(self) -> int:
        return int(self._info.n_head)

    @property
    def n_kv_heads(self) -> int:
        return int(self._info.n_head_kv)

    @staticmethod
    def _tok(v: int) -> Optional[int]:
        return None if v < 0 else v

    @property
    def bos_token_id(self) -> Optional[int]:
        return self._tok(self._info.token_bos)

    @property
    def eos_token_id(self) -> Optional[int]:
        return self._tok(self._info.token_eos)

    @property
    def eot_token_id(self) -> Optional[int]:
        return self._tok(self._info.token_eot)

    def is_eog(self, token: int) -> bool:
        """Whether token ends generation (EOS, EOT and the like)."""
        return bool(self._lib.model_is_eog(self._h("is_eog"), A.token("is_eog", "token", token)))

    # -- text -------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> List[int]:
        """Token ids of text. add_special adds BOS/EOS as the model asks;
        parse_special turns special-token text such as "<|im_end|>" into ids."""
        h = self._h("tokenize")
        lib = self._lib
        data = A.string("tokenize", "text", text).encode("utf-8")
        flags = _tokenize_flags("tokenize", add_special, parse_special)
        n_out = ctypes.c_size_t(0)
        cap = len(data) + 8
        for _ in range(3):
            out = (ctypes.c_int32 * cap)()
            st = lib.tokenize(h, data, len(data), flags, out, cap, ctypes.byref(n_out))
            if st == L.BUFFER_TOO_SMALL:
                cap = n_out.value
                continue
            lib.check(st, "tokenize")
            return out[: n_out.value]
        raise lib.error(st, "tokenize")  # pragma: no cover

    def detokenize(self, tokens: Tokens) -> str:
        """The text of tokens (special tokens such as BOS render as nothing).
        Invalid or incomplete UTF-8 becomes U+FFFD."""
        return self._detokenize_bytes(tokens).decode("utf-8", "replace")

    def _detokenize_bytes(self, tokens: Tokens) -> bytes:
        h = self._h("detokenize")
        ptr, n, keep = A.tokens("detokenize", "tokens", tokens)
        data = self._textbuf().call(self._lib, self._lib.detokenize, "detokenize", h, ptr, n)
        del keep
        return data

    def token_to_piece(self, token: int) -> bytes:
        """The raw bytes of one token as it appears inside a text (may be part
        of a UTF-8 character, so bytes, not str)."""
        h = self._h("token_to_piece")
        token = A.token("token_to_piece", "token", token)
        return self._textbuf().call(self._lib, self._lib.token_to_piece, "token_to_piece", h, token)

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_assistant: bool = True,
        template: Optional[str] = None,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> str:
        """Renders OpenAI-style messages ({"role": ..., "content": ...}) with the
        model's chat template, or with template="chatml" (or another name from
        moonlm.builtin_chat_templates()) in that built-in format instead.

        tools: OpenAI-style function specs ({"type": "function", "function":
        {"name", "description", "parameters"}}). Messages may then carry
        "tool_calls" (assistant) and "tool_call_id"/"name" (role "tool"); a
        key beyond these raises InvalidArgumentTypeError. A template with
        tool syntax renders them itself; one without, and a built-in format,
        get them the Hermes way (<tool_call> JSON).

        A model without a template (a base model) raises UnsupportedError
        naming the built-in formats: nothing is guessed. An unknown template
        name raises InvalidArgumentError listing them."""
        what = "apply_chat_template"
        h = self._h(what)
        checked = A.messages(what, messages)
        add_assistant = A.boolean(what, "add_assistant", add_assistant)
        if template is not None:
            template = A.string(what, "template", template, nul=False)
        lib = self._lib
        add = 1 if add_assistant else 0
        try:
            if tools is not None or A.uses_tools(messages):
                data = self._apply_json(h, messages, tools, template, add)
            elif lib.chat_apply_template_named is not None:
                msgs = (L.Message * len(checked))()
                keep = []
                for i, (r, c) in enumerate(checked):
                    keep += [r, c]
                    msgs[i].role, msgs[i].content = r, c
                name = template.encode("utf-8") if template else None
                data = self._textbuf().call(lib, lib.chat_apply_template_named, what, h, name, msgs, len(checked), add)
            else:
                raise UnsupportedError(4, f"{what}: {lib.path} predates built-in templates; rebuild the library")
        except UnsupportedError as e:
            if template:
                raise
            raise UnsupportedError(e.status, f'{e.message}; pass template="NAME" to use a built-in format') from None
        return data.decode("utf-8", "replace")

    def _apply_json(self, h: int, messages: Any, tools: Any, template: Optional[str], add: int) -> bytes:
        """moonlm_chat_apply_template_json of checked messages and tools."""
        what = "apply_chat_template"
        lib = self._lib
        if lib.chat_apply_template_json is None:
            raise UnsupportedError(4, f"{what}: {lib.path} predates tool calling; rebuild the library")
        if tools is not None and (isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence)):
            raise A.type_error(what, "tools", f"must be a list of dicts, got {type(tools).__name__}")
        try:
            mj = json.dumps(list(messages), ensure_ascii=False).encode("utf-8")
            tj = None if tools is None else json.dumps(list(tools), ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise A.type_error(what, "messages", f"must be JSON-serialisable: {e}") from None
        if b"\0" in mj or (tj is not None and b"\0" in tj):
            raise A.range_error(what, "messages", "must not contain NUL characters")
        name = template.encode("utf-8") if template else None
        return self._textbuf().call(lib, lib.chat_apply_template_json, what, h, name, mj, tj, add)

    def _tool_format(self, template: Optional[str]) -> Optional[str]:
        """The format replies are parsed in, None if the model cannot say
        (no chat template, an older library)."""
        try:
            return self.parse_tool_calls("", template)["format"]
        except (UnsupportedError, InvalidArgumentError):
            return None

    def parse_tool_calls(self, text: str, template: Optional[str] = None) -> Dict[str, Any]:
        """The tool calls in text (a generated reply), read in the format the
        model's template (or the built-in format template) writes them: a
        dict {"format", "content", "tool_calls": [{"id", "type": "function",
        "function": {"name", "arguments"}}]}, arguments a JSON text, plus
        "reasoning" when the reply reasons first (gpt-oss's analysis channel,
        a <think> block; content is then the rest) and "error" when
        something looked like a call but could not be read."""
        what = "parse_tool_calls"
        h = self._h(what)
        lib = self._lib
        if lib.chat_parse_tool_calls is None:
            raise UnsupportedError(4, f"{what}: {lib.path} predates tool calling; rebuild the library")
        data = A.string(what, "text", text).encode("utf-8")
        if template is not None:
            template = A.string(what, "template", template, nul=False)
        name = template.encode("utf-8") if template else None
        out = self._textbuf().call(lib, lib.chat_parse_tool_calls, what, h, name, data, len(data))
        parsed: Dict[str, Any] = json.loads(out.decode("utf-8"))
        return parsed

    # -- embeddings ---------------------------------------------------------

    def _embed_params(self, what: str, pooling: Optional[str], normalize: Any) -> "tuple[L.EmbedParams, str]":
        lib = self._lib
        if lib.embed is None:
            raise UnsupportedError(4, f"{what}: {lib.path} predates embeddings; rebuild the library")
        name = "model" if pooling is None else A.string(what, "pooling", pooling)
        if name not in L.POOLINGS:
            raise A.range_error(what, "pooling", f"must be one of {', '.join(L.POOLINGS)}, got {name!r}")
        p = L.EmbedParams()
        lib.embed_params_init(ctypes.byref(p), ctypes.sizeof(p))
        p.pooling = L.POOLINGS[name]
        p.flags = L.EMBED_NORMALIZE if A.boolean(what, "normalize", normalize) else 0
        return p, name

    def embedding_length(self, pooling: Optional[str] = None) -> int:
        """The length of one embedding vector with pooling (default the
        model's): the hidden size, or a reranker's outputs with "rank"."""
        what = "embedding_length"
        h = self._h(what)
        p, _ = self._embed_params(what, pooling, False)
        n = ctypes.c_size_t(0)
        self._lib.check(self._lib.embed_size(h, p.pooling, ctypes.byref(n)), what)
        return n.value

    def _embed_call(self, what: str, call: Callable[..., int], n: int, dim: int) -> Any:
        """Runs an embed call twice (size, then data); returns the floats as
        a NumPy float32 array of n rows when NumPy is importable, else a
        list of n lists."""
        lib = self._lib
        n_out = ctypes.c_size_t(0)
        st = call(None, 0, ctypes.byref(n_out))
        if st != L.BUFFER_TOO_SMALL:
            lib.check(st, what)
        out = (ctypes.c_float * max(n_out.value, 1))()
        lib.check(call(out, n_out.value, ctypes.byref(n_out)), what)
        total = n_out.value
        if A._np is not None:
            return A._np.frombuffer(out, dtype=A._np.float32, count=total).reshape(-1, dim).copy()
        flat = out[:total]
        return [flat[i : i + dim] for i in range(0, total, dim)]

    def embed(self, texts: Any, *, pooling: Optional[str] = None, normalize: bool = False) -> Any:
        """Embedding vectors of texts (a list of str, or one str).

        Each text is tokenized with the model's special tokens ([CLS] text
        [SEP] for BERT) and computed as its own sequence. pooling: None (the
        model file's, else "mean"), "mean", "cls", "last" (Qwen3-Embedding),
        "none" (every token's vector) or "rank" (a reranker's scores).
        normalize scales each vector to unit length.

        Returns a NumPy float32 array of shape (len(texts), n) when NumPy is
        importable, else a list of lists of floats; for one str, one vector.
        With pooling "none" each text gives its own (tokens, n) array (or
        list of lists), in a list.
        """
        what = "embed"
        h = self._h(what)
        single = isinstance(texts, str)
        items = A.strings(what, "texts", texts)
        p, name = self._embed_params(what, pooling, normalize)
        if name == "none":
            rows = self.embed_tokens([self.tokenize(t) for t in items], pooling="none", normalize=normalize)
            return rows[0] if single else rows
        dim = self.embedding_length(pooling)
        data = [t.encode("utf-8") for t in items]
        n = len(data)
        arr = (ctypes.c_char_p * max(n, 1))(*data)
        lens = (ctypes.c_size_t * max(n, 1))(*[len(d) for d in data])
        lib = self._lib

        def call(out: Any, cap: int, n_out: Any) -> int:
            return int(lib.embed(h, arr, lens, n, ctypes.byref(p), out, cap, n_out))

        res = self._embed_call(what, call, n, dim)
        return res[0] if single else res

    def embed_tokens(self, token_lists: Any, *, pooling: Optional[str] = None, normalize: bool = False) -> Any:
        """embed() of token lists (each a sequence of ids, not empty): an
        array (or list) of one vector per list, or with pooling "none" a
        list of one (tokens, n) array (or list of lists) per list."""
        what = "embed_tokens"
        h = self._h(what)
        p, name = self._embed_params(what, pooling, normalize)
        if isinstance(token_lists, (str, bytes)):
            raise A.type_error(what, "token_lists", "must be a list of token lists")
        lists = [A.tokens(what, f"token_lists[{i}]", t) for i, t in enumerate(token_lists)]
        n = len(lists)
        dim = self.embedding_length(pooling)
        ptrs = (ctypes.POINTER(ctypes.c_int32) * max(n, 1))(
            *[ctypes.cast(ctypes.c_void_p(ptr), ctypes.POINTER(ctypes.c_int32)) for ptr, _, _ in lists]
        )
        lens = (ctypes.c_size_t * max(n, 1))(*[cnt for _, cnt, _ in lists])
        lib = self._lib

        def call(out: Any, cap: int, n_out: Any) -> int:
            return int(lib.embed_tokens(h, ptrs, lens, n, ctypes.byref(p), out, cap, n_out))

        res = self._embed_call(what, call, n, dim)
        del lists  # kept alive through the calls
        if name != "none":
            return res
        out, row = [], 0
        for cnt in lens[:n]:
            out.append(res[row : row + cnt])
            row += cnt
        return out

    def rerank(self, query: str, documents: Any) -> List[float]:
        """Relevance scores of documents (a list of str) for query, with a
        reranker: a BERT cross-encoder with a classifier head (its first
        output, a logit) or a Qwen3-Reranker file (the probability of
        "yes"). Higher is more relevant."""
        what = "rerank"
        h = self._h(what)
        self._embed_params(what, None, False)  # the library has embeddings
        q = A.string(what, "query", query, nul=False).encode("utf-8")
        docs = A.strings(what, "documents", documents)
        for i, d in enumerate(docs):
            A.string(what, f"documents[{i}]", d, nul=False)
        data = [d.encode("utf-8") for d in docs]
        n = len(data)
        arr = (ctypes.c_char_p * max(n, 1))(*data)
        lib = self._lib

        def call(out: Any, cap: int, n_out: Any) -> int:
            return int(lib.rerank(h, q, arr, n, out, cap, n_out))

        res = self._embed_call(what, call, n, 1)
        return [float(r[0]) for r in res]

    def _chat_tokens(
        self, messages: Sequence[Mapping[str, Any]], template: Optional[str] = None, tools: Any = None
    ) -> List[int]:
        """The prompt tokens of a conversation: the rendered template with
        special tokens parsed, and BOS added unless the template wrote it."""
        text = self.apply_chat_template(messages, add_assistant=True, template=template, tools=tools)
        toks = self.tokenize(text, add_special=True, parse_special=True)
        bos = self.bos_token_id
        if bos is not None and len(toks) >= 2 and toks[0] == bos and toks[1] == bos:
            toks = toks[1:]
        return toks

    # -- sessions and generation -------------------------------------------

    def session(
        self,
        n_ctx: Optional[int] = None,
        n_threads: Optional[int] = None,
        kv_type: str = "f16",
        *,
        checkpoint_every: Optional[int] = None,
        checkpoint_bytes: Optional[int] = None,
    ) -> "Session":
        """A new session (KV cache and position). n_ctx defaults to the
        model's context_length; kv_type is "f16" (default, like llama.cpp),
        "f32", or "q8_0" (about half of f16's memory, as llama.cpp's -ctk
        q8_0 -ctv q8_0; needs a head dimension that is a multiple of 32).
        checkpoint_every and checkpoint_bytes set a hybrid model's
        checkpoints (see Session)."""
        return Session(
            self,
            n_ctx=n_ctx,
            n_threads=n_threads,
            kv_type=kv_type,
            checkpoint_every=checkpoint_every,
            checkpoint_bytes=checkpoint_bytes,
        )

    def generate(
        self,
        prompt: Union[str, Tokens],
        max_tokens: int = 256,
        *,
        temperature: Optional[float] = None,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        min_p: Optional[float] = None,
        repeat_penalty: Optional[float] = None,
        presence_penalty: Optional[float] = None,
        frequency_penalty: Optional[float] = None,
        penalty_last_n: Optional[int] = None,
        seed: Optional[int] = None,
        stop: Optional[Iterable[str]] = None,
        stream: bool = False,
        details: bool = False,
        add_special: bool = True,
        parse_special: bool = False,
        n_ctx: Optional[int] = None,
        grammar: Union[None, str, "S.Grammar"] = None,
        json_schema: Union[None, str, Mapping[str, Any]] = None,
        response_format: Optional[Mapping[str, Any]] = None,
        logprobs: bool = False,
        top_logprobs: Optional[int] = None,
        draft: Union[None, str, "Model"] = None,
        draft_tokens: Optional[int] = None,
        keep_special: bool = False,
        _on_done: Optional[Callable[[Completion], None]] = None,
        _own_grammar: bool = False,
        **sampling: Any,
    ) -> Union[str, TextStream, Completion]:
        """Generates a continuation of prompt (text, or token ids used as is).

        Sampling options default to the library's (temperature 0.8, top_k 40,
        top_p 0.95, min_p 0.05, no penalties, random seed); temperature=0 is
        greedy. Generation stops at an end-of-generation token, after
        max_tokens tokens, at the end of the context, or before the first
        occurrence of any string in stop (which is not included).

        max_tokens=0 only evaluates the prompt.

        Returns the text; with details=True a Completion (text,
        finish_reason "stop", "length", "eog", "context" or "cancelled",
        the generated token ids, prompt_tokens and completion_tokens); with
        stream=True a TextStream, an iterator of text pieces whose
        completion attribute holds the Completion once it is exhausted. The
        stream may be abandoned early (close() it, or break out of a for
        loop: the generation is cancelled and its session freed). Each call
        uses a fresh session sized for the prompt plus max_tokens unless
        n_ctx is given. The library runs the whole loop (one call per
        generation, on a worker thread): Ctrl-C in the main thread cancels it.

        More sampling options, as Sampler takes them: typical_p,
        xtc_probability, xtc_threshold, mirostat (0, 1 or 2), mirostat_tau,
        mirostat_eta, dry_multiplier, dry_base, dry_allowed_length,
        dry_penalty_last_n, dry_sequence_breakers, logit_bias ({token: bias}).

        Structured output (at most one): grammar (GBNF text, or a
        moonlm.Grammar of this model), json_schema (a dict or JSON text:
        the output is a JSON value valid against it), or response_format as
        OpenAI takes it ({"type": "json_object"} or {"type": "json_schema",
        "json_schema": {"schema": ...}}). GBNF that does not parse raises
        InvalidArgumentError naming line:col.

        logprobs=True (with details or stream) fills Completion.logprobs
        with each token's log-probability and its top_logprobs (0 to 20)
        most likely alternatives.

        Speculative decoding: draft="lookup" guesses tokens by prompt
        lookup (the tokens after the latest earlier occurrence of the
        text's last few tokens), draft=a Model of the same vocabulary
        guesses greedily with that smaller model; the model checks
        draft_tokens guesses (default 8, at most 64) in one batched pass.
        The tokens are drawn from the model's distribution as without a
        draft (a greedy run can differ only where the two best logits are
        within float rounding); Completion.drafted and draft_accepted count
        the guesses.

        keep_special=True puts control tokens in the text as their text
        (such as gpt-oss's <|channel|>analysis<|message|>); by default they
        render as nothing.
        """
        if isinstance(prompt, str):
            tokens = self.tokenize(prompt, add_special=add_special, parse_special=parse_special)
        else:
            _tokenize_flags("generate", add_special, parse_special)
            tokens = A.token_list("generate", "prompt", prompt)
        A.boolean("generate", "stream", stream)
        A.boolean("generate", "details", details)
        if stream and details:
            raise A.type_error(
                "generate", "details", "cannot be combined with stream=True (the stream's completion holds the details)"
            )
        c_max, stops = _check_loop("generate", max_tokens, stop)
        if n_ctx is not None:
            n_ctx = A.integer("generate", "n_ctx", n_ctx, 1, A.INT32_MAX)
        if not tokens:
            raise A.range_error("generate", "prompt", "has no tokens")
        A.boolean("generate", "logprobs", logprobs)
        lp: Optional[Tuple[int, Callable[[int], bytes]]] = None
        if top_logprobs is not None and not logprobs:
            raise A.range_error("generate", "top_logprobs", "needs logprobs=True")
        if logprobs:
            top = 0 if top_logprobs is None else A.integer("generate", "top_logprobs", top_logprobs, 0, L.MAX_TOP_LOGPROBS)
            if self._lib.grammar_new is None:
                raise UnsupportedError(4, "generate: this library has no log-probabilities (it predates them)")
            lp = (top, self.token_to_piece)
        unknown = set(sampling) - set(S.sampler_kwargs(dict(sampling)))
        if unknown:
            raise TypeError(f"generate() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        mode, k = _draft_option("generate", draft, draft_tokens, Model)
        A.boolean("generate", "keep_special", keep_special)
        if n_ctx is None:
            # Sized for the job; a prompt longer than the model's context
            # fails with ContextFullError.
            n_ctx = min(len(tokens) + max(min(max_tokens, A.INT32_MAX), 1), self.context_length)
        if lp is not None:
            # One log-probability entry per token: no more than the context
            # can hold (it ends the generation first), so the buffer is bounded.
            bound = n_ctx + 1
            c_max = bound if c_max < 0 else min(c_max, bound)
        sampler = Sampler(
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            min_p=min_p,
            repeat_penalty=repeat_penalty,
            presence_penalty=presence_penalty,
            frequency_penalty=frequency_penalty,
            penalty_last_n=penalty_last_n,
            seed=seed,
            _what="generate",
            **sampling,
        )
        gram: Optional[S.Grammar] = None
        owned = False
        try:
            gram, owned = S.resolve("generate", self, grammar, json_schema, response_format)
            owned = owned or _own_grammar  # made by chat(tool_choice=...) for this call
            sess = Session(self, n_ctx=n_ctx)
            dsess = Session(draft, n_ctx=n_ctx) if isinstance(draft, Model) else None
        except BaseException:
            sampler.close()
            if owned and gram is not None:
                gram.close()
            raise

        def cleanup() -> None:
            sess.close()
            if dsess is not None:
                dsess.close()
            sampler.close()
            if owned and gram is not None:
                gram.close()

        gh = None if gram is None else gram._h("generate")
        dr = None if mode == L.DRAFT_NONE else (mode, k, dsess)
        flags = L.GENERATE_KEEP_SPECIAL if keep_special else 0
        it = G.run(self._lib, sess, sampler, tokens, c_max, stops, False, cleanup, _on_done, gh, lp, dr, flags)
        if stream:
            return it
        return _finish(it, details)

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int = 256,
        *,
        stream: bool = False,
        template: Optional[str] = None,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        tool_choice: Union[str, Mapping[str, Any]] = "auto",
        parallel_tool_calls: Optional[bool] = None,
        **kwargs: Any,
    ) -> Union[str, TextStream, Completion]:
        """Generates the assistant's reply to OpenAI-style messages
        ([{"role": "user", "content": "Hi"}]) using the model's chat
        template, or the built-in format template names (see
        apply_chat_template: a model without a template raises
        UnsupportedError unless template is given); options as for
        generate(). Returns the reply text (a TextStream of pieces with
        stream=True, a Completion with details=True).

        tools: OpenAI-style function specs (see apply_chat_template). The
        Completion (details=True, or a stream's completion) then has
        tool_calls, the calls the reply makes ([{"id", "type": "function",
        "function": {"name", "arguments"}}], arguments a JSON text), and
        content, the reply without them; tool_call_error says why text that
        looked like a call could not be read.

        tool_choice (with tools): "auto" (the default) lets the model
        choose; "none" leaves the tools out of the prompt and reads no
        calls; "required" constrains the reply to one call of one of the
        tools, and {"type": "function", "function": {"name": NAME}} to one
        call of that tool, with arguments valid against its parameters
        schema, in the template's call syntax (hermes, llama3, mistral,
        phi4, harmony, qwen3coder or gemma4).

        parallel_tool_calls: True lets a forced reply make several calls
        (where the format can: not harmony); False keeps one call, also
        the first of a free reply's; None (the default, as llama-server)
        forces one call and returns every call a free reply makes."""
        mode, name = S.tool_choice_name(tool_choice)
        if "keep_special" not in kwargs and self._tool_format(template) == "harmony":
            # gpt-oss: the channels are control tokens; keep them to split
            # the reasoning (analysis) from the answer (final).
            kwargs["keep_special"] = True
        if parallel_tool_calls is not None:
            A.boolean("chat", "parallel_tool_calls", parallel_tool_calls)
        if tools is None and mode != "auto":
            raise A.range_error("chat", "tool_choice", "needs tools")
        if mode == "none":
            tools = None
        tokens = self._chat_tokens(messages, template, tools)

        def reasoning(c: Completion) -> Dict[str, Any]:
            # The reply's reasoning, and the rest parsed.
            p = self.parse_tool_calls(c.text, template)
            c.reasoning = p.get("reasoning")
            if c.reasoning is not None:
                c.content = p["content"]
            return p

        if tools is None:
            if mode != "none":
                return self.generate(tokens, max_tokens, stream=stream, _on_done=reasoning, **kwargs)

            def no_calls(c: Completion) -> None:
                p = reasoning(c)
                c.tool_calls, c.content = [], p["content"] if c.reasoning is not None else c.text

            return self.generate(tokens, max_tokens, stream=stream, _on_done=no_calls, **kwargs)
        if mode == "required":
            if any(kwargs.get(k) is not None for k in ("grammar", "json_schema", "response_format")):
                raise A.range_error("chat", "tool_choice", "cannot be combined with grammar, json_schema or response_format")
            kwargs["grammar"] = S.Grammar.for_tool_calls(self, tools, name, template, parallel=bool(parallel_tool_calls))
            kwargs["_own_grammar"] = True

        def add_calls(c: Completion) -> None:
            p = reasoning(c)
            c.tool_calls = p["tool_calls"]
            if parallel_tool_calls is False:
                c.tool_calls = c.tool_calls[:1]
            c.content = p["content"]
            c.tool_call_error = p.get("error")

        return self.generate(tokens, max_tokens, stream=stream, _on_done=add_calls, **kwargs)


def _draft_option(what: str, draft: Any, draft_tokens: Any, model_kind: type) -> Tuple[int, int]:
    """moonlm_generate_params.draft and draft_tokens for a draft option:
    None, "lookup", or a model_kind (a Model, or a Session of one)."""
    if draft is None:
        if draft_tokens is not None:
            raise A.range_error(what, "draft_tokens", "needs draft")
        return L.DRAFT_NONE, 0
    k = 0 if draft_tokens is None else A.integer(what, "draft_tokens", draft_tokens, 1, L.MAX_DRAFT_TOKENS)
    if isinstance(draft, str):
        if draft != "lookup":
            raise A.range_error(what, "draft", f"must be 'lookup' or a {model_kind.__name__}, got {draft!r}")
        return L.DRAFT_LOOKUP, k
    if not isinstance(draft, model_kind):
        raise A.type_error(what, "draft", f"must be 'lookup' or a moonlm.{model_kind.__name__}, got {type(draft).__name__}")
    return L.DRAFT_MODEL, k


def _finish(it: TextStream, details: bool) -> Union[str, Completion]:
    """Runs a stream to its end: its text, or its Completion."""
    try:
        for _ in it:
            pass
    finally:
        it.close()
    c = it.completion
    if c is None:  # pragma: no cover - a stream that ended without raising has one
        raise InternalError(10, "generate: the generation ended without a result")
    return c if details else c.text


class Session(SessionStateMixin, CheckpointMixin):
    """A sequence being evaluated: its KV cache and position.

    One thread at a time may use a session (a concurrent call raises
    BusyError); cancel() may be called from any thread. prefill() and
    decode() return the logits of the last position in a buffer that the
    session owns and overwrites on every call: a read-only NumPy float32
    array (a view, no copy per token) when NumPy is installed, else an
    array('f'). Copy it (``logits.copy()``) to keep it past the next call.

    For a hybrid model (recurrent layers beside attention: qwen35,
    qwen35moe, qwen3next), checkpoint_every and checkpoint_bytes say how
    often (decoded positions; None or 0 is 32, negative never) and within
    how much memory (bytes; None or 0 is 128 MiB, negative none at all) the
    session keeps checkpoints of its recurrent state, besides one at the
    end of every prefill: rewind() goes back to the last one at or before
    the position and evaluates the tokens after it again. checkpoints()
    reports them. Other models ignore both.
    """

    def __init__(
        self,
        model: Model,
        n_ctx: Optional[int] = None,
        n_threads: Optional[int] = None,
        kv_type: str = "f16",
        *,
        checkpoint_every: Optional[int] = None,
        checkpoint_bytes: Optional[int] = None,
    ):
        if not isinstance(model, Model):
            raise A.type_error("session", "model", f"must be a moonlm.Model, got {type(model).__name__}")
        lib = self._lib = model._lib
        params = L.SessionParams()
        lib.session_params_init(ctypes.byref(params), ctypes.sizeof(params))
        if n_ctx is not None:
            params.n_ctx = A.integer("session", "n_ctx", n_ctx, 1, A.INT32_MAX)
        if n_threads is not None:
            params.n_threads = A.integer("session", "n_threads", n_threads, 0, A.INT32_MAX)
        A.string("session", "kv_type", kv_type)
        if kv_type not in _KV_TYPES:
            raise A.range_error("session", "kv_type", f"must be 'f16', 'f32' or 'q8_0', got {kv_type!r}")
        params.kv_type = _KV_TYPES[kv_type]
        # A hybrid model's checkpoints: 0 (or None) the default, negative none.
        if checkpoint_every is not None:
            params.checkpoint_every = A.integer("session", "checkpoint_every", checkpoint_every, A.INT32_MIN, A.INT32_MAX)
        if checkpoint_bytes is not None:
            params.checkpoint_bytes = A.integer("session", "checkpoint_bytes", checkpoint_bytes, -(1 << 63), (1 << 63) - 1)
        handle = ctypes.c_void_p()
        st = lib.session_new(model._h("session"), ctypes.byref(params), ctypes.byref(handle))
        lib.check(st, "session")
        h = int(handle.value or 0)
        self._handle: Optional[int] = h
        self._finalizer = weakref.finalize(self, _free_handle, lib.session_free, h)
        self.model = model
        self.n_ctx: int = params.n_ctx if params.n_ctx > 0 else model.context_length
        self.n_vocab = model.vocab_size
        self.kv_type = kv_type
        if _np is not None:
            buf = _np.zeros(self.n_vocab, dtype=_np.float32)
            self._logits_ptr = buf.ctypes.data
            view = buf.view()
            view.flags.writeable = False
            self._logits: Logits = view
        else:
            buf = array("f", bytes(4 * self.n_vocab))
            self._logits_ptr = buf.buffer_info()[0]
            self._logits = buf
        self._logits_owner = buf
        self._pos = ctypes.c_size_t(0)

    def close(self) -> None:
        """Frees the session. Idempotent; a call running in another thread is
        cancelled."""
        self._handle = None
        self._finalizer()

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _h(self, what: str) -> int:
        h = self._handle
        if h is None:
            raise InvalidArgumentError(1, f"{what}: the session is closed")
        return h

    @property
    def logits(self) -> Logits:
        """The buffer prefill()/decode() write into (the last logits)."""
        return self._logits

    def prefill(self, tokens: Tokens) -> Logits:
        """Evaluates tokens at the current position; returns the logits of
        the last one. The position is unchanged on any error, and on a
        KeyboardInterrupt: Ctrl-C in the main thread cancels the call."""
        h = self._h("prefill")
        ptr, n, keep = A.tokens("prefill", "tokens", tokens)
        lib, out, cap = self._lib, self._logits_ptr, self.n_vocab
        # Where a call that finished despite a Ctrl-C is rewound to. If the
        # position cannot be read (another thread's call), prefill fails too.
        known = lib.session_position(h, ctypes.byref(self._pos)) == L.OK
        start = self._pos.value

        def undo() -> None:
            if known:
                lib.session_rewind(h, start)

        err = _interruptible(lib, h, "prefill", lambda: lib.prefill(h, ptr, n, out, cap), undo)
        del keep
        if err is not None:
            raise err
        return self._logits

    def decode(self, token: int) -> Logits:
        """Evaluates one token; returns the next-token logits. (One token's
        work is short: a Ctrl-C during it is raised when it returns.)"""
        h = self._h("decode")
        if type(token) is not int or not 0 <= token <= A.INT32_MAX:
            token = A.token("decode", "token", token)
        st = self._lib.decode(h, token, self._logits_ptr, self.n_vocab)
        self._lib.check(st, "decode")
        return self._logits

    def rewind(self, n_keep: int) -> None:
        """Keeps the first n_keep positions and forgets the rest."""
        n_keep = A.integer("rewind", "n_keep", n_keep, 0, A.SIZE_MAX)
        self._lib.check(self._lib.session_rewind(self._h("rewind"), n_keep), "rewind")

    @property
    def position(self) -> int:
        """Tokens evaluated so far (the next token's position)."""
        st = self._lib.session_position(self._h("position"), ctypes.byref(self._pos))
        self._lib.check(st, "position")
        return self._pos.value

    def cancel(self) -> None:
        """Makes the running (or next) prefill/decode raise CancelledError.
        Safe from any thread; never blocks."""
        h = self._handle
        if h is None:
            return  # nothing left to cancel
        self._lib.check(self._lib.session_cancel(h), "cancel")

    def generate(
        self,
        tokens: Tokens,
        max_tokens: int = 256,
        *,
        sampler: Optional["Sampler"] = None,
        stop: Optional[Iterable[str]] = None,
        grammar: Union[None, str, "S.Grammar"] = None,
        json_schema: Union[None, str, Mapping[str, Any]] = None,
        response_format: Optional[Mapping[str, Any]] = None,
        logprobs: bool = False,
        top_logprobs: Optional[int] = None,
        draft: Union[None, str, "Session"] = None,
        draft_tokens: Optional[int] = None,
    ) -> TextStream:
        """Streams a continuation of tokens from this session's current
        position (its text pieces; the stream's completion holds the
        details once it is exhausted). The session is not closed
        afterwards; the last generated token is not evaluated (pass
        completion.tokens[-1] first to continue the text). The session is
        busy until the stream is exhausted or closed.

        grammar, json_schema, response_format, logprobs and top_logprobs
        are as for Model.generate. draft="lookup" decodes speculatively
        with prompt lookup, draft=a Session of a draft model (same
        vocabulary; busy during the call, and worth reusing across calls
        of one conversation: it keeps what it evaluated) with that model;
        draft_tokens guesses per pass (default 8)."""
        toks = A.token_list("generate", "tokens", tokens)
        c_max, stops = _check_loop("generate", max_tokens, stop)
        if sampler is not None and not isinstance(sampler, Sampler):
            raise A.type_error("generate", "sampler", f"must be a moonlm.Sampler, got {type(sampler).__name__}")
        if not toks:
            raise A.range_error("generate", "tokens", "has no tokens")
        A.boolean("generate", "logprobs", logprobs)
        if top_logprobs is not None and not logprobs:
            raise A.range_error("generate", "top_logprobs", "needs logprobs=True")
        lp: Optional[Tuple[int, Callable[[int], bytes]]] = None
        if logprobs:
            top = 0 if top_logprobs is None else A.integer("generate", "top_logprobs", top_logprobs, 0, L.MAX_TOP_LOGPROBS)
            lp = (top, self.model.token_to_piece)
            # One entry per token: no more than the context can still hold.
            bound = self.n_ctx + 1
            c_max = bound if c_max < 0 else min(c_max, bound)
        mode, k = _draft_option("generate", draft, draft_tokens, Session)
        if isinstance(draft, Session) and draft is self:
            raise A.range_error("generate", "draft", "is this session; the draft model needs a session of its own")
        gram, owned = S.resolve("generate", self.model, grammar, json_schema, response_format)
        # keep the caller's sampler open: close only one made here
        s = Sampler() if sampler is None else sampler

        def cleanup() -> None:
            if sampler is None:
                s.close()
            if owned and gram is not None:
                gram.close()

        gh = None if gram is None else gram._h("generate")
        dr = None if mode == L.DRAFT_NONE else (mode, k, draft if isinstance(draft, Session) else None)
        return G.run(self._lib, self, s, toks, c_max, stops, True, cleanup, None, gh, lp, dr)


class Sampler(OwnedHandle):
    """Chooses tokens from logits: penalties, top_k, top_p, min_p,
    temperature, then a seeded draw (temperature <= 0 is greedy).
    None leaves the library's default. One thread at a time."""

    _kind = "sampler"

    def __init__(
        self,
        temperature: Optional[float] = None,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        min_p: Optional[float] = None,
        repeat_penalty: Optional[float] = None,
        presence_penalty: Optional[float] = None,
        frequency_penalty: Optional[float] = None,
        penalty_last_n: Optional[int] = None,
        seed: Optional[int] = None,
        *,
        typical_p: Optional[float] = None,
        xtc_probability: Optional[float] = None,
        xtc_threshold: Optional[float] = None,
        mirostat: Optional[int] = None,
        mirostat_tau: Optional[float] = None,
        mirostat_eta: Optional[float] = None,
        dry_multiplier: Optional[float] = None,
        dry_base: Optional[float] = None,
        dry_allowed_length: Optional[int] = None,
        dry_penalty_last_n: Optional[int] = None,
        dry_sequence_breakers: Optional[Sequence[str]] = None,
        logit_bias: Optional[Mapping[int, float]] = None,
        _what: str = "Sampler",
    ):
        lib = self._lib = L.lib()
        p = L.SamplerParams()
        lib.sampler_params_init(ctypes.byref(p), ctypes.sizeof(p))
        floats: Dict[str, Any] = {
            "temperature": temperature,
            "top_p": top_p,
            "min_p": min_p,
            "repeat_penalty": repeat_penalty,
            "presence_penalty": presence_penalty,
            "frequency_penalty": frequency_penalty,
        }
        for k, v in floats.items():
            if v is not None:
                setattr(p, k, A.number(_what, k, v))
        for k, v in (("top_k", top_k), ("penalty_last_n", penalty_last_n)):
            if v is not None:
                setattr(p, k, A.integer(_what, k, v, A.INT32_MIN, A.INT32_MAX))
        if seed is not None:  # SEED_RANDOM (2**64-1) is what no seed means
            p.seed = A.integer(_what, "seed", seed, 0, L.SEED_RANDOM - 1)
        keep = S.set_sampler_options(
            _what,
            p,
            {
                "typical_p": typical_p,
                "xtc_probability": xtc_probability,
                "xtc_threshold": xtc_threshold,
                "mirostat": mirostat,
                "mirostat_tau": mirostat_tau,
                "mirostat_eta": mirostat_eta,
                "dry_multiplier": dry_multiplier,
                "dry_base": dry_base,
                "dry_allowed_length": dry_allowed_length,
                "dry_penalty_last_n": dry_penalty_last_n,
                "dry_sequence_breakers": dry_sequence_breakers,
                "logit_bias": logit_bias,
            },
        )
        self.params = p
        handle = ctypes.c_void_p()
        lib.check(lib.sampler_new(ctypes.byref(p), ctypes.byref(handle)), "sampler")
        del keep  # read by sampler_new; p must not point at it afterwards
        p.dry_sequence_breakers = None
        p.logit_bias = None
        p.n_dry_sequence_breakers = 0
        p.n_logit_bias = 0
        h = int(handle.value or 0)
        self._handle: Optional[int] = h
        self._finalizer = weakref.finalize(self, _free_handle, lib.sampler_free, h)
        self._tok = ctypes.c_int32(0)


    def sample(self, logits: Logits) -> int:
        """A token chosen from logits (float32, n_vocab long); not accepted."""
        h = self._h("sample")
        if _np is not None and isinstance(logits, _np.ndarray):
            if logits.dtype.kind not in "fiu":
                raise A.type_error("sample", "logits", f"must be numbers, got a {logits.dtype} array")
            if logits.dtype != _np.float32 or not logits.flags.c_contiguous:
                logits = _np.ascontiguousarray(logits, dtype=_np.float32)
            ptr, n = logits.ctypes.data, logits.size
        elif isinstance(logits, array) and logits.typecode == "f":
            ptr, n = logits.buffer_info()
        else:
            if isinstance(logits, (str, bytes, bytearray, memoryview)):
                raise A.type_error("sample", "logits", f"must be numbers, got {type(logits).__name__}")
            try:
                logits = array("f", logits)
            except TypeError as e:
                raise A.type_error("sample", "logits", f"must be a sequence of numbers: {e}") from None
            ptr, n = logits.buffer_info()
        st = self._lib.sample(h, ptr, n, ctypes.byref(self._tok))
        self._lib.check(st, "sample")
        return self._tok.value

    def accept(self, token: int) -> None:
        """Records token in the history the penalties look at."""
        h = self._h("accept")
        if type(token) is not int or not 0 <= token <= A.INT32_MAX:
            token = A.token("accept", "token", token)
        self._lib.check(self._lib.sampler_accept(h, token), "sampler accept")

    def reset(self) -> None:
        """Forgets the accepted history (keeps the random state)."""
        self._lib.check(self._lib.sampler_reset(self._h("reset")), "sampler reset")
