"""ScheduledDataLoaderRegistry: predicates, rechecks and a single-tick ticker.

java-dataloader 6.0.0's ScheduledDataLoaderRegistry starts one self-
rescheduling task per loader on every ``dispatchAll()`` in ticker mode, so
pending tasks grow with loaders × calls (200 loaders × 50 calls = 10,000 tasks
on one scheduler thread).  This registry keeps an atomic tick-scheduled flag
instead.

Guarantees:
- Ticker mode: after the first ``dispatch_all()`` (or ``reschedule_now()``),
  every loader whose predicate passes is dispatched at least every
  ``schedule`` until ``close()``, and **at most one tick is pending per
  registry**, however often ``dispatch_all()`` is called.  A tick clears the
  flag, re-arms itself, then dispatches, so a raising predicate or batch
  function cannot stop it.  One exception: a tick that finds every queued
  key told to a GraphQL execution that dispatches them itself (see
  ``_dispatch_scope``) does not re-arm — it could only leave them to it
  again.  The ticker *sleeps*, and is woken (re-armed) by a load that queues
  a key outside such an execution (``_Queued.add``), by the execution when
  it waits or ends, and by registering a loader that holds keys; an
  explicit ``dispatch_all()`` that left keys its predicates refused re-arms
  it too.  An idle registry keeps ticking.
- Non-ticker mode: a loader whose predicate says no is checked again after
  ``schedule`` until it dispatches, with at most one pending check per loader.
- A predicate that raises is logged and counts as "not now" for that loader.
- Lifecycle ``OPEN → CLOSED``.  ``close()`` is a one-way door: it cancels the
  pending tick and checks (the executor's pending count drops at once), and
  none runs after it; an explicit ``dispatch_all()`` after close still
  dispatches (predicates apply).
- A registry dropped without ``close()`` stops ticking once it is
  garbage-collected: pending tasks hold only a weak reference to it, and a
  finalizer cancels them.
- Scheduling happens under the registry's lock (the executor's ``schedule``
  runs no user code); predicates and batch functions never run under it.
- The batches of a tick or recheck run inside the job hooks
  (``_core/_job_hooks``: Django's connections are closed after them); an idle
  tick calls none.
"""
from __future__ import annotations

import datetime
import logging
import weakref
from typing import Any, Callable, Optional, Union

from ._core import DataLoader, _job_hooks, left_to_execution
from ._core import seconds as _seconds
from ._executor import ScheduledExecutor, ScheduledFuture, get_default_scheduled_executor
from ._instrumentation import DataLoaderInstrumentation
from ._predicates import DISPATCH_ALWAYS, DispatchPredicate, as_predicate
from ._registry import DataLoaderRegistry, check_entry

__all__ = ["ScheduledDataLoaderRegistry"]

_LOGGER = logging.getLogger("dataloader_sync")


class _Pending:
    """The registry's scheduled tasks, kept apart so a finalizer can cancel them
    without a reference to the registry.  Guarded by the registry's lock."""

    __slots__ = ("tick", "checks")

    def __init__(self) -> None:
        self.tick: Optional[ScheduledFuture[None]] = None  # set iff the tick-scheduled flag is up
        self.checks: dict[str, ScheduledFuture[None]] = {}  # non-ticker rechecks, one per loader

    def cancel_all(self) -> None:
        tasks: list[ScheduledFuture[None]] = list(self.checks.values())
        if self.tick is not None:
            tasks.append(self.tick)
        self.tick = None
        self.checks = {}
        for task in tasks:
            task.cancel()


def _tick(ref: weakref.ReferenceType[ScheduledDataLoaderRegistry]) -> None:
    registry = ref()
    if registry is not None:
        registry._tick()


def _recheck(ref: weakref.ReferenceType[ScheduledDataLoaderRegistry], name: str) -> None:
    registry = ref()
    if registry is not None:
        registry._recheck(name)


class ScheduledDataLoaderRegistry(DataLoaderRegistry):
    """A registry that dispatches on predicates, re-checking on a schedule.

    Thread-safe.  Create one per request: it creates no thread (ticks run on
    the shared ``ScheduledExecutor``).

    Args:
        scheduled_executor: where ticks and checks are scheduled (default
            ``get_default_scheduled_executor()``).
        schedule: seconds (or ``timedelta``) between ticks / checks.
        ticker_mode: keep dispatching every ``schedule`` after the first
            ``dispatch_all()`` until ``close()`` (needed for chained loads).
        dispatch_predicate: the registry-wide predicate, for loaders
            registered without one of their own.
        instrumentation: as ``DataLoaderRegistry``'s: for loaders registered
            without their own.

    Raises:
        ValueError, TypeError: a schedule that is not a finite number > 0, a
        predicate that is not callable, an executor without ``schedule``.
    """

    def __init__(
        self,
        *,
        scheduled_executor: Optional[ScheduledExecutor] = None,
        schedule: Union[float, datetime.timedelta] = 0.01,
        ticker_mode: bool = False,
        dispatch_predicate: Callable[[str, Any], bool] = DISPATCH_ALWAYS,
        instrumentation: Optional[DataLoaderInstrumentation] = None,
    ) -> None:
        super().__init__(instrumentation=instrumentation)
        if scheduled_executor is not None and not callable(getattr(scheduled_executor, "schedule", None)):
            raise TypeError("scheduled_executor must be a ScheduledExecutor or None")
        self._schedule = _seconds("schedule", schedule, positive=True)
        self._scheduler = scheduled_executor
        if not isinstance(ticker_mode, bool):
            raise TypeError("ticker_mode must be a bool")
        self._ticker_mode = ticker_mode
        self._predicate = as_predicate(dispatch_predicate, "dispatch_predicate")
        self._loader_predicates: dict[str, DispatchPredicate] = {}  # changed under _lock
        self._pending = _Pending()  # guarded by _lock
        self._ticking = False  # the ticker started (first dispatch_all/reschedule_now); written under _lock
        self._wake_failed = False  # _wake's failure was logged
        self._ref = weakref.ref(self)
        if ticker_mode:
            self._queued.wake = self._ref  # loads wake a sleeping ticker (see _tick)
        weakref.finalize(self, self._pending.cancel_all).atexit = False

    # -- configuration -----------------------------------------------------------
    @property
    def ticker_mode(self) -> bool:
        return self._ticker_mode

    @property
    def schedule(self) -> float:
        """Seconds between ticks / checks."""
        return self._schedule

    @property
    def scheduled_executor(self) -> ScheduledExecutor:
        if self._scheduler is None:
            self._scheduler = get_default_scheduled_executor()
        return self._scheduler

    def register(self, name: str, loader: DataLoader[Any, Any],
                 predicate: Optional[Callable[[str, Any], bool]] = None
                 ) -> ScheduledDataLoaderRegistry:
        """Register *loader*; *predicate*, when given, is final for it."""
        checked = None if predicate is None else as_predicate(predicate)
        check_entry(name, loader)
        with self._lock:  # one acquisition: registering 200 loaders per request stays cheap
            self._put_locked(name, loader)
            if checked is None:
                self._loader_predicates.pop(name, None)
            else:
                self._loader_predicates[name] = checked
        if loader.dispatch_depth:
            self._wake()
        return self

    def unregister(self, name: str) -> ScheduledDataLoaderRegistry:
        super().unregister(name)
        with self._lock:
            self._loader_predicates.pop(name, None)
            check = self._pending.checks.pop(name, None)
        if check is not None:
            check.cancel()
        return self

    # -- predicates ----------------------------------------------------------------
    def _should_dispatch(self, name: str, loader: DataLoader[Any, Any]) -> bool:
        predicate = self._loader_predicates.get(name, self._predicate)
        if predicate is DISPATCH_ALWAYS:  # the common per-loader predicate: no call on the tick's path
            return True
        try:
            return predicate(name, loader)
        except Exception:
            _LOGGER.exception("dispatch predicate %r raised for loader %r; not dispatching it now", predicate, name)
            return False

    # -- dispatching ---------------------------------------------------------------
    def dispatch_all_with_count(self) -> int:
        """Dispatch every loader whose predicate passes; arm the tick (ticker mode)
        or a recheck for each loader that may not dispatch yet.  Return the keys sent."""
        total = 0
        refused: list[str] = []
        walk = self._walk_queued()
        try:
            for name, loader in walk:
                if self._should_dispatch(name, loader):
                    total += loader.dispatch_count()
                else:
                    refused.append(name)
        finally:
            walk.close()
            self._queued.add_all(refused)  # still queued: the next dispatch asks again
        if self._ticker_mode:
            if refused or not self._ticking:
                self._arm_tick()
            # else a ticker asleep (see _tick) stays so: this dispatch sent all it may send
        elif refused:
            self._arm_checks(refused)
        return total

    def dispatch_all_immediately(self) -> None:
        """Dispatch every loader now, ignoring predicates; schedule nothing."""
        self.dispatch_all_with_count_immediately()

    def dispatch_all_with_count_immediately(self) -> int:
        """As ``dispatch_all_immediately()``; return the keys sent."""
        return super().dispatch_all_with_count()

    def reschedule_now(self) -> None:
        """Ticker mode: arm the tick.  Otherwise: a check for every loader."""
        if self._ticker_mode:
            self._arm_tick()
        else:
            self._arm_checks([name for name, _ in self._snapshot()])

    # -- the tick (ticker mode) ----------------------------------------------------------
    def _arm_tick(self) -> None:
        if self._pending.tick is not None or self._closed:
            return  # fast path: the flag is up (or the door is shut)
        with self._lock:
            if self._pending.tick is None and not self._closed:
                self._ticking = True
                self._pending.tick = self.scheduled_executor.schedule(_tick, self._schedule, self._ref)

    def _wake(self) -> None:
        """Re-arm the ticker if it started and sleeps (see ``_tick``); a no-op otherwise.

        Called from ``load()`` and from an execution's end: an executor that
        refuses the tick (shut down) is logged, once per registry, not raised
        there.
        """
        if self._ticking and self._pending.tick is None and not self._closed:
            try:
                self._arm_tick()
            except Exception:
                if not self._wake_failed:
                    self._wake_failed = True
                    _LOGGER.exception("%r: could not re-arm its tick (logged once per registry)", self)

    def _left_to_executions(self) -> bool:
        """Every loader with queued keys was told to a GraphQL execution that dispatches it itself (a racy look)."""
        loaders = self._loaders
        for name in self._queued.peek():
            loader = loaders.get(name)
            if loader is None:
                continue
            if not left_to_execution(loader):  # the loader's seam for ticks (see _listeners)
                return False
        return True

    def _tick(self) -> None:
        with self._lock:
            self._pending.tick = None  # clear the flag ...
        if self._closed:
            return
        if self._queued and self._left_to_executions():
            # The ticker sleeps: every queued key belongs to an execution at
            # work, which dispatches it at the end of its level (see
            # _dispatch_scope).  A load outside such an execution wakes it
            # (_Queued.add), and so does the execution when it ends.  The
            # flag was cleared first: a wake from now on re-arms it.
            return
        self._arm_tick()  # ... re-arm first, so nothing below can stop the ticker
        if not self._queued:  # an idle registry: nothing else to do (a racy peek: see _Queued)
            return
        refused: list[str] = []
        walk = self._walk_queued()
        # A tick runs on the scheduled executor's thread, not a request's: the job hooks around its batches.
        afters = _job_hooks.begin() if _job_hooks.hooks else None
        try:
            for name, loader in walk:
                if left_to_execution(loader):
                    # A GraphQL execution at work will dispatch it at the end of
                    # its level (see _dispatch_scope): one batch per level.
                    refused.append(name)
                elif self._should_dispatch(name, loader):
                    try:
                        loader.dispatch_count()
                    except Exception:
                        _LOGGER.exception("dispatch of loader %r raised during a tick", name)
                else:
                    refused.append(name)
        finally:
            walk.close()
            self._queued.add_all(refused)  # still queued: the next tick asks again
            if afters:
                _job_hooks.end(afters)

    # -- rechecks (non-ticker mode) ------------------------------------------------------
    def _arm_checks(self, names: list[str]) -> None:
        with self._lock:
            if self._closed:
                return
            checks = self._pending.checks
            for name in names:
                if name not in checks:
                    checks[name] = self.scheduled_executor.schedule(_recheck, self._schedule, self._ref, name)

    def _recheck(self, name: str) -> None:
        with self._lock:
            self._pending.checks.pop(name, None)
        if self._closed:
            return
        loader = self.get(name)
        if loader is None:
            return
        if self._should_dispatch(name, loader):
            afters = _job_hooks.begin() if _job_hooks.hooks else None  # (as a tick's)
            try:
                loader.dispatch_count()
            finally:
                if afters:
                    _job_hooks.end(afters)
        else:
            self._arm_checks([name])

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        """Stop ticking and rechecking; idempotent.  ``dispatch_all()`` still dispatches."""
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, _Pending()
        pending.cancel_all()

    def __repr__(self) -> str:
        state = "CLOSED" if self._closed else "OPEN"
        return (f"<ScheduledDataLoaderRegistry {state} loaders={len(self)} ticker_mode={self._ticker_mode} "
                f"schedule={self._schedule}>")
