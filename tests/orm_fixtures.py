"""Fixtures for tests of the ORM loaders on the ``orm_library`` app, on SQLite and on PostgreSQL.

Import them into a test module (``from orm_fixtures import library, orm_db  # noqa: F401``;
``postgres_server`` is tests/conftest.py's, one per run) and mark it
``pytestmark = pytest.mark.usefixtures("django_example_project")``.

- ``orm_db`` (parametrized ``"default"`` / ``"postgres"``): the Django
  database alias a test runs on — the in-memory SQLite database, or a
  PostgreSQL database on the ``postgres_server`` of tests/postgres_server.py
  (skipped with the reason where PostgreSQL or psycopg is missing, unless
  ``DATALOADER_SYNC_REQUIRE_POSTGRES=1``).  Each test that takes it runs
  twice, with ids ``[sqlite]`` and ``[postgresql]``.  Query the alias
  explicitly (``Author.objects.using(orm_db)``, ``CaptureQueriesContext(connections[orm_db])``);
  instances loaded from it remember it (``instance._state.db``), and the
  loaders query the database their instances came from.
- ``library``: ``fill(alias, authors=, books=, reviews=, tags=, publishers=)``
  writes a deterministic library (see ``fill_library``) inside a
  transaction on that alias, rolled back after the test.  Rows written so
  are invisible to other threads' connections (uncommitted); tests of
  loads on other threads use ``committed_library`` (same signature), which
  commits and deletes the rows after the test.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Callable

import pytest
from postgres_server import use_for_django


@pytest.fixture(params=["sqlite", "postgresql"])
def orm_db(request: pytest.FixtureRequest, django_example_project: None) -> str:
    if request.param == "sqlite":
        return "default"
    return use_for_django(request.getfixturevalue("postgres_server"))


@dataclasses.dataclass
class Library:
    """What ``fill_library`` wrote, in creation (= primary-key) order."""

    publishers: list[Any]
    authors: list[Any]
    profiles: list[Any]
    tags: list[Any]
    books: list[Any]
    reviews: list[Any]


def fill_library(alias: str, *, authors: int = 3, books: int = 2, reviews: int = 2, tags: int = 3,
                 publishers: int = 2) -> Library:
    """Write a library to *alias*:

    - publishers ``"publisher {p}"``;
    - authors ``"author {a}"``, published by publisher ``a % publishers``,
      except every third author (``a % 3 == 2``), who has none;
    - a profile (``bio="bio {a}"``) for each even-numbered author;
    - tags ``"tag {t:02}"``;
    - ``books`` books per author, ``"book {a}.{b}"``, ``year=2000 + b``,
      tagged with tags ``(a + b) % tags`` and ``(a + b + 1) % tags`` (one tag
      when ``tags == 1``, none when 0);
    - ``reviews`` reviews per book, ``rating = 1 + (a + b + r) % 5``, ``body="review {r}"``.
    """
    from orm_library.models import Author, AuthorProfile, Book, Publisher, Review, Tag

    made_publishers = Publisher.objects.using(alias).bulk_create(
        [Publisher(name=f"publisher {p}") for p in range(publishers)])
    made_authors = Author.objects.using(alias).bulk_create([
        Author(name=f"author {a}",
               publisher=None if a % 3 == 2 or not publishers else made_publishers[a % publishers])
        for a in range(authors)])
    made_profiles = AuthorProfile.objects.using(alias).bulk_create(
        [AuthorProfile(author=made_authors[a], bio=f"bio {a}") for a in range(0, authors, 2)])
    made_tags = Tag.objects.using(alias).bulk_create([Tag(name=f"tag {t:02}") for t in range(tags)])
    made_books = Book.objects.using(alias).bulk_create([
        Book(title=f"book {a}.{b}", year=2000 + b, author=made_authors[a]) for a in range(authors)
        for b in range(books)])
    links = []
    for i, book in enumerate(made_books):
        a, b = divmod(i, books)
        for t in sorted({(a + b) % tags, (a + b + 1) % tags} if tags else set()):
            links.append(Book.tags.through(book_id=book.pk, tag_id=made_tags[t].pk))
    Book.tags.through.objects.using(alias).bulk_create(links)
    made_reviews = Review.objects.using(alias).bulk_create([
        Review(book=book, rating=1 + (sum(divmod(i, books)) + r) % 5, body=f"review {r}")
        for i, book in enumerate(made_books) for r in range(reviews)])
    return Library(made_publishers, made_authors, made_profiles, made_tags, made_books, made_reviews)


def _delete_all(alias: str) -> None:
    from orm_library.models import Author, Book, Publisher, Tag

    for model in (Book, Author, Publisher, Tag):  # the rest cascades
        model.objects.using(alias).all().delete()


@pytest.fixture
def library(django_example_project: None) -> Iterator[Callable[..., Library]]:
    from django.db import transaction

    atomics: list[Any] = []

    def fill(alias: str, **counts: int) -> Library:
        atomic = transaction.atomic(using=alias)
        atomic.__enter__()
        atomics.append((alias, atomic))
        return fill_library(alias, **counts)

    try:
        yield fill
    finally:
        for alias, atomic in reversed(atomics):
            transaction.set_rollback(True, using=alias)
            atomic.__exit__(None, None, None)


@pytest.fixture
def committed_library(django_example_project: None) -> Iterator[Callable[..., Library]]:
    aliases: list[str] = []

    def fill(alias: str, **counts: int) -> Library:
        aliases.append(alias)
        return fill_library(alias, **counts)

    try:
        yield fill
    finally:
        for alias in aliases:
            _delete_all(alias)
