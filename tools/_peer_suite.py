"""What the peer-suite tools share: running a peer's suite twice, and the statements of each test.

``tools/peer_suite_graphene_django.py`` and
``tools/peer_suite_strawberry_django.py`` each run a peer's own test suite
twice in its checkout, with their own module loaded as a pytest plugin both
times: without the switch, then with it (``PEER_SUITE_FORCE`` set, which is
what makes the plugin force it).  In both runs ``pytest_runtest_call`` here
(re-exported by each plugin) counts the statements each test's body
executes on the test thread's Django connections, so that the report can
name every test that executes more statements with the switch than
without.  Statements on other threads (an async test's ``sync_to_async``)
are not counted.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FORCE = "PEER_SUITE_FORCE"  # set in the run with the switch
COUNTS = "PEER_SUITE_COUNTS"  # that run's asserted counts that differ (JSON lines)
STATEMENTS = "PEER_SUITE_STATEMENTS"  # each run's statements per test (JSON lines)


def forced() -> bool:
    """In the plugin: whether this run is the one with the switch."""
    return bool(os.environ.get(FORCE))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: Any) -> Iterator[None]:
    """As a plugin, in both runs: the statements each test's body executes, on every connection of its thread."""
    path = os.environ.get(STATEMENTS)
    if not path:
        return (yield)
    from django.db import connections

    counted = [0]

    def count(execute: Any, sql: Any, params: Any, many: Any, context: Any) -> Any:
        counted[0] += 1
        return execute(sql, params, many, context)

    try:
        with contextlib.ExitStack() as stack:
            for connection in connections.all():
                stack.enter_context(connection.execute_wrapper(count))
            return (yield)
    finally:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"test": item.nodeid, "statements": counted[0]}) + "\n")


def rows(path: Path) -> list[dict[str, Any]]:
    """A JSON-lines file's rows (none if the file was never written)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run(checkout: Path, plugin: str, pytest_args: list[str], with_switch: bool,
        tmp: Path) -> tuple[str, set[str], dict[str, int]]:
    """One run of the suite in CHECKOUT with ``plugin`` loaded: its summary line, its failing tests, and the
    statements of each test."""
    statements = tmp / f"statements-{with_switch}.jsonl"
    env = {**os.environ, STATEMENTS: str(statements), COUNTS: str(tmp / "counts.jsonl"),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")])}
    env.pop(FORCE, None)
    if with_switch:
        env[FORCE] = "1"
    command = [sys.executable, "-m", "pytest", "-q", "-p", plugin, "-p", "no:cacheprovider", "-rfE", *pytest_args]
    out = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=False).stdout
    summary = (out.strip().splitlines() or ["(no output)"])[-1]
    if not finished(summary):  # a crash (an import error, a syntax error): its last line says what
        summary = f"did not finish: {summary}"
    failed = {re.sub(r" - .*", "", line) for line in out.splitlines() if line.startswith(("FAILED ", "ERROR "))}
    return summary, failed, {row["test"]: row["statements"] for row in rows(statements)}


def finished(summary: str) -> bool:
    """Whether a run's last line is pytest's result line with tests run (not a crash, not an interrupted
    collection)."""
    return re.search(r"\d+ (passed|failed)", summary) is not None


def tested(checkout: Path) -> str:
    """Where the runs import dataloader_sync from (PYTHONPATH, else the install), seen from CHECKOUT."""
    command = [sys.executable, "-c", "import dataloader_sync; print(dataloader_sync.__file__)"]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False)
    return done.stdout.strip() or done.stderr.strip()[-200:]


def outcomes(plain_failed: set[str], forced_failed: set[str]) -> int:
    """Print each test whose outcome differs, then those failing in both runs; return how many differ."""
    differing = sorted(plain_failed ^ forced_failed)
    for test in differing:
        print(f"{'fails only with' if test in forced_failed else 'passes only with'} the switch: {test}")
    for test in sorted(plain_failed & forced_failed):  # the suite against this install: the switch unseen there
        print(f"fails in both runs: {test}")
    return len(differing)


def compare_statements(plain: dict[str, int], forced: dict[str, int], *, list_fewer: bool) -> int:
    """Print each test that executes more statements with the switch (and, if ``list_fewer``, fewer) and the
    totals; return how many execute more."""
    both = sorted(set(plain) & set(forced))
    more = [test for test in both if forced[test] > plain[test]]
    fewer = [test for test in both if forced[test] < plain[test]]
    for test in more + (fewer if list_fewer else []):
        print(f"{'more' if test in more else 'fewer'} statements with the switch:"
              f" {plain[test]} -> {forced[test]}: {test}")
    print(f"statements of the {len(both)} tests of both runs: {sum(plain[t] for t in both)} without the switch,"
          f" {sum(forced[t] for t in both)} with it ({len(fewer)} tests fewer, {len(more)} more)")
    return len(more)
