"""tools/bench.py --value-cache runs on tiny settings and reports what it promises (no speed asserted):
every per-key case, and in the Bench shape a second process whose warm value cache leaves no batch call."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("redis")
pytest.importorskip("graphene")

from redis_server import redis_binary

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")


@pytest.mark.timeout(300)
def test_bench_value_cache_tiny_run_reports_no_batch_calls_with_a_warm_shared_cache(tmp_path):
    redis_binary()  # skip (or fail in CI) without redis-server
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(TOOLS, "bench.py"), "--value-cache", "--quick", "--requests", "4",
         "--concurrency", "2", "--items", "2", "--depth", "1", "--io-ms", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())["value_cache"]
    cases = {row["case"] for row in report["per_key"]}
    assert {"per-request cache hit: load()", "batch fn on SQLite (no value cache)",
            "value-cache hit: RedisValueCache", "value-cache miss: RedisValueCache"} <= cases
    assert all(row["ns_per_key"] > 0 for row in report["per_key"])
    assert {"bare client: MGET + json.loads", "near-cache hit: RedisValueCache",
            "RedisValueCache.get_values alone", "loader's own share: hit from a dict",
            "per-request cache hit: load_many(100) (same group)"} <= cases
    assert {"  step: MGET, the client alone", "  step: RedisValueCache._decode",
            "  step: json.loads of each value", "  step: near cache lookup (get_values)"} <= cases
    outage = {(row["case"], row["breaker"]) for row in report["outage"]}
    assert outage == {(c, b) for c in ("refused (server gone)", "frozen (SIGSTOP)") for b in (False, True)}
    stampede = {row["single_flight"]: row["batch_calls_per_key"] for row in report["stampede"]}
    assert stampede[True] == 1.0  # one batch call per key with single flight
    first, without, warm = report["shape"]
    assert first["value_cache"] and not without["value_cache"] and warm["value_cache"]
    assert all(run["errors"] == 0 for run in report["shape"])
    assert without["batch_calls_per_request"] > 0 and first["batch_calls_per_request"] > 0
    assert warm["batch_calls_per_request"] == 0 and warm["value_cache_misses_per_request"] == 0
    assert warm["value_cache_hits_per_request"] > 0
