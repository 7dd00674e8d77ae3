"""Django REST framework's own test suite with our batched serialization forced onto every serializer, and without.

    python tools/peer_suite_rest_framework.py CHECKOUT [pytest args...]

CHECKOUT is a REST framework source tree (its ``tests/``, ``pyproject.toml``
with the suite's pytest settings, ``runtests.py``; PyPI's wheel carries no
tests: take a git checkout of the release tag of the installed version).
Run it with the python of a throwaway virtualenv that has REST framework,
Django, this repository (``pip install -e .``, or this repository on
``PYTHONPATH``: the report names the one imported) and the suite's
dependency groups ``test`` and ``optional`` (pytest, pytest-django,
dj-database-url, django-filter, django-guardian, inflection, markdown,
pygments, pyyaml, requests, uritemplate, psycopg).  The default argument is
the suite's ``tests``; its addopts (``--no-migrations``, ``--strict-markers``)
stay.  Which REST framework is tested is the one imported from CHECKOUT:
the checkout's own ``rest_framework/`` if it is there (move it aside to test
the installed one against the suite; the report names the one imported).

The suite runs twice in CHECKOUT with this module loaded as a pytest plugin:
without the switch (the plugin only counts each test's statements, see
``_peer_suite``; nothing of ``dataloader_sync`` is imported), then with it,
where the plugin also

- replaces ``rest_framework.serializers.BaseSerializer.data`` (the property
  ``Serializer.data`` and ``ListSerializer.data`` reach through ``super()``)
  with one that first gives the serializer the hook ``AutoRelationsMixin``
  and ``batched_data`` give it (``dataloader_sync.rest_framework._views.batching``:
  its ``to_representation`` instance attribute), then reads REST framework's
  property: every top-level serializer's output, in views (a
  ``get_serializer`` or not) and in the tests' own ``serializer.data``, goes
  through the walk; a nested serializer is reached through its parent's walk
  as it is with the mixin.  ``.data`` of a serializer that has only
  validated data (``to_representation(validated_data)``: dicts, not
  instances) goes through it too;
- sets ``GenericAPIView.get_serializer`` to the mixin's, as a view listing
  ``AutoRelationsMixin`` first would have it (the same hook, given earlier);
- makes Django's ``assertNumQueries`` record a count that differs (in a
  JSON-lines file) instead of failing, so the test's answers are still
  checked.  It replaces Django's private
  ``django.test.testcases._AssertNumQueriesContext.__exit__`` (the context
  manager ``assertNumQueries`` returns, and uses for its callable form); the
  suite uses no pytest-django count fixture.

The report: which dataloader_sync and which REST framework were tested, both
runs' outcome counts, how many ``.data`` reads got the hook, every test whose
outcome differs (and those failing in both runs, where the switch goes
unchecked), every recorded statement count, every test whose body executes
more or fewer statements with the switch, and the totals.  Exit status 1 if
an outcome differs, a count or a test's statements are higher with the
switch, no ``.data`` read got the hook, or a run did not finish.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _peer_suite import COUNTS, compare_statements, finished, forced, outcomes, rows, run, tested
from _peer_suite import pytest_runtest_call as pytest_runtest_call

_reads = [0]  # ``.data`` reads that went through the hook


def _force_data() -> None:
    """Every ``BaseSerializer.data`` read serializes through the hook (``batching``) first."""
    from rest_framework.serializers import BaseSerializer

    from dataloader_sync.rest_framework._views import batching

    original = BaseSerializer.__dict__["data"]

    def data(self: Any) -> Any:
        if "_data" not in self.__dict__:  # a read that serializes (not the cached one)
            batching(self)
            _reads[0] += 1
        return original.fget(self)

    BaseSerializer.data = property(data, doc=original.__doc__)  # type: ignore[assignment,method-assign]


def _force_views() -> None:
    """``GenericAPIView.get_serializer`` is the mixin's (its serializers get the hook when made)."""
    from rest_framework.generics import GenericAPIView
    from rest_framework.serializers import BaseSerializer

    from dataloader_sync.rest_framework._views import batching

    original = GenericAPIView.get_serializer

    def get_serializer(self: Any, *args: Any, **kwargs: Any) -> Any:
        serializer = original(self, *args, **kwargs)
        return batching(serializer) if isinstance(serializer, BaseSerializer) else serializer

    GenericAPIView.get_serializer = get_serializer  # type: ignore[method-assign]


def _record_counts(path: str) -> None:
    """Django's ``assertNumQueries`` records a count that differs instead of failing."""
    from django.test.testcases import _AssertNumQueriesContext
    from django.test.utils import CaptureQueriesContext

    def __exit__(self: Any, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        CaptureQueriesContext.__exit__(self, exc_type, exc_value, traceback)
        if exc_type is not None or len(self) == self.num:
            return
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"test": test, "executed": len(self), "expected": self.num}) + "\n")

    _AssertNumQueriesContext.__exit__ = __exit__  # type: ignore[method-assign]


def pytest_sessionstart(session: Any) -> None:
    """As a plugin, with the switch (the suite's conftest has set Django up by now): force it."""
    path = os.environ.get(COUNTS)
    if not path or not forced():
        return
    _force_data()
    _force_views()
    _record_counts(path)


def pytest_unconfigure(config: Any) -> None:
    """As a plugin, with the switch: how many ``.data`` reads got the hook, for the report."""
    path = os.environ.get(COUNTS)
    if path and forced():
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"reads": _reads[0]}) + "\n")


def _rest_framework(checkout: Path) -> str:
    """Which REST framework the runs import, seen from CHECKOUT."""
    command = [sys.executable, "-c", "import rest_framework as r; print(r.__version__, r.__file__)"]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=False)
    return done.stdout.strip() or done.stderr.strip()[-200:]


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    checkout, args = Path(argv[0]).resolve(), argv[1:] or ["tests"]
    with tempfile.TemporaryDirectory() as tmp:
        plain, plain_failed, plain_statements = run(checkout, Path(__file__).stem, args, False, Path(tmp))
        with_switch, forced_failed, forced_statements = run(checkout, Path(__file__).stem, args, True, Path(tmp))
        recorded = rows(Path(tmp) / "counts.jsonl")
    print(f"dataloader_sync: {tested(checkout)}\nrest_framework: {_rest_framework(checkout)}")
    print(f"without the switch: {plain}\nwith the switch:    {with_switch}")
    reads = [row["reads"] for row in recorded if "reads" in row]
    for number in reads:
        print(f".data reads given the batched hook: {number}")
    differing = outcomes(plain_failed, forced_failed)
    counts = [row for row in recorded if "test" in row]
    for row in counts:
        print(f"statements {row['executed']} (the test expects {row['expected']}): {row['test']}")
    more = compare_statements(plain_statements, forced_statements, list_fewer=True)
    higher = [row for row in counts if row["executed"] > row["expected"]]
    print(f"{differing} outcomes differ; {len({r['test'] for r in counts})} tests count other statements"
          f" ({len(higher)} counts higher); {more} tests execute more statements with the switch")
    ran = finished(plain) and finished(with_switch)
    return 1 if differing or higher or more or not any(reads) or not ran else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
