"""_fork: one mechanism repairs every object holding threads and locks in a forked child."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import pytest

from dataloader_sync._core import _fork

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _run_script(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, env=env)


def test_fork_hooks_run_in_tracking_order_around_every_fork():
    proc = _run_script(
        """
        import os, sys
        from dataloader_sync._core import _fork
        calls = []
        class Tracked:
            def __init__(self, name):
                self.name = name
                _fork.track(self)
            def _before_fork(self):
                calls.append(("before", self.name))
            def _after_fork_in_parent(self):
                calls.append(("parent", self.name))
            def _after_fork_in_child(self):
                calls.append(("child", self.name))
        a, b = Tracked("a"), Tracked("b")
        pid = os.fork()
        if pid == 0:
            ok = calls == [("before", "a"), ("before", "b"), ("child", "a"), ("child", "b")]
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert calls == [("before", "a"), ("before", "b"), ("parent", "a"), ("parent", "b")], calls
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fork_one_failing_repair_does_not_stop_the_others():
    proc = _run_script(
        """
        import os, sys
        from dataloader_sync._core import _fork
        repaired = []
        class Broken:
            def _after_fork_in_child(self):
                raise RuntimeError("broken repair")
        class Fine:
            def _after_fork_in_child(self):
                repaired.append(True)
        broken, fine = Broken(), Fine()
        _fork.track(broken)
        _fork.track(fine)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if repaired == [True] else 1)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken repair" in proc.stderr  # logged


def test_fork_tracking_keeps_nothing_alive():
    class Tracked:
        def _after_fork_in_child(self) -> None:
            pass

    obj = Tracked()
    _fork.track(obj)
    assert any(ref() is obj for ref in list(_fork._tracked.values()))
    ref_to_obj = [ref for ref in list(_fork._tracked.values()) if ref() is obj][0]
    del obj
    gc.collect()
    assert ref_to_obj() is None
    assert ref_to_obj not in list(_fork._tracked.values())  # and its entry is gone


def test_PeriodicRefresher_reload_in_flight_at_a_fork_does_not_block_the_child():
    proc = _run_script(
        """
        import os, sys, threading
        from dataloader_sync import PeriodicRefresher
        gate, loading = threading.Event(), threading.Event()
        calls = []
        def load():
            calls.append(os.getpid())
            if len(calls) > 1 and os.getpid() == parent:
                loading.set()
                gate.wait(30)
            return os.getpid()
        parent = os.getpid()
        refresher = PeriodicRefresher(load, 3600)
        assert refresher.get() == parent
        refresher.request_refresh()              # a background reload, stuck in the parent
        assert loading.wait(10)
        pid = os.fork()
        if pid == 0:
            done = threading.Event()
            def child():
                if refresher.refresh() == os.getpid():   # not waiting for the parent's reload
                    done.set()
            threading.Thread(target=child, daemon=True).start()
            os._exit(0 if done.wait(10) else 1)
        _, status = os.waitpid(pid, 0)
        gate.set()
        refresher.close()
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- forks while the library is busy: the child always gets out of os.fork() -------------------------
#
# gunicorn --preload, uWSGI and Celery's prefork pool fork at arbitrary moments relative to the
# parent's threads.  Each case starts work that keeps the library busy in the parent (threads
# loading, batches on an executor's pool, ticks, reloads, restarts), then forks CHILDREN children.
# A child first writes "out" to a pipe (it got out of os.fork()), then runs its checks on a thread
# of its own, bounded by a timeout, and writes "ok" or what went wrong.  The parent counts children
# that never got out of the fork ("stuck") and children whose checks failed.

FORK_HARNESS = """
import concurrent.futures as cf, os, select, signal, sys, threading, time, traceback
from dataloader_sync import (DataLoader, PeriodicRefresher, RestartableWorker, ScheduledDataLoaderRegistry,
                             ScheduledExecutor, get_default_scheduled_executor)
CHILDREN = 50
PARENT = os.getpid()
WAIT = 20

def in_parent():
    return os.getpid() == PARENT

def common_checks():
    # The default executor and new loaders work in every child.
    assert get_default_scheduled_executor().submit(lambda: 7).result(timeout=WAIT) == 7
    new = DataLoader(lambda keys: [k * 2 for k in keys])
    assert new.load(21).result(timeout=WAIT) == 42
    with ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.002) as registry:
        registry.register("new", DataLoader(lambda keys: list(keys)))
        registry.reschedule_now()
        settled = threading.Event()
        registry["new"].load("x").add_done_callback(lambda f: settled.set())   # dispatched by a tick
        assert settled.wait(WAIT), "a new ticker registry did not dispatch in the child"

def fork_children(check):
    stuck, failed = 0, []
    for _ in range(CHILDREN):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, b"out\\n")
            outcome = []
            def run():
                try:
                    common_checks()
                    check()
                    outcome.append("ok")
                except BaseException:
                    outcome.append(traceback.format_exc())
            t = threading.Thread(target=run, daemon=True)
            t.start()
            t.join(3 * WAIT)
            os.write(w, (outcome[0] if outcome else "checks did not finish").encode()[:60000])
            os._exit(0)
        os.close(w)
        ready, _, _ = select.select([r], [], [], 3 * WAIT)
        if not ready:
            stuck += 1
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            continue
        data = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        text = data.decode()
        if text.strip() != "out\\nok".strip():
            failed.append(text)
    print("stuck", stuck, "failed", len(failed))
    for text in failed[:3]:
        print(text)
    sys.exit(1 if stuck or failed else 0)
"""


def _fork_case(body: str) -> None:
    proc = _run_script(FORK_HARNESS + textwrap.dedent(body))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stuck 0 failed 0" in proc.stdout


def test_fork_while_threads_load_a_shared_loader_and_its_batch_runs_inline():
    # A process-global loader: two threads load and dispatch it (its lock is often held at the
    # fork), and one batch is inside the batch function, on a parent thread, at every fork.
    _fork_case(
        """
        gate, inside = threading.Event(), threading.Event()
        def batch(keys):
            if "slow" in keys and in_parent():
                inside.set()
                gate.wait(600)
            return list(keys)
        shared = DataLoader(batch)
        in_flight = shared.load("slow")
        threading.Thread(target=shared.dispatch, daemon=True).start()
        assert inside.wait(10)
        stop = threading.Event()
        def loading():
            i = 0
            while not stop.is_set():
                shared.load(i % 100)
                i += 1
                if i % 50 == 0:
                    shared.dispatch()
                if i % 1000 == 0:
                    shared.clear_all()
        threads = [threading.Thread(target=loading, daemon=True) for _ in range(2)]
        for t in threads:
            t.start()
        def check():
            # The parent's in-flight key fails at once instead of waiting for ever, and leaves the cache.
            try:
                in_flight.result(timeout=WAIT)
                raise AssertionError("the parent's in-flight key completed in the child")
            except cf.CancelledError as exc:
                assert "os.fork()" in str(exc), exc
            assert shared.load("slow").result(timeout=WAIT) == "slow"      # loaded again, in the child
            assert shared.load("fresh").result(timeout=WAIT) == "fresh"    # the shared loader works
            assert cf.wait([shared.load("w")], timeout=WAIT).not_done == set()
        fork_children(check)
        stop.set()
        gate.set()
        """
    )


def test_fork_while_a_batch_runs_on_an_executor_pool_and_a_thread_holds_the_loader():
    # The reported hang: a batch on the ScheduledExecutor's own pool at the fork, another thread
    # inside the loader's lock (load()), a then() chain and a user done-callback on the batch's keys.
    _fork_case(
        """
        pool = ScheduledExecutor(max_workers=2)
        gate, inside = threading.Event(), threading.Event()
        def batch(keys):
            if "k" in keys and in_parent():
                inside.set()
                gate.wait(600)
            return list(keys)
        busy = DataLoader(batch, executor=pool)
        in_flight = busy.load("k")
        chained = in_flight.then(lambda v: v + "!")
        called = []
        in_flight.add_done_callback(lambda f: called.append(f))
        busy.dispatch()
        assert inside.wait(10)
        stop = threading.Event()
        def loading():                         # more batches on the pool, all the time
            i = 0
            while not stop.is_set():
                busy.load(i % 200)
                i += 1
                if i % 200 == 0:
                    busy.dispatch()
                    busy.clear_all()
        t = threading.Thread(target=loading, daemon=True)
        t.start()
        def check():
            for fut in (in_flight, chained):
                try:
                    fut.result(timeout=WAIT)
                    raise AssertionError("the parent's batch completed in the child")
                except cf.CancelledError:
                    pass
            deadline = time.monotonic() + WAIT
            while not called and time.monotonic() < deadline:   # the repair thread runs it, soon
                threading.Event().wait(0.01)
            assert called, "the user's done-callback never ran"
            assert busy.load("k").result(timeout=WAIT) == "k"        # loaded again, on the child's pool
            assert pool.submit(lambda: 3).result(timeout=WAIT) == 3
        fork_children(check)
        stop.set()
        gate.set()
        pool.shutdown()
        """
    )


def test_fork_while_registry_ticks_dispatch():
    # Ticker registries on the default executor tick every millisecond while threads load through
    # them: ticks are queued, running and inside batch functions at the forks.
    _fork_case(
        """
        registries = []
        for n in range(4):
            registry = ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.001)
            registry.register("echo", DataLoader(lambda keys: list(keys)))
            registry.reschedule_now()
            registries.append(registry)
        stop = threading.Event()
        def loading(registry):
            i = 0
            while not stop.is_set():
                registry["echo"].load(i)
                i += 1
                if i % 1000 == 0:
                    registry["echo"].clear_all()
        threads = [threading.Thread(target=loading, args=(r,), daemon=True) for r in registries]
        for t in threads:
            t.start()
        def check():
            pass
        fork_children(check)
        stop.set()
        for r in registries:
            r.close()
        """
    )


def test_fork_while_PeriodicRefresher_reloads_are_in_flight():
    _fork_case(
        """
        refreshers = [PeriodicRefresher(os.getpid, 0.0005, executor=get_default_scheduled_executor()),
                      PeriodicRefresher(os.getpid, 0.0005)]   # reloads on a thread of their own
        stop = threading.Event()
        def reading(refresher):
            while not stop.is_set():
                refresher.get()
        threads = [threading.Thread(target=reading, args=(r,), daemon=True) for r in refreshers]
        for t in threads:
            t.start()
        def check():
            for refresher in refreshers:
                assert refresher.refresh() == os.getpid()
                assert refresher.request_refresh().result(timeout=WAIT) == os.getpid()
        fork_children(check)
        stop.set()
        for r in refreshers:
            r.close()
        """
    )


def test_fork_while_RestartableWorker_restarts_are_in_flight():
    _fork_case(
        """
        units = []
        def unit():
            units.append(1)
            worker.wait(0.0005)
        worker = RestartableWorker(unit, name="restarting")
        worker.start()
        stop = threading.Event()
        def restarting():
            while not stop.is_set():
                worker.restart()
        t = threading.Thread(target=restarting, daemon=True)
        t.start()
        def check():
            assert not worker.running
            worker.start()
            assert worker.running
            assert worker.stop(timeout=WAIT)
        fork_children(check)
        stop.set()
        t.join(10)
        assert worker.stop(timeout=10)
        """
    )
