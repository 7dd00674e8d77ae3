"""The execution's dispatch scope: how other threads reach the request thread.

Guarantees:
- It is the only object of an execution that other threads touch, and they
  only append under its lock: a future's done-callback enqueues the
  placeholder it completes (``ready``); a load that queues a new key records
  its loader (``loader_queued``, called by the core's ``_listeners.announce``).
- The request thread takes what was reported and dispatches loaders only
  when it has nothing else to run, so one level of loads goes out as one
  batch per loader.
- Waiting is a ``Condition.wait`` that any ``ready``/``loader_queued`` ends;
  nothing polls.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Callable, Optional

from .._registry import DataLoaderRegistry

__all__ = ["ExecutionStalledError", "registry_of"]


class ExecutionStalledError(Exception):
    """Fields waited ``stall_timeout`` seconds while nothing could make progress."""


def registry_of(context_value: Any) -> Optional[DataLoaderRegistry]:
    """The registry the execution dispatches through, found in ``context_value``.

    The context itself, its ``loaders`` attribute, or its ``"loaders"`` key
    (a mapping context); None when there is none.
    """
    if isinstance(context_value, DataLoaderRegistry):
        return context_value
    if isinstance(context_value, Mapping):
        loaders = context_value.get("loaders")
    else:
        loaders = getattr(context_value, "loaders", None)
    return loaders if isinstance(loaders, DataLoaderRegistry) else None


class Scope:
    """Completions and loaders reported to one execution.

    Thread-safe: any thread may call ``ready`` and ``loader_queued``; only the
    request thread calls ``take``.
    """

    __slots__ = ("_lock", "_changed", "_ready", "_loaders", "_waiting", "_early", "dispatches_itself", "run")

    def __init__(self, run: Any = None) -> None:
        # The execution's Run, weakly (it holds this scope): what a loader's next-load hook asks of the
        # current execution (_reuse.on_next_load); None for a scope of no execution.
        self.run: Any = run
        # _lock guards _ready, _loaders, _waiting and _early.
        self._lock = threading.Lock()
        # _changed: _ready or _loaders became non-empty while the request thread waits.
        self._changed = threading.Condition(self._lock)
        self._ready: list[Any] = []  # placeholders whose future is done, in completion order
        self._loaders: dict[Any, None] = {}  # loaders with newly queued keys (an ordered set)
        self._waiting = False  # the request thread is in take(), waiting
        # Loaders that waits (a resolver's result()) dispatched early, and how
        # many times: the execution warns of them when it ends (early_dispatches).
        self._early: dict[Any, int] = {}
        # True while the request thread runs the execution (not while it waits,
        # not once it ended): it dispatches the loaders it was told of itself,
        # at the end of the level, so a registry's tick leaves them to it (see
        # _dispatch_scope).  Written by the request thread only; ticks read it
        # without a lock — a stale answer is harmless, because the execution
        # dispatches every queued key (its sweep) before it starts waiting.
        self.dispatches_itself = True

    def loader_queued(self, loader: Any) -> None:
        """A load queued a new key in *loader* (called by ``DataLoader`` in this scope)."""
        # Lock-free fast path: the loader is recorded and not yet taken, so a
        # dispatch that sends this (already queued) key is still to come, and
        # the request thread has news, so it is not waiting.
        if loader in self._loaders:
            return
        with self._lock:
            self._loaders[loader] = None
            if self._waiting:
                self._changed.notify()

    def dispatched_by_a_wait(self, loader: Any) -> None:
        """A resolver blocked on a load of *loader* and so dispatched it before the level ended."""
        with self._lock:
            self._early[loader] = self._early.get(loader, 0) + 1

    def early_dispatches(self) -> dict[Any, int]:
        """Hand out (and forget) the loaders waits dispatched early, with how many times."""
        with self._lock:
            early, self._early = self._early, {}
        return early

    def ready(self, pending: Any, _future: Any = None) -> None:
        """*pending*'s future is done: queue it for the request thread.

        Used as ``future.add_done_callback(functools.partial(scope.ready, pending))``.
        """
        with self._lock:
            self._ready.append(pending)
            if self._waiting:
                self._changed.notify()

    def take(self) -> tuple[list[Any], dict[Any, None]]:
        """Hand out (and forget) the completions and loaders reported so far."""
        with self._lock:
            ready, self._ready = self._ready, []
            loaders, self._loaders = self._loaders, {}
        return ready, loaders

    def wait(self, timeout: Optional[float], waiting: Optional[Callable[[], None]] = None) -> bool:
        """Wait until something is reported, at most *timeout* seconds (None: no limit).

        *waiting* is called once ``dispatches_itself`` is False, before the
        wait (the execution wakes sleeping tickers there).  Returns False
        when the time ran out with nothing reported.
        """
        self.dispatches_itself = False  # waiting: a tick may dispatch what is queued now
        try:
            if waiting is not None:
                waiting()
            with self._lock:
                self._waiting = True
                try:
                    return self._changed.wait_for(self._has_news, timeout)
                finally:
                    self._waiting = False
        finally:
            self.dispatches_itself = True

    def _has_news(self) -> bool:
        return bool(self._ready or self._loaders)
