"""The part every object owning one library handle shares."""

from __future__ import annotations

from typing import Any, Callable, Optional

from ._errors import InvalidArgumentError


class OwnedHandle:
    """close(), use as a context manager and the closed check of an object
    whose handle is self._handle, freed by self._finalizer; _kind names the
    object in the error a closed one raises."""

    _kind = "object"
    _handle: Optional[int]
    _finalizer: Callable[[], Any]

    def close(self) -> None:
        self._handle = None
        self._finalizer()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _h(self, what: str) -> int:
        h = self._handle
        if h is None:
            raise InvalidArgumentError(1, f"{what}: the {self._kind} is closed")
        return h
