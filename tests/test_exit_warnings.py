"""Tasks a wrapped executor refuses are logged once per run of refusals, at exit too.

At interpreter exit, ticker registries that were never closed log their
dropped tick once (if the pool refuses work then at all).

Exit behaviour is tested in subprocesses, several times over.  The script's
own ``atexit`` hook runs after ``concurrent.futures`` has stopped accepting
work and before logging shuts down; it waits until every registry's tick
came due once more (dropped, or run by a pool that still accepts work), then
prints how many "dropped" warnings were logged.
"""
from __future__ import annotations

import concurrent.futures as cf
import logging
import subprocess
import sys
import textwrap
import threading

import pytest

from dataloader_sync import ScheduledExecutor

SCRIPT = textwrap.dedent(
    """
    import atexit, logging, sys, threading, time

    from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry, get_default_scheduled_executor

    REGISTRIES = 20
    dropped = []
    calls_after_exit = [0] * REGISTRIES
    exiting = threading.Event()

    class Count(logging.Handler):
        def emit(self, record):
            if "dropped" in record.getMessage():
                dropped.append(record.getMessage())

    logging.getLogger("dataloader_sync").addHandler(Count())

    def predicate_of(i):
        def predicate(name, loader):
            if exiting.is_set():
                calls_after_exit[i] += 1
            return True
        return predicate

    registries = []  # never closed, and kept alive until the process dies
    for i in range(REGISTRIES):
        registry = ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.002, dispatch_predicate=predicate_of(i))
        registry.register("echo", DataLoader(lambda keys: keys))
        registry.dispatch_all()
        registries.append(registry)
    executor = get_default_scheduled_executor()
    executor.submit(lambda: None).result(timeout=10)  # the pool is up and ticks run

    def at_exit():
        exiting.set()
        runs_at_exit = executor.completed_count
        deadline = time.monotonic() + 10
        outcome = "timeout"
        while time.monotonic() < deadline:
            if executor.pending_count == 0 and executor.queued_count == 0:
                outcome = "all ticks dropped"
                break
            # Ticks still run (the library's own pool keeps accepting work at exit; an idle
            # loader's tick may not even ask its predicate).
            if min(calls_after_exit) >= 3 or executor.completed_count >= runs_at_exit + 3 * REGISTRIES:
                outcome = "still ticking"
                break
            threading.Event().wait(0.005)
        print(f"OUTCOME={outcome} DROPPED={len(dropped)}", flush=True)

    atexit.register(at_exit)
    """
)


@pytest.mark.parametrize("run", range(5))
def test_never_closed_ticker_registries_log_one_dropped_warning_at_exit(run):
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = [line for line in proc.stdout.splitlines() if line.startswith("OUTCOME=")]
    assert line, proc.stdout + proc.stderr
    outcome, dropped = line[0][len("OUTCOME="):].rsplit(" DROPPED=", 1)
    assert outcome in ("all ticks dropped", "still ticking"), line[0]
    assert int(dropped) <= 1, line[0]
    assert proc.stderr.count("dropped") <= 1, proc.stderr


class _Refusing(cf.Executor):
    """Runs tasks at once, or refuses them (as a shut-down pool does) while ``refuse`` is set."""

    def __init__(self) -> None:
        self.refuse = threading.Event()

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.refuse.is_set():
            raise RuntimeError("cannot schedule new futures after shutdown")
        future: cf.Future = cf.Future()
        future.set_result(fn(*args, **kwargs))
        return future


def test_ScheduledExecutor_logs_a_run_of_refused_tasks_once(caplog):
    pool = _Refusing()
    executor = ScheduledExecutor(pool, name="test-refused")
    try:
        with caplog.at_level(logging.WARNING, logger="dataloader_sync"):
            pool.refuse.set()
            refused = [executor.schedule(lambda: None, 0) for _ in range(5)]
            for future in refused:
                with pytest.raises(RuntimeError, match="cannot schedule"):
                    future.result(timeout=10)
            assert len(caplog.records) == 1 and "dropped" in caplog.records[0].getMessage()
            pool.refuse.clear()  # accepted again: the next run of refusals is logged again
            assert executor.schedule(lambda: 1, 0).result(timeout=10) == 1
            pool.refuse.set()
            with pytest.raises(RuntimeError):
                executor.schedule(lambda: None, 0).result(timeout=10)
        assert sum("dropped" in r.getMessage() for r in caplog.records) == 2
    finally:
        executor.shutdown()
