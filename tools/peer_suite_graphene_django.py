"""graphene-django's own test suite with AutoRelationsExecutionContext forced onto every execution, and without.

    python tools/peer_suite_graphene_django.py CHECKOUT [pytest args...]

CHECKOUT is a graphene-django source tree (its ``graphene_django/`` with the
tests inside, ``examples/`` and ``setup.cfg``; PyPI's wheel carries no
tests: take a git checkout of the release tag of the installed version, e.g.
``v3.2.3``).  Run it with the python of a throwaway virtualenv that has
graphene-django, Django, this repository (``pip install -e .``) and the
suite's test dependencies (setup.py's ``test`` extra: pytest, pytest-django,
django-filter, djangorestframework, pytest-random-order, pytest-cov, mock,
pytz, coveralls).  The default arguments are the paths tox runs,
``graphene_django examples``; the suite's ``--random-order`` addopt is
dropped so both runs take the tests in one order (its ``filterwarnings =
error`` stays: a warning the switch raises fails the test).  Run from
CHECKOUT, the checkout's ``graphene_django`` is the one imported (the tag of
the installed version: the same code).

The suite runs twice in CHECKOUT: as it is, then with this module loaded as
a pytest plugin, which

- wraps graphql-core's ``execute`` where it is bound (graphql-core's
  modules, before graphene or graphene-django import it): an execution with
  no ``execution_context_class`` gets ``AutoRelationsExecutionContext``
  (``graphene.Schema.execute``, ``graphql_sync``, graphene-django's
  ``GraphQLView``), one given explicitly is left as given;
- sets ``GraphQLView.execution_context_class`` to it, as a user would;
- makes pytest-django's ``django_assert_num_queries`` and
  ``django_assert_max_num_queries`` record a count that differs (in a
  JSON-lines file) instead of failing, so the test's answers are still
  checked.  It replaces pytest-django's private ``fixtures._assert_num_queries``
  (the context manager both fixtures return); the suite makes no
  ``assertNumQueries`` call, which is left as it is.

The report: both runs' outcome counts, every test whose outcome differs (and
those failing in both runs, where the switch goes unchecked), every recorded
statement count, and how many executions got the switch.  Exit status 1 if an
outcome differs, a count is higher with the switch, or no execution got it.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_COUNTS = "PEER_SUITE_COUNTS"
_executions: dict[str, int] = {}  # "forced", or the name of a class given explicitly: how many executions


def _force() -> None:
    """As a plugin: every graphql-core ``execute`` with no execution context class gets ours."""
    import graphql.execution.execute  # noqa: F401  (the module, in sys.modules)

    original = sys.modules["graphql.execution.execute"].execute
    signature = inspect.signature(original)

    @functools.wraps(original)
    def forced(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        given = bound.arguments.get("execution_context_class")
        if given is None:
            from dataloader_sync.graphql import AutoRelationsExecutionContext

            bound.arguments["execution_context_class"] = AutoRelationsExecutionContext
        name = "forced" if given is None else f"{given.__module__}.{given.__qualname__}"
        _executions[name] = _executions.get(name, 0) + 1
        return original(*bound.args, **bound.kwargs)

    for name, module in list(sys.modules.items()):  # graphql, graphql.execution, graphql.graphql, ...
        if name.partition(".")[0] == "graphql" and getattr(module, "execute", None) is original:
            vars(module)["execute"] = forced


def pytest_configure(config: Any) -> None:
    """As a plugin: pytest-django's statement-count fixtures record a difference instead of failing."""
    path = os.environ.get(_COUNTS)
    if not path:
        return
    import pytest
    from pytest_django import fixtures

    original = fixtures._assert_num_queries

    @contextlib.contextmanager
    def recording(config: Any, num: int, exact: bool = True, connection: Any = None, info: Any = None,
                  *, using: Any = None) -> Iterator[Any]:
        body_done = False
        try:  # -1 never matches: its own failure alone is caught
            with original(config, -1, True, connection, info, using=using) as ctx:
                yield ctx
                body_done = True
        except pytest.fail.Exception:
            if not body_done:
                raise
        if (len(ctx) != num) if exact else (len(ctx) > num):
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"test": test, "executed": len(ctx), "expected": num, "exact": exact}) + "\n")

    fixtures._assert_num_queries = recording


def pytest_sessionstart(session: Any) -> None:
    """As a plugin: graphene-django's view carries the switch, as a user would set it (Django is set up now)."""
    from graphene_django.views import GraphQLView

    from dataloader_sync.graphql import AutoRelationsExecutionContext

    GraphQLView.execution_context_class = AutoRelationsExecutionContext


def pytest_unconfigure(config: Any) -> None:
    """As a plugin: how many executions the switch reached, for the report."""
    path = os.environ.get(_COUNTS)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"executions": _executions}) + "\n")


def _run(checkout: Path, args: list[str], forced: bool, counts: Path) -> tuple[str, set[str]]:
    env = dict(os.environ)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-rfE", *args]
    if forced:
        env[_COUNTS] = str(counts)
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent), env.get("PYTHONPATH", "")])
        command[3:3] = ["-p", Path(__file__).stem]
    out = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, check=False).stdout
    summary = (out.strip().splitlines() or ["(no output)"])[-1]
    failed = {re.sub(r" - .*", "", line) for line in out.splitlines() if line.startswith(("FAILED ", "ERROR "))}
    return summary, failed


def _tested(checkout: Path) -> str:
    """Where the runs import dataloader_sync from (PYTHONPATH, else the install), seen from CHECKOUT."""
    command = [sys.executable, "-c", "import dataloader_sync; print(dataloader_sync.__file__)"]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False)
    return done.stdout.strip() or done.stderr.strip()[-200:]


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    checkout, args = Path(argv[0]).resolve(), argv[1:] or ["graphene_django", "examples"]
    with tempfile.TemporaryDirectory() as tmp:
        counts = Path(tmp) / "counts.jsonl"
        plain, plain_failed = _run(checkout, args, False, counts)
        forced, forced_failed = _run(checkout, args, True, counts)
        rows = [json.loads(line) for line in counts.read_text().splitlines()] if counts.exists() else []
    recorded = [row for row in rows if "test" in row]
    reached = [row["executions"] for row in rows if "executions" in row]
    print(f"dataloader_sync: {_tested(checkout)}")
    print(f"without the switch: {plain}\nwith the switch:    {forced}")
    for seen in reached:
        print(f"executions given AutoRelationsExecutionContext: {seen.pop('forced', 0)}")
        for name, number in sorted(seen.items()):
            print(f"executions that named their own class, left as given: {number} {name}")
    differing = sorted(plain_failed ^ forced_failed)
    for test in differing:
        print(f"{'fails only with' if test in forced_failed else 'passes only with'} the switch: {test}")
    for test in sorted(plain_failed & forced_failed):  # the suite against this install: the switch unseen there
        print(f"fails in both runs: {test}")
    for row in recorded:
        bound = "" if row["exact"] else "at most "
        print(f"statements {row['executed']} (the test expects {bound}{row['expected']}): {row['test']}")
    higher = [row for row in recorded if row["executed"] > row["expected"]]
    print(f"{len(differing)} outcomes differ; {len({r['test'] for r in recorded})} tests count other statements"
          f" ({len(higher)} counts higher)")
    return 1 if differing or higher or not reached else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
else:
    _force()
