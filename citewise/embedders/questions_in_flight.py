"""How many questions this process is answering right now, for the local embedder's choice of
threads: a question alone (a CLI ask, a quiet server) runs the model on every core; with others
in flight (a busy server) on one, since their retrieval, gate and drafting hold the other
core and a second model thread would wait for it. Counting the model's own runs is not enough:
under load they rarely overlap although the cores are full (88 against 121 requests/s at 50
clients, ``benchmarks/load.py``).

``Engine.retrieve``, ``decide`` and ``ask`` mark their thread (nested marks count once), and
``ask_stream`` marks each step of its stream: a streamed answer may be read a step at a time
from different threads (a server's thread pool), and between steps it runs nothing here.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_in_flight = 0
_depth = threading.local()


@contextmanager
def answering() -> Iterator[None]:
    """Mark this thread as answering one question while the block runs."""
    global _in_flight
    outer = getattr(_depth, "n", 0)
    _depth.n = outer + 1
    if outer == 0:
        with _lock:
            _in_flight += 1
    try:
        yield
    finally:
        _depth.n = outer
        if outer == 0:
            with _lock:
                _in_flight -= 1


def answering_here() -> bool:
    """Whether this thread is answering a question."""
    return getattr(_depth, "n", 0) > 0


def alone() -> bool:
    """Whether this thread answers the only question in flight in the process."""
    return getattr(_depth, "n", 0) > 0 and _in_flight == 1


def marks(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` runs inside ``answering()`` (for ``Engine``'s question methods)."""

    @functools.wraps(fn)
    def marked(*args: P.args, **kwargs: P.kwargs) -> R:
        with answering():
            return fn(*args, **kwargs)

    return marked


T = TypeVar("T")


def marked_steps(steps: Iterator[T]) -> Iterator[T]:
    """``steps``, each of them run inside ``answering()`` (for a streamed answer)."""
    while True:
        with answering():
            try:
                step = next(steps)
            except StopIteration:
                return
        yield step
