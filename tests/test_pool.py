"""ElasticPool: the owned pool, where tasks stuck past a threshold stop counting against capacity."""
from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from dataloader_sync._pool import ElasticPool

WAIT = 10.0  # generous upper bound for anything that should happen "soon"
NEVER = 3600.0  # a stuck_after / idle_timeout that no test reaches


@pytest.fixture
def make_pool():
    pools = []

    def make(workers=2, **options):
        options.setdefault("name", "test-pool")
        pool = ElasticPool(workers, **options)
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.shutdown(wait=True, cancel_futures=True)


def _blockers(pool, n, gate):
    """Submit *n* tasks that wait on *gate*; return their futures once all have started."""
    started = threading.Semaphore(0)

    def block():
        started.release()
        return gate.wait(WAIT)

    futures = [pool.submit(block) for _ in range(n)]
    for _ in range(n):
        assert started.acquire(timeout=WAIT)
    return futures


def _threads_named(prefix):
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def test_ElasticPool_runs_tasks_and_reports_their_outcome(make_pool):
    pool = make_pool()
    assert pool.submit(lambda a, b=0: a + b, 2, b=3).result(timeout=WAIT) == 5
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(timeout=WAIT)
    assert list(pool.map(lambda x: x * 2, [1, 2, 3], timeout=WAIT)) == [2, 4, 6]


def test_ElasticPool_threads_are_named_daemon_threads(make_pool):
    pool = make_pool(name="test-named")
    thread = pool.submit(threading.current_thread).result(timeout=WAIT)
    assert thread.daemon
    assert thread.name.startswith("test-named-worker-")


def test_ElasticPool_reuses_an_idle_thread(make_pool):
    pool = make_pool(workers=1, stuck_after=NEVER)
    for i in range(20):
        assert pool.submit(lambda i=i: i).result(timeout=WAIT) == i
    stats = pool.statistics()
    assert stats.threads_started == 1
    assert stats.threads == stats.idle_threads == 1


def test_ElasticPool_N_blocked_tasks_hold_N_workers(make_pool):
    gate = threading.Event()
    pool = make_pool(workers=3, stuck_after=NEVER)
    futures = _blockers(pool, 3, gate)
    stats = pool.statistics()
    assert (stats.threads, stats.busy_threads, stats.idle_threads, stats.stuck_threads) == (3, 3, 0, 0)
    gate.set()
    assert [f.result(timeout=WAIT) for f in futures] == [True] * 3


def test_ElasticPool_fresh_tasks_queue_behind_the_capacity(make_pool):
    gate = threading.Event()
    pool = make_pool(workers=2, stuck_after=NEVER)
    blockers = _blockers(pool, 2, gate)
    light = pool.submit(lambda: "light")
    stats = pool.statistics()
    assert stats.queued_tasks == 1 and stats.threads == 2  # a burst does not get a thread per task
    assert not light.done()
    gate.set()
    assert light.result(timeout=WAIT) == "light"
    assert all(f.result(timeout=WAIT) for f in blockers)


def test_ElasticPool_a_light_task_starts_while_every_worker_is_stuck(make_pool):
    # Without the elastic policy the light task would wait for the gate, i.e. for ever here.
    gate = threading.Event()
    pool = make_pool(workers=2, stuck_after=0.05)
    blockers = _blockers(pool, 2, gate)
    ran = threading.Event()
    light = pool.submit(ran.set)
    try:
        assert ran.wait(WAIT), "a light task waited behind stuck tasks"
        light.result(timeout=WAIT)
        stats = pool.statistics()
        assert stats.stuck_threads >= 1  # one stuck task is enough to free a unit of capacity
        assert stats.threads == 3 and stats.peak_threads == 3
    finally:
        gate.set()
    assert all(f.result(timeout=WAIT) for f in blockers)


def test_ElasticPool_growth_is_bounded_by_max_threads(make_pool):
    gate = threading.Event()
    pool = make_pool(workers=1, max_threads=2, stuck_after=0.01)
    blockers = _blockers(pool, 2, gate)  # the second starts once the first is stuck
    queued = pool.submit(lambda: "queued")
    stats = pool.statistics()
    assert stats.threads == 2 and stats.queued_tasks == 1
    gate.set()
    assert queued.result(timeout=WAIT) == "queued"
    assert all(f.result(timeout=WAIT) for f in blockers)
    assert pool.statistics().peak_threads == 2


def test_ElasticPool_shrinks_back_when_idle(make_pool):
    gate = threading.Event()
    pool = make_pool(workers=1, stuck_after=0.01, idle_timeout=0.05, name="test-shrink")
    blockers = _blockers(pool, 3, gate)
    threads = _threads_named("test-shrink-")
    assert len([t for t in threads if "-worker-" in t.name]) == 3
    gate.set()
    assert all(f.result(timeout=WAIT) for f in blockers)
    for thread in threads:  # every idle thread ends, the first one included
        thread.join(WAIT)
        assert not thread.is_alive()
    stats = pool.statistics()
    assert stats.threads == 0 and stats.peak_threads == 3
    assert pool.submit(lambda: "again").result(timeout=WAIT) == "again"  # and starts again


def test_ElasticPool_shutdown_cancels_queued_tasks_and_joins(make_pool):
    gate = threading.Event()
    pool = make_pool(workers=1, stuck_after=NEVER, name="test-pool-shutdown")
    (blocker,) = _blockers(pool, 1, gate)
    queued = [pool.submit(lambda: "never") for _ in range(3)]
    threads = _threads_named("test-pool-shutdown-")
    threading.Timer(0.01, gate.set).start()
    pool.shutdown(wait=True, cancel_futures=True)
    assert blocker.result(timeout=0) is True
    assert all(f.cancelled() for f in queued)
    assert not any(t.is_alive() for t in threads)
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(lambda: None)
    pool.shutdown()  # idempotent


def test_ElasticPool_shutdown_without_cancel_runs_queued_tasks_first(make_pool):
    gate = threading.Event()
    pool = make_pool(workers=1, stuck_after=NEVER)
    (blocker,) = _blockers(pool, 1, gate)
    queued = pool.submit(lambda: "ran")
    threading.Timer(0.01, gate.set).start()
    pool.shutdown(wait=True)
    assert queued.result(timeout=0) == "ran"


def test_ElasticPool_cancelled_before_start_never_runs(make_pool):
    gate = threading.Event()
    pool = make_pool(workers=1, stuck_after=NEVER)
    (blocker,) = _blockers(pool, 1, gate)
    ran = []
    queued = pool.submit(ran.append, 1)
    assert queued.cancel()
    gate.set()
    assert pool.submit(lambda: "after").result(timeout=WAIT) == "after"
    assert ran == [] and queued.cancelled()


def test_ElasticPool_execute_logs_a_failure_and_keeps_working(make_pool, caplog):
    pool = make_pool()
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        pool.execute(lambda: 1 / 0)
        assert pool.submit(lambda: "still").result(timeout=WAIT) == "still"
        pool.shutdown(wait=True)
    assert any("raised" in r.getMessage() and r.exc_info for r in caplog.records)


def test_ElasticPool_max_threads_below_workers_is_refused():
    with pytest.raises(ValueError, match="max_threads"):
        ElasticPool(4, name="bad", max_threads=2)


def _run_script(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_ElasticPool_in_a_forked_child_cancels_the_parents_tasks_and_works():
    proc = _run_script(
        """
        import os, sys, threading
        from dataloader_sync._pool import ElasticPool
        pool = ElasticPool(1, name="p", stuck_after=3600)
        gate, started = threading.Event(), threading.Event()
        running = pool.submit(lambda: (started.set(), gate.wait(30)))
        assert started.wait(10)
        queued = pool.submit(lambda: "parent")
        pid = os.fork()
        if pid == 0:
            ok = running.cancelled() and queued.cancelled()           # none hangs
            stats = pool.statistics()
            ok = ok and stats.threads == 0 and stats.queued_tasks == 0
            ok = ok and pool.submit(os.getpid).result(timeout=10) == os.getpid()
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        gate.set()
        assert queued.result(timeout=10) == "parent"                  # the parent's tasks run there
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    assert proc.returncode == 0, proc.stderr


def test_ElasticPool_threads_never_hold_up_interpreter_exit():
    proc = _run_script(
        """
        import threading
        from dataloader_sync._pool import ElasticPool
        pool = ElasticPool(1, name="p")
        started = threading.Event()
        pool.submit(lambda: (started.set(), threading.Event().wait(3600)))
        assert started.wait(10)
        print("exiting")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "exiting" in proc.stdout


def test_ElasticPool_is_a_concurrent_futures_executor(make_pool):
    pool = make_pool()
    assert isinstance(pool, cf.Executor)
    _, not_done = cf.wait([pool.submit(lambda: 1), pool.submit(lambda: 2)], timeout=WAIT)
    assert not not_done


def test_ElasticPool_shutdown_wait_joins_idle_threads_too(make_pool):
    gate = threading.Event()
    pool = make_pool(workers=3, stuck_after=NEVER, name="test-join-idle")
    futures = _blockers(pool, 3, gate)
    gate.set()
    assert all(f.result(timeout=WAIT) for f in futures)
    threads = _threads_named("test-join-idle-")
    assert len(threads) == 3
    pool.shutdown(wait=True)
    assert [t.name for t in threads if t.is_alive()] == []  # joined, not merely told to end


def test_ElasticPool_measures_stuck_tasks_on_its_injected_clock(make_pool):
    from conftest import FakeClock

    clock = FakeClock(100.0)
    gate = threading.Event()
    pool = make_pool(workers=1, stuck_after=0.2, clock=clock)
    blockers = _blockers(pool, 1, gate)
    ran = threading.Event()
    light = pool.submit(ran.set)
    try:
        # The monitor looks again every 0.2 s of real time, but on the pool's clock, which stands still:
        # the running task never becomes stuck, so the light task keeps waiting for the worker.
        assert not ran.wait(0.6)
        assert pool.statistics().stuck_threads == 0 and pool.statistics().queued_tasks == 1
        clock.advance(1.0)
        assert pool.statistics().stuck_threads == 1
        assert ran.wait(WAIT), "the light task did not start once the clock said the worker was stuck"
        light.result(timeout=WAIT)
    finally:
        gate.set()
    assert all(f.result(timeout=WAIT) for f in blockers)


def test_ElasticPool_rejects_a_clock_that_is_not_one(make_pool):
    with pytest.raises(TypeError, match="clock must be callable"):
        make_pool(clock=5)
    with pytest.raises(TypeError, match="clock must return a number of seconds"):
        make_pool(clock=lambda: "now")
