"""where=, order_by= and first= of the SQLAlchemy related loaders: still one statement per batch.

Real SQLAlchemy 2 ORM on SQLite and PostgreSQL; values checked against the
same filter, order and limit applied in Python to SQLAlchemy's own lazy loads.
"""
from __future__ import annotations

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")

from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402
from sqlalchemy_helpers import (  # noqa: E402
    Author,
    Book,
    Review,
    Tag,
    catalogue,  # noqa: F401
    database_url,  # noqa: F401
    engine,  # noqa: F401
    postgres_url,  # noqa: F401
)

from dataloader_sync import DataLoaderRegistry  # noqa: E402
from dataloader_sync.sqlalchemy import load_related, related_loader  # noqa: E402


def _all(session: Session, model):
    return session.scalars(select(model).order_by(model.id)).all()


def _truth(engine, model, attribute):
    with Session(engine) as other:
        return [list(getattr(obj, attribute)) for obj in _all(other, model)]


def test_where_filters_a_one_to_many_in_one_statement(catalogue, engine):
    session, statements = catalogue
    authors = _all(session, Author)
    statements.reset()
    books = load_related(authors, Author.books, where=Book.title != "book 2.1")
    assert statements.count == 1
    expected = [[b.title for b in bs if b.title != "book 2.1"] for bs in _truth(engine, Author, "books")]
    assert [[b.title for b in bs] for bs in books] == expected
    assert len(books[1]) == 2


def test_order_by_replaces_the_relationship_order(catalogue, engine):
    session, statements = catalogue
    authors = _all(session, Author)
    statements.reset()
    books = load_related(authors, Author.books, order_by=Book.title.desc())
    assert statements.count == 1
    assert [[b.title for b in bs] for bs in books] == [
        sorted((b.title for b in bs), reverse=True) for bs in _truth(engine, Author, "books")]


def test_first_keeps_each_parents_first_n_in_the_same_statement(catalogue, engine):
    session, statements = catalogue
    authors = _all(session, Author)
    statements.reset()
    books = load_related(authors, Author.books, order_by=[Book.title.desc()], first=2)
    assert statements.count == 1
    assert "row_number() OVER (PARTITION BY" in statements.sql[0]
    expected = [sorted((b.title for b in bs), reverse=True)[:2] for bs in _truth(engine, Author, "books")]
    assert [[b.title for b in bs] for bs in books] == expected
    assert all(sqlalchemy.inspect(b).session is session for bs in books for b in bs)


def test_first_on_a_many_to_many_with_the_relationship_order_and_a_filter(catalogue, engine):
    session, statements = catalogue
    tags = _all(session, Tag)
    statements.reset()
    books = load_related(tags, Tag.books, where=Book.title.like("book %"), first=2)
    assert statements.count == 1
    expected = [[b.title for b in bs if b.title.startswith("book ")][:2] for bs in _truth(engine, Tag, "books")]
    assert [[b.title for b in bs] for bs in books] == expected  # Tag.books is ordered by title, descending
    assert all(len(bs) == 2 for bs in books)


def test_where_on_a_many_to_one_skips_the_identity_map_and_gives_none_when_filtered_out(catalogue):
    session, statements = catalogue
    books = _all(session, Book)
    _all(session, Author)  # all in the identity map: a plain load would send nothing
    statements.reset()
    authors = load_related(books, Book.author, where=Author.name != "author 1")
    assert statements.count == 1
    assert [a.id if a else None for a in authors] == [None if b.author_id == 1 else b.author_id for b in books]


def test_equal_criteria_built_twice_share_one_loader_and_other_values_do_not():
    registry = DataLoaderRegistry()
    one = related_loader(registry, Author.books, where=Book.title != "x", first=2)
    assert related_loader(registry, Author.books, where=[Book.title != "x"], first=2) is one
    assert related_loader(registry, Author.books, where=Book.title != "y", first=2) is not one
    assert related_loader(registry, Author.books, where=Book.title != "x") is not one
    assert related_loader(registry, Author.books, where=Book.title.in_(["a", "b"])) is \
        related_loader(registry, Author.books, where=Book.title.in_(["a", "b"]))
    assert "load_related(Author.books, where=book.title != 'x', first=2)" in registry
    assert related_loader(registry, Author.books) is registry.loader_for(load_related, Author.books, session=None)


def test_criteria_in_a_registry_three_levels_one_statement_each(catalogue):
    session, statements = catalogue
    authors = _all(session, Author)
    registry = DataLoaderRegistry()
    statements.reset()

    def best_reviews(books):
        loader = related_loader(registry, Book.reviews, order_by=Review.rating.desc(), first=1)
        return loader.load_many(books)

    futures = [related_loader(registry, Author.books, first=2).load(a).then(best_reviews) for a in authors]
    while registry.dispatch_depth:
        registry.dispatch_all()
    assert statements.count == 2
    got = [[[r.rating for r in rs] for rs in f.result(timeout=5)] for f in futures]
    assert all(len(per_author) == 2 and all(len(rs) == 1 for rs in per_author) for per_author in got)
    with Session(session.get_bind()) as other:
        expected = [[[max(r.rating for r in b.reviews)] for b in a.books[:2]] for a in _all(other, Author)]
    assert got == expected


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"first": 0}, ValueError, "first must be >= 1"),
    ({"first": "2"}, TypeError, "first must be an int or None, got str"),
    ({"first": True}, TypeError, "first must be an int or None, got bool"),
    ({"where": "title = 'x'"}, TypeError, "where must be a SQL expression or a sequence of them"),
    ({"order_by": [Book.title, 3]}, TypeError, "order_by must be a SQL expression"),
])
def test_bad_criteria_fail_at_once(kwargs, error, message):
    registry = DataLoaderRegistry()
    with pytest.raises(error, match=message):
        related_loader(registry, Author.books, **kwargs)
    with pytest.raises(error, match=message):
        load_related([], Author.books, **kwargs)
    assert len(registry) == 0


def test_first_on_a_to_one_relationship_fails_at_once():
    with pytest.raises(ValueError, match="first applies to to-many relationships; Book.author is to-one"):
        related_loader(DataLoaderRegistry(), Book.author, first=1)
