"""ScheduledExecutor: delayed and periodic tasks over a wrapped executor."""
from __future__ import annotations

import concurrent.futures as cf
import contextvars
import dataclasses
import datetime
import functools
import gc
import logging
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from conftest import FakeClock

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


def test_ScheduledExecutor_equal_due_times_run_in_submission_order():
    clock = FakeClock(1000.0)  # stands still: every task gets the same due time
    ex = ScheduledExecutor(name="test-order", max_workers=1, clock=clock)
    ex._timer.executor.stuck_after = 3600  # one thread, even if a run is descheduled for a while
    try:
        order = []
        futures = [ex.schedule(order.append, 5, i) for i in range(30)]
        clock.advance(5)
        ex.wake()
        done, not_done = cf.wait(futures, timeout=WAIT)
        assert not not_done
        assert order == list(range(30))
    finally:
        ex.shutdown()


def test_ScheduledExecutor_runs_on_the_clock_it_is_given():
    clock = FakeClock(0.0)
    ex = ScheduledExecutor(name="test-clock", clock=clock)
    try:
        later = ex.schedule(lambda: "ran", 60)  # a minute of fake time
        assert later.delay() == 60
        clock.advance(20)
        assert later.delay() == 40
        assert ex.pending_count == 1
        clock.advance(40)
        ex.wake()  # the timer reads the moved clock now, not in a real minute
        assert later.result(timeout=WAIT) == "ran"
        assert later.delay() == 0.0
    finally:
        ex.shutdown()


def test_ScheduledExecutor_clock_must_be_callable():
    with pytest.raises(TypeError, match="clock must be callable"):
        ScheduledExecutor(clock=5)  # type: ignore[arg-type]


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
    ticks: queue.Queue[float] = queue.Queue()
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
    stamps: queue.Queue[float] = queue.Queue()
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


def test_ScheduledFuture_cancel_of_a_task_waiting_for_a_pool_thread_drops_the_queued_count_at_once():
    # A due task handed to a busy pool is "queued"; cancelled there, it must leave the count (a
    # registry's close() relies on it: no tick of a closed registry is counted) and be done for
    # concurrent.futures.wait at once, and never run.
    with ScheduledExecutor(name="queued-cancel", max_workers=1) as ex:
        started, release = threading.Event(), threading.Event()
        blocker = ex.schedule(lambda: (started.set(), release.wait(WAIT)), 0)
        assert started.wait(WAIT)
        ran = []
        waiting = ex.schedule(ran.append, 0, "ran")
        deadline = time.monotonic() + WAIT
        while ex.queued_count == 0 and time.monotonic() < deadline:  # the timer hands it over
            threading.Event().wait(0.001)
        assert ex.queued_count == 1
        assert waiting.cancel()
        assert ex.queued_count == 0
        done, not_done = cf.wait([waiting], timeout=0)
        assert done == {waiting} and not not_done
        release.set()
        blocker.result(timeout=WAIT)
        ex.submit(lambda: None).result(timeout=WAIT)  # the pool thread went past the cancelled run
    assert ran == []


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


def test_ScheduledExecutor_shutdown_wait_after_shutdown_nowait_waits_for_the_owned_pool():
    # As ThreadPoolExecutor: a later shutdown(wait=True) joins what an earlier shutdown(wait=False) left running.
    ex = ScheduledExecutor(name="test-shutdown-twice", max_workers=1)
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    running = ex.submit(lambda: (started.set(), release.wait(WAIT), finished.set()))
    assert started.wait(WAIT)
    ex.shutdown(wait=False)
    assert not finished.is_set()
    threading.Timer(0.05, release.set).start()
    ex.shutdown(wait=True)
    assert finished.is_set() and running.done()
    assert ex.statistics().pool is not None and ex.statistics().pool.threads == 0


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
        (lambda ex: ex.schedule_at_fixed_rate(lambda: None, float("nan"), 1), ValueError,
         "initial_delay must be finite"),
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
    pool = a.statistics().pool
    assert pool is not None and (pool.workers, pool.max_threads) == (4, 64)
    names = {t.name for t in threading.enumerate() if t.name.startswith("dataloader-sync-default")}
    assert len(names) <= pool.max_threads + 2  # the pool, the timer and a monitor


def _run_script(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env)


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


@pytest.mark.parametrize("owned", [True, False])
def test_ScheduledExecutor_runs_dropped_by_the_wrapped_executor_cancel_their_futures(owned):
    pool = None if owned else cf.ThreadPoolExecutor(1, thread_name_prefix="given-dropped")
    ex = ScheduledExecutor(pool, name="test-dropped", max_workers=1)
    if owned:
        ex._timer.executor.stuck_after = 3600  # the one worker stays the only one
    gate, started = threading.Event(), threading.Event()
    blocker = ex.submit(lambda: (started.set(), gate.wait(WAIT)))
    assert started.wait(WAIT)
    futures = [ex.schedule(lambda: "ran", 0) for _ in range(5)]
    deadline = time.monotonic() + WAIT
    while ex.queued_count < 5 and time.monotonic() < deadline:  # all due, waiting for the one worker
        gate.wait(0.001)
    assert ex.queued_count == 5
    if owned:
        ex.shutdown(wait=False, cancel_futures=True)
    else:
        pool.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert blocker.result(timeout=WAIT) == (None, True)
    done, not_done = cf.wait(futures, timeout=WAIT)
    assert not not_done and all(f.cancelled() for f in futures)  # none hangs
    assert ex.queued_count == 0
    ex.shutdown(wait=True)
    if pool is not None:
        pool.shutdown(wait=True)


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


# -- fork (issue: a child could deadlock on its first task) ------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_default_scheduled_executor_works_in_every_forked_child_while_tasks_are_due():
    # gunicorn --preload: forks while fixed-rate tasks and a ticker registry are live.  Each child
    # must run a task on the default executor and tick a new registry; the parent goes on working.
    proc = _run_script(
        """
        import os, sys, threading
        from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry, get_default_scheduled_executor

        def child():
            ex = get_default_scheduled_executor()
            assert ex.submit(lambda: 7).result(timeout=5) == 7
            assert ex.schedule(os.getpid, 0.001).result(timeout=5) == os.getpid()
            registry = ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.001)
            registry.register("ids", DataLoader(lambda keys: [k * 2 for k in keys]))
            registry.dispatch_all()                            # arms the ticker
            assert registry["ids"].load(21).result(timeout=5) == 42  # dispatched by a tick
            registry.close()

        def run_child():
            done = threading.Event()
            def body():
                try:
                    child()
                    done.set()
                except BaseException as exc:
                    print("child failed:", repr(exc), file=sys.stderr, flush=True)
            t = threading.Thread(target=body, daemon=True)
            t.start()
            t.join(10)
            os._exit(0 if done.is_set() else 1)

        ex = get_default_scheduled_executor()
        ex.schedule_at_fixed_rate(lambda: None, 0, 0.0005)
        ex.schedule_with_fixed_delay(lambda: None, 0, 0.0005)
        registry = ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.0005)
        registry.register("ids", DataLoader(lambda keys: list(keys)))
        registry.dispatch_all()
        stop = threading.Event()
        def load_in_a_loop():                                  # keeps ticks and the pool busy
            n = 0
            while not stop.is_set():
                registry["ids"].load(n).result(timeout=10)
                n += 1
        loader_thread = threading.Thread(target=load_in_a_loop, daemon=True)
        loader_thread.start()
        stuck = 0
        for _ in range(50):
            pid = os.fork()
            if pid == 0:
                run_child()
            _, status = os.waitpid(pid, 0)
            stuck += os.waitstatus_to_exitcode(status) != 0
        assert ex.submit(lambda: "parent").result(timeout=10) == "parent"
        assert registry["ids"].load("last").result(timeout=10) == "last"
        stop.set()
        loader_thread.join(10)
        print("stuck", stuck)
        sys.exit(1 if stuck else 0)
        """,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stuck 0" in proc.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_ScheduledExecutor_runs_in_flight_at_a_fork_are_the_parents():
    # A one-shot handed over (queued or running) at the fork is cancelled in the child, never left
    # hanging nor counted; a periodic task running at the fork goes on in the child.
    proc = _run_script(
        """
        import os, sys, threading
        from dataloader_sync import ScheduledExecutor
        ex = ScheduledExecutor(name="forked", max_workers=1)
        ex._timer.executor.stuck_after = 3600          # the one worker stays the only one
        parent = os.getpid()
        gate, started, periodic_started = threading.Event(), threading.Event(), threading.Event()
        ticked_in_child = threading.Event()

        def tick():
            if os.getpid() == parent:
                periodic_started.set()
                gate.wait(30)
            else:
                ticked_in_child.set()

        periodic = ex.schedule_at_fixed_rate(tick, 0, 2)    # its next run, in the child, is 2 s away
        assert periodic_started.wait(10)
        ex._timer.executor.stuck_after = 0.0             # let one more thread start, then hold it too
        running = ex.submit(lambda: (started.set(), gate.wait(30)))
        assert started.wait(10)
        ex._timer.executor.stuck_after = 3600
        queued = ex.submit(lambda: "parent")
        assert ex.queued_count == 1
        pid = os.fork()
        if pid == 0:
            ok = ex.queued_count == 0 and queued.cancelled() and running.cancelled()
            ok = ok and not periodic.done() and ticked_in_child.wait(10)
            ok = ok and ex.submit(lambda: 5).result(timeout=10) == 5
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        gate.set()
        assert queued.result(timeout=10) == "parent"
        assert running.result(timeout=10) == (None, True)
        periodic.cancel()
        ex.shutdown()
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- exit -------------------------------------------------------------------------------------------


def test_interpreter_exit_does_not_wait_for_a_default_executor_task_stuck_in_user_code():
    proc = _run_script(
        """
        import threading
        from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry, get_default_scheduled_executor
        in_batch = threading.Event()
        def stuck_batch(keys):                     # a remote call that never returns
            in_batch.set()
            threading.Event().wait(3600)
            return keys
        registry = ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.005)
        registry.register("stuck", DataLoader(stuck_batch))
        registry.reschedule_now()
        registry["stuck"].load(1)
        assert in_batch.wait(10)                   # a tick is inside the batch function
        started = threading.Event()
        get_default_scheduled_executor().submit(lambda: (started.set(), threading.Event().wait(3600)))
        assert started.wait(10)
        print("exiting", flush=True)
        """,
        timeout=30,  # the stuck tasks would hold the process for an hour
    )
    assert proc.returncode == 0, proc.stderr
    assert "exiting" in proc.stdout


def test_a_given_executor_keeps_its_own_exit_semantics():
    # A ThreadPoolExecutor joins its workers at exit: a task on it finishes before the process ends.
    proc = _run_script(
        """
        import concurrent.futures as cf, threading
        from dataloader_sync import ScheduledExecutor
        pool = cf.ThreadPoolExecutor(1)
        ex = ScheduledExecutor(pool, name="given")
        started = threading.Event()
        def task():
            started.set()
            threading.Event().wait(0.3)
            print("task finished", flush=True)
        ex.submit(task)
        assert started.wait(10)
        print("exiting", flush=True)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["exiting", "task", "finished"]


# -- no head-of-line blocking ----------------------------------------------------------------------


def test_ScheduledExecutor_light_task_starts_while_every_worker_is_blocked():
    ex = ScheduledExecutor(name="test-hol", max_workers=2)
    gate = threading.Event()
    try:
        started = threading.Semaphore(0)
        blocked = [ex.submit(lambda: (started.release(), gate.wait(WAIT))) for _ in range(2)]
        for _ in range(2):
            assert started.acquire(timeout=WAIT)
        ran = threading.Event()
        tick = ex.schedule(ran.set, 0)
        assert ran.wait(WAIT), "a tick waited behind blocked tasks"
        tick.result(timeout=WAIT)
        pool = ex.statistics().pool
        assert pool is not None and pool.threads >= 3 and pool.stuck_threads >= 1
    finally:
        gate.set()
        ex.shutdown()
    assert all(f.result(timeout=0)[1] for f in blocked)


def test_ScheduledExecutor_with_a_given_executor_keeps_its_queueing():
    pool = cf.ThreadPoolExecutor(1, thread_name_prefix="given")
    ex = ScheduledExecutor(pool, name="test-given-queue")
    gate, started = threading.Event(), threading.Event()
    try:
        blocker = ex.submit(lambda: (started.set(), gate.wait(WAIT)))
        assert started.wait(WAIT)
        behind = ex.submit(lambda: "behind")
        assert not behind.done() and ex.queued_count == 1  # no thread of ours jumps the queue
        assert ex.statistics().pool is None
    finally:
        gate.set()
    assert behind.result(timeout=WAIT) == "behind"
    assert blocker.result(timeout=WAIT)[1] is True
    ex.shutdown()
    pool.shutdown()


# -- contextvars ----------------------------------------------------------------------------------

REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST", default="none")


def test_ScheduledExecutor_runs_each_task_in_a_copy_of_the_scheduling_context(executor):
    token = REQUEST.set("request-1")
    try:
        one_shot = executor.schedule(REQUEST.get, 0.001)
        submitted = executor.submit(REQUEST.get)
        seen: queue.Queue[str] = queue.Queue()
        periodic = executor.schedule_at_fixed_rate(lambda: seen.put(REQUEST.get()), 0, 0.001)
    finally:
        REQUEST.reset(token)
    REQUEST.set("changed later")  # copied at scheduling time: later changes are not seen
    try:
        assert one_shot.result(timeout=WAIT) == "request-1"
        assert submitted.result(timeout=WAIT) == "request-1"
        assert [seen.get(timeout=WAIT) for _ in range(3)] == ["request-1"] * 3
    finally:
        periodic.cancel()
    # A task's own changes stay in its copy.
    executor.submit(REQUEST.set, "set by a task").result(timeout=WAIT)
    assert executor.submit(REQUEST.get).result(timeout=WAIT) == "changed later"


def test_ScheduledDataLoaderRegistry_tick_runs_in_the_context_of_the_request_that_armed_it(executor):
    from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry

    def run_request(name):
        REQUEST.set(name)
        registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=0.001)
        registry.register("who", DataLoader(lambda keys: [REQUEST.get() for _ in keys]))
        registry.dispatch_all()  # arms the ticker in this request's context
        try:
            return registry["who"].load("k").result(timeout=WAIT)
        finally:
            registry.close()

    results = [contextvars.copy_context().run(run_request, f"request-{i}") for i in range(3)]
    assert results == ["request-0", "request-1", "request-2"]


# -- statistics and the slow-task log -----------------------------------------------------------------


def test_ScheduledExecutor_statistics_is_a_frozen_snapshot(executor):
    assert executor.statistics().tasks_run == 0
    executor.submit(lambda: None).result(timeout=WAIT)
    with pytest.raises(ZeroDivisionError):
        executor.schedule(lambda: 1 / 0, 0).result(timeout=WAIT)
    executor.schedule(lambda: None, 0).result(timeout=WAIT)
    stats = executor.statistics()
    assert (stats.tasks_run, stats.tasks_failed, stats.slow_tasks) == (3, 1, 0)
    assert stats.queue_wait.count == 3 and stats.run_time.count == 3
    assert stats.timer_lateness.count == 2  # submit() is not a timer hand-over
    assert stats.queue_wait.max >= stats.queue_wait.p99 >= 0 and stats.queue_wait.mean >= 0
    assert stats.failure_ratio == pytest.approx(1 / 3)
    assert stats.pool is not None and stats.pool.threads >= 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.tasks_run = 5  # type: ignore[misc]
    as_dict = stats.to_dict()
    assert as_dict["tasks_run"] == 3 and as_dict["run_time"]["count"] == 3 and "threads" in as_dict["pool"]
    executor.submit(lambda: None).result(timeout=WAIT)
    assert stats.tasks_run == 3  # a snapshot does not move


def test_ScheduledExecutor_statistics_window_is_bounded(executor):
    from dataloader_sync._executor_statistics import WINDOW

    futures = [executor.submit(lambda: None) for _ in range(WINDOW + 50)]
    _, not_done = cf.wait(futures, timeout=WAIT)
    assert not not_done
    stats = executor.statistics()
    assert stats.run_time.count == WINDOW + 50
    assert len(executor._timer.run_time.samples) == WINDOW


def test_Window_mean_max_and_p99():
    from dataloader_sync._executor_statistics import Window

    window = Window()
    assert window.snapshot().to_dict() == {"count": 0, "mean": 0.0, "max": 0.0, "p99": 0.0}
    for ms in range(1, 201):  # 1..200 ms
        window.add(ms / 1000)
    snap = window.snapshot()
    assert snap.count == 200 and snap.max == 0.2
    assert snap.mean == pytest.approx(0.1005)
    assert snap.p99 == 0.198  # the 198th of 200 sorted samples


def test_ScheduledExecutor_logs_and_counts_a_slow_task(caplog):
    clock = FakeClock(1000.0)  # advanced by the tasks themselves
    executor = ScheduledExecutor(name="test-slow", clock=clock)
    executor.slow_task_threshold = 1.0

    def slow():
        clock.now += 2.5  # this run "takes" 2.5 s

    def fast():
        clock.now += 0.5

    with caplog.at_level(logging.WARNING, logger="dataloader_sync"):
        executor.submit(slow).result(timeout=WAIT)
        executor.submit(fast).result(timeout=WAIT)
        executor.submit(functools.partial(lambda: slow(), )).result(timeout=WAIT)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "test_ScheduledExecutor_logs_and_counts_a_slow_task.<locals>.slow" in warnings[0]
    assert "took 2.500 s" in warnings[0]
    assert "<lambda>" in warnings[1]  # a partial is named by the function it wraps
    stats = executor.statistics()
    executor.shutdown()
    assert stats.slow_tasks == 2 and stats.run_time.max == 2.5


def test_ScheduledExecutor_slow_task_threshold_is_off_by_default_and_checked(caplog):
    clock = FakeClock(1000.0)
    executor = ScheduledExecutor(name="test-slow-off", clock=clock)
    assert executor.slow_task_threshold is None
    with caplog.at_level(logging.WARNING, logger="dataloader_sync"):
        executor.submit(lambda: setattr(clock, "now", clock.now + 100)).result(timeout=WAIT)
    assert not caplog.records and executor.statistics().slow_tasks == 0
    bad_thresholds = [(0, ValueError), (-1, ValueError), (float("nan"), ValueError), ("1", TypeError),
                      (True, TypeError)]
    for bad, exc in bad_thresholds:
        with pytest.raises(exc, match="slow_task_threshold"):
            executor.slow_task_threshold = bad
        with pytest.raises(exc, match="slow_task_threshold"):
            ScheduledExecutor(slow_task_threshold=bad)
    executor.shutdown()
    ex = ScheduledExecutor(name="test-threshold", slow_task_threshold=datetime.timedelta(milliseconds=250))
    assert ex.slow_task_threshold == 0.25
    ex.shutdown()


def test_default_scheduled_executor_slow_task_threshold_is_a_setting(monkeypatch, caplog):
    ex = get_default_scheduled_executor()
    clock = FakeClock(1000.0)
    monkeypatch.setattr(ex._timer, "clock", clock)  # the default executor reads time.monotonic
    ex.slow_task_threshold = 0.5
    try:
        with caplog.at_level(logging.WARNING, logger="dataloader_sync"):
            ex.submit(slow_report_taking, clock, 0.75).result(timeout=WAIT)
    finally:
        ex.slow_task_threshold = None
    assert [r.getMessage() for r in caplog.records] == [
        "slow task: test_executor.slow_report_taking took 0.750 s (slow_task_threshold is 0.5 s)"
    ]


def slow_report_taking(clock, seconds):
    clock.now += seconds


def test_ScheduledExecutor_run_observer_that_raises_is_logged_and_the_task_completes(caplog):
    executor = ScheduledExecutor(name="observed", max_workers=1)
    seen: list[tuple[float, float]] = []

    def broken(queue_wait, run_time):
        raise RuntimeError("observer bug")

    executor.add_run_observer(broken)
    executor.add_run_observer(lambda w, r: seen.append((w, r)))
    try:
        with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
            assert executor.submit(lambda: 7).result(timeout=10) == 7
            executor.submit(lambda: None).result(timeout=10)
        assert any("run observer" in r.getMessage() for r in caplog.records)
        assert seen and all(w >= 0 and r >= 0 for w, r in seen)
        executor.remove_run_observer(broken)
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
            executor.submit(lambda: None).result(timeout=10)
        assert caplog.records == []  # removed
        with pytest.raises(TypeError, match="observer must be callable"):
            executor.add_run_observer(None)  # type: ignore[arg-type]
    finally:
        executor.shutdown()


def test_ScheduledExecutor_run_observer_is_told_queue_wait_and_run_time_on_the_executors_clock():
    clock = FakeClock()
    seen: queue.Queue = queue.Queue()
    with ScheduledExecutor(name="observed-clock", max_workers=1, clock=clock) as executor:
        executor.add_run_observer(lambda waited, took: seen.put((waited, took)))
        future = executor.schedule(slow_report_taking, 1.0, clock, 0.25)
        clock.now += 1.5  # due at 1.0, started at 1.5
        executor.wake()
        future.result(timeout=10)
        assert seen.get(timeout=10) == (0.5, 0.25)
