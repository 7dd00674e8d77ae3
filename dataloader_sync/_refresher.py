"""PeriodicRefresher: a value that reloads itself in the background.

Guarantees:

- At most one load runs at a time (single flight): concurrent first callers
  wait for the same load, and a stale value triggers one reload, however many
  readers see it.
- Once a value exists, ``get()`` neither blocks nor raises; a failed reload
  keeps the old value, is logged, and is retried on the next request (after
  ``failures_before_backoff`` failures in a row: after ``failure_backoff``).
- No idle thread: a reload runs on the given executor, or on a daemon thread
  started for it that ends with it.
- ``load_fn``, ``next_reload``, Future callbacks and log handlers never run
  under the refresher's lock.
"""
from __future__ import annotations

import concurrent.futures
import datetime
import functools
import itertools
import logging
import threading
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Generic, TypeVar, cast

from ._core import Delay as Seconds
from ._core import Future, _fork, check_callable, check_clock
from ._core import seconds as _seconds
from ._schedules import local_now

__all__ = ["PeriodicRefresher", "RefresherStatistics", "refreshed_every"]

T = TypeVar("T")

logger = logging.getLogger("dataloader_sync")

# Names of the threads started for one background reload each.
_refresh_thread_ids = itertools.count(1)


@dataclass(frozen=True)
class RefresherStatistics:
    """A snapshot of a refresher's counters, from ``PeriodicRefresher.statistics()``.

    Attributes:
        load_count: loads that finished, successful or not.
        failure_count: loads that raised.
        failures_in_a_row: failures since the last success.
        last_success: clock time of the last successful load, or None.
        last_error: the exception of the last failed load, or None.
        next_reload: clock time from which a ``get()`` starts a reload, or
            None (nothing loaded yet, or closed).
    """

    load_count: int = 0
    failure_count: int = 0
    failures_in_a_row: int = 0
    last_success: float | None = None
    last_error: BaseException | None = None
    next_reload: float | None = None

    @property
    def failure_ratio(self) -> float:
        """``failure_count / load_count``, 0.0 before any load."""
        return self.failure_count / self.load_count if self.load_count else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (``last_error`` stays the exception object)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


class PeriodicRefresher(Generic[T]):
    """A cached value that reloads itself in the background on a schedule.

    For reference data that is expensive to load and changes rarely (postal
    codes, exchange rates). The first ``get()`` loads and waits; later ones
    return the cached value at once, and the first after the reload time
    starts one background reload. The instance is callable: ``r()`` is
    ``r.get()``.

    Lifecycle (the state is derived, not stored)::

        EMPTY --get()--> LOADING --ok--> FRESH --reload time--> STALE
          ^                 |              ^                      |
          +----failed-------+              +-----reload ok--------+
        any state --close()--> CLOSED (keeps the value, never reloads)

    Thread-safety: every method may be called from any number of threads at
    once. ``load_fn`` never runs twice at the same time, and never runs under
    the refresher's lock (so it may call ``get()`` or ``statistics()``).

    Args:
        load_fn: a zero-argument callable returning the value.
        interval: seconds (or a ``timedelta``) from a successful load to the
            next reload; also the fallback when ``next_reload`` fails.
        executor: a ``concurrent.futures.Executor`` for background reloads;
            None starts a short-lived daemon thread per reload.
        failure_backoff: seconds (or ``timedelta``) to wait before the next
            try once ``failures_before_backoff`` loads failed in a row.
        failures_before_backoff: failures in a row that trigger the back-off.
        next_reload: optional ``next_reload(now) -> seconds`` (float or
            ``timedelta``), called after each successful load with the
            current wall-clock time (an aware ``datetime``), returning the
            delay until the next reload, e.g. ``daily_at(5)``. If it raises or
            returns a non-finite value, the error is logged and ``interval``
            is used; a negative delay counts as 0.
        clock: monotonic seconds, for reload times and statistics.
        wall_clock: returns the current ``datetime`` passed to ``next_reload``.
            With ``next_reload``, it is called once here to check that it
            returns a ``datetime`` (``time.time`` does not).

    Raises:
        TypeError: ``load_fn``, ``next_reload``, ``executor``, ``clock`` or
            ``wall_clock`` has the wrong type.
        ValueError: ``interval`` is not > 0 and finite, ``failure_backoff``
            not >= 0 and finite, or ``failures_before_backoff`` < 1.
    """

    def __init__(
        self,
        load_fn: Callable[[], T],
        interval: Seconds,
        *,
        executor: concurrent.futures.Executor | None = None,
        failure_backoff: Seconds = 120.0,
        failures_before_backoff: int = 2,
        next_reload: Callable[[datetime.datetime], Seconds] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime.datetime] = local_now,
    ) -> None:
        if not callable(load_fn):
            raise TypeError("load_fn must be callable")
        if next_reload is not None and not callable(next_reload):
            raise TypeError("next_reload must be callable or None")
        if executor is not None and not isinstance(executor, concurrent.futures.Executor):
            raise TypeError("executor must be a concurrent.futures.Executor or None")
        if not isinstance(failures_before_backoff, int) or isinstance(failures_before_backoff, bool):
            raise TypeError("failures_before_backoff must be an int")
        if failures_before_backoff < 1:
            raise ValueError("failures_before_backoff must be >= 1")
        self._load_fn = load_fn
        self._interval = _seconds("interval", interval, positive=True)
        self._failure_backoff = _seconds("failure_backoff", failure_backoff)
        if self._failure_backoff < 0:
            raise ValueError("failure_backoff must be >= 0")
        self._failures_before_backoff = failures_before_backoff
        self._executor = executor
        self._next_reload_fn = next_reload
        check_clock("clock", clock)
        self._clock = clock
        self._wall_clock = check_callable("wall_clock", wall_clock)
        if next_reload is not None:
            # Checked now: a wall clock returning seconds (time.time) would
            # otherwise fail inside every reload, logged, with interval used.
            now = wall_clock()
            if not isinstance(now, datetime.datetime):
                raise TypeError(f"wall_clock must return a datetime.datetime, got {type(now).__name__}")
        self._init_lock()
        self._value: T | None = None
        self._has_value = False
        self._closed = False
        # Invariant: _in_flight is the Future of the one load that has been
        # claimed and has not yet recorded its outcome, else None. It is
        # always RUNNING (so no caller can cancel it), and it is resolved
        # only after the outcome is recorded and the lock released.
        self._in_flight: Future[T] | None = None
        self._next_reload: float | None = None  # clock time; None until a load finished
        self._load_count = 0
        self._failure_count = 0
        self._failures_in_a_row = 0
        self._last_success: float | None = None
        self._last_error: BaseException | None = None
        _fork.track(self)  # repaired in a forked child: _after_fork_in_child

    def _init_lock(self) -> None:
        # Guards every mutable field: value, closed, _in_flight, the reload
        # time and the counters. Held only for field swaps, never while user
        # code (load_fn, next_reload, callbacks, logging) runs.
        self._lock = threading.Lock()

    # -- public API --------------------------------------------------------

    def get(self) -> T:
        """Return the value, loading it first if there is none yet.

        With a value, this never blocks and never raises: if the reload time
        has passed and no load is in flight, it starts a background reload
        and returns the current (stale) value. Without a value, it waits for
        the load in flight, or runs one itself.

        Returns:
            The latest successfully loaded value.

        Raises:
            Exception: the loader's error, when there is no value yet (the
                next ``get()`` tries again).
            RuntimeError: the refresher is closed and has no value.
        """
        now = self._clock()
        with self._lock:
            if self._has_value:
                value = cast(T, self._value)
                if (
                    self._closed
                    or self._in_flight is not None
                    or now < cast(float, self._next_reload)
                ):
                    return value
                action, future = "reload", self._claim_locked()  # STALE
            elif self._closed:
                raise RuntimeError("refresher is closed and has no value")
            elif self._in_flight is not None:  # LOADING: join that one load
                action, future = "wait", self._in_flight
            else:  # EMPTY: this caller loads, later ones wait for it
                action, future = "load", self._claim_locked()
        # The lock is released: now run, start or wait for the load.
        if action == "reload":
            self._start_background(future)
            return value
        if action == "load":
            self._load(future)
        return future.result()

    __call__ = get

    def refresh(self) -> T:
        """Reload now, on the calling thread, and return the new value.

        If a load is in flight, waits for it to finish first (whatever its
        outcome), so the returned value comes from a load that began after
        this call.

        Returns:
            The freshly loaded value.

        Raises:
            Exception: the loader's error; it is recorded like any failure
                (statistics, back-off) and the old value is kept.
            RuntimeError: the refresher is closed.
        """
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("cannot refresh after close")
                if self._in_flight is None:
                    future = self._claim_locked()
                    break
                previous = self._in_flight
            concurrent.futures.wait([previous])
        self._load(future)
        return future.result()

    def request_refresh(self) -> Future[T]:
        """Start one background reload now, whatever the schedule.

        Returns:
            A ``dataloader_sync.Future`` (a ``concurrent.futures.Future`` with
            ``then``) of the new value, or of the loader's error (such a
            failure is also logged). If a load is already in flight, its
            Future: loads never overlap. The Future cannot be cancelled.

        Raises:
            RuntimeError: the refresher is closed.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot refresh after close")
            if self._in_flight is not None:
                return self._in_flight
            future = self._claim_locked()
        self._start_background(future)
        return future

    def close(self) -> None:
        """Stop reloading; ``get()`` keeps returning the last value.

        Idempotent and does not wait. A load in flight at close is not
        interrupted: it finishes, its Future is resolved, and a successful
        result becomes the value that ``get()`` returns. No load starts
        after close.
        """
        with self._lock:
            self._closed = True

    def __enter__(self) -> PeriodicRefresher[T]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def statistics(self) -> RefresherStatistics:
        """Return a snapshot of the counters (see ``RefresherStatistics``)."""
        with self._lock:
            return RefresherStatistics(
                load_count=self._load_count,
                failure_count=self._failure_count,
                failures_in_a_row=self._failures_in_a_row,
                last_success=self._last_success,
                last_error=self._last_error,
                next_reload=None if self._closed else self._next_reload,
            )

    def __repr__(self) -> str:
        now = self._clock()
        with self._lock:
            if self._closed:
                state = "CLOSED"
            elif not self._has_value:
                state = "LOADING" if self._in_flight is not None else "EMPTY"
            elif now < cast(float, self._next_reload):
                state = "FRESH"
            else:
                state = "STALE"
        return f"<PeriodicRefresher {state} load_fn={self._load_fn!r}>"

    # -- loading -----------------------------------------------------------

    def _claim_locked(self) -> Future[T]:
        """Make a new load the one in flight and return its Future."""
        assert self._in_flight is None, "a load is already in flight"
        future: Future[T] = Future()
        future.set_running_or_notify_cancel()
        self._in_flight = future
        return future

    def _start_background(self, future: Future[T]) -> None:
        """Run the claimed load on the executor or on a thread of its own."""
        # The thread holds the refresher strongly, but for one load only.
        try:
            if self._executor is not None:
                self._executor.submit(self._load, future, background=True)
            else:
                threading.Thread(
                    target=self._load,
                    args=(future,),
                    kwargs={"background": True},
                    name=f"dataloader-sync-refresh-{next(_refresh_thread_ids)}",
                    daemon=True,
                ).start()
        except Exception as exc:  # executor shut down, or no thread to be had
            self._fail(future, exc, background=True)

    def _load(self, future: Future[T], *, background: bool = False) -> None:
        """Run the claimed load, record it, then resolve ``future`` (never raises an Exception)."""
        try:
            value = self._load_fn()
        except Exception as exc:
            self._fail(future, exc, background=background)
        except BaseException as exc:  # KeyboardInterrupt and the like: not a load failure
            with self._lock:
                self._in_flight = None
            future.set_exception(exc)
            raise
        else:
            self._record_success(value)
            future.set_result(value)

    def _fail(self, future: Future[T], exc: Exception, *, background: bool) -> None:
        """Record a failed load, log it if nobody waits for it, resolve ``future``."""
        retry_in = self._record_failure(exc)
        if background:
            logger.error(
                "reload of %r failed; keeping the previous value, next try in %.3g s",
                self, retry_in, exc_info=exc,
            )
        future.set_exception(exc)

    def _record_success(self, value: T) -> None:
        delay = self._interval
        if self._next_reload_fn is not None:  # user code: call it before locking
            try:
                delay = max(_seconds("next_reload()", self._next_reload_fn(self._wall_clock())), 0.0)
            except Exception:
                delay = self._interval
                logger.exception("next_reload of %r failed; reloading after interval", self)
        now = self._clock()
        with self._lock:
            self._value, self._has_value = value, True
            self._load_count += 1
            self._failures_in_a_row = 0
            self._last_success = now
            self._next_reload = now + delay
            self._in_flight = None

    def _record_failure(self, exc: Exception) -> float:
        """Record a failed load; return the seconds until the next try."""
        now = self._clock()
        with self._lock:
            self._load_count += 1
            self._failure_count += 1
            self._failures_in_a_row += 1
            self._last_error = exc
            # Retry on the next request, unless failures are piling up.
            retry_in = (
                self._failure_backoff
                if self._failures_in_a_row >= self._failures_before_backoff
                else 0.0
            )
            self._next_reload = now + retry_in
            self._in_flight = None
            return retry_in

    def _after_fork_in_child(self) -> None:
        # In a forked child no load is running: whoever held the lock or the
        # in-flight claim in the parent does not exist here.
        self._init_lock()
        self._in_flight = None


def refreshed_every(
    interval: Seconds, **options: Any
) -> Callable[[Callable[[], T]], PeriodicRefresher[T]]:
    """Decorate a zero-argument loader into a ``PeriodicRefresher``.

    Calling the decorated name returns the cached value::

        @refreshed_every(datetime.timedelta(minutes=10))
        def postal_codes() -> dict[str, str]:
            return fetch_postal_codes()

        postal_codes()["75001"]

    Args:
        interval: as for ``PeriodicRefresher``.
        **options: any keyword argument of ``PeriodicRefresher``.

    Returns:
        A decorator returning the refresher (``close()`` it to stop reloads).

    Raises:
        TypeError, ValueError: ``interval`` is not a finite delay > 0 (at
            once; the other options are checked when the decorator is applied).
    """
    _seconds("interval", interval, positive=True)

    def decorate(load_fn: Callable[[], T]) -> PeriodicRefresher[T]:
        refresher = PeriodicRefresher(load_fn, interval, **options)
        functools.update_wrapper(refresher, load_fn)
        return refresher

    return decorate
