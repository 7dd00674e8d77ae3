"""Tests for dataloader_sync._refresher (PeriodicRefresher, refreshed_every)."""
from __future__ import annotations

import concurrent.futures
import datetime
import logging
import math
import queue
import threading
from typing import Any, Callable

import pytest
from conftest import FakeClock

from dataloader_sync._refresher import (
    PeriodicRefresher,
    RefresherStatistics,
    refreshed_every,
)
from dataloader_sync._schedules import daily_at

TIMEOUT = 10.0  # generous upper bound for anything that should be quick


class InlineExecutor(concurrent.futures.Executor):
    """Runs each submitted function at once, on the submitting thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


class Loader:
    """A load_fn that returns 1, 2, 3, ... or raises what it is told to."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail_with: BaseException | None = None
        self.lock = threading.Lock()

    def __call__(self) -> int:
        with self.lock:
            self.calls += 1
            calls = self.calls
        if self.fail_with is not None:
            raise self.fail_with
        return calls


class GatedLoader(Loader):
    """A Loader whose calls report that they started, then wait for a gate."""

    def __init__(self) -> None:
        super().__init__()
        self.started: queue.Queue[int] = queue.Queue()
        self.gate = threading.Event()

    def __call__(self) -> int:
        with self.lock:
            call = self.calls + 1
        self.started.put(call)
        assert self.gate.wait(TIMEOUT), "gate never opened"
        return super().__call__()


def make(load_fn: Callable[[], Any], interval: float = 10.0, **kwargs: Any) -> PeriodicRefresher[Any]:
    kwargs.setdefault("clock", FakeClock())
    kwargs.setdefault("executor", InlineExecutor())
    return PeriodicRefresher(load_fn, interval, **kwargs)


# -- first load ---------------------------------------------------------------


def test_PeriodicRefresher_first_get_raises_the_loader_error_and_tries_again():
    loader = Loader()
    loader.fail_with = OSError("source down")
    refresher = make(loader)
    with pytest.raises(OSError, match="source down"):
        refresher.get()
    loader.fail_with = None
    assert refresher.get() == 2
    assert loader.calls == 2
    assert refresher.statistics().failure_count == 1


def run_first_get_in_threads(loader: GatedLoader, n: int) -> list[Any]:
    """Start n threads calling get() on a fresh refresher; open the gate once
    all of them are inside get(); return what each got (value or exception)."""
    entered: queue.Queue[None] = queue.Queue()
    clock = FakeClock()

    def counting_clock() -> float:
        entered.put(None)  # get() reads the clock first thing
        return clock()

    refresher = make(loader, clock=counting_clock)
    results: queue.Queue[Any] = queue.Queue()

    def reader() -> None:
        try:
            results.put(refresher.get())
        except Exception as exc:
            results.put(exc)

    threads = [threading.Thread(target=reader) for _ in range(n)]
    for t in threads:
        t.start()
    for _ in range(n):
        entered.get(timeout=TIMEOUT)
    # Every reader is inside get(); none can have finished, since the one
    # load cannot finish before the gate opens.
    assert results.empty()
    loader.gate.set()
    for t in threads:
        t.join(TIMEOUT)
    return [results.get(timeout=TIMEOUT) for _ in range(n)]


def test_PeriodicRefresher_first_load_is_single_flight():
    loader = GatedLoader()
    assert run_first_get_in_threads(loader, 20) == [1] * 20
    assert loader.calls == 1


def test_PeriodicRefresher_failed_first_load_fails_every_waiter_once():
    loader = GatedLoader()
    loader.fail_with = OSError("source down")
    results = run_first_get_in_threads(loader, 20)
    assert all(isinstance(r, OSError) for r in results)
    assert loader.calls == 1


# -- reloads ------------------------------------------------------------------


def test_PeriodicRefresher_serves_fresh_value_without_reloading():
    loader, clock = Loader(), FakeClock()
    refresher = make(loader, clock=clock)
    assert refresher.get() == 1
    clock.advance(9.999)
    assert refresher.get() == 1
    assert loader.calls == 1


def test_PeriodicRefresher_stale_value_served_while_one_reload_runs_for_50_readers():
    loader, clock = GatedLoader(), FakeClock()
    loader.gate.set()
    with PeriodicRefresher(loader, 10.0, clock=clock) as refresher:  # own thread per reload
        assert refresher.get() == 1
        loader.gate.clear()
        loader.started.get(timeout=TIMEOUT)
        clock.advance(10.0)

        with concurrent.futures.ThreadPoolExecutor(50) as pool:
            got = list(pool.map(lambda _: refresher.get(), range(50), timeout=TIMEOUT))
        # The readers returned while the reload was still held at the gate.
        assert got == [1] * 50
        assert loader.started.get(timeout=TIMEOUT) == 2
        assert loader.calls == 1  # the reload has not passed the gate
        assert refresher.get() == 1

        in_flight = refresher.request_refresh()  # the one in flight, no new one
        loader.gate.set()
        assert in_flight.result(timeout=TIMEOUT) == 2
        assert loader.calls == 2
        assert refresher.get() == 2


def test_PeriodicRefresher_background_reload_thread_ends_after_the_reload():
    loader, clock = Loader(), FakeClock()
    refresher = PeriodicRefresher(loader, 10.0, clock=clock)
    refresher.get()  # the first load runs on the caller: no thread at all
    assert not [t for t in threading.enumerate() if t.name.startswith("dataloader-sync-refresh-")]
    clock.advance(10.0)
    refresher.get()
    reload_threads = [t for t in threading.enumerate() if t.name.startswith("dataloader-sync-refresh-")]
    for t in reload_threads:
        assert t.daemon
        t.join(TIMEOUT)
        assert not t.is_alive()
    assert loader.calls == 2  # the reload did run (on that thread, now ended)
    assert refresher.get() == 2


def test_PeriodicRefresher_runs_reloads_on_the_given_executor():
    loader, clock = Loader(), FakeClock()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="given") as pool:
        names: list[str] = []

        def load() -> int:
            names.append(threading.current_thread().name)
            return loader()

        refresher = PeriodicRefresher(load, 10.0, executor=pool, clock=clock)
        refresher.get()
        clock.advance(10.0)
        assert refresher.get() == 1
        pool.submit(lambda: None).result(timeout=TIMEOUT)  # one worker: the reload ran
        assert refresher.get() == 2
        assert names[0] == threading.current_thread().name
        assert names[1].startswith("given")


def test_PeriodicRefresher_failure_keeps_old_value_and_retries(caplog):
    loader, clock = Loader(), FakeClock()
    refresher = make(loader, clock=clock)
    assert refresher.get() == 1
    clock.advance(10.0)
    loader.fail_with = OSError("source down")
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        assert refresher.get() == 1  # the failed reload ran inline: old value kept
    assert loader.calls == 2
    [record] = caplog.records
    assert record.name == "dataloader_sync"
    assert record.exc_info is not None and isinstance(record.exc_info[1], OSError)
    assert "keeping the previous value" in record.getMessage()

    loader.fail_with = None
    assert refresher.get() == 1  # the next request retried (serving the old value)
    assert loader.calls == 3
    assert refresher.get() == 3
    stats = refresher.statistics()
    assert (stats.load_count, stats.failure_count, stats.failures_in_a_row) == (3, 1, 0)
    assert isinstance(stats.last_error, OSError)


def test_PeriodicRefresher_backs_off_after_two_failures_in_a_row():
    loader, clock = Loader(), FakeClock()
    refresher = make(loader, clock=clock, failure_backoff=datetime.timedelta(minutes=2))
    refresher.get()
    clock.advance(10.0)
    loader.fail_with = OSError("source down")
    refresher.get()  # failure 1: retry on the next request
    assert refresher.statistics().next_reload == clock.now
    refresher.get()  # failure 2: back off
    assert loader.calls == 3
    assert refresher.statistics().next_reload == clock.now + 120.0

    clock.advance(119.9)
    refresher.get()
    assert loader.calls == 3
    clock.advance(0.1)
    refresher.get()  # failure 3: back off again
    assert loader.calls == 4
    assert refresher.statistics().failures_in_a_row == 3
    assert refresher.statistics().next_reload == clock.now + 120.0

    loader.fail_with = None
    clock.advance(120.0)
    assert refresher.get() == 1
    assert refresher.get() == 5  # success resets the counter and the interval
    stats = refresher.statistics()
    assert stats.failures_in_a_row == 0
    assert stats.next_reload == clock.now + 10.0


def test_PeriodicRefresher_failures_before_backoff_is_configurable():
    loader, clock = Loader(), FakeClock()
    refresher = make(loader, clock=clock, failures_before_backoff=1, failure_backoff=30)
    refresher.get()
    clock.advance(10.0)
    loader.fail_with = OSError("source down")
    refresher.get()
    assert refresher.statistics().next_reload == clock.now + 30.0


def test_PeriodicRefresher_refresh_reloads_now_and_raises_but_records():
    loader, clock = Loader(), FakeClock()
    refresher = make(loader, clock=clock)
    assert refresher.refresh() == 1
    assert refresher.refresh() == 2  # no need to be stale
    loader.fail_with = KeyError("gone")
    with pytest.raises(KeyError):
        refresher.refresh()
    stats = refresher.statistics()
    assert (stats.load_count, stats.failure_count, stats.failures_in_a_row) == (3, 1, 1)
    assert isinstance(stats.last_error, KeyError)
    assert stats.next_reload == 0.0  # like any failure: retry on the next request
    loader.fail_with = None
    assert refresher.get() == 2  # the old value, while the retry loads
    assert refresher.get() == 4


def test_PeriodicRefresher_refresh_waits_for_the_load_in_flight_then_loads_again():
    loader = GatedLoader()
    refresher = PeriodicRefresher(loader, 10.0, clock=FakeClock())
    background = refresher.request_refresh()
    assert loader.started.get(timeout=TIMEOUT) == 1
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        refreshed = pool.submit(refresher.refresh)
        with pytest.raises(concurrent.futures.TimeoutError):
            refreshed.result(timeout=0.05)  # held behind the load in flight
        loader.gate.set()
        assert background.result(timeout=TIMEOUT) == 1
        assert refreshed.result(timeout=TIMEOUT) == 2


def test_PeriodicRefresher_request_refresh_returns_the_future_in_flight():
    loader = GatedLoader()
    refresher = PeriodicRefresher(loader, 10.0, clock=FakeClock())
    first = refresher.request_refresh()
    assert refresher.request_refresh() is first
    assert not first.cancel()  # nobody can cancel a load others wait for
    loader.gate.set()
    assert first.result(timeout=TIMEOUT) == 1
    second = refresher.request_refresh()
    assert second is not first
    assert second.result(timeout=TIMEOUT) == 2
    assert refresher.get() == 2


def test_PeriodicRefresher_request_refresh_returns_a_future_that_chains_with_then():
    loader = GatedLoader()
    refresher = PeriodicRefresher(loader, 10.0, clock=FakeClock())
    first = refresher.request_refresh()
    doubled = first.then(lambda value: value * 2)
    loader.gate.set()
    assert doubled.result(timeout=TIMEOUT) == 2
    refresher.close()


def test_PeriodicRefresher_request_refresh_failure_is_in_the_future_and_logged(caplog):
    loader = Loader()
    loader.fail_with = OSError("source down")
    refresher = make(loader)
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        future = refresher.request_refresh()
    assert isinstance(future.exception(timeout=TIMEOUT), OSError)
    assert len(caplog.records) == 1


def test_PeriodicRefresher_executor_that_refuses_counts_as_a_failed_reload(caplog):
    loader, clock = Loader(), FakeClock()
    pool = concurrent.futures.ThreadPoolExecutor(1)
    refresher = PeriodicRefresher(loader, 10.0, executor=pool, clock=clock)
    refresher.get()
    pool.shutdown()
    clock.advance(10.0)
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        assert refresher.get() == 1  # never raises once there is a value
    assert isinstance(refresher.statistics().last_error, RuntimeError)
    assert len(caplog.records) == 1
    assert refresher.request_refresh().exception(timeout=TIMEOUT) is not None  # no stuck claim


# -- schedules ----------------------------------------------------------------


PARIS = pytest.importorskip("zoneinfo").ZoneInfo("Europe/Paris")


def test_PeriodicRefresher_reloads_daily_at_five_on_fake_clocks():
    loader, clock = Loader(), FakeClock()
    wall = [datetime.datetime(2024, 5, 1, 4, 0, tzinfo=PARIS)]
    refresher = make(loader, interval=600, clock=clock, next_reload=daily_at(5),
                     wall_clock=lambda: wall[0])
    refresher.get()
    assert refresher.statistics().next_reload == 3600.0
    clock.advance(3599.0)
    refresher.get()
    assert loader.calls == 1
    clock.advance(1.0)
    wall[0] += datetime.timedelta(hours=1)  # 05:00 on the wall
    refresher.get()
    assert loader.calls == 2
    assert refresher.statistics().next_reload == 3600.0 + 86400.0


def test_PeriodicRefresher_next_reload_may_return_a_timedelta():
    clock = FakeClock()
    refresher = make(Loader(), clock=clock, next_reload=lambda now: datetime.timedelta(hours=1))
    refresher.get()
    assert refresher.statistics().next_reload == 3600.0


@pytest.mark.parametrize("bad", [lambda now: 1 / 0, lambda now: math.nan, lambda now: "soon"])
def test_PeriodicRefresher_failing_next_reload_is_logged_and_interval_used(caplog, bad):
    loader = Loader()
    refresher = make(loader, interval=7.0, next_reload=bad)
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        assert refresher.get() == 1
    assert refresher.statistics().next_reload == 7.0
    assert "next_reload" in caplog.records[0].getMessage()
    assert refresher.statistics().failure_count == 0


# -- close --------------------------------------------------------------------


def test_PeriodicRefresher_close_stops_reloads():
    loader, clock = Loader(), FakeClock()
    with make(loader, clock=clock) as refresher:
        refresher.get()
    refresher.close()  # idempotent
    assert refresher.closed
    clock.advance(1000.0)
    assert refresher.get() == 1
    assert loader.calls == 1
    assert refresher.statistics().next_reload is None
    with pytest.raises(RuntimeError):
        refresher.refresh()
    with pytest.raises(RuntimeError):
        refresher.request_refresh()
    assert "CLOSED" in repr(refresher)


def test_PeriodicRefresher_get_after_close_without_value_raises():
    loader = Loader()
    refresher = make(loader)
    refresher.close()
    with pytest.raises(RuntimeError, match="closed"):
        refresher.get()
    assert loader.calls == 0


def test_PeriodicRefresher_load_in_flight_at_close_finishes_and_is_kept():
    loader = GatedLoader()
    refresher = PeriodicRefresher(loader, 10.0, clock=FakeClock())
    future = refresher.request_refresh()
    loader.started.get(timeout=TIMEOUT)
    refresher.close()
    loader.gate.set()
    assert future.result(timeout=TIMEOUT) == 1
    assert refresher.get() == 1
    assert loader.calls == 1


# -- extras, statistics, arguments --------------------------------------------


def test_refreshed_every_makes_a_callable_refresher():
    clock = FakeClock()
    calls = []

    @refreshed_every(10.0, clock=clock, executor=InlineExecutor())
    def rates() -> dict[str, float]:
        """Exchange rates."""
        calls.append(1)
        return {"EUR": 1.0 + len(calls)}

    assert isinstance(rates, PeriodicRefresher)
    assert rates.__name__ == "rates" and rates.__doc__ == "Exchange rates."
    assert rates() == {"EUR": 2.0}
    clock.advance(10.0)
    rates()
    assert rates() == {"EUR": 3.0}
    rates.close()


def test_RefresherStatistics_is_a_frozen_snapshot():
    loader = Loader()
    refresher = make(loader)
    before = refresher.statistics()
    refresher.get()
    assert before == RefresherStatistics()
    assert before.failure_ratio == 0.0
    after = refresher.statistics()
    assert after.to_dict() == {
        "load_count": 1, "failure_count": 0, "failures_in_a_row": 0,
        "last_success": 0.0, "last_error": None, "next_reload": 10.0,
    }
    with pytest.raises(AttributeError):
        after.load_count = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    "args, kwargs, error, name",
    [
        ((42, 1.0), {}, TypeError, "load_fn"),
        ((Loader(), 0), {}, ValueError, "interval"),
        ((Loader(), -1.0), {}, ValueError, "interval"),
        ((Loader(), math.nan), {}, ValueError, "interval"),
        ((Loader(), math.inf), {}, ValueError, "interval"),
        ((Loader(), datetime.timedelta(0)), {}, ValueError, "interval"),
        ((Loader(), "10"), {}, TypeError, "interval"),
        ((Loader(), 1.0), {"failure_backoff": -1}, ValueError, "failure_backoff"),
        ((Loader(), 1.0), {"failure_backoff": math.nan}, ValueError, "failure_backoff"),
        ((Loader(), 1.0), {"failures_before_backoff": 0}, ValueError, "failures_before_backoff"),
        ((Loader(), 1.0), {"failures_before_backoff": 1.5}, TypeError, "failures_before_backoff"),
        ((Loader(), 1.0), {"next_reload": 5}, TypeError, "next_reload"),
        ((Loader(), 1.0), {"executor": object()}, TypeError, "executor"),
    ],
)
def test_PeriodicRefresher_rejects_bad_arguments(args, kwargs, error, name):
    with pytest.raises(error, match=name):
        PeriodicRefresher(*args, **kwargs)


def test_PeriodicRefresher_accepts_timedelta_interval():
    clock = FakeClock()
    refresher = make(Loader(), interval=datetime.timedelta(minutes=10), clock=clock)
    refresher.get()
    assert refresher.statistics().next_reload == 600.0
