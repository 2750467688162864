"""Batched decoding of several sessions (moonlm_batch_decode).

decode_batch() advances several sessions of one model in one forward pass:
the weights are read once per step for all of them. Batcher lets many
asyncio tasks ``await`` their next logits and runs one batched step for all
the tasks waiting, in a worker thread so the event loop stays free.
"""

from __future__ import annotations

import asyncio
import ctypes
from array import array
from ctypes import POINTER, Structure, c_int, c_int32, c_size_t, c_void_p
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _args as A
from . import _lib as L
from ._errors import InvalidArgumentError, MoonlmError, UnsupportedError, error_for_status
from ._model import Model, Session

Tokens = Union[int, Sequence[int]]


class _Entry(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("session", c_void_p),
        ("tokens", POINTER(c_int32)),
        ("n_tokens", c_size_t),
        ("logits", c_void_p),
        ("logits_cap", c_size_t),
        ("status", c_int),
        ("continues", c_size_t),
    ]


class BatchEntry(NamedTuple):
    """One entry of decode_batch: a plain (session, tokens) tuple is one
    with continues False. continues=True says these tokens are a chunk of
    a prompt that the session's entry in a later decode_batch goes on
    with: a hybrid model's session then takes the checkpoints of its
    recurrent state as for one prefill of the whole prompt (one copy of
    the state at its end) instead of one per chunk. Other models ignore
    it."""

    session: Session
    tokens: "Tokens"
    continues: bool = False


_declared: Dict[int, Any] = {}


def _fns(lib: L.Library) -> Tuple[Any, Any]:
    fns = _declared.get(id(lib))
    if fns is None:
        dec = getattr(lib.dll, "moonlm_batch_decode", None)
        mx = getattr(lib.dll, "moonlm_batch_max_tokens", None)
        if dec is not None and mx is not None:
            dec.restype, dec.argtypes = c_int, [c_void_p, POINTER(_Entry), c_size_t]
            mx.restype, mx.argtypes = c_int, [c_void_p, POINTER(c_size_t)]
        fns = _declared[id(lib)] = (dec, mx)
    if fns[0] is None or fns[1] is None:
        raise UnsupportedError(4, f"decode_batch: {lib.path} predates batched decoding; rebuild the library")
    return fns


def max_batch_tokens(model: Model) -> int:
    """The most tokens one decode_batch step evaluates, over all its entries."""
    if not isinstance(model, Model):
        raise A.type_error("max_batch_tokens", "model", f"must be a moonlm.Model, got {type(model).__name__}")
    lib = model._lib
    n = c_size_t(0)
    lib.check(_fns(lib)[1](model._h("max_batch_tokens"), ctypes.byref(n)), "max_batch_tokens")
    return n.value


def decode_batch(
    model: Model, entries: Sequence[Union[Tuple[Session, Tokens], BatchEntry]], *, raise_first: bool = False
) -> List[Optional[MoonlmError]]:
    """Evaluates each (session, tokens) entry in one forward pass: tokens is
    one token to decode or a list (a chunk of a prompt); an entry may also
    be a BatchEntry(session, tokens, continues=True) (or a 3-tuple), a
    chunk that the session's next entry goes on with. Each session's
    logits buffer (session.logits) then holds its last token's logits, as
    after session.decode(); they equal, bit for bit, what the session gets
    alone. Returns one error per entry, None where the tokens were
    evaluated (an entry that fails leaves its session unchanged and the
    others go on); with raise_first, raises the first error instead."""
    if not isinstance(model, Model):
        raise A.type_error("decode_batch", "model", f"must be a moonlm.Model, got {type(model).__name__}")
    lib = model._lib
    dec = _fns(lib)[0]
    entries = list(entries)
    n = len(entries)
    arr = (_Entry * max(n, 1))()
    keep = []
    for i, e in enumerate(entries):
        if not isinstance(e, tuple) or len(e) not in (2, 3):
            raise A.type_error("decode_batch", f"entries[{i}]", "must be a (session, tokens) tuple or a BatchEntry")
        s, toks = e[0], e[1]
        cont = e[2] if len(e) == 3 else False
        if not isinstance(cont, bool):
            raise A.type_error("decode_batch", f"entries[{i}]", f"continues must be a bool, got {type(cont).__name__}")
        if not isinstance(s, Session):
            raise A.type_error("decode_batch", f"entries[{i}]", f"session must be a moonlm.Session, got {type(s).__name__}")
        if s.model is not model:
            raise InvalidArgumentError(1, f"decode_batch: entries[{i}]: the session belongs to another model")
        if isinstance(toks, int) and not isinstance(toks, bool):
            toks = [toks]
        ptr, cnt, k = A.tokens("decode_batch", f"entries[{i}]", toks)
        keep.append(k)
        arr[i] = _Entry(ctypes.sizeof(_Entry), s._h("decode_batch"), ctypes.cast(c_void_p(ptr), POINTER(c_int32)), cnt,
                        s._logits_ptr, s.n_vocab, 0, 1 if cont else 0)
    st = dec(model._h("decode_batch"), arr, n)
    first = lib.error(st, "decode_batch") if st != L.OK else None
    del keep
    errs: List[Optional[MoonlmError]] = []
    for i in range(n):
        es = arr[i].status
        if es == L.OK:
            errs.append(None)
        elif first is not None and es == st and all(e is None for e in errs):
            errs.append(first)
        else:
            name = lib.status_string(es)
            errs.append(error_for_status(es, f"decode_batch: entries[{i}]: {name.decode() if name else es}"))
    if first is not None and all(e is None for e in errs):
        raise first  # the call itself failed
    if raise_first:
        for e in errs:
            if e is not None:
                raise e
    return errs


class Batcher:
    """Lets many asyncio tasks decode through shared batched steps.

    ``logits = await batcher.decode(session, token)`` (or a list of prompt
    tokens) queues the session's tokens; the batcher runs one
    decode_batch for every session waiting (in a worker thread, so the
    event loop stays free) and resolves each task's await with a copy of
    its session's logits (a NumPy array when NumPy is installed, else an
    array('f')), or raises that entry's error. Tasks that ask while a step
    runs join the next one. A prompt longer than a step's room is fed in
    chunks over several steps, each but the last marked continues (so a
    hybrid model's session checkpoints it as one prefill). Use one Batcher
    per model and event loop.
    """

    def __init__(self, model: Model):
        if not isinstance(model, Model):
            raise A.type_error("Batcher", "model", f"must be a moonlm.Model, got {type(model).__name__}")
        self.model = model
        self.max_tokens = max_batch_tokens(model)
        self._pending: List[Tuple[Session, List[int], "asyncio.Future[Any]", bool]] = []
        self._running: Optional["asyncio.Task[None]"] = None
        #: The batched steps run so far.
        self.steps = 0

    async def decode(self, session: Session, tokens: Tokens, *, continues: bool = False) -> Any:
        """Evaluates tokens (one, or a list) on session in the next shared
        step(s); returns the last token's logits (a copy). continues=True:
        the tokens are a chunk of a prompt that the next decode on this
        session goes on with (see BatchEntry)."""
        if not isinstance(continues, bool):
            raise A.type_error("Batcher.decode", "continues", f"must be a bool, got {type(continues).__name__}")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            toks = [tokens]
        else:
            toks = A.token_list("Batcher.decode", "tokens", tokens)
        if not toks:
            raise InvalidArgumentError(1, "Batcher.decode: no tokens")
        loop = asyncio.get_running_loop()
        fut: "asyncio.Future[Any]" = loop.create_future()
        self._pending.append((session, toks, fut, continues))
        if self._running is None or self._running.done():
            self._running = loop.create_task(self._run())
        return await fut

    async def _run(self) -> None:
        # Let the tasks that are ready ask before the first step.
        await asyncio.sleep(0)
        while self._pending:
            room = self.max_tokens
            step: List[Tuple[Session, List[int], "asyncio.Future[Any]", bool, int]] = []
            rest: List[Tuple[Session, List[int], "asyncio.Future[Any]", bool]] = []
            for s, toks, fut, cont in self._pending:
                if fut.cancelled():
                    continue
                if room == 0 or any(s is x[0] for x in step):
                    rest.append((s, toks, fut, cont))
                    continue
                n = min(len(toks), room)
                room -= n
                step.append((s, toks, fut, cont, n))
            self._pending = rest
            if not step:
                continue
            # A prompt cut short here goes on in a later step: one prefill.
            entries = [BatchEntry(s, toks[:n], n < len(toks) or cont) for s, toks, _, cont, n in step]
            try:
                errs = await asyncio.to_thread(decode_batch, self.model, entries)
            except BaseException as e:  # the call itself failed: every entry gets it
                for _, _, fut, _, _ in step:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            self.steps += 1
            for (s, toks, fut, cont, n), err in zip(step, errs):
                if fut.done():
                    continue
                if err is not None:
                    fut.set_exception(err)
                elif n < len(toks):
                    self._pending.append((s, toks[n:], fut, cont))  # the rest of a prompt
                else:
                    lg = s.logits
                    fut.set_result(lg.copy() if hasattr(lg, "copy") else array("f", lg))
            # Tasks woken by this step ask again before the next one.
            await asyncio.sleep(0)
