"""graphene-django's own test suite with AutoRelationsExecutionContext forced onto every execution, and without.

    python tools/peer_suite_graphene_django.py CHECKOUT [pytest args...]

CHECKOUT is a graphene-django source tree (its ``graphene_django/`` with the
tests inside, ``examples/`` and ``setup.cfg``; PyPI's wheel carries no
tests: take a git checkout of the release tag of the installed version, e.g.
``v3.2.3``).  Run it with the python of a throwaway virtualenv that has
graphene-django, Django, this repository (``pip install -e .``, or this
repository on ``PYTHONPATH``: the report names the one imported) and the
suite's test dependencies (setup.py's ``test`` extra: pytest, pytest-django,
django-filter, djangorestframework, pytest-random-order, pytest-cov, mock,
pytz, coveralls).  The default arguments are the paths tox runs,
``graphene_django examples``; the suite's ``--random-order`` addopt is
dropped so both runs take the tests in one order (its ``filterwarnings =
error`` stays: a warning the switch raises fails the test).  Run from
CHECKOUT, the checkout's ``graphene_django`` is the one imported (the tag of
the installed version: the same code).

The suite runs twice in CHECKOUT with this module loaded as a pytest plugin:
without the switch (the plugin only counts each test's statements, see
``_peer_suite``), then with it, where the plugin also

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

The report: which dataloader_sync was tested, both runs' outcome counts, how
many executions got the switch, every test whose outcome differs (and those
failing in both runs, where the switch goes unchecked), every recorded
statement count, every test whose body executes more or fewer statements with
the switch, and the totals.  Exit status 1 if an outcome differs, a count or
a test's statements are higher with the switch, no execution got it, or a
run did not finish (its last line is then shown: a syntax error, say).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _peer_suite import COUNTS, compare_statements, finished, forced, outcomes, rows, run, tested
from _peer_suite import pytest_runtest_call as pytest_runtest_call

_executions: dict[str, int] = {}  # "forced", or the name of a class given explicitly: how many executions


def _force() -> None:
    """As a plugin: every graphql-core ``execute`` with no execution context class gets ours."""
    import graphql.execution.execute  # noqa: F401  (the module, in sys.modules)

    original = sys.modules["graphql.execution.execute"].execute
    signature = inspect.signature(original)

    @functools.wraps(original)
    def forced_execute(*args: Any, **kwargs: Any) -> Any:
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
            vars(module)["execute"] = forced_execute


def pytest_configure(config: Any) -> None:
    """As a plugin, with the switch: pytest-django's statement-count fixtures record a difference instead of
    failing."""
    path = os.environ.get(COUNTS)
    if not path or not forced():
        return
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
    """As a plugin, with the switch: graphene-django's view carries it, as a user would set it (Django is set
    up now)."""
    if not forced():
        return
    from graphene_django.views import GraphQLView

    from dataloader_sync.graphql import AutoRelationsExecutionContext

    GraphQLView.execution_context_class = AutoRelationsExecutionContext


def pytest_unconfigure(config: Any) -> None:
    """As a plugin, with the switch: how many executions it reached, for the report."""
    path = os.environ.get(COUNTS)
    if path and forced():
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"executions": _executions}) + "\n")


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    checkout, args = Path(argv[0]).resolve(), ["-o", "addopts=", *(argv[1:] or ["graphene_django", "examples"])]
    with tempfile.TemporaryDirectory() as tmp:
        plain, plain_failed, plain_statements = run(checkout, Path(__file__).stem, args, False, Path(tmp))
        with_switch, forced_failed, forced_statements = run(checkout, Path(__file__).stem, args, True, Path(tmp))
        recorded = rows(Path(tmp) / "counts.jsonl")
    print(f"dataloader_sync: {tested(checkout)}")
    print(f"without the switch: {plain}\nwith the switch:    {with_switch}")
    reached = [row["executions"] for row in recorded if "executions" in row]
    for seen in reached:
        print(f"executions given AutoRelationsExecutionContext: {seen.pop('forced', 0)}")
        for name, number in sorted(seen.items()):
            print(f"executions that named a class, left as given: {number} {name}")
    differing = outcomes(plain_failed, forced_failed)
    counts = [row for row in recorded if "test" in row]
    for row in counts:
        bound = "" if row["exact"] else "at most "
        print(f"statements {row['executed']} (the test expects {bound}{row['expected']}): {row['test']}")
    more = compare_statements(plain_statements, forced_statements, list_fewer=True)
    higher = [row for row in counts if row["executed"] > row["expected"]]
    print(f"{differing} outcomes differ; {len({r['test'] for r in counts})} tests count other statements"
          f" ({len(higher)} counts higher); {more} tests execute more statements with the switch")
    ran = finished(plain) and finished(with_switch)
    return 1 if differing or higher or more or not reached or not ran else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
elif forced():
    _force()
