"""tools/repro.py prints the ticker report's table; the per-loader-chains model shows the defect it contrasts."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry, ScheduledExecutor

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
sys.path.insert(0, TOOLS)

from per_loader_chains import PerLoaderChainsRegistry  # noqa: E402


def _repro(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(TOOLS, "repro.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_repro_json_rows_show_one_pending_tick_against_loaders_times_calls():
    proc = _repro("--json", "--loaders", "20", "--seconds", "0.1", "--calls", "1", "2", "10")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert {tuple(sorted(r)) for r in rows} == {
        ("dispatch_all_calls", "pending_after_close", "pending_tasks", "tasks_run_per_second", "variant")}
    single = {r["dispatch_all_calls"]: r for r in rows if r["variant"] == "single-tick"}
    chains = {r["dispatch_all_calls"]: r for r in rows if r["variant"] == "per-loader-chains"}
    assert sorted(single) == sorted(chains) == [1, 2, 10]
    for calls in (1, 2, 10):
        assert single[calls]["pending_tasks"] == 1
        assert single[calls]["pending_after_close"] == 0
        assert chains[calls]["pending_tasks"] == 20 * calls
        # Run rates are timings (a loaded machine may run no tick in 0.1 s):
        # only their shape is checked here; tools/repro.py measures them.
        for row in (single[calls], chains[calls]):
            assert isinstance(row["tasks_run_per_second"], int) and row["tasks_run_per_second"] >= 0


def test_repro_prints_the_table_by_default():
    proc = _repro("--loaders", "5", "--seconds", "0.05", "--calls", "1")
    assert proc.returncode == 0, proc.stderr
    assert "dispatch_all calls" in proc.stdout and "pending 1 tick after close" in proc.stdout
    assert "single-tick" in proc.stdout and "per-loader-chains" in proc.stdout


def test_repro_refuses_bad_arguments():
    proc = _repro("--loaders", "0")
    assert proc.returncode != 0
    assert "--loaders" in proc.stderr


@pytest.mark.parametrize("registry_class, expected", [(ScheduledDataLoaderRegistry, 1),
                                                      (PerLoaderChainsRegistry, 10 * 7)])
def test_pending_tasks_after_seven_dispatch_all_calls(registry_class, expected):
    executor = ScheduledExecutor(name="test-model")
    try:
        registry = registry_class(scheduled_executor=executor, ticker_mode=True, schedule=3600)
        for i in range(10):
            registry.register(f"loader-{i}", DataLoader(lambda keys: keys))
        for _ in range(7):
            registry.dispatch_all()
        assert executor.pending_count == expected
        registry.close()
    finally:
        executor.shutdown(cancel_futures=True)


def test_repro_last_column_is_read_as_many_ticks_after_close_as_its_label_says():
    import repro

    waits = []

    def wait(seconds: float) -> None:
        waits.append(seconds)

    row = repro.run("single-tick", 1, 3, 0.015, 0.001, wait=wait)
    assert waits == [0.001, 0.015 * repro.TICKS_AFTER_CLOSE]  # the ticking time, then the ticks after close
    assert repro.AFTER_CLOSE_LABEL == "pending 1 tick after close" and repro.TICKS_AFTER_CLOSE == 1
    assert row["pending_after_close"] == 0
