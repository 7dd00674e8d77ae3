"""ElasticPool: the thread pool the library owns, where a stuck task holds up no one.

A fixed pool of N threads has head-of-line blocking: N tasks stuck in a slow
database call hold every worker, and every other task -- another request's
tick -- waits as long as they are stuck.  Here a task that has been running
for ``stuck_after`` seconds no longer counts against the pool's capacity
(``workers``): when every counted worker is busy, the pool starts another
thread, up to ``max_threads``.  Light tasks thus keep the latency they have
with no stuck task at all, while bursts of light tasks still queue behind a
handful of threads instead of each getting one.

Guarantees:
- Capacity: a task starts at once on an idle thread if there is one;
  otherwise on a new thread while fewer than ``workers`` threads run a task
  that started less than ``stuck_after`` seconds ago (and fewer than
  ``max_threads`` threads exist); otherwise it waits in a FIFO queue.  A worker that finishes takes the queue's head; a
  monitor thread, alive only while tasks wait, starts a thread for the head
  when a running task crosses ``stuck_after``.
- Idle threads end: a thread with no task for ``idle_timeout`` seconds ends,
  whatever the pool's size; the most recently idle thread is reused first, so
  a pool that grew shrinks back.
- Daemon threads, never joined at interpreter exit (unlike the standard
  ``ThreadPoolExecutor``, whose workers are joined): a task stuck in user
  code does not hold up exit.  ``shutdown(wait=True)`` joins them.
- Fork-aware (see ``_fork``): in a child, the pool has no threads; tasks
  queued or running at the fork belong to the parent, and the child cancels
  the futures it holds of them, so none hangs; their done-callbacks run
  after the fork, on the repair thread, never inside ``os.fork()``.  The standard library's global
  shutdown lock is never taken.
- Thread-safe.  No user code runs under the pool's lock.
"""
from __future__ import annotations

import collections
import concurrent.futures as cf
import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ._core import Future, _fork, abandon_in_child, check_clock, seconds, settle, wait_timeout

__all__ = ["ElasticPool", "PoolStatistics"]

_LOGGER = logging.getLogger("dataloader_sync")

# A queued task: (fn, args, kwargs, future or None).  Tasks without a future
# (``execute``) are the owner's business, e.g. the ScheduledExecutor's runs.
_Task = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any], Optional[Future[Any]]]


@dataclass(frozen=True)
class PoolStatistics:
    """The threads of an ElasticPool, as of the ``statistics()`` call.

    Fields:
        threads: worker threads alive (busy + idle).
        busy_threads: threads running a task.
        stuck_threads: busy threads whose task started over ``stuck_after`` ago.
        idle_threads: threads waiting for a task.
        queued_tasks: tasks waiting for a thread.
        peak_threads: the most threads alive at once.
        threads_started: threads started over the pool's life.
        workers, max_threads: the pool's capacity and its bound on threads.
    """

    threads: int
    busy_threads: int
    stuck_threads: int
    idle_threads: int
    queued_tasks: int
    peak_threads: int
    threads_started: int
    workers: int
    max_threads: int


class _Worker:
    """One worker thread's hand-over slot.

    ``wake`` is held while the worker is idle: whoever hands it a task sets
    ``task`` (``None`` = end) and releases ``wake``.  ``started`` is the start
    time of its current task.  Both fields are guarded by the pool's lock.
    """

    __slots__ = ("wake", "task", "started", "thread")

    def __init__(self) -> None:
        self.wake = threading.Lock()
        self.wake.acquire()
        self.task: Optional[_Task] = None
        self.started = 0.0
        self.thread: Optional[threading.Thread] = None


class ElasticPool(cf.Executor):
    """A ``concurrent.futures.Executor`` that grows past stuck tasks and shrinks when idle.

    Thread-safe.

    Args:
        workers: threads that may run fresh tasks at once (the capacity).
            Every argument is checked at once (``TypeError``/``ValueError``
            naming it).
        name: prefix of thread names (``<name>-worker-<n>``, ``<name>-monitor``).
        max_threads: bound on threads, stuck ones included (default
            ``max(64, 2 * workers)``).
        stuck_after: seconds after which a running task no longer counts
            against ``workers``.
        idle_timeout: seconds after which an idle thread ends.
        clock: the monotonic clock a task's running time is measured on
            (``time.monotonic``), as its siblings' ``clock=``; it is read
            under the pool's lock, so it must be a plain clock function.
            The waits themselves are real time.
    """

    def __init__(self, workers: int, *, name: str, max_threads: Optional[int] = None,
                 stuck_after: float = 0.1, idle_timeout: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        for arg, value in (("workers", workers), ("max_threads", max_threads)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{arg} must be an int")
        if workers <= 0:
            raise ValueError("workers must be > 0")
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        self.workers = workers
        self.max_threads = max(64, 2 * workers) if max_threads is None else max_threads
        if self.max_threads < workers:
            raise ValueError("max_threads must be >= workers")
        self.stuck_after = seconds("stuck_after", stuck_after)
        if self.stuck_after < 0:
            raise ValueError("stuck_after must be >= 0")
        self.idle_timeout = wait_timeout(seconds("idle_timeout", idle_timeout, positive=True))
        check_clock("clock", clock)
        self._clock = clock
        self.name = name
        self._numbers = itertools.count(1)
        self._init_state()
        self._peak = 0
        self._started = 0
        _fork.track(self)

    def _init_state(self) -> None:
        # _lock guards every field below, the _Worker fields, _peak, _started.
        # tasks_waiting signals the monitor that the queue became non-empty or
        # the pool shut down.
        self._lock = threading.Lock()
        self._tasks_waiting = threading.Condition(self._lock)
        self._queue: collections.deque[_Task] = collections.deque()
        self._idle: list[_Worker] = []  # a stack: the most recently idle on top
        self._busy: set[_Worker] = set()
        self._exiting: set[threading.Thread] = set()  # ended workers, for shutdown's join
        self._monitor: Optional[threading.Thread] = None
        self._shutdown = False
        # Invariant: a thread is in _idle, in _busy, or on its way out.

    # -- submitting -------------------------------------------------------------
    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run ``fn(*args, **kwargs)``; return its Future (cancellable until it starts)."""
        future: Future[Any] = Future()
        self._put((fn, args, kwargs, future))
        return future

    def execute(self, fn: Callable[..., Any], /, *args: Any) -> None:
        """Run ``fn(*args)`` with no Future: its exceptions are logged.

        For owners that track their tasks themselves: a task queued when the
        pool shuts down with ``cancel_futures`` (or at a fork, in the child)
        is dropped without a word.
        """
        self._put((fn, args, {}, None))

    def _put(self, task: _Task) -> None:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._idle:
                worker = self._idle.pop()
                worker.task = task
                worker.started = self._clock()
                self._busy.add(worker)
                worker.wake.release()
                return
            if self._has_capacity_locked(self._clock()) and self._spawn_locked(task):
                return
            self._queue.append(task)
            if len(self._queue) == 1:
                self._start_monitor_locked()

    def _has_capacity_locked(self, now: float) -> bool:
        busy = self._busy
        if len(busy) + len(self._idle) >= self.max_threads:
            return False
        if len(busy) < self.workers:
            return True
        fresh_since = now - self.stuck_after
        counted = 0
        for worker in busy:
            if worker.started > fresh_since:
                counted += 1
        return counted < self.workers

    def _spawn_locked(self, task: _Task) -> bool:
        """Start a thread for *task*; False (nothing changed) if none can start."""
        worker = _Worker()
        worker.task = task
        worker.started = self._clock()
        thread = threading.Thread(target=self._work, args=(worker,), daemon=True,
                                  name=f"{self.name}-worker-{next(self._numbers)}")
        worker.thread = thread
        try:
            thread.start()
        except RuntimeError:  # out of threads, or the interpreter is exiting
            _LOGGER.warning("%s: could not start a thread; the task waits for a worker", self.name)
            return False
        self._busy.add(worker)
        self._started += 1
        self._peak = max(self._peak, len(self._busy) + len(self._idle))
        return True

    # -- the workers --------------------------------------------------------------
    def _work(self, worker: _Worker) -> None:
        lock = self._lock
        task = worker.task  # stays in worker.task while it runs (a fork cancels its future)
        while task is not None:
            fn, args, kwargs, future = task
            task = None
            if future is None:
                try:
                    fn(*args, **kwargs)
                except BaseException:
                    _LOGGER.exception("%s: task %r raised", self.name, fn)
            elif future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    settle(future, None, exc)
                else:
                    settle(future, result, None)
                result = None
            del fn, args, kwargs, future  # drop references before idling
            with lock:
                if self._queue:
                    task = worker.task = self._queue.popleft()
                    worker.started = self._clock()
                    if not self._queue and self._monitor is not None:
                        self._tasks_waiting.notify()  # the backlog is gone
                    continue
                worker.task = None
                self._busy.discard(worker)
                if self._shutdown:
                    self._ending_locked(worker)
                    return
                self._idle.append(worker)
            if not worker.wake.acquire(timeout=self.idle_timeout):
                with lock:
                    if worker in self._idle:  # nobody handed it a task: end
                        self._idle.remove(worker)
                        self._ending_locked(worker)
                        return
                # A task (or the end) was handed over as the wait timed out:
                # the release has happened (under the lock we just held).
                worker.wake.acquire()
            task = worker.task
        # Handed None: shutdown() has put this thread among the ending ones.

    def _ending_locked(self, worker: _Worker) -> None:
        # A thread that leaves _idle/_busy is remembered for join() (it may
        # be alive for a moment more); the ones that have ended are forgotten.
        self._exiting = {t for t in self._exiting if t.is_alive()}
        if worker.thread is not None:
            self._exiting.add(worker.thread)

    # -- the monitor ----------------------------------------------------------------
    def _start_monitor_locked(self) -> None:
        if self._monitor is not None:
            self._tasks_waiting.notify()
            return
        thread = threading.Thread(target=self._watch, daemon=True, name=f"{self.name}-monitor")
        try:
            thread.start()
        except RuntimeError:
            return  # workers still take the queue as they finish
        self._monitor = thread

    def _watch(self) -> None:
        """While tasks wait: start a thread for them when a running task becomes stuck."""
        with self._lock:
            while True:
                now = self._clock()
                while self._queue and self._has_capacity_locked(now):
                    task = self._queue.popleft()
                    if not self._spawn_locked(task):
                        self._queue.appendleft(task)
                        break
                if not self._queue:
                    # Nothing waits: linger a little for the next backlog, then end.
                    if self._shutdown or (not self._tasks_waiting.wait(self.idle_timeout) and not self._queue):
                        break
                    continue
                # Sleep until the next running task becomes stuck (for ever if
                # every one is stuck already and max_threads is reached: a
                # worker that finishes takes the head itself, and says when
                # the queue is empty).
                fresh = [w.started for w in self._busy if w.started > now - self.stuck_after]
                self._tasks_waiting.wait(min(fresh) + self.stuck_after - now if fresh else None)
            self._monitor = None
            self._exiting.add(threading.current_thread())

    # -- inspection -------------------------------------------------------------------
    def statistics(self) -> PoolStatistics:
        """A frozen snapshot of the pool's threads (see ``PoolStatistics``)."""
        with self._lock:
            now = self._clock()
            stuck = sum(1 for w in self._busy if w.started <= now - self.stuck_after)
            return PoolStatistics(
                threads=len(self._busy) + len(self._idle), busy_threads=len(self._busy),
                stuck_threads=stuck, idle_threads=len(self._idle), queued_tasks=len(self._queue),
                peak_threads=self._peak, threads_started=self._started,
                workers=self.workers, max_threads=self.max_threads,
            )

    # -- ending -------------------------------------------------------------------------
    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new tasks; let idle threads end; with *wait*, join every thread.

        With *cancel_futures*, tasks still queued are dropped (their futures
        cancelled); otherwise they run first, as with ``ThreadPoolExecutor``.
        Idempotent.
        """
        with self._lock:
            self._shutdown = True
            dropped: list[_Task] = []
            if cancel_futures:
                dropped = list(self._queue)
                self._queue.clear()
            idle, self._idle = self._idle, []
            for worker in idle:
                worker.task = None
                self._ending_locked(worker)
                worker.wake.release()
            self._tasks_waiting.notify_all()
        for task in dropped:
            if task[3] is not None:
                task[3].cancel()
        if wait:
            self.join()

    def join(self) -> None:
        """Wait until every thread of a shut-down pool has ended."""
        me = threading.current_thread()
        while True:
            with self._lock:
                threads = [w.thread for w in self._busy] + [w.thread for w in self._idle]
                threads += list(self._exiting)
                if self._monitor is not None:
                    threads.append(self._monitor)
                self._exiting.clear()
            alive = [t for t in threads if t is not None and t is not me and t.is_alive()]
            if not alive:
                return
            for thread in alive:
                thread.join()

    # -- fork ------------------------------------------------------------------------------
    def _before_fork(self) -> None:
        self._lock.acquire()

    def _after_fork_in_parent(self) -> None:
        self._lock.release()

    def _after_fork_in_child(self) -> None:
        # Only the forking thread exists here: no worker, no monitor.  The
        # tasks queued or running belong to the parent; futures the child
        # holds of them are cancelled, so that none hangs (their callbacks
        # run after the hooks: see Future._abandon_in_child).
        abandoned = [task[3] for task in self._queue]
        abandoned += [w.task[3] for w in self._busy if w.task is not None]  # running
        shutdown = self._shutdown
        self._init_state()
        self._shutdown = shutdown
        for future in abandoned:
            if future is not None:
                abandon_in_child(future)
