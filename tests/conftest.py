"""Fixtures shared by every test module.

The autouse ``no_leaked_threads`` fixture fails any test that leaves a thread
running which it did not find when it started: every executor, worker and
refresher a test creates must be shut down by the test.  Threads of the
process-wide default ScheduledExecutor are allowed (they are shared by design
and bounded).

``FakeClock`` is the clock every test injects where the library takes a
``clock=`` (``from conftest import FakeClock``): time moves only when the test
says so, so no test sleeps to wait.

``postgres_server`` (session-scoped, from tests/postgres_server.py): one
PostgreSQL server for the whole run, for any test that asks for it.

``django_example_project`` (module-scoped, not autouse) configures Django for
the modules that test against the example project's ``books`` app;
``example_books`` fills its tables for one test and rolls them back after.
"""
from __future__ import annotations

import pathlib
import sys
import threading
from collections.abc import Iterator
from typing import Callable

import pytest

# One PostgreSQL server per test run (tests/postgres_server.py): a session
# fixture must be defined once, here, or each module importing it gets its own.
from postgres_server import postgres_server  # noqa: F401

_ALLOWED_PREFIXES = ("dataloader-sync-default",)
EXAMPLE_DIR = pathlib.Path(__file__).resolve().parent.parent / "examples" / "django_project"


class FakeClock:
    """A monotonic clock in seconds that moves only when told to."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _alive() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.is_alive()}


@pytest.fixture(autouse=True)
def no_leaked_threads():
    before = _alive()
    yield
    leaked = set()
    for t in _alive() - before:
        if t.name.startswith(_ALLOWED_PREFIXES):
            continue
        # A thread that is already on its way out gets a moment to finish.
        t.join(timeout=5.0)
        if t.is_alive():
            leaked.add(t)
    assert not leaked, f"test leaked threads: {sorted(t.name for t in leaked)}"


@pytest.fixture(scope="module")
def django_example_project() -> Iterator[None]:
    """Django configured from tests/django_settings.py, with the example project's ``books`` app, migrated.

    Django's settings can be configured once per process: the first module
    that asks configures them (never through DJANGO_SETTINGS_MODULE, so
    modules that do not ask are unaffected), later ones reuse them.  The
    example project is on ``sys.path`` for the asking module's tests only; the
    in-memory SQLite database is migrated for each module (again a no-op).
    """
    pytest.importorskip("django")
    import django
    from django.conf import settings

    sys.path.insert(0, str(EXAMPLE_DIR))
    try:
        if not settings.configured:
            import django_settings

            settings.configure(**{k: v for k, v in vars(django_settings).items() if k.isupper()})
            django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        yield
    finally:
        sys.path.remove(str(EXAMPLE_DIR))


@pytest.fixture
def example_books(django_example_project: None) -> Iterator[Callable[..., None]]:
    """``fill(authors=, books=, reviews=)``: replaces the example project's rows with that many
    authors, ``books`` books each (titled ``"book {a}.{b}"``) and ``reviews`` reviews per book
    (rated ``1 + (a + b + r) % 5``).

    The whole test runs in a transaction that is rolled back after it, whatever it wrote.
    """
    from books.models import Author, Book, Review
    from django.db import transaction

    def fill(*, authors: int, books: int, reviews: int) -> None:
        Author.objects.all().delete()  # the example's sample rows
        for a in range(authors):
            author = Author.objects.create(name=f"author {a}")
            for b in range(books):
                book = Book.objects.create(title=f"book {a}.{b}", author=author)
                Review.objects.bulk_create(Review(book=book, rating=1 + (a + b + r) % 5) for r in range(reviews))

    with transaction.atomic():
        yield fill
        transaction.set_rollback(True)
