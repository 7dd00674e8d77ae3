"""ScheduledExecutor: delayed and periodic tasks over any concurrent.futures executor.

Guarantees:
- One daemon timer thread per ScheduledExecutor, holding a heap of
  ``(due, seq, entry)``; ``seq`` (an ``itertools.count``) runs equal due times
  in submission order.  The timer thread never runs user code: it hands due
  tasks to the wrapped executor, so a slow task cannot delay anyone's tick.
- Cancellation is lazy: ``cancel()`` marks the entry and drops the pending
  count at once; the heap is rebuilt when stale entries outnumber live ones.
- Runs of one periodic task never overlap: the next run is put on the heap
  only after the previous one has returned.  A periodic task that raises
  stops repeating; its future holds the exception and the failure is logged.
- Nothing hangs: ``shutdown()`` cancels every task still waiting and every
  periodic task; a run the wrapped executor drops on its own shutdown cancels
  its future.  The timer thread holds no reference to the ScheduledExecutor:
  one that is garbage-collected stops its thread.
- ``get_default_scheduled_executor()`` is shared by every registry, bounded
  (a timer thread and four workers), survives ``os.fork()`` (the child gets a
  fresh timer thread and pool; tasks that were running at the fork do not
  continue there) and never holds up interpreter exit.
"""
from __future__ import annotations

import concurrent.futures as cf
import heapq
import itertools
import logging
import os
import threading
import time
import weakref
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, PENDING, RUNNING
from typing import Any, Callable, List, Optional, Tuple

from ._future import Future
from ._time import Delay as Delay
from ._time import seconds as _seconds
from ._time import wait_timeout

__all__ = ["ScheduledExecutor", "ScheduledFuture", "get_default_scheduled_executor"]

_LOGGER = logging.getLogger("dataloader_sync")
_clock = time.monotonic
_names = itertools.count(1)
_timers: "weakref.WeakSet[_Timer]" = weakref.WeakSet()

class _Entry:
    """A task on the heap.  Fields other than ``future`` are guarded by the timer's lock."""

    __slots__ = ("fn", "args", "kwargs", "future", "period", "fixed_rate", "due", "in_heap")

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict, period: Optional[float], fixed_rate: bool):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.future: ScheduledFuture = None  # type: ignore[assignment]
        self.period = period
        self.fixed_rate = fixed_rate
        self.due = 0.0
        self.in_heap = False


class ScheduledFuture(Future):
    """The future of a scheduled task.

    A one-shot task's future completes with its result; a periodic task's
    future stays pending until it is cancelled, raises, or the executor shuts
    down.  ``cancel()`` succeeds until a one-shot task starts, and at any time
    for a periodic task (a run in progress finishes, no new run starts).
    """

    def __init__(self, timer: "_Timer", entry: _Entry) -> None:
        super().__init__()
        self._timer = timer
        self._entry = entry

    def delay(self) -> float:
        """Seconds until the next run (negative when overdue, 0.0 when done)."""
        return 0.0 if self.done() else self._entry.due - _clock()

    @property
    def periodic(self) -> bool:
        return self._entry.period is not None

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        if self._timer.discard(self._entry) or self._entry.period is not None:
            # It will never reach a worker that would notify waiters, so
            # concurrent.futures.wait() must hear of the cancellation now.
            self._notify_cancelled()
        return True

    def _notify_cancelled(self) -> None:
        with self._lock:
            if self._state != CANCELLED:
                return
            self._state = CANCELLED_AND_NOTIFIED
            for waiter in self._w or ():
                waiter.add_cancelled(self)

    def _start(self) -> bool:
        """Mark a one-shot run as started; False (waiters notified) if it was cancelled."""
        with self._lock:
            if self._state == PENDING:
                self._state = RUNNING
                return True
        self._notify_cancelled()
        return False


class _Timer:
    """The timer thread's state.  The thread refers to this, never to the ScheduledExecutor."""

    def __init__(self, executor: cf.Executor, owned: bool, name: str, max_workers: Optional[int]) -> None:
        self.executor = executor
        self.owned = owned
        self.name = name
        self.max_workers = max_workers
        self._init_locks()
        self.heap: List[Tuple[float, int, _Entry]] = []
        self.seq = itertools.count()
        self.live = 0  # entries in the heap that are not cancelled: the pending count
        self.queued = 0  # entries handed to the executor whose run has not started
        self.running_periodic: "set[_Entry]" = set()
        self.task_count = 0
        self.completed_count = 0
        self.shutdown_flag = False
        self.thread: Optional[threading.Thread] = None
        # True while the wrapped executor refuses tasks (a drop was logged);
        # read and written by the timer thread only.
        self.refusing = False
        _timers.add(self)

    def _init_locks(self) -> None:
        # lock guards heap, live, running_periodic, the counts, shutdown_flag,
        # thread and every _Entry's due/in_heap.  deadline_changed signals the
        # timer thread that the earliest due time moved or shutdown began.
        self.lock = threading.Lock()
        self.deadline_changed = threading.Condition(self.lock)

    # -- heap -------------------------------------------------------------------
    def push_locked(self, entry: _Entry, due: float) -> None:
        entry.due = due
        entry.in_heap = True
        self.live += 1
        self.task_count += 1
        heapq.heappush(self.heap, (due, next(self.seq), entry))
        if self.heap[0][2] is entry:
            self.deadline_changed.notify()
        if self.thread is None:
            self.thread = threading.Thread(target=self.run, name=f"{self.name}-timer", daemon=True)
            self.thread.start()

    def discard(self, entry: _Entry) -> bool:
        """Take *entry* off the heap; True if it was there."""
        with self.lock:
            if not entry.in_heap:
                return False
            entry.in_heap = False
            self.live -= 1
            if len(self.heap) > 2 * self.live + 16:
                # Stale entries outnumber live ones: rebuild without them.
                self.heap = [item for item in self.heap if item[2].in_heap]
                heapq.heapify(self.heap)
            return True

    def schedule(self, entry: _Entry, delay: float) -> None:
        with self.lock:
            if self.shutdown_flag:
                raise RuntimeError("cannot schedule new tasks after shutdown")
            self.push_locked(entry, _clock() + max(delay, 0.0))

    # -- the timer thread -----------------------------------------------------------
    def run(self) -> None:
        while True:
            due: List[_Entry] = []
            with self.lock:
                while not due:
                    if self.shutdown_flag:
                        return
                    now = _clock()
                    heap = self.heap
                    while heap and (heap[0][0] <= now or not heap[0][2].in_heap):
                        entry = heapq.heappop(heap)[2]
                        if entry.in_heap:
                            entry.in_heap = False
                            self.live -= 1
                            self.queued += 1
                            due.append(entry)
                    if not due:
                        self.deadline_changed.wait(wait_timeout(heap[0][0] - now) if heap else None)
                executor = self.executor
            for entry in due:
                self.hand_over(executor, entry)

    def hand_over(self, executor: cf.Executor, entry: _Entry) -> None:
        try:
            pool_future = executor.submit(self.run_entry, entry)
        except BaseException as exc:  # the wrapped executor is shut down
            # Logged once per run of refusals: at interpreter exit the pool
            # refuses every task from then on (every tick of every registry
            # never closed), and one line says it all.
            if not self.refusing:
                self.refusing = True
                _LOGGER.warning("scheduled task %r dropped: %s (further tasks dropped until the executor "
                                "accepts one again are not logged)", entry.fn, exc)
            self._unqueue()
            entry.future._settle(None, exc)
            return
        self.refusing = False
        pool_future.add_done_callback(lambda pf: self._dropped_if_cancelled(pf, entry))

    def _unqueue(self) -> None:
        with self.lock:
            self.queued -= 1

    def _dropped_if_cancelled(self, pool_future: cf.Future, entry: _Entry) -> None:
        # The wrapped executor cancelled the run before it started (its own
        # shutdown with cancel_futures): the task will not run, so neither
        # will a periodic task's next run.
        if pool_future.cancelled():
            self._unqueue()
            entry.future.cancel()
            entry.future._notify_cancelled()

    # -- on the wrapped executor ------------------------------------------------------
    def run_entry(self, entry: _Entry) -> None:
        fut = entry.future
        self._unqueue()
        if entry.period is None:
            if not fut._start():
                return
            result, error = None, None
            try:
                result = entry.fn(*entry.args, **entry.kwargs)
            except BaseException as exc:
                error = exc
            with self.lock:  # counted before the outcome is published
                self.completed_count += 1
            fut._settle(result, error)
            return
        if fut.done():
            return
        with self.lock:
            self.running_periodic.add(entry)
        try:
            entry.fn(*entry.args, **entry.kwargs)
        except BaseException as exc:
            _LOGGER.exception("periodic task %r raised; it will not run again", entry.fn)
            with self.lock:
                self.running_periodic.discard(entry)
                self.completed_count += 1
            fut._settle(None, exc)
            return
        with self.lock:
            self.running_periodic.discard(entry)
            self.completed_count += 1
            if self.shutdown_flag or fut.done():
                return
            assert entry.period is not None
            due = entry.due + entry.period if entry.fixed_rate else _clock() + entry.period
            self.push_locked(entry, due)

    def submit_counted(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> cf.Future:
        with self.lock:
            if self.shutdown_flag:
                raise RuntimeError("cannot schedule new tasks after shutdown")
            executor = self.executor
            self.task_count += 1
        return executor.submit(self._run_counted, fn, args, kwargs)

    def _run_counted(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        # Counted before the result is published, so completed_count is
        # up to date once the caller sees the result.
        try:
            return fn(*args, **kwargs)
        finally:
            with self.lock:
                self.completed_count += 1

    # -- ending ----------------------------------------------------------------------
    def stop(self, wait: bool, cancel_futures: bool) -> None:
        with self.lock:
            first = not self.shutdown_flag
            self.shutdown_flag = True
            waiting = [item[2] for item in self.heap if item[2].in_heap]
            waiting.extend(self.running_periodic)
            thread = self.thread
            self.deadline_changed.notify_all()
        for entry in waiting:
            entry.future.cancel()
        if thread is not None and wait and thread is not threading.current_thread():
            thread.join()
        if first and self.owned:
            self.executor.shutdown(wait=wait, cancel_futures=cancel_futures)

    def after_fork_in_child(self) -> None:
        self._init_locks()
        self.thread = None
        self.running_periodic = set()
        if self.shutdown_flag:
            return
        if self.owned:
            self.executor = cf.ThreadPoolExecutor(self.max_workers, thread_name_prefix=f"{self.name}-worker")
        if self.live:
            self.thread = threading.Thread(target=self.run, name=f"{self.name}-timer", daemon=True)
            self.thread.start()


class ScheduledExecutor(cf.Executor):
    """A ``concurrent.futures.Executor`` with delayed and periodic tasks.

    Thread-safe.  Delays are seconds (``float``) or ``datetime.timedelta`` on
    ``time.monotonic``; a delay ≤ 0 means now.

    Args:
        executor: runs the tasks.  When omitted, the ScheduledExecutor owns a
            ``ThreadPoolExecutor`` (``max_workers`` threads) and shuts it down
            with itself; a given executor is never shut down by it.
        name: prefix of its threads' names (default ``dataloader-sync-N``).
        max_workers: size of the owned pool (ignored with ``executor``).
    """

    def __init__(self, executor: Optional[cf.Executor] = None, *, name: Optional[str] = None,
                 max_workers: Optional[int] = None) -> None:
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise TypeError("executor must be a concurrent.futures.Executor or None")
        if name is not None and not isinstance(name, str):
            raise TypeError("name must be a str or None")
        if max_workers is not None:
            if isinstance(max_workers, bool) or not isinstance(max_workers, int):
                raise TypeError("max_workers must be an int or None")
            if max_workers <= 0:
                raise ValueError("max_workers must be > 0")
        name = name or f"dataloader-sync-{next(_names)}"
        owned = executor is None
        if executor is None:
            executor = cf.ThreadPoolExecutor(max_workers, thread_name_prefix=f"{name}-worker")
        self._name = name
        self._timer = _Timer(executor, owned, name, max_workers)
        weakref.finalize(self, self._timer.stop, False, False).atexit = False

    @property
    def name(self) -> str:
        return self._name

    def _start(self, fn: Callable[..., Any], args: tuple, kwargs: dict, delay: float,
               period: Optional[float], fixed_rate: bool) -> ScheduledFuture:
        """Put a new task on the heap, due *delay* seconds from now (delays already checked)."""
        if not callable(fn):
            raise TypeError("fn must be callable")
        entry = _Entry(fn, args, kwargs, period, fixed_rate)
        entry.future = ScheduledFuture(self._timer, entry)
        self._timer.schedule(entry, delay)
        return entry.future

    def schedule(self, fn: Callable[..., Any], delay: Delay, /, *args: Any, **kwargs: Any) -> ScheduledFuture:
        """Run ``fn(*args, **kwargs)`` once, *delay* seconds from now.

        Raises:
            TypeError, ValueError: *fn* is not callable, *delay* is not a finite number.
            RuntimeError: after ``shutdown()``.
        """
        return self._start(fn, args, kwargs, _seconds("delay", delay), None, False)

    def schedule_at_fixed_rate(self, fn: Callable[..., Any], initial_delay: Delay, period: Delay, /,
                               *args: Any, **kwargs: Any) -> ScheduledFuture:
        """Run *fn* after *initial_delay*, then every *period* after the previous due time.

        A run that is late is followed at once by the next due one (as Java's);
        runs never overlap.

        Raises:
            ValueError: *period* ≤ 0, or a delay that is not finite.
        """
        first = _seconds("initial_delay", initial_delay)
        return self._start(fn, args, kwargs, first, _seconds("period", period, positive=True), True)

    def schedule_with_fixed_delay(self, fn: Callable[..., Any], initial_delay: Delay, delay: Delay, /,
                                  *args: Any, **kwargs: Any) -> ScheduledFuture:
        """Run *fn* after *initial_delay*, then *delay* after each run returns.

        Raises:
            ValueError: *delay* ≤ 0, or a delay that is not finite.
        """
        first = _seconds("initial_delay", initial_delay)
        return self._start(fn, args, kwargs, first, _seconds("delay", delay, positive=True), False)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:
        """Run *fn* now on the wrapped executor (counted in ``task_count``/``completed_count``)."""
        if not callable(fn):
            raise TypeError("fn must be callable")
        return self._timer.submit_counted(fn, args, kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Cancel every task waiting for its time and every periodic task; stop the timer.

        Then shut down an owned executor with the same arguments.  Idempotent.
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
        return self._timer.queued

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

    Created on first use: one timer thread and at most four worker threads,
    however many registries use it.
    """
    global _default
    executor = _default
    if executor is None:
        with _default_lock:
            executor = _default
            if executor is None:
                executor = _default = ScheduledExecutor(name="dataloader-sync-default", max_workers=4)
    return executor


def _after_fork_in_child() -> None:
    global _default_lock
    _default_lock = threading.Lock()
    for timer in list(_timers):
        timer.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
