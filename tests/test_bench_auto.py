"""tools/bench_auto.py runs end to end on tiny settings: every variant gives the same data on every shape, and
auto relations cost what they promise in SQL statements (no speed asserted)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("django")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")


def bench(tmp_path, authors):
    out = tmp_path / f"bench-{authors}.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(TOOLS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, os.path.join(TOOLS, "bench_auto.py"), "--authors", str(authors),
                           "--books", "2", "--reviews", "2", "--requests", "1", "--rounds", "1", "--warmup", "0",
                           "--variants", "n-plus-one", "auto", "hand-written", "--json", str(out)],
                          capture_output=True, text=True, timeout=200, env=env)
    assert proc.returncode == 0, proc.stderr
    return {(row["shape"], row["variant"]): row["sql_per_request"] for row in json.loads(out.read_text())["rows"]}


@pytest.mark.timeout(300)
def test_bench_auto_tiny_runs_give_the_statement_counts_it_promises(tmp_path):
    for authors in (4, 12):
        sql = bench(tmp_path, authors)
        # whatever the number of authors: hand-written, authors, publishers, books, tags, reviews; auto, the
        # publishers joined into the root resolver's authors (its queryset planned)
        assert sql[("plain", "hand-written")] == 5
        assert sql[("plain", "auto")] == 4
        assert sql[("joined", "auto")] == 2  # the books' authors and their publishers joined into the books
        assert sql[("reverse-m2m", "auto")] == 4
        # the user's own resolver runs once per author, and the queryset it returns is loaded for the level
        # (one statement), as hand-written's related_loader with that queryset; the tags below it are one batch
        assert sql[("custom", "auto")] == sql[("custom", "hand-written")] == 3
        # a slice (a window over the parent key), an annotated filter, a DjangoListField's resolver: the
        # authors and one statement for the level, as hand-written
        for shape in ("sliced", "annotated", "list-field"):
            assert sql[(shape, "auto")] == sql[(shape, "hand-written")] == 2, shape
            assert sql[(shape, "n-plus-one")] == 1 + authors, shape
        assert all(sql[(shape, "n-plus-one")] > sql[(shape, "auto")] for shape in ("plain", "joined", "reverse-m2m"))
