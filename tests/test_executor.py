"""ScheduledExecutor: delayed and periodic tasks over a wrapped executor."""
from __future__ import annotations

import concurrent.futures as cf
import datetime
import gc
import logging
import queue
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from dataloader_sync import ScheduledExecutor, ScheduledFuture, get_default_scheduled_executor

WAIT = 10.0  # generous upper bound for anything that should happen "soon"


@pytest.fixture
def executor():
    ex = ScheduledExecutor(name="test-sched")
    yield ex
    ex.shutdown(wait=True, cancel_futures=True)


def test_ScheduledExecutor_schedule_runs_after_the_delay(executor):
    start = time.monotonic()
    fut = executor.schedule(lambda: time.monotonic(), 0.05)
    assert isinstance(fut, ScheduledFuture) and isinstance(fut, cf.Future)
    ran_at = fut.result(timeout=WAIT)
    assert ran_at - start >= 0.05 - 0.002  # lower bound: never early
    assert executor.completed_count == 1
    assert executor.task_count == 1


def test_ScheduledExecutor_passes_args_and_kwargs(executor):
    fut = executor.schedule(lambda a, b=0: a + b, 0, 2, b=3)
    assert fut.result(timeout=WAIT) == 5


def test_ScheduledExecutor_accepts_timedelta(executor):
    fut = executor.schedule(lambda: "ok", datetime.timedelta(milliseconds=1))
    assert fut.result(timeout=WAIT) == "ok"


def test_ScheduledExecutor_negative_delay_means_now(executor):
    assert executor.schedule(lambda: 1, -5).result(timeout=WAIT) == 1


def test_ScheduledExecutor_equal_due_times_run_in_submission_order(monkeypatch):
    from dataloader_sync import _executor

    ex = ScheduledExecutor(name="test-order", max_workers=1)
    try:
        order = []
        now = time.monotonic()
        monkeypatch.setattr(_executor, "_clock", lambda: now)  # every task gets the same due time
        futures = [ex.schedule(order.append, 0.02, i) for i in range(30)]
        monkeypatch.undo()
        done, not_done = cf.wait(futures, timeout=WAIT)
        assert not not_done
        assert order == list(range(30))
    finally:
        ex.shutdown()


def test_ScheduledExecutor_timer_thread_never_runs_user_code(executor):
    names = [executor.schedule(lambda: threading.current_thread().name, 0).result(timeout=WAIT) for _ in range(3)]
    timer = executor.timer_thread
    assert timer is not None and timer.daemon
    assert timer.name == "test-sched-timer"
    assert all(name != timer.name for name in names)
    assert all(name.startswith("test-sched-worker") for name in names)


def test_ScheduledExecutor_slow_task_does_not_delay_another_tick(executor):
    gate = threading.Event()
    slow = executor.schedule(gate.wait, 0, WAIT)
    ticks: "queue.Queue[float]" = queue.Queue()
    periodic = executor.schedule_at_fixed_rate(lambda: ticks.put(time.monotonic()), 0, 0.01)
    try:
        for _ in range(3):
            ticks.get(timeout=WAIT)  # three ticks while the slow task still blocks
        assert not slow.done()
    finally:
        gate.set()
        periodic.cancel()
    assert slow.result(timeout=WAIT) is True


def test_ScheduledExecutor_fixed_rate_repeats_and_never_overlaps(executor):
    state = {"running": 0, "overlap": False, "runs": 0}
    lock = threading.Lock()
    done = threading.Event()

    def task():
        with lock:
            state["running"] += 1
            state["overlap"] |= state["running"] > 1
        threading.Event().wait(0.005)  # a run longer than the period
        with lock:
            state["running"] -= 1
            state["runs"] += 1
            if state["runs"] == 10:
                done.set()

    fut = executor.schedule_at_fixed_rate(task, 0, 0.001)
    assert done.wait(WAIT)
    fut.cancel()
    assert not state["overlap"]
    assert fut.cancelled()


def test_ScheduledExecutor_fixed_delay_waits_after_each_run(executor):
    stamps: "queue.Queue[float]" = queue.Queue()
    fut = executor.schedule_with_fixed_delay(lambda: stamps.put(time.monotonic()), 0, 0.02)
    got = [stamps.get(timeout=WAIT) for _ in range(3)]
    fut.cancel()
    assert all(b - a >= 0.02 - 0.002 for a, b in zip(got, got[1:]))


def test_ScheduledExecutor_periodic_task_that_raises_stops_and_is_logged(executor, caplog):
    runs = []

    def task():
        runs.append(1)
        if len(runs) == 2:
            raise ValueError("boom")

    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        fut = executor.schedule_at_fixed_rate(task, 0, 0.001)
        with pytest.raises(ValueError, match="boom"):
            fut.result(timeout=WAIT)
    assert len(runs) == 2
    assert executor.pending_count == 0
    assert any("will not run again" in r.getMessage() for r in caplog.records)


def test_ScheduledExecutor_one_shot_failure_goes_to_its_future_only(executor):
    bad = executor.schedule(lambda: 1 / 0, 0)
    good = executor.schedule(lambda: "fine", 0)
    with pytest.raises(ZeroDivisionError):
        bad.result(timeout=WAIT)
    assert good.result(timeout=WAIT) == "fine"


def test_ScheduledFuture_cancel_drops_the_pending_count_at_once(executor):
    ran = []
    futures = [executor.schedule(ran.append, 60, i) for i in range(5)]
    assert executor.pending_count == 5
    assert futures[0].cancel()
    assert executor.pending_count == 4
    assert futures[0].cancelled()
    assert futures[0].cancel()  # again: still cancelled, no double count
    assert executor.pending_count == 4
    assert 59 < futures[1].delay() <= 60


def test_ScheduledExecutor_prunes_cancelled_entries(executor):
    futures = [executor.schedule(lambda: None, 60) for _ in range(1000)]
    for fut in futures[10:]:
        fut.cancel()
    assert executor.pending_count == 10
    assert len(executor._timer.heap) < 100  # stale entries did not pile up


def test_ScheduledExecutor_periodic_cancel_while_running_stops_it(executor):
    started, release = threading.Event(), threading.Event()
    runs = []

    def task():
        runs.append(1)
        started.set()
        release.wait(WAIT)

    fut = executor.schedule_at_fixed_rate(task, 0, 0.001)
    assert started.wait(WAIT)
    assert fut.cancel()  # a periodic task can be cancelled mid-run
    release.set()
    executor.submit(lambda: None).result(timeout=WAIT)
    assert executor.pending_count == 0
    assert len(runs) == 1


def test_ScheduledExecutor_submit_runs_now_and_counts(executor):
    assert executor.submit(lambda x: x * 2, 21).result(timeout=WAIT) == 42
    assert list(executor.map(lambda x: x + 1, [1, 2, 3], timeout=WAIT)) == [2, 3, 4]
    assert executor.task_count == 4
    assert executor.completed_count == 4


def test_ScheduledExecutor_shutdown_cancels_waiting_and_periodic_tasks():
    ex = ScheduledExecutor(name="test-shutdown")
    one_shot = ex.schedule(lambda: None, 60)
    periodic = ex.schedule_at_fixed_rate(lambda: None, 60, 1)
    ex.shutdown()
    assert one_shot.cancelled() and periodic.cancelled()
    assert ex.pending_count == 0
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.schedule(lambda: None, 0)
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(lambda: None)
    ex.shutdown()  # idempotent
    assert ex.timer_thread is not None and not ex.timer_thread.is_alive()


def test_ScheduledExecutor_shutdown_stops_a_running_periodic_task():
    ex = ScheduledExecutor(name="test-shutdown-running")
    started, release = threading.Event(), threading.Event()
    fut = ex.schedule_at_fixed_rate(lambda: (started.set(), release.wait(WAIT)), 0, 0.001)
    assert started.wait(WAIT)
    threading.Timer(0.01, release.set).start()
    ex.shutdown(wait=True)
    assert fut.done()  # nothing hangs after shutdown


def test_ScheduledExecutor_never_shuts_down_a_given_executor():
    pool = cf.ThreadPoolExecutor(1, thread_name_prefix="given")
    try:
        ex = ScheduledExecutor(pool, name="test-given")
        assert ex.schedule(lambda: threading.current_thread().name, 0).result(timeout=WAIT).startswith("given")
        ex.shutdown()
        assert pool.submit(lambda: "still works").result(timeout=WAIT) == "still works"
    finally:
        pool.shutdown()


def test_ScheduledExecutor_owned_pool_is_shut_down_with_it():
    ex = ScheduledExecutor(name="test-owned")
    ex.submit(lambda: None).result(timeout=WAIT)
    ex.shutdown()
    with pytest.raises(RuntimeError):
        ex._timer.executor.submit(lambda: None)


@pytest.mark.parametrize(
    "call, exc, message",
    [
        (lambda ex: ex.schedule(lambda: None, float("nan")), ValueError, "delay must be finite"),
        (lambda ex: ex.schedule(lambda: None, float("inf")), ValueError, "delay must be finite"),
        (lambda ex: ex.schedule(lambda: None, "1"), TypeError, "delay must be a number"),
        (lambda ex: ex.schedule(lambda: None, True), TypeError, "delay must be a number"),
        (lambda ex: ex.schedule("not callable", 1), TypeError, "fn must be callable"),
        (lambda ex: ex.schedule_at_fixed_rate(lambda: None, 0, 0), ValueError, "period must be > 0"),
        (lambda ex: ex.schedule_at_fixed_rate(lambda: None, 0, -1), ValueError, "period must be > 0"),
        (lambda ex: ex.schedule_at_fixed_rate(lambda: None, float("nan"), 1), ValueError, "initial_delay must be finite"),
        (lambda ex: ex.schedule_with_fixed_delay(lambda: None, 0, 0), ValueError, "delay must be > 0"),
        (lambda ex: ex.schedule_with_fixed_delay(lambda: None, 0, float("inf")), ValueError, "delay must be finite"),
    ],
)
def test_ScheduledExecutor_bad_input_is_refused_at_once(executor, call, exc, message):
    with pytest.raises(exc, match=message):
        call(executor)
    assert executor.pending_count == 0


def test_ScheduledExecutor_bad_constructor_arguments():
    with pytest.raises(TypeError, match="executor must be"):
        ScheduledExecutor(object())
    with pytest.raises(ValueError, match="max_workers must be > 0"):
        ScheduledExecutor(max_workers=0)


def test_ScheduledExecutor_garbage_collected_stops_its_timer_thread():
    ex = ScheduledExecutor(name="test-gc")
    ex.schedule(lambda: None, 60)
    timer = ex.timer_thread
    assert timer is not None and timer.is_alive()
    del ex
    gc.collect()
    timer.join(WAIT)
    assert not timer.is_alive()


def test_default_scheduled_executor_is_shared_and_bounded():
    a = get_default_scheduled_executor()
    assert a is get_default_scheduled_executor()
    futures = [a.submit(threading.Event().wait, 0.01) for _ in range(20)]
    cf.wait(futures, timeout=WAIT)
    names = {t.name for t in threading.enumerate() if t.name.startswith("dataloader-sync-default")}
    assert len(names) <= 5  # four workers and the timer


def _run_script(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_default_scheduled_executor_survives_fork():
    proc = _run_script(
        """
        import os, sys
        from dataloader_sync import get_default_scheduled_executor
        ex = get_default_scheduled_executor()
        assert ex.schedule(lambda: "parent", 0).result(timeout=10) == "parent"
        ticks = ex.schedule_at_fixed_rate(lambda: None, 60, 60)  # pending across the fork
        pid = os.fork()
        if pid == 0:
            try:
                child = get_default_scheduled_executor()
                ok = child.schedule(lambda: os.getpid(), 0.01).result(timeout=10) == os.getpid()
                ok = ok and child.submit(lambda: 7).result(timeout=10) == 7
                ok = ok and child.pending_count == 1
            except BaseException:
                ok = False
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert ex.schedule(lambda: "parent again", 0).result(timeout=10) == "parent again"
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    assert proc.returncode == 0, proc.stderr


def test_default_scheduled_executor_never_hangs_interpreter_exit():
    proc = _run_script(
        """
        from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry, get_default_scheduled_executor
        ex = get_default_scheduled_executor()
        ex.schedule(lambda: None, 3600)
        ex.schedule_at_fixed_rate(lambda: None, 0, 0.001)
        registry = ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.001)
        registry.register("a", DataLoader(lambda keys: keys))
        registry.dispatch_all()
        print("exiting")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "exiting" in proc.stdout


def test_ScheduledExecutor_runs_dropped_by_the_wrapped_executor_cancel_their_futures():
    ex = ScheduledExecutor(name="test-dropped", max_workers=1)
    gate = threading.Event()
    blocker = ex.submit(gate.wait, WAIT)
    futures = [ex.schedule(lambda: "ran", 0) for _ in range(5)]
    deadline = time.monotonic() + WAIT
    while ex.queued_count < 5 and time.monotonic() < deadline:  # all due, waiting for the one worker
        gate.wait(0.001)
    assert ex.queued_count == 5
    ex.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert blocker.result(timeout=WAIT) is True
    done, not_done = cf.wait(futures, timeout=WAIT)
    assert not not_done and all(f.cancelled() for f in futures)  # none hangs
    assert ex.queued_count == 0
    ex.shutdown(wait=True)


@pytest.mark.parametrize("periodic", [False, True])
def test_ScheduledFuture_cancel_wakes_concurrent_futures_wait(executor, periodic):
    if periodic:
        fut = executor.schedule_at_fixed_rate(lambda: None, 60, 1)
    else:
        fut = executor.schedule(lambda: None, 60)
    waiting = cf.ThreadPoolExecutor(1)
    try:
        waited = waiting.submit(cf.wait, [fut], WAIT)
        fut.cancel()
        done, not_done = waited.result(timeout=WAIT * 2)
        assert done == {fut} and not not_done
    finally:
        waiting.shutdown()
