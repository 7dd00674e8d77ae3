"""Tests for dataloader_sync._worker (RestartableWorker)."""
from __future__ import annotations

import logging
import math
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Callable

import pytest
from conftest import FakeClock

from dataloader_sync._worker import RestartableWorker, WorkerState, _backoff

TIMEOUT = 10.0  # generous upper bound for anything that should be quick


class Crash(BaseException):
    """Ends a worker thread the way an unexpected BaseException would."""


def worker_threads(name: str) -> list[threading.Thread]:
    prefix = f"dataloader-sync-worker-{name}-"
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


class LogWatcher(logging.Handler):
    """Sets an event when a dataloader_sync record contains ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


@pytest.fixture
def watch_log() -> Any:
    logger = logging.getLogger("dataloader_sync")
    handlers: list[logging.Handler] = []

    def watch(text: str) -> threading.Event:
        handler = LogWatcher(text)
        logger.addHandler(handler)
        handlers.append(handler)
        return handler.seen

    yield watch
    for handler in handlers:
        logger.removeHandler(handler)


def make(target: Callable[[], object], **kwargs: Any) -> RestartableWorker:
    return RestartableWorker(target, **kwargs)


# -- start, stop, restart -----------------------------------------------------


def test_RestartableWorker_runs_target_in_a_loop_until_stop():
    units: queue.Queue[str] = queue.Queue()

    def unit() -> None:
        units.put(threading.current_thread().name)
        worker.wait(0.001)

    worker = RestartableWorker(unit, name="loop")
    assert worker.state is WorkerState.STOPPED and not worker.running
    worker.start()
    assert worker.running and worker.state is WorkerState.RUNNING
    names = {units.get(timeout=TIMEOUT) for _ in range(3)}
    assert names == {"dataloader-sync-worker-loop-1"}
    [thread] = worker_threads("loop")
    assert thread.daemon
    assert worker.stop(TIMEOUT) is True
    assert not thread.is_alive()
    assert not worker.running and worker.state is WorkerState.STOPPED
    assert worker.stop() is True  # idempotent


def test_RestartableWorker_start_twice_raises():
    worker = RestartableWorker(lambda: worker.wait(60))
    worker.start()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            worker.start()
    finally:
        assert worker.stop(TIMEOUT)


def test_RestartableWorker_restart_hands_over_and_old_thread_has_ended():
    units: queue.Queue[str] = queue.Queue()

    def unit() -> None:
        units.put(threading.current_thread().name)
        worker.wait(60)

    with RestartableWorker(unit, name="handover") as worker:
        worker.start()
        assert units.get(timeout=TIMEOUT) == "dataloader-sync-worker-handover-1"
        [old] = worker_threads("handover")
        worker.restart()
        assert not old.is_alive()  # restart() waited for it
        assert units.get(timeout=TIMEOUT) == "dataloader-sync-worker-handover-2"
        assert worker.restart_count == 1
        assert worker.running
    assert not worker.running
    assert not worker_threads("handover")


def test_RestartableWorker_never_runs_two_units_at_once():
    lock = threading.Lock()
    active = 0
    max_active = 0
    units = 0
    enough = threading.Event()

    def unit() -> None:
        nonlocal active, max_active, units
        with lock:
            active += 1
            max_active = max(max_active, active)
            units += 1
            n = units
        if n % 3 == 0:
            worker.restart()  # from inside: the successor must wait for this unit
        threading.Event().wait(0.002)  # the unit's "work" goes on after the handover
        with lock:
            active -= 1
        if n >= 60:
            enough.set()

    worker = RestartableWorker(unit, name="exclusive")
    worker.start()
    try:
        for _ in range(10):
            worker.restart()  # from outside, while units run
        assert enough.wait(TIMEOUT)
    finally:
        assert worker.stop(TIMEOUT)
    assert max_active == 1
    assert worker.restart_count >= 10 + 60 // 3


def test_RestartableWorker_restart_of_a_stopped_worker_starts_it():
    ran = threading.Event()
    worker = RestartableWorker(lambda: (ran.set(), worker.wait(60)))
    worker.restart()
    try:
        assert ran.wait(TIMEOUT)
        assert worker.running and worker.restart_count == 0
    finally:
        assert worker.stop(TIMEOUT)


def test_RestartableWorker_stop_returns_promptly_from_a_target_in_wait():
    waiting = threading.Event()
    woke: queue.Queue[bool] = queue.Queue()

    def unit() -> None:
        waiting.set()
        woke.put(worker.wait(60))

    worker = RestartableWorker(unit)
    worker.start()
    assert waiting.wait(TIMEOUT)
    began = time.monotonic()
    assert worker.stop() is True
    assert time.monotonic() - began < 10.0  # far under the 60 s wait
    assert woke.get(timeout=TIMEOUT) is True


def test_RestartableWorker_wait_returns_false_when_time_runs_out():
    results: queue.Queue[tuple[bool, float]] = queue.Queue()

    def unit() -> None:
        began = time.monotonic()
        results.put((worker.wait(0.02), time.monotonic() - began))
        worker.wait(60)

    with RestartableWorker(unit) as worker:
        worker.start()
        woke, elapsed = results.get(timeout=TIMEOUT)
    assert woke is False
    assert 0.01 <= elapsed < TIMEOUT


def test_RestartableWorker_wait_outside_the_current_thread_returns_true_at_once():
    worker = RestartableWorker(lambda: None)
    assert worker.wait(60) is True


def test_RestartableWorker_stop_from_inside_target():
    answers: queue.Queue[bool] = queue.Queue()
    calls = 0

    def unit() -> None:
        nonlocal calls
        calls += 1
        answers.put(worker.stop())

    worker = RestartableWorker(unit, name="selfstop")
    worker.start()
    assert answers.get(timeout=TIMEOUT) is False  # it cannot wait for itself
    for thread in worker_threads("selfstop"):
        thread.join(TIMEOUT)
        assert not thread.is_alive()
    assert not worker.running and worker.state is WorkerState.STOPPED
    assert calls == 1
    assert worker.stop(TIMEOUT) is True


def test_RestartableWorker_state_is_stopping_while_the_last_unit_finishes():
    in_unit, gate = threading.Event(), threading.Event()

    def unit() -> None:
        in_unit.set()
        assert gate.wait(TIMEOUT)

    worker = RestartableWorker(unit)
    worker.start()
    assert in_unit.wait(TIMEOUT)
    assert worker.stop(timeout=0.01) is False
    assert worker.state is WorkerState.STOPPING and not worker.running
    gate.set()
    assert worker.stop(TIMEOUT) is True
    assert worker.state is WorkerState.STOPPED


# -- failures -----------------------------------------------------------------


def test_RestartableWorker_exception_is_logged_and_survived(caplog):
    results: queue.Queue[str] = queue.Queue()
    calls = 0

    def unit() -> None:
        nonlocal calls
        calls += 1
        if calls <= 3:
            raise ValueError(f"bad unit {calls}")
        results.put(threading.current_thread().name)
        worker.wait(60)

    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        with RestartableWorker(unit, name="survivor") as worker:
            worker.start()
            assert results.get(timeout=TIMEOUT) == "dataloader-sync-worker-survivor-1"
    errors = [r for r in caplog.records if r.name == "dataloader_sync"]
    assert len(errors) == 3
    assert all(r.exc_info and isinstance(r.exc_info[1], ValueError) for r in errors)
    assert "target raised" in errors[0].getMessage()
    assert isinstance(worker.last_error, ValueError)
    assert worker.restart_count == 0


def test_backoff_doubles_from_10_ms_and_is_capped_at_1_s():
    assert [_backoff(n) for n in range(1, 9)] == pytest.approx(
        [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0]
    )
    assert _backoff(1000) == _backoff(10**9) == 1.0


def test_RestartableWorker_failing_target_backs_off_instead_of_spinning():
    times: queue.Queue[float] = queue.Queue()

    def unit() -> None:
        times.put(time.monotonic())
        raise ValueError("always broken")

    logging.getLogger("dataloader_sync").disabled = True
    try:
        with RestartableWorker(unit) as worker:
            worker.start()
            stamps = [times.get(timeout=TIMEOUT) for _ in range(5)]
    finally:
        logging.getLogger("dataloader_sync").disabled = False
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    # Lower bounds only (with slack for timer granularity): 10, 20, 40, 80 ms.
    for gap, expected in zip(gaps, [0.01, 0.02, 0.04, 0.08]):
        assert gap >= expected * 0.8


def test_RestartableWorker_crash_starts_a_new_thread(caplog):
    names: queue.Queue[str] = queue.Queue()
    calls = 0

    def unit() -> None:
        nonlocal calls
        calls += 1
        names.put(threading.current_thread().name)
        if calls == 1:
            raise Crash("out of memory, say")
        worker.wait(60)

    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        with RestartableWorker(unit, name="crashy") as worker:
            worker.start()
            assert names.get(timeout=TIMEOUT) == "dataloader-sync-worker-crashy-1"
            assert names.get(timeout=TIMEOUT) == "dataloader-sync-worker-crashy-2"
            assert worker.restart_count == 1
            assert isinstance(worker.last_error, Crash)
            assert worker.state is WorkerState.RUNNING
    [record] = [r for r in caplog.records if "restarted as" in r.getMessage()]
    assert record.exc_info and isinstance(record.exc_info[1], Crash)


def test_RestartableWorker_gives_up_after_too_many_crashes_within_the_window(watch_log):
    clock = FakeClock()
    crash_times = [0.0, 11.0, 11.0]  # the first crash is out of the window by the second
    calls = 0

    def unit() -> None:
        nonlocal calls
        clock.now = crash_times[calls]
        calls += 1
        raise Crash("again")

    gave_up = watch_log("giving up")
    worker = RestartableWorker(unit, name="fragile", max_restarts=1, restart_window=10.0,
                               clock=clock)
    worker.start()
    assert gave_up.wait(TIMEOUT)
    assert worker.stop(TIMEOUT)
    assert calls == 3
    assert worker.restart_count == 2
    assert worker.state is WorkerState.GAVE_UP and not worker.running
    assert isinstance(worker.last_error, Crash)

    # start() is a fresh start: the crash history is forgotten.
    crash_times[:] = [20.0, 20.0]
    calls = 0
    gave_up.clear()
    worker.start()
    assert gave_up.wait(TIMEOUT)
    assert worker.stop(TIMEOUT)
    assert calls == 2 and worker.state is WorkerState.GAVE_UP


def test_RestartableWorker_max_restarts_zero_gives_up_on_first_crash(watch_log):
    gave_up = watch_log("giving up")
    worker = RestartableWorker(lambda: (_ for _ in ()).throw(Crash()), max_restarts=0,
                               clock=FakeClock())
    worker.start()
    assert gave_up.wait(TIMEOUT)
    assert worker.stop(TIMEOUT)
    assert worker.restart_count == 0 and worker.state is WorkerState.GAVE_UP


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt])
def test_RestartableWorker_system_exit_stops_the_worker_normally(exc_type):
    calls = 0

    def unit() -> None:
        nonlocal calls
        calls += 1
        raise exc_type()

    worker = RestartableWorker(unit, name="exiting")
    worker.start()
    for thread in worker_threads("exiting"):
        thread.join(TIMEOUT)
    assert worker.stop(TIMEOUT)
    assert calls == 1
    assert worker.state is WorkerState.STOPPED
    assert worker.restart_count == 0 and worker.last_error is None


# -- arguments, fork ----------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs, error, name",
    [
        ((None,), {}, TypeError, "target"),
        ((print,), {"max_restarts": -1}, ValueError, "max_restarts"),
        ((print,), {"max_restarts": 1.5}, TypeError, "max_restarts"),
        ((print,), {"restart_window": 0}, ValueError, "restart_window"),
        ((print,), {"restart_window": -5.0}, ValueError, "restart_window"),
        ((print,), {"restart_window": math.nan}, ValueError, "restart_window"),
        ((print,), {"restart_window": "60"}, TypeError, "restart_window"),
        ((print,), {"name": 3}, TypeError, "name"),
    ],
)
def test_RestartableWorker_rejects_bad_arguments(args, kwargs, error, name):
    with pytest.raises(error, match=name):
        RestartableWorker(*args, **kwargs)


def test_RestartableWorker_default_name_comes_from_the_target():
    def poll_inbox() -> None:
        pass

    assert RestartableWorker(poll_inbox).name == "poll_inbox"
    assert RestartableWorker(lambda: None).name == "worker"
    assert "STOPPED" in repr(RestartableWorker(poll_inbox))


FORK_SCRIPT = textwrap.dedent(
    """
    import os, queue, sys, threading, traceback
    from dataloader_sync._worker import RestartableWorker

    units = queue.Queue()

    def unit():
        units.put(threading.current_thread().name)
        worker.wait(60)

    worker = RestartableWorker(unit, name="forked")
    worker.start()
    units.get(timeout=10)  # the parent's thread is inside wait()
    pid = os.fork()
    if pid == 0:
        try:
            assert not worker.running, "child sees a running worker"
            assert worker.state.name == "STOPPED", worker.state
            units = queue.Queue()
            worker.start()
            assert worker.running
            units.get(timeout=10)
            assert worker.stop(10), "child worker did not stop"
            os._exit(0)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert worker.running, "parent's worker stopped by the fork"
    assert worker.stop(10), "parent worker did not stop"
    sys.exit(os.waitstatus_to_exitcode(status))
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_RestartableWorker_survives_fork_stopped_and_startable_in_child():
    result = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", FORK_SCRIPT],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
