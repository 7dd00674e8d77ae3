"""tools/outside_check_nest.py: OWASP Nest's schema, ported, answers alike under the four switches.

The tool's ``--quick`` run in a subprocess (its own Django settings, its own in-memory database): every
query's answers byte-identical across off / AutoRelationsExtension / DjangoOptimizerExtension / both, or
split only as the app itself splits them (``yes*``, see the tool's notes), no variant erring, exit status 0.
The verdict is checked on its own too, so a wrong answer cannot pass as a split of the app's.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")


def _tool():
    spec = importlib.util.spec_from_file_location("outside_check_nest", os.path.join(TOOLS, "outside_check_nest.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(**answers: str) -> dict:
    return {"query": "q", **{v: {"statements": 1, "answer": answers.get(v, "A"), "error": None}
                             for v in ("off", "switch", "optimizer", "both")}}


def test_verdict_tells_a_wrong_answer_from_the_apps_own_split() -> None:
    tool = _tool()
    assert tool.verdict(_row()) == "yes"
    assert tool.verdict(_row(optimizer="B", both="B")).startswith("yes*")   # the switch leaves the hint alone
    assert tool.verdict(_row(switch="B", optimizer="B", both="B")).startswith("yes*")   # it honours it
    assert tool.verdict(_row(switch="B")).startswith("NO")
    assert tool.verdict(_row(both="B")).startswith("NO")
    assert tool.verdict(_row(switch="C", optimizer="B", both="B")).startswith("NO")
    erred = _row()
    erred["switch"]["error"] = "1 error(s)"
    assert not tool.passed(erred)


def test_quick_run_answers_alike_under_every_switch() -> None:
    pytest.importorskip("strawberry_django", reason="the port is a strawberry-django schema")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run([sys.executable, os.path.join(TOOLS, "outside_check_nest.py"), "--quick"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split(" | ", 5) for line in done.stdout.splitlines()
            if line.count(" | ") >= 5 and not line.startswith("query")]
    assert len(rows) == 10, done.stdout   # nine queries and the total
    assert all(row[5].startswith("yes") for row in rows[:-1]), done.stdout
    assert not any("ERR" in cell for row in rows for cell in row[1:5]), done.stdout
    assert "\npassed" in done.stdout, done.stdout
