"""tools/bench_ab.py runs the bench alternately against two checkouts and prints medians (no speed asserted)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import bench_ab  # noqa: E402


def test_bench_ab_flatten_names_rows_by_variant_and_target():
    report = {"settings": {"requests": 3}, "variants": [{"variant": "floor", "rps": 2.5, "notes": ["x"]}],
              "targets": [{"target": "t", "value": 1.5, "met": True}], "micro": {"load": 200}}
    assert bench_ab.flatten(report) == {"settings.requests": 3.0, "variants.floor.rps": 2.5,
                                        "targets.t.value": 1.5, "micro.load": 200.0}


def test_bench_ab_summarize_gives_medians_spread_and_ratio():
    rows = bench_ab.summarize([{"x": 1.0}, {"x": 3.0}, {"x": 2.0}], [{"x": 4.0}, {"x": 4.0}, {"x": 5.0}], None)
    assert rows == [("x", 2.0, 1.0, 3.0, 4.0, 4.0, 5.0, 2.0)]


def test_bench_ab_tiny_run_alternates_and_reports_each_figure(tmp_path):
    out = tmp_path / "ab.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "bench_ab.py"), "--a", ROOT, "--b", ROOT, "--rounds", "2",
         "--python-a", sys.executable, "--python-b", sys.executable, "--json", str(out), "--",
         "--requests", "4", "--concurrency", "1", "--io-ms", "0", "--items", "2", "--depth", "1", "--loaders", "20",
         "--variants", "floor"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("round ") == 4 and "A done" in proc.stdout and "B done" in proc.stdout
    report = json.loads(out.read_text())
    assert len(report["runs"]["A"]) == len(report["runs"]["B"]) == 2
    assert "variants.floor.process_cpu_ms_per_request" in report["medians"]
    assert "| variants.floor.process_cpu_ms_per_request" in proc.stdout


def test_bench_ab_refuses_a_directory_that_is_not_a_checkout(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_ab.py"), "--a", str(tmp_path), "--b",
                           ROOT], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "not a checkout" in proc.stderr
