"""In-process progress events from a flow to whoever listens (the CLI's progress bar).

The flow reports phases and completed fold fits as its futures finish, in the flow's own process,
so this works with any task runner (threads or Dask). Events carry counts only, never data.
"""

from __future__ import annotations

from typing import Callable, Protocol


class Listener(Protocol):
    def phase(self, name: str, total: int | None = None) -> None: ...
    def advance(self, n: int = 1, cached: int = 0) -> None: ...


_listeners: list[Listener] = []


def subscribe(listener: Listener) -> Callable[[], None]:
    """Register a listener; returns a function that unregisters it."""
    _listeners.append(listener)
    return lambda: _listeners.remove(listener) if listener in _listeners else None


def phase(name: str, total: int | None = None) -> None:
    for listener in list(_listeners):
        listener.phase(name, total)


def advance(n: int = 1, cached: int = 0) -> None:
    """``n`` more units done, ``cached`` of them taken from Prefect's cache."""
    for listener in list(_listeners):
        listener.advance(n, cached)
