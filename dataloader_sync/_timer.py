"""The timer thread of a ScheduledExecutor: its heap of tasks, their runs, ScheduledFuture.

``ScheduledExecutor`` (``_executor``) is the ``concurrent.futures.Executor``
facade; everything that happens on the timer thread and in a task's run
is here.

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
- Each run happens in a copy of the ``contextvars`` context of the caller
  that scheduled or submitted it (a periodic task's runs share one copy).
- Statistics (``statistics()``): runs, failures, slow runs; queue wait, run
  time and timer lateness over a bounded window of recent runs.
- Fork (``_fork``): in a child, tasks waiting for their time are still
  there and run; runs handed over or running at the fork are the parent's:
  a periodic task's next run is scheduled as usual, a one-shot's future is
  cancelled (its done-callbacks run after the fork, never inside it).  The child's timer thread and pool start afresh.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextvars
import dataclasses
import functools
import heapq
import itertools
import logging
import threading
from typing import Any, Callable, Generic, Optional, TypeVar

from ._core import (
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    PENDING,
    RUNNING,
    Clock,
    Future,
    _fork,
    abandon_in_child,
    renew_lock_in_child,
    settle,
    wait_timeout,
)
from ._executor_statistics import ExecutorStatistics, Window

__all__ = ["Entry", "ScheduledFuture", "Timer"]

_LOGGER = logging.getLogger("dataloader_sync")
T = TypeVar("T")


class Entry:
    """A task.  Fields other than ``future`` and ``ctx`` are guarded by the timer's lock."""

    __slots__ = ("fn", "args", "kwargs", "ctx", "future", "period", "fixed_rate", "due", "in_heap")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 period: Optional[float], fixed_rate: bool):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        # Each run happens in this copy of the scheduling caller's context (as
        # asyncio's call_later): request-scoped contextvars follow the task.
        self.ctx = contextvars.copy_context()
        self.future: ScheduledFuture[Any] = None  # type: ignore[assignment]
        self.period = period
        self.fixed_rate = fixed_rate
        self.due = 0.0  # the due time of the next (or current) run
        self.in_heap = False


class ScheduledFuture(Future[T], Generic[T]):
    """The future of a scheduled task: a ``Future`` of what the task returns.

    A one-shot task's future completes with its result; a periodic task's
    future stays pending until it is cancelled, raises, or the executor shuts
    down.  ``cancel()`` succeeds until a one-shot task starts, and at any time
    for a periodic task (a run in progress finishes, no new run starts).
    """

    def __init__(self, timer: Timer, entry: Entry) -> None:
        super().__init__()
        self._timer = timer
        self._entry = entry

    def delay(self) -> float:
        """Seconds until the next run (negative when overdue, 0.0 when done)."""
        return 0.0 if self.done() else self._entry.due - self._timer.clock()

    @property
    def periodic(self) -> bool:
        return self._entry.period is not None

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        if self._timer.discard(self._entry) or self._timer.withdraw(self._entry) or self._entry.period is not None:
            # It will never reach a worker that would notify waiters (off the
            # heap, or withdrawn from the pool's queue, where run_entry will
            # find it gone), so
            # concurrent.futures.wait() must hear of the cancellation now.
            self._notify_cancelled()
        return True

    def _notify_cancelled(self) -> None:
        with self._lock:
            if self._state != CANCELLED:
                return
            self._state = CANCELLED_AND_NOTIFIED
            for waiter in self._waiter_list or ():
                waiter.add_cancelled(self)

    def _start(self) -> bool:
        """Mark a one-shot run as started; False (waiters notified) if it was cancelled."""
        with self._lock:
            if self._state == PENDING:
                self._state = RUNNING
                return True
        self._notify_cancelled()
        return False


def _task_name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a task's function (of the function a partial wraps)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    qualname = getattr(fn, "__qualname__", None)
    if qualname is None:
        return repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}.{qualname}" if module else qualname


class Timer:
    """The timer thread's state.  The thread refers to this, never to the ScheduledExecutor.

    An entry's life: on the heap (``pending_count``) -> due, handed to the
    executor (in ``queued``) -> running (in ``running``) -> done, or back on
    the heap for a periodic task's next run.
    """

    def __init__(self, executor: cf.Executor, owned: bool, name: str,
                 slow_task_threshold: Optional[float], clock: Clock) -> None:
        self.executor = executor
        self.owned = owned
        self.name = name
        self.clock = clock  # due times and timings; called under lock (see ScheduledExecutor)
        self.slow_task_threshold = slow_task_threshold
        self._init_locks()
        self.heap: list[tuple[float, int, Entry]] = []
        self.seq = itertools.count()
        self.live = 0  # entries in the heap that are not cancelled: the pending count
        self.queued: set[Entry] = set()  # handed to the executor, not started
        self.running: set[Entry] = set()
        self.task_count = 0
        self.completed_count = 0
        self.failed_count = 0
        self.slow_count = 0
        self.queue_wait = Window()
        self.run_time = Window()
        self.lateness = Window()
        # Run observers (ScheduledExecutor.add_run_observer): replaced, never
        # mutated, under lock; read without it by each run (one tuple read).
        self.observers: tuple[Callable[[float, float], None], ...] = ()
        self.shutdown_flag = False
        self.thread: Optional[threading.Thread] = None
        # True while the wrapped executor refuses tasks (a drop was logged).
        # No lock: a race between hand-overs only decides whether to log.
        self.refusing = False
        # Tracked after an owned pool (created first), so a forked child
        # repairs the pool before this timer starts handing work to it.
        _fork.track(self)

    def _init_locks(self) -> None:
        # lock guards heap, live, queued, running, the counts and windows,
        # shutdown_flag, thread and every Entry's due/in_heap.
        # deadline_changed signals the timer thread that the earliest due
        # time moved or shutdown began.
        self.lock = threading.Lock()
        self.deadline_changed = threading.Condition(self.lock)

    # -- heap -------------------------------------------------------------------
    def push_locked(self, entry: Entry, due: float) -> None:
        entry.due = due
        entry.in_heap = True
        self.live += 1
        self.task_count += 1
        heapq.heappush(self.heap, (due, next(self.seq), entry))
        if self.heap[0][2] is entry:
            self.deadline_changed.notify()
        if self.thread is None:
            self._start_thread_locked()

    def _start_thread_locked(self) -> None:
        self.thread = threading.Thread(target=self.run, name=f"{self.name}-timer", daemon=True)
        self.thread.start()

    def discard(self, entry: Entry) -> bool:
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

    def withdraw(self, entry: Entry) -> bool:
        """Take *entry* out of ``queued`` (handed to the executor, not started); True if it was there.

        Its run then does nothing (``run_entry`` finds it gone), so a
        cancelled task no longer counts in ``queued_count`` while it waits
        for a pool thread.
        """
        with self.lock:
            if entry not in self.queued:
                return False
            self.queued.discard(entry)
            return True

    def schedule(self, entry: Entry, delay: float) -> None:
        with self.lock:
            if self.shutdown_flag:
                raise RuntimeError("cannot schedule new tasks after shutdown")
            self.push_locked(entry, self.clock() + max(delay, 0.0))

    def wake(self) -> None:
        with self.lock:
            self.deadline_changed.notify_all()

    def run_now(self, entry: Entry) -> None:
        """Hand *entry* to the executor at once (``submit``), bypassing the heap."""
        with self.lock:
            if self.shutdown_flag:
                raise RuntimeError("cannot schedule new tasks after shutdown")
            entry.due = self.clock()
            self.task_count += 1
            self.queued.add(entry)
            executor = self.executor
        self.hand_over(executor, entry)

    # -- the timer thread -----------------------------------------------------------
    def run(self) -> None:
        while True:
            due: list[Entry] = []
            with self.lock:
                while not due:
                    if self.shutdown_flag:
                        return
                    now = self.clock()
                    heap = self.heap
                    while heap and (heap[0][0] <= now or not heap[0][2].in_heap):
                        entry = heapq.heappop(heap)[2]
                        if entry.in_heap:
                            entry.in_heap = False
                            self.live -= 1
                            self.queued.add(entry)
                            self.lateness.add(now - entry.due)
                            due.append(entry)
                    if not due:
                        self.deadline_changed.wait(wait_timeout(heap[0][0] - now) if heap else None)
                executor = self.executor
            for entry in due:
                self.hand_over(executor, entry)

    def hand_over(self, executor: cf.Executor, entry: Entry) -> None:
        if self.owned:
            # Our own pool: no Future per run; shutdown and fork are handled
            # through ``queued`` (see stop and _after_fork_in_child).
            try:
                executor.execute(self.run_entry, entry)  # type: ignore[attr-defined]
                self.refusing = False
                return
            except RuntimeError as exc:  # shut down meanwhile
                self._drop(entry, exc)
                return
        try:
            pool_future = executor.submit(self.run_entry, entry)
        except BaseException as exc:  # the wrapped executor is shut down
            self._drop(entry, exc)
            return
        self.refusing = False
        pool_future.add_done_callback(lambda pf: self._dropped_if_cancelled(pf, entry))

    def _drop(self, entry: Entry, exc: BaseException) -> None:
        # Logged once per run of refusals: at interpreter exit the pool
        # refuses every task from then on (every tick of every registry
        # never closed), and one line says it all.
        if not self.refusing:
            self.refusing = True
            _LOGGER.warning("scheduled task %r dropped: %s (further tasks dropped until the executor "
                            "accepts one again are not logged)", entry.fn, exc)
        with self.lock:
            self.queued.discard(entry)
        settle(entry.future, None, exc)

    def _dropped_if_cancelled(self, pool_future: cf.Future[Any], entry: Entry) -> None:
        # The wrapped executor cancelled the run before it started (its own
        # shutdown with cancel_futures): the task will not run, so neither
        # will a periodic task's next run.
        if pool_future.cancelled():
            with self.lock:
                if entry not in self.queued:
                    return  # dealt with already (a fork)
                self.queued.discard(entry)
            entry.future.cancel()
            entry.future._notify_cancelled()

    # -- on the wrapped executor ------------------------------------------------------
    def run_entry(self, entry: Entry) -> None:
        fut = entry.future
        with self.lock:
            if entry not in self.queued:
                return  # cancelled by shutdown, or a run of the parent's in a forked child
            self.queued.discard(entry)
            self.running.add(entry)
            start = self.clock()
            waited = start - entry.due
        periodic = entry.period is not None
        started = (not fut.done()) if periodic else fut._start()
        if not started:
            with self.lock:
                self.running.discard(entry)
            return
        result, error = None, None
        try:
            result = entry.ctx.run(entry.fn, *entry.args, **entry.kwargs)
        except BaseException as exc:
            error = exc
        took = self.clock() - start
        threshold = self.slow_task_threshold
        slow = threshold is not None and took > threshold
        with self.lock:  # counted before the outcome is published
            self.running.discard(entry)
            self.completed_count += 1
            self.queue_wait.add(waited)
            self.run_time.add(took)
            if error is not None:
                self.failed_count += 1
            if slow:
                self.slow_count += 1
            if periodic and error is None and not (self.shutdown_flag or fut.done()):
                assert entry.period is not None
                self.push_locked(entry, entry.due + entry.period if entry.fixed_rate else self.clock() + entry.period)
        if slow:
            _LOGGER.warning("slow task: %s took %.3f s (slow_task_threshold is %g s)",
                            _task_name(entry.fn), took, threshold)
        observers = self.observers
        if observers:
            self._observe(observers, waited, took)
        if not periodic:
            settle(fut, result, error)
        elif error is not None:
            _LOGGER.error("periodic task %r raised; it will not run again", entry.fn, exc_info=error)
            settle(fut, None, error)

    def _observe(self, observers: tuple[Callable[[float, float], None], ...], waited: float, took: float) -> None:
        for observer in observers:
            try:
                observer(waited, took)
            except Exception:
                _LOGGER.exception("run observer %r raised; ignored", observer)

    # -- inspection ----------------------------------------------------------------
    def statistics(self) -> ExecutorStatistics:
        with self.lock:
            stats = ExecutorStatistics(
                tasks_run=self.completed_count, tasks_failed=self.failed_count,
                slow_tasks=self.slow_count, pending=self.live, queued=len(self.queued),
                queue_wait=self.queue_wait.snapshot(), run_time=self.run_time.snapshot(),
                timer_lateness=self.lateness.snapshot(),
            )
        if self.owned:
            stats = dataclasses.replace(stats, pool=self.executor.statistics())  # type: ignore[attr-defined]
        return stats

    # -- ending ----------------------------------------------------------------------
    def stop(self, wait: bool, cancel_futures: bool) -> None:
        with self.lock:
            first = not self.shutdown_flag
            self.shutdown_flag = True
            waiting = [item[2] for item in self.heap if item[2].in_heap]
            # Periodic tasks stop; one-shots already handed over still run,
            # unless cancel_futures drops them from our own pool.
            waiting.extend(e for e in self.running if e.period is not None)
            dropped = [e for e in self.queued if e.period is not None or (cancel_futures and self.owned)]
            self.queued.difference_update(dropped)
            waiting.extend(dropped)
            thread = self.thread
            self.deadline_changed.notify_all()
        for entry in waiting:
            entry.future.cancel()
            entry.future._notify_cancelled()
        if thread is not None and wait and thread is not threading.current_thread():
            thread.join()
        if self.owned and (first or wait or cancel_futures):
            # Every call, not the first only: a shutdown(wait=True) after a
            # shutdown(wait=False) waits for the pool, as ThreadPoolExecutor's does.
            self.executor.shutdown(wait=wait, cancel_futures=cancel_futures)

    # -- fork --------------------------------------------------------------------------
    def _before_fork(self) -> None:
        self.lock.acquire()

    def _after_fork_in_parent(self) -> None:
        self.lock.release()

    def _after_fork_in_child(self) -> None:
        # Only the forking thread exists here.  What waits on the heap is the
        # child's too (as the rest of memory is).  Runs handed over or running
        # at the fork are the parent's: a periodic task goes back on the heap
        # for its next run; a one-shot's future is cancelled, never left hanging
        # (its done-callbacks -- a loader's, a then() chain's, the user's --
        # run after the hooks, on the repair thread: see _fork.soon).
        self._init_locks()
        self.thread = None
        in_flight = self.queued | self.running
        self.queued, self.running = set(), set()
        for entry in in_flight:
            fut = entry.future
            if entry.period is not None and not fut.done() and not self.shutdown_flag:
                # Its context may be "entered" by a parent's thread: a fresh copy.
                entry.ctx = entry.ctx.copy()
                renew_lock_in_child(fut)
                entry.due = entry.due + entry.period if entry.fixed_rate else self.clock() + entry.period
                entry.in_heap = True
                self.live += 1
                heapq.heappush(self.heap, (entry.due, next(self.seq), entry))
            else:
                abandon_in_child(fut)
        if self.live and not self.shutdown_flag:
            self._start_thread_locked()

