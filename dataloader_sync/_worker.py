"""RestartableWorker: a thread that works while it is the worker's current thread.

A worker calls ``target()`` -- one bounded unit of work -- in a loop on a
thread of its own. Stopping and restarting do not set a flag that a thread
must notice and someone must reset: they change which thread is *current*,
and a thread ends as soon as, between two units, it sees it is no longer the
current one. So a restart is "make a new thread current"; the old thread
retires by itself after its unit.

Guarantees:

- Never two units at once: a thread begins a unit only when no other unit
  runs, so a new thread waits for its predecessor's unit to finish.
- An ``Exception`` from ``target()`` is logged with its traceback and the loop
  goes on after a back-off (10 ms, doubling per failure in a row, at most 1 s)
  that a stop or restart interrupts: a broken target cannot spin a core.
- A ``BaseException`` that ends a thread (``SystemExit`` and
  ``KeyboardInterrupt`` aside: they stop the worker normally) starts a new
  thread, unless more than ``max_restarts`` such crashes happened within
  ``restart_window`` seconds; then the worker gives up and stays stopped.
- ``stop()`` and ``wait()`` are woken by a Condition, never by polling.
- ``target()`` and log handlers never run under the worker's lock.
- After ``os.fork()`` the child's workers read as stopped and can be started.
"""
from __future__ import annotations

import collections
import enum
import itertools
import logging
import threading
import time
from typing import Callable

from ._core import Delay, _fork, check_clock, wait_timeout
from ._core import seconds as _seconds

__all__ = ["RestartableWorker", "WorkerState"]

logger = logging.getLogger("dataloader_sync")

_BACKOFF_FIRST = 0.01  # seconds after the first failure in a row
_BACKOFF_MAX = 1.0


def _backoff(failures_in_a_row: int) -> float:
    """Seconds to wait after ``failures_in_a_row`` (>= 1) failed units."""
    return min(_BACKOFF_FIRST * 2.0 ** min(failures_in_a_row - 1, 32), _BACKOFF_MAX)


class WorkerState(enum.Enum):
    """Where a ``RestartableWorker`` is in its lifecycle.

    ::

        STOPPED --start()--> RUNNING --stop()--> STOPPING --last unit done--> STOPPED
                             RUNNING --restart() / crash--> RUNNING (a new thread)
                             RUNNING --too many crashes--> GAVE_UP
        STOPPED, GAVE_UP --start() / restart()--> RUNNING
    """

    STOPPED = "stopped"
    RUNNING = "running"
    STOPPING = "stopping"  # no current thread, but a retired one is finishing its unit
    GAVE_UP = "gave up"  # stopped after too many crashes; see last_error


class RestartableWorker:
    """Call ``target()`` in a loop on a thread that can be stopped and restarted.

    ``target`` should do one bounded unit of work and return; to wait for
    work, it should call ``worker.wait(seconds)``, which returns True at once
    when the thread is asked to stop or is replaced. Threads are daemon
    threads named ``dataloader-sync-worker-<name>-<n>``.

    Each thread holds a strong reference to its worker while it runs (as a
    running ``threading.Thread`` keeps its target alive): a started worker
    runs until ``stop()``, even if nothing else refers to it.

    Thread-safety: every method may be called from any thread, including from
    ``target()`` itself (``stop()`` and ``restart()`` then do not wait for the
    calling thread, which ends after its current unit).

    Args:
        target: a zero-argument callable, one unit of work.
        name: used in thread names and log messages; defaults to the
            target's ``__name__`` (or ``"worker"``).
        max_restarts: crashes allowed within ``restart_window``; one more
            and the worker gives up.
        restart_window: seconds (or a ``timedelta``) over which crashes count.
        clock: monotonic seconds, for the restart window only; read once here
            (as every other ``clock=`` of the package), so that a clock that
            cannot tell the time fails now, not on the first crash.

    Raises:
        TypeError: ``target`` or ``clock`` is not callable, ``clock``
            returns something other than a number, ``name`` is not a str, or
            ``max_restarts`` not an int.
        ValueError: ``max_restarts`` < 0, ``restart_window`` not > 0 and
            finite, or ``clock`` returns NaN or an infinity.
    """

    def __init__(
        self,
        target: Callable[[], object],
        *,
        name: str | None = None,
        max_restarts: int = 5,
        restart_window: Delay = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not callable(target):
            raise TypeError("target must be callable")
        if name is None:
            name = getattr(target, "__name__", "")
            name = name if isinstance(name, str) and name.isidentifier() else "worker"
        elif not isinstance(name, str):
            raise TypeError("name must be a str or None")
        if not isinstance(max_restarts, int) or isinstance(max_restarts, bool):
            raise TypeError("max_restarts must be an int")
        if max_restarts < 0:
            raise ValueError("max_restarts must be >= 0")
        self._restart_window = _seconds("restart_window", restart_window, positive=True)
        self._target = target
        self._name = name
        self._max_restarts = max_restarts
        check_clock("clock", clock)
        self._clock = clock
        self._thread_numbers = itertools.count(1)
        self._init_locks()
        self._forget_threads()
        self._gave_up = False
        self._crash_times: collections.deque[float] = collections.deque()
        self._restart_count = 0
        self._last_error: BaseException | None = None
        _fork.track(self)  # repaired in a forked child: _after_fork_in_child

    def _init_locks(self) -> None:
        # Guards _current, _threads, _unit_running, _gave_up, _crash_times,
        # _restart_count and _last_error. Never held while target() or a log
        # handler runs.
        self._lock = threading.Lock()
        # Signals that _current changed: a stop or restart was requested.
        self._handover = threading.Condition(self._lock)
        # Signals that _unit_running became False: another unit may begin.
        self._unit_finished = threading.Condition(self._lock)

    def _forget_threads(self) -> None:
        # Invariant: _current is None or in _threads; _threads holds the
        # started threads whose run loop has not returned; _unit_running is
        # True while one of them (and only one) is inside target().
        self._current: threading.Thread | None = None
        self._threads: set[threading.Thread] = set()
        self._unit_running = False

    # -- control -----------------------------------------------------------

    def start(self) -> None:
        """Start a thread running the loop.

        Also starts a worker that gave up, with a clean crash history. A
        thread still finishing a unit after ``stop()`` may be there: the new
        thread begins its first unit after that unit.

        Raises:
            RuntimeError: the worker is already running.
        """
        with self._lock:
            if self._current is not None:
                raise RuntimeError("worker is already running")
            self._gave_up = False
            self._crash_times.clear()
            self._start_thread_locked()

    def restart(self) -> None:
        """Make a new thread current; the old one ends after its current unit.

        Called from outside the worker, this waits until the old thread has
        finished its unit and ended, so from its return on, only the new
        thread runs units. Called from ``target()``, it cannot wait for its
        own thread: it returns at once, and the new thread begins its first
        unit once the caller's unit returns. Either way, two units never run
        at once. If the worker is not running, this starts it.
        """
        me = threading.current_thread()
        with self._lock:
            retiring = [t for t in self._threads if t is not me]
            from_worker = me in self._threads
            taking_over = self._current is not None
            if not taking_over:
                self._gave_up = False
                self._crash_times.clear()
            self._start_thread_locked()
            if taking_over:
                self._restart_count += 1
        if not from_worker:
            for thread in retiring:
                thread.join()

    def stop(self, timeout: Delay | None = None) -> bool:
        """Ask the current thread to end after its unit, and wait for it.

        Idempotent. A ``wait()`` in progress in ``target()`` returns True at
        once. Called from ``target()`` (a worker thread), this only makes the
        request and returns False, since a thread cannot wait for itself.

        Args:
            timeout: seconds (or ``timedelta``) to wait at most; None waits
                until the worker's threads have ended.

        Returns:
            True if no worker thread is alive any more, else False.
        """
        limit = None if timeout is None else wait_timeout(max(_seconds("timeout", timeout), 0.0))
        me = threading.current_thread()
        with self._lock:
            self._set_current_locked(None)
            if me in self._threads:
                return False
            threads = list(self._threads)
        deadline = None if limit is None else time.monotonic() + limit
        for thread in threads:
            thread.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        return not any(thread.is_alive() for thread in threads)

    def wait(self, seconds: Delay) -> bool:
        """For ``target()``: sleep up to ``seconds``, waking on stop or restart.

        Args:
            seconds: seconds or a ``timedelta``; negative counts as 0.

        Returns:
            True if the calling thread should end (a stop or restart was
            requested, or it is not the worker's current thread), False when
            the time ran out.
        """
        limit = wait_timeout(max(_seconds("seconds", seconds), 0.0))
        return self._wait_as(threading.current_thread(), limit)

    def __enter__(self) -> RestartableWorker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- observation -------------------------------------------------------

    @property
    def name(self) -> str:
        """The name given (or derived from the target)."""
        return self._name

    @property
    def running(self) -> bool:
        """Whether a current thread exists (the worker was started and not stopped)."""
        return self._current is not None

    @property
    def state(self) -> WorkerState:
        """The lifecycle state (see ``WorkerState``)."""
        with self._lock:
            if self._current is not None:
                return WorkerState.RUNNING
            if self._threads:
                return WorkerState.STOPPING
            return WorkerState.GAVE_UP if self._gave_up else WorkerState.STOPPED

    @property
    def restart_count(self) -> int:
        """How many times a new thread took over: by ``restart()`` or after a crash."""
        return self._restart_count

    @property
    def last_error(self) -> BaseException | None:
        """The last exception ``target()`` raised, or None."""
        return self._last_error

    def __repr__(self) -> str:
        return f"<RestartableWorker {self._name!r} {self.state.name}>"

    # -- the thread's side -------------------------------------------------

    def _start_thread_locked(self) -> threading.Thread:
        """Create, register and start a thread, and make it current."""
        thread = threading.Thread(
            target=self._run,
            name=f"dataloader-sync-worker-{self._name}-{next(self._thread_numbers)}",
            daemon=True,
        )
        # Started under the lock so nobody sees it registered but unstarted
        # (join() would raise). start() only waits for the thread to exist,
        # not for it to take the lock, so this cannot deadlock.
        self._threads.add(thread)
        try:
            thread.start()
        except BaseException:
            self._threads.discard(thread)
            raise
        self._set_current_locked(thread)
        return thread

    def _set_current_locked(self, thread: threading.Thread | None) -> None:
        assert thread is None or thread in self._threads
        self._current = thread
        self._handover.notify_all()

    def _wait_as(self, me: threading.Thread, seconds: float) -> bool:
        with self._lock:
            return self._handover.wait_for(lambda: self._current is not me, seconds)

    def _begin_unit(self, me: threading.Thread) -> bool:
        """Claim the right to run a unit; False when ``me`` must end instead."""
        with self._lock:
            while self._current is me and self._unit_running:
                self._unit_finished.wait()
            if self._current is not me:
                return False
            self._unit_running = True
            return True

    def _end_unit(self, error: BaseException | None) -> None:
        with self._lock:
            # Not asserted True: a target that forks leaves its child here
            # with the flag reset by _after_fork_in_child.
            self._unit_running = False
            if error is not None:
                self._last_error = error
            # Any waiter may be the current thread: wake them all.
            self._unit_finished.notify_all()

    def _run(self) -> None:
        me = threading.current_thread()
        failures = 0
        try:
            while self._begin_unit(me):
                try:
                    self._target()
                except Exception as exc:
                    self._end_unit(exc)
                    failures += 1
                    delay = _backoff(failures)
                    logger.error("worker %s: target raised; next unit in %.3g s",
                                 self._name, delay, exc_info=exc)
                    self._wait_as(me, delay)
                except (SystemExit, KeyboardInterrupt) as exc:
                    self._end_unit(None)
                    with self._lock:
                        if self._current is me:
                            self._set_current_locked(None)
                    logger.info("worker %s: target raised %r; worker stopped", self._name, exc)
                    return
                except BaseException as exc:
                    self._end_unit(exc)
                    self._crashed(me, exc)
                    return
                else:
                    self._end_unit(None)
                    failures = 0
        finally:
            with self._lock:
                self._threads.discard(me)
                if self._current is me:
                    # Only when the loop itself failed (nothing above lets an
                    # error out): a current thread that has ended would make
                    # the worker read as running with no thread alive.
                    self._gave_up = True
                    self._set_current_locked(None)

    def _crashed(self, me: threading.Thread, exc: BaseException) -> None:
        """``me`` was ended by ``exc``: start a successor, or give up."""
        try:
            now: float | None = float(self._clock())
        except Exception:  # user code: a broken clock must not leave a dead thread current
            logger.exception("worker %s: clock raised; counting the crash as one too many", self._name)
            now = None
        with self._lock:
            if self._current is not me:
                outcome = "retired"  # a stop or restart came first: nothing to restart
            else:
                crashes = self._crash_times
                outcome = "gave up"
                if now is not None:
                    crashes.append(now)
                    while crashes and crashes[0] <= now - self._restart_window:
                        crashes.popleft()
                if now is not None and len(crashes) <= self._max_restarts:
                    try:
                        successor = self._start_thread_locked()
                        self._restart_count += 1
                        outcome = "restarted"
                    except RuntimeError:  # no thread to be had: give up as well
                        pass
                if outcome == "gave up":
                    self._gave_up = True
                    self._set_current_locked(None)
        if outcome == "restarted":
            logger.error("worker %s: thread %s ended by %r; restarted as %s",
                         self._name, me.name, exc, successor.name, exc_info=exc)
        elif outcome == "retired":
            logger.error("worker %s: thread %s ended by %r after a stop or restart",
                         self._name, me.name, exc, exc_info=exc)
        else:
            logger.error("worker %s: more than %d crashes within %g s; giving up",
                         self._name, self._max_restarts, self._restart_window, exc_info=exc)

    def _after_fork_in_child(self) -> None:
        # In a forked child only the forking thread exists: none of the
        # worker's threads run, and the lock may have been held by one.
        self._init_locks()
        self._forget_threads()

