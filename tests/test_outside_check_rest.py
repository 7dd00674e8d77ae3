"""tools/outside_check_rest.py: Pinry's REST API, ported, answers alike with AutoRelationsMixin and without.

The tool's ``--quick`` run in a subprocess (its own Django settings, its own in-memory database): every
request's answer (a write's: its response and the rows it left) under the switch byte-identical to the
views as written, neither erring, fewer statements in all, exit status 0.  The prefetch planners are not
needed (their columns appear when they are installed); the port needs django-taggit and django-filter (the
test extra's), as Pinry does.  The verdicts are checked on their own too, so that a wrong answer cannot pass.
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
    spec = importlib.util.spec_from_file_location("outside_check_rest", os.path.join(TOOLS, "outside_check_rest.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(**bodies: str) -> dict:
    return {"endpoint": "e", **{v: {"statements": 1, "body": bodies.get(v, "A"), "error": None}
                                for v in ("off", "switch", "serializer-prefetch")}}


def test_verdicts_fail_the_switch_only_on_its_own_answer() -> None:
    tool = _tool()
    variants = ["off", "switch", "serializer-prefetch"]
    assert tool.verdict(_row(), variants) == "yes" and tool.switch_passed(_row())
    assert tool.verdict(_row(switch="B"), variants).startswith("NO") and not tool.switch_passed(_row(switch="B"))
    planner = _row(**{"serializer-prefetch": "B"})
    assert not tool.passed(planner, variants) and tool.switch_passed(planner)   # the planner's, reported
    erred = _row()
    erred["switch"]["error"] = "status 500"
    assert not tool.switch_passed(erred)


def test_quick_run_answers_alike_with_the_switch() -> None:
    pytest.importorskip("rest_framework", reason="the port is a REST framework API")
    pytest.importorskip("taggit", reason="Pinry's tags are django-taggit's (the test extra installs it)")
    pytest.importorskip("django_filters", reason="Pinry's views filter with django-filter")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run([sys.executable, os.path.join(TOOLS, "outside_check_rest.py"), "--quick"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.count(" | ") >= 3]
    head = [cell.strip() for cell in lines[0].split(" | ")]
    # the verdicts hold " | " of their own: the rows are split as many times as the head
    rows = [[cell.strip() for cell in line.split(" | ", len(head) - 1)] for line in lines[1:]]
    assert head[:3] == ["endpoint", "off", "switch"], done.stdout
    assert len(rows) == 13, done.stdout   # ten reads, two writes and the total
    for row in rows[:-1]:
        assert "ERR" not in row[1] + row[2], done.stdout
        assert int(row[2]) <= int(row[1]), done.stdout   # never more statements with the switch
        # "yes", or a planner answers otherwise: "NO (off=switch | ...)", off's group first
        assert row[-1] == "yes" or row[-1].split(" | ")[0].split("=")[:2] == ["NO (off", "switch"], done.stdout
    off, switch = int(rows[-1][1]), int(rows[-1][2])
    assert switch * 2 < off, done.stdout
    assert "switch 12/12" in rows[-1][-1] and "\npassed" in done.stdout, done.stdout
