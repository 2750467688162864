"""Text plumbing for streaming: incremental detokenization and stop strings.

Pure Python, no library calls of its own, so it is tested without a model.
"""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Sequence, Union


def incomplete_utf8_tail(b: bytes) -> int:
    """The number of bytes at the end of b that start a UTF-8 character
    whose continuation bytes have not arrived yet (0 if b ends cleanly)."""
    n = len(b)
    for back in range(1, min(4, n) + 1):
        c = b[n - back]
        if c & 0xC0 == 0x80:  # continuation byte: keep looking for the lead
            continue
        if c >= 0xF8:
            return 0  # not a lead byte at all: invalid, waiting will not help
        if c >= 0xF0:
            need = 4
        elif c >= 0xE0:
            need = 3
        elif c >= 0xC0:
            need = 2
        else:
            return 0
        return back if back < need else 0
    return 0


class IncrementalDetokenizer:
    """Turns a stream of tokens into text pieces.

    Each piece is the difference between the detokenization of a short window
    of tokens with and without the newest ones, so the tokenizer's rules for
    joining pieces (SentencePiece's leading space, byte tokens that assemble
    a multi-byte character) apply exactly as they do to the whole text.
    A piece is released only when it ends on a complete UTF-8 character.
    """

    def __init__(self, detokenize: Callable[[Sequence[int]], bytes], context: Sequence[int]):
        self._detok = detokenize
        self._toks: List[int] = list(context[-4:])  # a little prompt for the joining rules
        self._read = len(self._toks)  # tokens [0, read) have been emitted (or are context)

    def push(self, token: int) -> str:
        """Adds a token; returns the text it completes (often "" for a partial character)."""
        self._toks.append(token)
        prev = self._detok(self._toks[: self._read]) if self._read else b""
        cur = self._detok(self._toks)
        # Joining rules only ever change the start of a window, so cur begins
        # with prev; if a tokenizer broke that, the length cut is still right.
        new = cur[len(prev) :]
        if incomplete_utf8_tail(new):
            return ""  # wait for the rest of the character
        # Slide the window: what was emitted becomes the context of the next piece.
        del self._toks[: self._read]
        self._read = len(self._toks)
        return new.decode("utf-8", "replace")

    def flush(self) -> str:
        """Whatever is held back (an unfinished character, as U+FFFD)."""
        if self._read == len(self._toks):
            return ""
        prev = self._detok(self._toks[: self._read]) if self._read else b""
        cur = self._detok(self._toks)
        self._read = len(self._toks)
        return cur[len(prev) :].decode("utf-8", "replace")


class StopFilter:
    """Cuts a stream of text before the first occurrence of any stop string.

    Text that could be the start of a stop string is held back until it is
    known not to be one, so a stop string split across pieces is caught and
    never shown.
    """

    def __init__(self, stop: Optional[Union[str, Iterable[str]]]):
        if stop is None:
            stops: List[str] = []
        elif isinstance(stop, str):
            stops = [stop]
        else:
            stops = [s for s in stop]
        for s in stops:
            if not isinstance(s, str):
                raise TypeError(f"stop strings must be str, got {type(s).__name__}")
        self._stops = [s for s in stops if s]
        self._held = ""
        self.done = False

    def push(self, text: str, final: bool = False) -> str:
        """Adds text; returns what can be shown now. final releases the rest."""
        if self.done:
            return ""
        if not self._stops:
            return text
        buf = self._held + text
        cut = -1
        for s in self._stops:
            i = buf.find(s)
            if i != -1 and (cut == -1 or i < cut):
                cut = i
        if cut != -1:
            self.done = True
            self._held = ""
            return buf[:cut]
        if final:
            self._held = ""
            return buf
        hold = 0
        for s in self._stops:
            for k in range(min(len(s) - 1, len(buf)), hold, -1):
                if buf.endswith(s[:k]):
                    hold = k
                    break
        self._held = buf[len(buf) - hold :]
        return buf[: len(buf) - hold]
