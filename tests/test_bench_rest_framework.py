"""tools/bench_rest_framework.py runs end to end on tiny settings: every variant gives the same data, and the
batched serializer's statements per request do not grow with the authors (no speed asserted)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("django")
if importlib.util.find_spec("rest_framework") is None:
    pytest.skip("djangorestframework is not installed", allow_module_level=True)

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")


def bench(tmp_path, authors):
    out = tmp_path / f"bench-{authors}.json"
    proc = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_rest_framework.py"), "--authors", str(authors),
                           "--books", "2", "--reviews", "2", "--requests", "2", "--rounds", "2", "--warmup", "1",
                           "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "| batched |" in proc.stdout
    return {row["variant"]: row for row in json.loads(out.read_text())["variants"]}


@pytest.mark.timeout(240)
def test_bench_rest_framework_tiny_runs_give_the_statement_counts_it_promises(tmp_path):
    small, large = bench(tmp_path, 2), bench(tmp_path, 6)
    assert list(small) == ["batched", "prefetch", "n-plus-one"]
    for rows in (small, large):
        assert rows["batched"]["sql_per_request"] == rows["prefetch"]["sql_per_request"] == 3
        assert all(row["cpu_ms_per_request"] > 0 and len(row["cpu_ms_per_request_rounds"]) == 2
                   for row in rows.values())
    # n-plus-one: 1 + one per author (books) + one per book (reviews; book.author is the manager's known parent)
    assert small["n-plus-one"]["sql_per_request"] == 1 + 2 + 4
    assert large["n-plus-one"]["sql_per_request"] == 1 + 6 + 12
