"""tools/bench_rest.py runs end to end on tiny settings: every variant gives plain REST framework's data (the
tool checks it), the switch's statements per request do not grow with the authors, and a planner that is not
installed is named as skipped (no speed asserted)."""
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
PLANNERS = {"serializer-prefetch": "serializer_prefetch", "auto-prefetching": "django_auto_prefetching"}


def bench(tmp_path, authors):
    out = tmp_path / f"bench-{authors}.json"
    # this checkout's dataloader_sync, not the one installed (the tool runs from tools/)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(TOOLS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_rest.py"), "--authors", str(authors),
                           "--books", "2", "--reviews", "2", "--requests", "1", "--rounds", "2", "--warmup", "0",
                           "--json", str(out)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    return proc.stdout, report, {(row["shape"], row["variant"]): row for row in report["rows"]}


@pytest.mark.timeout(240)
def test_bench_rest_tiny_runs_give_the_statement_counts_it_promises(tmp_path):
    (out, report, small), (_, _, large) = bench(tmp_path, 2), bench(tmp_path, 6)
    missing = {variant for variant, module in PLANNERS.items() if importlib.util.find_spec(module) is None}
    assert set(report["skipped"]) == missing
    for variant in missing:
        assert f"skipped {variant}: " in out
    assert "| nested | switch |" in out
    shapes = ["nested", "filtered", "counting", "source", "run-time"]
    assert [shape for shape, _ in small][::len(small) // len(shapes)] == shapes
    # one statement per relation per level, whatever the number of authors; the source= path's to-one hops are
    # one join (select_related), by hand and by the switch (its root queryset joins them)
    switch = {"nested": 3, "filtered": 2, "counting": 2, "source": 1, "run-time": 3}
    by_hand = switch
    for rows in (small, large):
        for shape, statements in switch.items():
            assert rows[shape, "switch"]["sql_per_request"] == statements
            assert rows[shape, "prefetch"]["sql_per_request"] == by_hand[shape]
        assert all(len(row["cpu_ms_per_request_rounds"]) == 2 and row["cpu_ms_per_request"] > 0
                   for row in rows.values())
    # plain: 1 + one per author (books) + one per book (reviews; book.author is the manager's known parent)
    assert small["nested", "plain"]["sql_per_request"] == 1 + 2 + 4
    assert large["nested", "plain"]["sql_per_request"] == 1 + 6 + 12
    assert large["counting", "plain"]["sql_per_request"] == 1 + 6
