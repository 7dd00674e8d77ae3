"""tools/bench_connections.py runs, serves the same data from its three variants, and counts their statements."""
from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:
    pytest.skip("graphene_django is not installed", allow_module_level=True)

TOOL = pathlib.Path(__file__).resolve().parent.parent / "tools" / "bench_connections.py"


@pytest.mark.timeout(240)
def test_bench_connections_prints_cpu_and_statements_per_variant() -> None:
    out = subprocess.run([sys.executable, str(TOOL), "--authors", "4", "--rounds", "1", "--requests", "1"],
                         capture_output=True, text=True, timeout=200, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines()[2:]}
    assert set(rows) == {"loaders", "prefetch", "n-plus-one"}, out.stdout
    assert all(float(cpu) > 0 for cpu, _ in rows.values())
    # authors (count, rows), books, reviews: for loaders and for the hand-written prefetch
    assert int(rows["loaders"][1]) == 4 and int(rows["prefetch"][1]) == 4
    assert int(rows["n-plus-one"][1]) == 2 + 4 * 2 + 4 * 3 * 2  # a count and a page per author and per book
