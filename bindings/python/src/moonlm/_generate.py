"""Generation: one moonlm_generate_ex call per generation.

The library runs the whole loop (prefill, sampling, stop strings, UTF-8
holdback, finish reasons); this module runs that call on a worker thread and
hands the text pieces its callback releases to the caller's iterator, so a
stream is an ordinary Python iterator and Ctrl-C in the main thread is seen
while the library computes.
"""

from __future__ import annotations

import ctypes
import queue
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from . import _args as A
from . import _lib as L

_WAIT_SLICE = 0.05  # seconds: the longest a Ctrl-C or a close waits to be seen
_AHEAD = 64  # pieces the library may produce before the consumer takes them


class Completion:
    """What a generation produced (``generate(..., details=True)``).

    text: the generated text (cut before a stop string).
    finish_reason: why it ended: "stop" (a stop string), "length"
    (max_tokens), "eog" (the model's end-of-generation token), "context"
    (the context is full) or "cancelled".
    tokens: the generated token ids (an end-of-generation token is not one).
    prompt_tokens, completion_tokens: how many tokens were evaluated as the
    prompt and how many were generated (len(tokens)).
    tool_calls, content, tool_call_error: for chat(..., tools=...), the
    calls the reply makes (OpenAI's shape, arguments a JSON text), the
    reply without them, and why text that looked like a call could not be
    read (else None); all None without tools.
    logprobs: with logprobs=True, OpenAI's shape: {"content": [{"token":
    text, "id": id, "bytes": [...], "logprob": lp, "top_logprobs": [{"token",
    "id", "bytes", "logprob"}, ...]}, ...]}, one entry per generated token
    (the model's distribution after the grammar, logit bias and penalties,
    before truncation and temperature); else None.
    reasoning: for chat, the reply's reasoning (gpt-oss's analysis
    channel, a <think> block) when it has some, else None; content is then
    the answer without it.
    drafted, draft_accepted: with speculative decoding (draft=...), the
    tokens the drafter guessed and how many of them were kept (0 without).
    """

    __slots__ = (
        "text",
        "finish_reason",
        "tokens",
        "prompt_tokens",
        "completion_tokens",
        "tool_calls",
        "content",
        "tool_call_error",
        "logprobs",
        "drafted",
        "draft_accepted",
        "reasoning",
    )

    def __init__(self, text: str, finish_reason: str, tokens: List[int], prompt_tokens: int, completion_tokens: int):
        self.text = text
        self.finish_reason = finish_reason
        self.tokens = tokens
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        # chat(..., tools=...): the calls the reply makes, and the rest of it.
        self.tool_calls: Optional[List[Dict[str, Any]]] = None
        self.content: Optional[str] = None
        self.tool_call_error: Optional[str] = None
        self.logprobs: Optional[Dict[str, Any]] = None
        self.drafted = 0
        self.draft_accepted = 0
        self.reasoning: Optional[str] = None

    def __repr__(self) -> str:
        return (
            f"Completion(text={self.text!r}, finish_reason={self.finish_reason!r}, "
            f"prompt_tokens={self.prompt_tokens}, completion_tokens={self.completion_tokens})"
        )


class TextStream(Iterator[str]):
    """The text pieces of a generation as they are produced.

    Iterate it (or call close() to stop early: the generation is cancelled
    and its resources freed). Once it is exhausted, ``completion`` holds the
    Completion (the finish reason, token ids and counts); before that it is
    None.
    """

    def __init__(self, it: Iterator[str], box: List[Optional[Completion]]):
        self._it = it
        self._box = box

    @property
    def completion(self) -> Optional[Completion]:
        return self._box[0]

    def __iter__(self) -> "TextStream":
        return self

    def __next__(self) -> str:
        return next(self._it)

    def close(self) -> None:
        """Stops the generation (if it runs) and frees what it holds."""
        close = getattr(self._it, "close", None)
        if close is not None:
            close()


def check_max_tokens(what: str, max_tokens: Any) -> int:
    """max_tokens as moonlm_generate_params.max_tokens: beyond int32 is no limit."""
    n = A.integer(what, "max_tokens", max_tokens, 0, (1 << 63) - 1)
    return n if n <= A.INT32_MAX else -1


def check_stops(what: str, stop: Any) -> List[bytes]:
    """The stop strings as UTF-8, within the library's bounds (checked here so
    the error comes from the call, not from the first piece)."""
    stops = [s.encode("utf-8") for s in A.strings(what, "stop", stop)]
    stops = [s for s in stops if s]  # empty ones are ignored by the library too
    if len(stops) > L.MAX_STOP_STRINGS:
        raise A.range_error(what, "stop", f"has {len(stops)} strings; at most {L.MAX_STOP_STRINGS}")
    if sum(len(s) for s in stops) > L.MAX_STOP_BYTES:
        raise A.range_error(what, "stop", f"holds more than {L.MAX_STOP_BYTES} bytes of UTF-8")
    return stops


def run(
    lib: L.Library,
    session: Any,
    sampler: Any,
    tokens: Sequence[int],
    max_tokens: int,
    stops: List[bytes],
    borrowed_session: bool,
    cleanup: Callable[[], None],
    on_done: Optional[Callable[[Completion], None]] = None,
    grammar: Optional[int] = None,
    logprobs: Optional[Tuple[int, Callable[[int], bytes]]] = None,
    draft: Optional[Tuple[int, int, Any]] = None,
    flags: int = 0,
) -> TextStream:
    """Starts nothing yet: returns the stream whose first next() runs
    moonlm_generate_ex on session with sampler (objects with _h(what)).
    cleanup() runs when the generation is over (or abandoned); on_done
    completes the Completion before the stream ends. draft is
    (moonlm_generate_params.draft, draft_tokens, the draft session or
    None)."""
    box: List[Optional[Completion]] = [None]
    it = _pieces(
        lib, session, sampler, tokens, max_tokens, stops, borrowed_session, cleanup, box, on_done, grammar, logprobs, draft, flags
    )
    return TextStream(it, box)


class _Call:
    """One moonlm_generate_ex call on a worker thread and what it shares
    with the consumer."""

    def __init__(
        self,
        lib: L.Library,
        h: int,
        sh: int,
        tokens: Sequence[int],
        max_tokens: int,
        stops: List[bytes],
        grammar: Optional[int] = None,
        top_logprobs: Optional[int] = None,
        draft: Optional[Tuple[int, int, Optional[int]]] = None,
        flags: int = 0,
    ):
        self.lib = lib
        self.h = h
        self.sh = sh
        self.tokens = (ctypes.c_int32 * len(tokens))(*tokens)
        self.n = len(tokens)
        self.pieces: "queue.Queue[Optional[bytes]]" = queue.Queue(_AHEAD)
        self.generated: List[int] = []
        self.started = False  # a callback came: the prompt is evaluated
        self.stopping = threading.Event()  # the consumer is gone: return nonzero
        self.finished = threading.Event()
        self.status = L.OK
        self.error: Optional[Exception] = None
        self.cancel_sent = False
        p = self.params = L.GenerateParams()
        lib.generate_params_init(ctypes.byref(p), ctypes.sizeof(p))
        p.size = ctypes.sizeof(L.GenerateParams)
        p.max_tokens = max_tokens
        p.flags = flags
        if stops:
            self._stop = (ctypes.c_char_p * len(stops))(*stops)
            self._stop_len = (ctypes.c_size_t * len(stops))(*[len(s) for s in stops])
            p.stop = self._stop
            p.stop_len = self._stop_len
            p.n_stop = len(stops)
        if grammar is not None:
            p.grammar = grammar
        if draft is not None:
            p.draft, p.draft_tokens, p.draft_session = draft
        self.logprobs: Optional[Any] = None
        if top_logprobs is not None:
            # One entry per token: max_tokens is bounded (the caller made it so).
            cap = max(max_tokens, 1)
            self.logprobs = (L.TokenLogprob * cap)()
            p.logprobs = self.logprobs
            p.logprobs_cap = cap
            p.top_logprobs = top_logprobs
        self._cb = L.PieceCallback(self._on_piece)  # kept alive with the call
        p.callback = self._cb
        self.result = L.GenerateResult()
        self.result.size = ctypes.sizeof(L.GenerateResult)

    def _on_piece(self, ptr: Optional[int], n: int, tok: int, _ud: Any) -> int:
        # On the worker thread, inside the library's call: nothing may raise.
        try:
            self.started = True
            if tok >= 0:
                self.generated.append(tok)
            if self.stopping.is_set():
                return 1
            if n and ptr:
                data = ctypes.string_at(ptr, n)
                while not self.stopping.is_set():
                    try:
                        self.pieces.put(data, timeout=_WAIT_SLICE)
                        break
                    except queue.Full:
                        continue
            return 1 if self.stopping.is_set() else 0
        except BaseException:  # pragma: no cover - e.g. interpreter shutdown
            return 1

    def start(self) -> None:
        t = threading.Thread(target=self._work, name="moonlm generate", daemon=True)
        t.start()

    def _work(self) -> None:
        try:
            st = self.lib.generate_ex(
                self.h, self.sh, self.tokens, self.n, ctypes.byref(self.params), ctypes.byref(self.result)
            )
            self.status = st
            if st != L.OK:
                # The library's message is per thread: made here.
                self.error = self.lib.error(st, "generate")
        finally:
            self.finished.set()
            while not self.stopping.is_set():  # the end marker, unless nobody reads
                try:
                    self.pieces.put(None, timeout=_WAIT_SLICE)
                    break
                except queue.Full:
                    continue

    def stop(self) -> None:
        """Ends the call early and waits for it: the callback refuses more
        text, and a prompt still being evaluated is cancelled."""
        self.stopping.set()
        if not self.started and not self.finished.is_set():
            # Still in the prompt: no callback will come soon to see the flag.
            self.cancel_sent = True
            self.lib.session_cancel(self.h)
        while not self.finished.is_set():  # the call must end before its buffers may go
            try:
                self.finished.wait(_WAIT_SLICE)
            except KeyboardInterrupt:
                continue

    def drain_cancel(self) -> None:
        """A cancel request sent while the call was already ending (and so
        not consumed by it) would cancel the session's next call: consume it
        with a one-token evaluation that it stops, or undo one it did not."""
        if not self.cancel_sent or self.status == L.CANCELLED:
            return
        pos = ctypes.c_size_t(0)
        if self.lib.session_position(self.h, ctypes.byref(pos)) != L.OK:
            return
        tok = (ctypes.c_int32 * 1)(self.tokens[self.n - 1])
        if self.lib.prefill(self.h, tok, 1, None, 0) == L.OK:
            self.lib.session_rewind(self.h, pos.value)


def _pieces(
    lib: L.Library,
    session: Any,
    sampler: Any,
    tokens: Sequence[int],
    max_tokens: int,
    stops: List[bytes],
    borrowed_session: bool,
    cleanup: Callable[[], None],
    box: List[Optional[Completion]],
    on_done: Optional[Callable[[Completion], None]],
    grammar: Optional[int],
    logprobs: Optional[Tuple[int, Callable[[int], bytes]]],
    draft: Optional[Tuple[int, int, Any]] = None,
    flags: int = 0,
) -> Iterator[str]:
    call: Optional[_Call] = None
    try:
        top = None if logprobs is None else logprobs[0]
        dr = None
        if draft is not None:
            mode, k, ds = draft
            dr = (mode, k, None if ds is None else ds._h("generate"))
        call = _Call(lib, session._h("generate"), sampler._h("generate"), tokens, max_tokens, stops, grammar, top, dr, flags)
        call.start()
        text: List[str] = []
        while True:
            try:
                data = call.pieces.get(timeout=_WAIT_SLICE)
            except queue.Empty:
                continue
            if data is None:
                break
            piece = data.decode("utf-8", "replace")
            text.append(piece)
            yield piece
        r = call.result
        reason = r.finish_reason
        done = Completion(
            "".join(text),
            L.FINISH_REASONS[reason] if 0 <= reason < len(L.FINISH_REASONS) else f"unknown {reason}",
            list(call.generated),
            int(r.n_prompt),
            int(r.n_generated),
        )
        done.drafted, done.draft_accepted = int(r.n_drafted), int(r.n_draft_accepted)
        if call.logprobs is not None and logprobs is not None:
            n = min(int(r.n_generated), len(call.logprobs))
            done.logprobs = _openai_logprobs(call.logprobs, n, logprobs[1])
        if call.error is not None:
            if call.status == L.CANCELLED:
                # Session.cancel(): what was generated until then comes with the error.
                setattr(call.error, "completion", done)
            raise call.error
        if on_done is not None:
            on_done(done)
        box[0] = done
    finally:
        if call is not None:
            call.stop()  # at once if the call is over
            if borrowed_session:
                call.drain_cancel()
        cleanup()


def _openai_logprobs(entries: Any, n: int, piece: Callable[[int], bytes]) -> Dict[str, Any]:
    """The first n entries of a moonlm_token_logprob array in OpenAI's shape."""

    def one(tok: int, lp: float) -> Dict[str, Any]:
        b = piece(tok)
        return {"token": b.decode("utf-8", "replace"), "id": tok, "bytes": list(b), "logprob": lp}

    content = []
    for i in range(n):
        e = entries[i]
        d = one(int(e.token), float(e.logprob))
        k = max(0, min(int(e.n_top), L.MAX_TOP_LOGPROBS))
        d["top_logprobs"] = [one(int(e.top[j].token), float(e.top[j].logprob)) for j in range(k)]
        content.append(d)
    return {"content": content}
