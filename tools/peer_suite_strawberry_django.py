"""strawberry-django's own test suite with AutoRelationsExtension forced onto every schema, and without.

    python tools/peer_suite_strawberry_django.py CHECKOUT [-k EXPR] [pytest args...]

CHECKOUT is a strawberry-django source tree (its ``tests/`` and
``pyproject.toml``; PyPI's sdist and wheel carry no tests: take a git
checkout of the release tag nearest the installed version).  Run it with the
python of a throwaway virtualenv that has strawberry-graphql-django, this
repository (``pip install -e .``) and the suite's test dependencies
(pyproject's ``dev`` group: pytest-django, pytest-asyncio, pytest-mock,
pytest-snapshot, factory-boy, django-guardian, django-polymorphic, channels,
django-debug-toolbar, django-choices-field, django-tree-queries,
django-model-utils, pillow, psycopg).  ``-k "not async"`` (the default)
runs the sync tests.

The suite runs twice in CHECKOUT: as it is, then with this module loaded as
a pytest plugin, which appends ``AutoRelationsExtension`` to every
``strawberry.Schema`` and makes the suite's ``tests.utils.assert_num_queries``
record a count that differs (in a JSON-lines file) instead of failing, so
the test's answers are still checked.  The report: both runs' outcome
counts, every test whose outcome differs (and those failing in both
runs, where the switch goes unchecked), every recorded statement count.
Exit status 1 if an outcome differs or a count is higher with the switch.
"""
from __future__ import annotations

import contextlib
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
    """As a plugin: the suite's statement-count helper records a difference instead of failing."""
    path = os.environ.get(_COUNTS)
    if not path:
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


def _run(checkout: Path, args: list[str], forced: bool, counts: Path) -> tuple[str, set[str]]:
    env = dict(os.environ)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=--nomigrations",
               "-rfE", *args, "tests"]
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
    checkout, args = Path(argv[0]).resolve(), argv[1:] or ["-k", "not async"]
    with tempfile.TemporaryDirectory() as tmp:
        counts = Path(tmp) / "counts.jsonl"
        plain, plain_failed = _run(checkout, args, False, counts)
        forced, forced_failed = _run(checkout, args, True, counts)
        recorded = [json.loads(line) for line in counts.read_text().splitlines()] if counts.exists() else []
    print(f"dataloader_sync: {_tested(checkout)}")
    print(f"without the switch: {plain}\nwith the switch:    {forced}")
    differing = sorted(plain_failed ^ forced_failed)
    for test in differing:
        print(f"{'fails only with' if test in forced_failed else 'passes only with'} the switch: {test}")
    for test in sorted(plain_failed & forced_failed):  # the suite against this install: the switch unseen there
        print(f"fails in both runs: {test}")
    for row in recorded:
        print(f"statements {row['executed']} (the test expects {row['expected']}): {row['test']}")
    higher = [row for row in recorded if row["executed"] > row["expected"]]
    print(f"{len(differing)} outcomes differ; {len({r['test'] for r in recorded})} tests count other statements"
          f" ({len(higher)} counts higher)")
    return 1 if differing or higher else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
else:
    _force()
