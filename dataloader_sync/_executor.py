"""ScheduledExecutor: delayed and periodic tasks over any concurrent.futures executor.

The timer thread, its heap and ScheduledFuture live in ``_timer``; this
module is the ``concurrent.futures.Executor`` facade over them and the
process-wide default executor.

Guarantees:
- Those of the timer thread and its heap (ordering, lazy cancellation,
  runs that never overlap, nothing hangs, contextvars, statistics, fork):
  see ``_timer``.
- An owned pool is an ``ElasticPool`` (``_pool``): a stuck task does not hold
  up the others, its daemon threads never hold up interpreter exit, idle
  ones end.  A given executor keeps its own semantics.
- ``get_default_scheduled_executor()`` is shared by every registry, bounded
  (a timer thread, four workers that may grow past stuck tasks to 64
  threads, and a monitor thread while tasks wait), survives ``os.fork()``
  and never holds up interpreter exit.
"""
from __future__ import annotations

import concurrent.futures as cf
import itertools
import os
import threading
import time
import weakref
from typing import Any, Callable, Optional, TypeVar

from ._core import Clock, P, _fork, check_callable, check_clock
from ._core import Delay as Delay
from ._core import seconds as _seconds
from ._executor_statistics import ExecutorStatistics
from ._pool import ElasticPool
from ._timer import Entry, Timer
from ._timer import ScheduledFuture as ScheduledFuture

__all__ = ["ScheduledExecutor", "ScheduledFuture", "get_default_scheduled_executor"]

_names = itertools.count(1)
T = TypeVar("T")

def _threshold(value: Optional[Delay]) -> Optional[float]:
    return None if value is None else _seconds("slow_task_threshold", value, positive=True)


class ScheduledExecutor(cf.Executor):
    """A ``concurrent.futures.Executor`` with delayed and periodic tasks.

    Thread-safe.  Delays are seconds (``float``) or ``datetime.timedelta`` on
    ``time.monotonic``; a delay ≤ 0 means now.  Each task runs in a copy of
    the ``contextvars`` context of the caller that scheduled or submitted it
    (as asyncio's ``loop.call_later``).

    Args:
        executor: runs the tasks.  When omitted, the ScheduledExecutor owns
            an elastic pool of daemon threads and shuts it down with itself:
            ``max_workers`` threads run fresh tasks, a task running for more
            than 0.1 s stops counting against them (the pool then grows, up to
            ``max(64, 2 * max_workers)`` threads), and a thread idle for 30 s
            ends.  A given executor is used as it is (its own queueing,
            thread and exit semantics) and never shut down by it.
        name: prefix of its threads' names (default ``dataloader-sync-N``).
        max_workers: capacity of the owned pool (ignored with ``executor``;
            default ``min(32, os.cpu_count() + 4)`` as ``ThreadPoolExecutor``).
        slow_task_threshold: seconds; a task run that takes longer logs one
            WARNING on the ``dataloader_sync`` logger naming the task's
            function and its duration, and counts in ``statistics()``.
            ``None`` (default): no check.  Settable later as an attribute.
        clock: returns the current time in seconds (``time.monotonic`` by
            default), as ``sched.scheduler(timefunc)``: due times, ``delay()``
            and the timings of ``statistics()`` are read on it, so tests can
            drive the executor with fake time (then call ``wake()`` after
            moving the clock).  It is called under the executor's lock: it
            must be quick, must not raise and must not call the executor.

    Raises:
        TypeError, ValueError: a bad argument.
    """

    #: ``submit`` runs each task in a copy of the submitting thread's ``contextvars`` context: a
    #: ``DataLoader``'s batch call submits its batch function as it is, not wrapped in a copy of its own.
    copies_context = True

    def __init__(self, executor: Optional[cf.Executor] = None, *, name: Optional[str] = None,
                 max_workers: Optional[int] = None, slow_task_threshold: Optional[Delay] = None,
                 clock: Clock = time.monotonic) -> None:
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise TypeError("executor must be a concurrent.futures.Executor or None")
        if name is not None and not isinstance(name, str):
            raise TypeError("name must be a str or None")
        if max_workers is not None:
            if isinstance(max_workers, bool) or not isinstance(max_workers, int):
                raise TypeError("max_workers must be an int or None")
            if max_workers <= 0:
                raise ValueError("max_workers must be > 0")
        threshold = _threshold(slow_task_threshold)
        check_clock("clock", clock)  # its first reading too: NaN would make every task never due
        name = name or f"dataloader-sync-{next(_names)}"
        owned = executor is None
        if executor is None:
            workers = max_workers or min(32, (os.cpu_count() or 1) + 4)
            executor = ElasticPool(workers, name=name)
        self._name = name
        self._timer = Timer(executor, owned, name, threshold, clock)
        weakref.finalize(self, self._timer.stop, False, False).atexit = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def slow_task_threshold(self) -> Optional[float]:
        """Seconds a run may take before it is logged and counted as slow (``None``: no check)."""
        return self._timer.slow_task_threshold

    @slow_task_threshold.setter
    def slow_task_threshold(self, value: Optional[Delay]) -> None:
        self._timer.slow_task_threshold = _threshold(value)

    def statistics(self) -> ExecutorStatistics:
        """A frozen snapshot: runs, failures, slow runs, timings, the owned pool's threads.

        See ``ExecutorStatistics``.
        """
        return self._timer.statistics()

    def add_run_observer(self, observer: Callable[[float, float], None]) -> None:
        """Call ``observer(queue_wait, run_time)`` after each task run (seconds, on ``clock``).

        The seam for metrics (``dataloader_sync.otel.instrument_executor``):
        ``queue_wait`` is due time (or ``submit()``) to start, ``run_time``
        start to end, as in ``statistics()``.  The observer runs on the thread
        that ran the task, after the run is counted and before its future is
        completed, outside the executor's lock; it must be quick.  One that
        raises is logged and ignored.  An executor without observers pays one
        attribute test per run.

        Raises:
            TypeError: *observer* is not callable.
        """
        check_callable("observer", observer)
        timer = self._timer
        with timer.lock:
            timer.observers = (*timer.observers, observer)

    def remove_run_observer(self, observer: Callable[[float, float], None]) -> None:
        """Stop calling *observer* (added by ``add_run_observer``); nothing if it is not there."""
        timer = self._timer
        with timer.lock:
            observers = list(timer.observers)
            if observer in observers:
                observers.remove(observer)
            timer.observers = tuple(observers)

    def wake(self) -> None:
        """Make the timer thread read the clock now: after a fake ``clock`` moved.

        With the default clock there is no need: the timer wakes by itself
        when the next task is due.
        """
        self._timer.wake()

    def _start(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], delay: float,
               period: Optional[float], fixed_rate: bool) -> ScheduledFuture[Any]:
        """Put a new task on the heap, due *delay* seconds from now (delays already checked)."""
        if not callable(fn):
            raise TypeError("fn must be callable")
        entry = Entry(fn, args, kwargs, period, fixed_rate)
        entry.future = ScheduledFuture(self._timer, entry)
        self._timer.schedule(entry, delay)
        return entry.future

    def schedule(self, fn: Callable[P, T], delay: Delay, /, *args: P.args, **kwargs: P.kwargs) -> ScheduledFuture[T]:
        """Run ``fn(*args, **kwargs)`` once, *delay* seconds from now.

        Raises:
            TypeError, ValueError: *fn* is not callable, *delay* is not a finite number.
            RuntimeError: after ``shutdown()``.
        """
        return self._start(fn, args, kwargs, _seconds("delay", delay), None, False)

    def schedule_at_fixed_rate(self, fn: Callable[P, object], initial_delay: Delay, period: Delay, /,
                               *args: P.args, **kwargs: P.kwargs) -> ScheduledFuture[None]:
        """Run *fn* after *initial_delay*, then every *period* after the previous due time.

        A run that is late is followed at once by the next due one (as Java's);
        runs never overlap.

        Raises:
            ValueError: *period* ≤ 0, or a delay that is not finite.
        """
        first = _seconds("initial_delay", initial_delay)
        return self._start(fn, args, kwargs, first, _seconds("period", period, positive=True), True)

    def schedule_with_fixed_delay(self, fn: Callable[P, object], initial_delay: Delay, delay: Delay, /,
                                  *args: P.args, **kwargs: P.kwargs) -> ScheduledFuture[None]:
        """Run *fn* after *initial_delay*, then *delay* after each run returns.

        Raises:
            ValueError: *delay* ≤ 0, or a delay that is not finite.
        """
        first = _seconds("initial_delay", initial_delay)
        return self._start(fn, args, kwargs, first, _seconds("delay", delay, positive=True), False)

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> ScheduledFuture[T]:
        """Run *fn* now on the wrapped executor (counted in ``task_count``/``completed_count``).

        Raises:
            TypeError: *fn* is not callable.
            RuntimeError: after ``shutdown()``.
        """
        if not callable(fn):
            raise TypeError("fn must be callable")
        entry = Entry(fn, args, kwargs, None, False)
        entry.future = ScheduledFuture(self._timer, entry)
        self._timer.run_now(entry)
        return entry.future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Cancel every task waiting for its time and every periodic task; stop the timer.

        Then shut down an owned executor with the same arguments.  Idempotent;
        as with ``ThreadPoolExecutor``, a ``shutdown(wait=True)`` after a
        ``shutdown(wait=False)`` waits for the owned executor's tasks.
        """
        self._timer.stop(wait, cancel_futures)

    @property
    def pending_count(self) -> int:
        """Tasks waiting for their time (cancelled ones are not counted)."""
        return self._timer.live

    @property
    def queued_count(self) -> int:
        """Tasks that are due and handed to the wrapped executor, but not started yet.

        ``pending_count + queued_count`` is what Java's
        ``ScheduledThreadPoolExecutor.getQueue().size()`` counts.
        """
        return len(self._timer.queued)

    @property
    def completed_count(self) -> int:
        """Task runs finished (each run of a periodic task counts once)."""
        return self._timer.completed_count

    @property
    def task_count(self) -> int:
        """Task runs ever scheduled or submitted (each periodic re-arm counts once)."""
        return self._timer.task_count

    @property
    def timer_thread(self) -> Optional[threading.Thread]:
        """The timer thread, once started (for measuring its CPU time)."""
        return self._timer.thread

    def __repr__(self) -> str:
        return f"<ScheduledExecutor {self._name} pending={self.pending_count}>"


_default: Optional[ScheduledExecutor] = None
_default_lock = threading.Lock()  # guards the creation of _default


def get_default_scheduled_executor() -> ScheduledExecutor:
    """The process-wide ScheduledExecutor that registries share by default.

    Created on first use, however many registries use it: one timer thread
    and an elastic pool of four workers (a task running over 0.1 s stops
    counting, so the pool may grow to 64 threads while tasks are stuck; idle
    threads end after 30 s).  To log slow tasks process-wide, set
    ``get_default_scheduled_executor().slow_task_threshold = seconds``.
    """
    global _default
    executor = _default
    if executor is None:
        with _default_lock:
            executor = _default
            if executor is None:
                executor = _default = ScheduledExecutor(name="dataloader-sync-default", max_workers=4)
    return executor


class _DefaultLock:
    """Repairs ``_default_lock`` in a forked child (another thread may have held it)."""

    def _after_fork_in_child(self) -> None:
        global _default_lock
        _default_lock = threading.Lock()


_default_lock_repair = _DefaultLock()
_fork.track(_default_lock_repair)
