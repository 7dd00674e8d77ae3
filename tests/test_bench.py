"""tools/bench.py runs end to end on tiny settings and writes the JSON it promises (no speed asserted)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
VARIANTS = ["floor", "floor-ours", "single-tick", "per-loader-chains", "n-plus-one"]
ROW_KEYS = {"variant", "status", "notes", "requests", "warmup_requests", "errors", "first_error", "throughput_rps",
            "latency_p50_ms", "latency_p99_ms", "batch_calls_per_request", "process_cpu_ms_per_request",
            "gc_collections_per_request", "gc_collections_per_request_by_generation"}
SCHEDULER_KEYS = {"scheduled_tasks_per_request", "queue_peak", "queue_end", "timer_cpu_ms_per_request",
                  "tick_worker_cpu_ms_per_request"}


def _bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(TOOLS, "bench.py"), *args],
                          capture_output=True, text=True, timeout=30)


def test_bench_tiny_run_writes_every_variant_with_zero_errors(tmp_path):
    out = tmp_path / "bench.json"
    proc = _bench("--requests", "20", "--concurrency", "4", "--io-ms", "1", "--items", "3", "--depth", "1",
                  "--loaders", "20", "--tick-ms", "5", "--json", str(out), "--variants", *VARIANTS)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert {"settings", "environment", "variants", "targets"} <= set(report)
    assert report["settings"]["items_per_request"] == 3 + 9
    rows = {row["variant"]: row for row in report["variants"]}
    assert list(rows) == VARIANTS
    graphql_integration = importlib.util.find_spec("dataloader_sync.graphql") is not None
    for name, row in rows.items():
        if row["status"] == "skipped":  # only ours may be skipped, and only without the integration
            assert name in ("single-tick", "per-loader-chains", "floor-ours") and not graphql_integration, row
            continue
        assert row["status"] == "ran"
        assert ROW_KEYS <= set(row), name
        assert row["errors"] == 0, row["first_error"]
        assert row["requests"] > 0
    for name in ("single-tick", "per-loader-chains"):
        if rows[name]["status"] == "ran":
            assert SCHEDULER_KEYS <= set(rows[name])
            assert rows[name]["batch_calls_per_request"] > 0
    assert rows["n-plus-one"]["batch_calls_per_request"] > rows["floor"]["batch_calls_per_request"] == 0
    assert "| variant" in proc.stdout and "graphql-core" in proc.stdout


def test_bench_refuses_bad_arguments():
    proc = _bench("--loaders", "5")
    assert proc.returncode != 0
    assert "--loaders" in proc.stderr


def test_bench_hol_tiny_run_reports_every_policy_with_and_without_heavy_tasks(tmp_path):
    out = tmp_path / "hol.json"
    proc = _bench("--hol", "--hol-seconds", "0.3", "--hol-threads", "2",
                  "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())["hol"]
    runs = [(row["policy"], row["heavy"]) for row in report["rows"]]
    assert runs == [(p, h) for p in ("fixed-4", "thread-per-task", "elastic") for h in (False, True)]
    for row in report["rows"]:
        assert row["errors"] == 0, row["first_error"]
        assert row["light_tasks"] > 0
        assert {"mean", "p50", "p99", "p999"} <= set(row["light_queue_wait_ms"]) & set(row["light_latency_ms"])
    assert [t["policy"] for t in report["targets"]] == ["fixed-4", "thread-per-task", "elastic"]
    assert "| policy" in proc.stdout and "target: elastic" in proc.stdout


def test_bench_gc_freeze_freezes_the_heap_and_reports_both_floors(tmp_path):
    out = tmp_path / "bench.json"
    proc = _bench("--requests", "10", "--concurrency", "1", "--io-ms", "0", "--items", "3", "--depth", "1",
                  "--loaders", "20", "--gc-freeze", "--gc-threshold", "100000", "--json", str(out),
                  "--variants", "floor", "floor-ours", "single-tick")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["environment"]["gc_frozen"] > 1000 and report["environment"]["gc_threshold"][0] == 100000
    targets = [t["target"] for t in report["targets"]]
    if importlib.util.find_spec("dataloader_sync.graphql") is not None:
        assert any("tuned GC" in t and t.endswith("single-tick / floor") for t in targets), targets
        assert any(t.endswith("single-tick / floor-ours") for t in targets), targets
    assert "GC/req" in proc.stdout


def test_bench_bound_variants_run_only_when_named_and_take_their_parts_away(tmp_path):
    if importlib.util.find_spec("dataloader_sync.graphql") is None:
        return
    out = tmp_path / "bench.json"
    bounds = ["all-cached", "primed-in-request", "done-futures", "registry-unused"]
    proc = _bench("--requests", "6", "--concurrency", "2", "--io-ms", "0", "--items", "3", "--depth", "1",
                  "--loaders", "20", "--json", str(out), "--variants", "single-tick", *bounds)
    assert proc.returncode == 0, proc.stderr
    rows = {row["variant"]: row for row in json.loads(out.read_text())["variants"]}
    assert list(rows) == ["single-tick", *bounds]
    for row in rows.values():
        assert row["status"] == "ran" and row["errors"] == 0 and row["requests"] == 6, row
    assert rows["single-tick"]["batch_calls_per_request"] > 0
    for name in bounds:  # every load a cache hit (all-cached), or no loader at all
        assert rows[name]["batch_calls_per_request"] == 0, name
    assert any("primed before the run" in note for note in rows["all-cached"]["notes"])
    default = _bench("--help")
    assert "all-cached" in default.stdout and "run only when named" in default.stdout


def test_bench_parts_splits_each_variant_into_parts_that_add_up(tmp_path):
    if importlib.util.find_spec("dataloader_sync.graphql") is None:
        return
    out = tmp_path / "parts.json"
    proc = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_parts.py"), "--requests", "2", "--rounds", "1",
                           "--items", "3", "--depth", "1", "--loaders", "20", "--json", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    rows = report["variants"]
    assert list(rows) == ["single-tick", "floor-ours"]
    for name, row in rows.items():
        parts = row["parts_us_per_load"]
        assert abs(sum(parts.values()) - row["cpu_us_per_load"]) < 1e-6 * row["cpu_us_per_load"], name
    ours = rows["single-tick"]["parts_us_per_load"]
    assert ours["load(): cache lookup, lock, queueing, its future"] > 0 and ours["settling (settle_many)"] > 0
    plain = rows["floor-ours"]["parts_us_per_load"]  # no loader at all
    assert plain["load(): cache lookup, lock, queueing, its future"] == 0 == plain["settling (settle_many)"]
    assert "single-tick" in proc.stdout and "total" in proc.stdout
    bad = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_parts.py"), "--requests", "0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--requests must be at least 1" in bad.stderr
