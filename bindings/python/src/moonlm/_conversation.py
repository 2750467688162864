"""Conversation: a chat that keeps its history and its session, so each turn
evaluates only the tokens the session does not already hold."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from . import _args as A
from ._errors import CancelledError

_SAMPLING = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
    "penalty_last_n",
    "seed",
    "typical_p",
    "xtc_probability",
    "xtc_threshold",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
    "dry_multiplier",
    "dry_base",
    "dry_allowed_length",
    "dry_penalty_last_n",
    "dry_sequence_breakers",
    "logit_bias",
)


def _check_options(max_tokens: Any, stream: Any, stop: Any, sampling: Mapping[str, Any]) -> List[str]:
    """Checks a turn's options; returns the stop strings as a list."""
    for k in sampling:
        if k not in _SAMPLING:
            raise A.type_error("reply", k, f"is not an option (sampling options: {', '.join(_SAMPLING)})")
    A.integer("reply", "max_tokens", max_tokens, 0, (1 << 63) - 1)
    A.boolean("reply", "stream", stream)
    return A.strings("reply", "stop", stop)


class Conversation:
    """A chat with a model: OpenAI-style messages and a session that holds
    their tokens.

    Each turn renders the whole conversation with the chat template (the
    model's, or the built-in format template names) and calls
    Session.prefill_reuse, which keeps the longest prefix the session
    already holds: turn N evaluates only what is new since turn N-1 (the
    reply's last token and the new message; more if the template renders
    earlier messages differently once later ones exist).
    last_evaluated says how many tokens the last turn evaluated.

        with moonlm.Conversation(model, system="Be brief.") as chat:
            print(chat.send("Hi!", temperature=0))
            print(chat.send("And then?", temperature=0))

    One thread at a time; close() (or the with block) frees the session.
    """

    def __init__(
        self,
        model: Any,
        messages: Optional[Sequence[Mapping[str, Any]]] = None,
        *,
        system: Optional[str] = None,
        template: Optional[str] = None,
        n_ctx: Optional[int] = None,
        n_threads: Optional[int] = None,
        kv_type: str = "f16",
        _session: Any = None,
    ):
        from ._model import Model

        if not isinstance(model, Model):
            raise A.type_error("conversation", "model", f"must be a moonlm.Model, got {type(model).__name__}")
        self.model = model
        self.messages: List[Dict[str, str]] = []
        if system is not None:
            self.messages.append({"role": "system", "content": A.string("conversation", "system", system)})
        if messages is not None:
            A.messages("conversation", messages)
            self.messages += [{"role": m["role"], "content": m["content"] or ""} for m in messages]
        self.template = None if template is None else A.string("conversation", "template", template, nul=False)
        self.session = _session if _session is not None else model.session(n_ctx=n_ctx, n_threads=n_threads, kv_type=kv_type)
        self.last_evaluated = 0
        self.last_prompt_tokens = 0

    def close(self) -> None:
        """Frees the session (idempotent)."""
        self.session.close()

    def __enter__(self) -> "Conversation":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def add(self, role: str, content: str) -> None:
        """Appends a message without generating a reply."""
        A.messages("add", [{"role": role, "content": content}])
        self.messages.append({"role": role, "content": content})

    def prompt_tokens(self) -> List[int]:
        """The tokens of the conversation so far with the assistant's turn
        opened: the rendered template, special tokens parsed, BOS added
        unless the template wrote it."""
        text = self.model.apply_chat_template(self.messages, add_assistant=True, template=self.template)
        toks: List[int] = self.model.tokenize(text, add_special=True, parse_special=True)
        bos = self.model.bos_token_id
        if bos is not None and len(toks) >= 2 and toks[0] == bos and toks[1] == bos:
            toks = toks[1:]
        return toks

    def send(
        self,
        content: str,
        max_tokens: int = 256,
        *,
        role: str = "user",
        stream: bool = False,
        stop: Optional[Iterable[str]] = None,
        **sampling: Any,
    ) -> Union[str, Iterator[str]]:
        """Adds a message (role "user" by default) and returns the
        assistant's reply, which joins the history; see reply(). Without
        stream, a turn that fails before its reply (bad options, a context
        too small for the prompt) leaves the history as it was."""
        _check_options(max_tokens, stream, stop, sampling)
        self.add(role, content)
        n = len(self.messages)
        try:
            return self.reply(max_tokens, stream=stream, stop=stop, **sampling)
        except BaseException:
            if len(self.messages) == n:
                self.messages.pop()
            raise

    def reply(
        self,
        max_tokens: int = 256,
        *,
        stream: bool = False,
        stop: Optional[Iterable[str]] = None,
        **sampling: Any,
    ) -> Union[str, Iterator[str]]:
        """Generates the assistant's reply to the messages so far and
        appends it to them. Sampling options (temperature, top_k, top_p,
        min_p, the penalties, seed, typical_p, XTC, mirostat, DRY,
        logit_bias) are Sampler's; stop strings end the
        reply before them. With stream=True returns an iterator of text
        pieces; the reply joins the history when the iterator ends or is
        closed (with what was generated so far)."""
        from ._model import Sampler

        stops = _check_options(max_tokens, stream, stop, sampling)
        sampler = Sampler(**sampling)
        it = self._turn(max_tokens, sampler, stops)
        if stream:
            return it
        return "".join(it)

    def _turn(self, max_tokens: int, sampler: Any, stop: List[str]) -> Iterator[str]:
        """Holds all but the last prompt token through prefill_reuse, then
        runs the library's generation loop (moonlm_generate_ex) from the
        last one, which it evaluates."""
        sess = self.session
        parts: List[str] = []
        answered = False  # the reply joins the history only once the prompt was evaluated
        try:
            toks = self.prompt_tokens()
            self.last_prompt_tokens = len(toks)
            held = 0
            if len(toks) > 1:
                sess.prefill_reuse(toks[:-1], logits=False)
                held = sess.last_evaluated
            else:
                sess.rewind(0)
            for t in toks[:-1]:
                sampler.accept(t)
            stream = sess.generate(toks[-1:], max_tokens, sampler=sampler, stop=stop)
            try:
                for piece in stream:
                    answered = True
                    parts.append(piece)
                    yield piece
            except CancelledError as e:
                answered = answered or getattr(e, "completion", None) is not None
                raise
            finally:
                stream.close()
            answered = True
            self.last_evaluated = held + 1
        finally:
            sampler.close()
            if answered:
                self.messages.append({"role": "assistant", "content": "".join(parts)})

    def fork(self) -> "Conversation":
        """A copy that continues independently: the messages are copied and
        the session forked (its KV cache copied, nothing recomputed)."""
        return Conversation(
            self.model, [dict(m) for m in self.messages], template=self.template, _session=self.session.fork()
        )
