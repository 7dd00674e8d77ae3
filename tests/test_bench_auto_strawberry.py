"""tools/bench_auto.py --strawberry-django runs end to end on tiny settings: every variant gives the same data on
every shape, and on the resolver shapes the switch alone costs no more statements than strawberry-django's
optimizer with the fields written its way (hints) or without (no speed asserted)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("django")
if importlib.util.find_spec("strawberry_django") is None:
    pytest.skip("strawberry-django is not installed", allow_module_level=True)

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")
RESOLVER_SHAPES = ("custom", "sliced", "annotated", "list-field")


@pytest.mark.timeout(300)
def test_the_switch_alone_costs_no_more_statements_than_the_optimizer_on_the_resolver_shapes(tmp_path):
    out = tmp_path / "bench.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(TOOLS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_auto.py"), "--strawberry-django",
                           "--authors", "6", "--books", "2", "--reviews", "2", "--requests", "1", "--rounds", "1",
                           "--warmup", "0", "--shapes", *RESOLVER_SHAPES, "--json", str(out)],
                          capture_output=True, text=True, timeout=200, env=env)
    assert proc.returncode == 0, proc.stderr
    sql = {(row["shape"], row["variant"]): row["sql_per_request"] for row in json.loads(out.read_text())["rows"]}
    for shape in RESOLVER_SHAPES:
        best = min(sql[shape, "optimizer"], sql[shape, "optimizer-hints"])
        assert sql[shape, "auto"] <= best, shape
        assert sql[shape, "optimizer+auto"] <= sql[shape, "optimizer"], shape
        assert sql[shape, "n-plus-one"] > sql[shape, "auto"], shape
