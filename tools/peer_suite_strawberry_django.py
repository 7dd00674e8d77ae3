"""strawberry-django's own test suite with AutoRelationsExtension forced onto every schema, and without.

    python tools/peer_suite_strawberry_django.py CHECKOUT [-k EXPR] [pytest args...]

CHECKOUT is a strawberry-django source tree (its ``tests/`` and
``pyproject.toml``; PyPI's sdist and wheel carry no tests: take a git
checkout of the release tag nearest the installed version, without its
``strawberry_django/``, which would shadow the installed one).  Run it with
the python of a throwaway virtualenv that has strawberry-graphql-django,
this repository (``pip install -e .``, or this repository on ``PYTHONPATH``:
the report names the one imported) and the suite's test dependencies
(pyproject's ``dev`` group: pytest-django, pytest-asyncio, pytest-mock,
pytest-snapshot, factory-boy, django-guardian, django-polymorphic, channels,
django-debug-toolbar, django-choices-field, django-tree-queries,
django-model-utils, pillow, psycopg).  ``-k "not async"`` (the default)
runs the sync tests.

The suite runs twice in CHECKOUT with this module loaded as a pytest plugin:
without the switch (the plugin only counts each test's statements, see
``_peer_suite``), then with it, where the plugin also appends
``AutoRelationsExtension`` to every ``strawberry.Schema`` and makes the
suite's ``tests.utils.assert_num_queries`` record a count that differs (in
a JSON-lines file) instead of failing, so the test's answers are still
checked.  The report: which dataloader_sync was tested, both runs' outcome
counts, every test whose outcome differs (and those failing in both runs,
where the switch goes unchecked), every recorded statement count, every
test whose body executes more statements with the switch, and the totals.
Exit status 1 if an outcome differs, a count or a test's statements are
higher with the switch, or a run did not finish (its last line is then
shown: a syntax error, say).
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _peer_suite import COUNTS, compare_statements, finished, forced, outcomes, rows, run, tested
from _peer_suite import pytest_runtest_call as pytest_runtest_call


def _force() -> None:
    """As a plugin: every strawberry.Schema gets AutoRelationsExtension (appended, once)."""
    import inspect

    import strawberry

    init = strawberry.Schema.__init__
    signature = inspect.signature(init)

    def forced_init(self: Any, *args: Any, **kwargs: Any) -> None:
        from dataloader_sync.strawberry_django import AutoRelationsExtension

        bound = signature.bind(self, *args, **kwargs)
        extensions = list(bound.arguments.get("extensions", ()) or ())
        if AutoRelationsExtension not in extensions:
            extensions.append(AutoRelationsExtension)
        bound.arguments["extensions"] = extensions
        init(*bound.args, **bound.kwargs)

    strawberry.Schema.__init__ = forced_init  # type: ignore[method-assign]


def pytest_configure(config: Any) -> None:
    """As a plugin, with the switch: the suite's statement-count helper records a difference instead of failing."""
    path = os.environ.get(COUNTS)
    if not path or not forced():
        return
    import tests.utils as utils  # the suite's own helpers (CHECKOUT is the working directory)

    original = utils.assert_num_queries

    @contextlib.contextmanager
    def recording(n: int, *, using: str = "default") -> Iterator[Any]:
        body_done = False
        try:
            with original(-1, using=using) as ctx:  # -1 never matches: its own assertion alone is caught
                yield ctx
                body_done = True
        except AssertionError:
            if not body_done:
                raise
        if len(ctx) != n:
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"test": test, "executed": len(ctx), "expected": n}) + "\n")

    utils.assert_num_queries = recording


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    checkout, args = Path(argv[0]).resolve(), argv[1:] or ["-k", "not async"]
    args = ["-o", "addopts=--nomigrations", *args, "tests"]
    with tempfile.TemporaryDirectory() as tmp:
        plain, plain_failed, plain_statements = run(checkout, Path(__file__).stem, args, False, Path(tmp))
        with_switch, forced_failed, forced_statements = run(checkout, Path(__file__).stem, args, True, Path(tmp))
        recorded = rows(Path(tmp) / "counts.jsonl")
    print(f"dataloader_sync: {tested(checkout)}")
    print(f"without the switch: {plain}\nwith the switch:    {with_switch}")
    differing = outcomes(plain_failed, forced_failed)
    for row in recorded:
        print(f"statements {row['executed']} (the test expects {row['expected']}): {row['test']}")
    more = compare_statements(plain_statements, forced_statements, list_fewer=False)
    higher = [row for row in recorded if row["executed"] > row["expected"]]
    print(f"{differing} outcomes differ; {len({r['test'] for r in recorded})} tests count other statements"
          f" ({len(higher)} counts higher); {more} tests execute more statements with the switch")
    ran = finished(plain) and finished(with_switch)
    return 1 if differing or higher or more or not ran else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
elif forced():
    _force()
