"""dataloader_sync.sqlalchemy.related_loader and model_loader: loader families in a registry.

Real SQLAlchemy 2 ORM on SQLite and PostgreSQL; every test asserts the values
and the statements sent (one per loader per dispatch, whatever the number of
keys).
"""
from __future__ import annotations

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")

from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Session, scoped_session, sessionmaker  # noqa: E402
from sqlalchemy.orm.exc import DetachedInstanceError  # noqa: E402
from sqlalchemy_helpers import (  # noqa: E402
    Author,
    Book,
    Publisher,
    Review,
    catalogue,  # noqa: F401
    database_url,  # noqa: F401
    engine,  # noqa: F401
    postgres_url,  # noqa: F401
)

from dataloader_sync import DataLoaderRegistry, ScheduledDataLoaderRegistry  # noqa: E402
from dataloader_sync.sqlalchemy import load_model, load_related, model_loader, related_loader  # noqa: E402


def _all(session: Session, model):
    return session.scalars(select(model).order_by(model.id)).all()


def test_related_loader_is_the_registry_family_of_load_related():
    registry = DataLoaderRegistry()
    loader = related_loader(registry, Author.books)
    assert related_loader(registry, Author.books) is loader
    assert registry.loader_for(load_related, Author.books, session=None) is loader
    assert related_loader(registry, Book.author) is not loader
    assert related_loader(DataLoaderRegistry(), Author.books) is not loader
    assert list(registry.keys()) == ["load_related(Author.books)", "load_related(Book.author)"]


def test_related_loader_one_family_per_session_argument(engine):
    registry = DataLoaderRegistry()
    factory = sessionmaker(engine)
    scoped = scoped_session(factory)
    try:
        loaders = [related_loader(registry, Author.books, session=s) for s in (None, factory, scoped)]
        assert len({id(loader) for loader in loaders}) == 3
        assert related_loader(registry, Author.books, session=scoped) is loaders[2]
        assert "load_related(Author.books, session=scoped_session)" in registry
    finally:
        scoped.remove()


def test_related_loader_three_levels_cost_one_statement_per_level(catalogue):
    session, statements = catalogue
    authors = _all(session, Author)
    registry = DataLoaderRegistry()
    statements.reset()

    def reviews_of(books):
        return registry_loads(registry, Book.reviews, books)

    futures = [related_loader(registry, Author.books).load(a).then(reviews_of) for a in authors]
    while registry.dispatch_depth:
        registry.dispatch_all()
    assert statements.count == 2
    with Session(session.get_bind()) as other:
        expected = [[[r.id for r in b.reviews] for b in a.books] for a in _all(other, Author)]
    assert [[[r.id for r in rs] for rs in f.result(timeout=5)] for f in futures] == expected
    stats = registry.statistics_by_loader()
    assert stats["load_related(Author.books)"].batch_invoke_count == 1
    assert stats["load_related(Book.reviews)"].batch_load_count == 12


def registry_loads(registry, attribute, instances):
    return related_loader(registry, attribute).load_many(instances)


def test_related_loader_a_detached_key_fails_alone(catalogue):
    session, statements = catalogue
    authors = _all(session, Author)
    session.expunge(authors[2])
    registry = DataLoaderRegistry()
    statements.reset()
    futures = [related_loader(registry, Author.books).load(a) for a in authors]
    registry.dispatch_all()
    assert statements.count == 1
    assert isinstance(futures[2].exception(timeout=5), DetachedInstanceError)
    assert [len(futures[i].result(timeout=5)) for i in (0, 1, 3)] == [3, 3, 3]


def test_related_loader_with_a_scoped_session_resolves_it_at_batch_time(engine):
    with Session(engine) as setup:
        from sqlalchemy_helpers import fill

        fill(setup)
    scoped = scoped_session(sessionmaker(engine))
    try:
        authors = scoped.scalars(select(Author).order_by(Author.id)).all()
        scoped.expunge_all()  # detached: only session= can load them
        registry = DataLoaderRegistry()
        loader = related_loader(registry, Author.books, session=scoped)
        futures = [loader.load(a) for a in authors]
        registry.dispatch_all()
        books = [f.result(timeout=5) for f in futures]
        assert [len(b) for b in books] == [3, 3, 3, 3]
        assert all(sqlalchemy.inspect(b).session is scoped() for bs in books for b in bs)
    finally:
        scoped.remove()


def test_related_loader_in_a_scheduled_registry_without_ticker_mode(catalogue):
    session, statements = catalogue
    books = _all(session, Book)
    with ScheduledDataLoaderRegistry() as registry:
        statements.reset()
        futures = [related_loader(registry, Book.author).load(b) for b in books]
        registry.dispatch_all()
        assert [f.result(timeout=5) and f.result().id for f in futures] == [b.author_id for b in books]
    assert statements.count == 1


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda r: related_loader(r, Book.title), TypeError, "attribute must be a relationship attribute"),
    (lambda r: related_loader(r, Book.author, session="db"), TypeError, "session must be a Session"),
    (lambda r: related_loader(object(), Book.author), TypeError, "registry must be a DataLoaderRegistry"),
    (lambda r: model_loader(r, Author, session=None), TypeError, "or a sessionmaker, got None"),
    (lambda r: model_loader(r, "Author", session=Session()), TypeError, "model must be a mapped class"),
    (lambda r: model_loader(r, Author, "books", session=Session()), ValueError,
     'field must be "pk" or the name of a column attribute of Author'),
    (lambda r: model_loader(r, Author, "nope", session=Session()), ValueError, "got 'nope'"),
])
def test_loaders_refuse_bad_arguments_at_once(call, error, message):
    registry = DataLoaderRegistry()
    with pytest.raises(error, match=message):
        call(registry)
    assert len(registry) == 0


def test_model_loader_by_primary_key_uses_the_identity_map_then_one_statement(catalogue):
    session, statements = catalogue
    loaded = session.get(Author, 2)
    registry = DataLoaderRegistry()
    loader = model_loader(registry, Author, session=session)
    assert model_loader(registry, Author, "pk", session=session) is loader
    assert list(registry.keys()) == ["load_model(Author.pk, session=Session)"]
    statements.reset()
    futures = [loader.load(k) for k in (1, 2, 3, 999, None, 1)]
    registry.dispatch_all()
    assert statements.count == 1
    found = [f.result(timeout=5) for f in futures]
    assert found[1] is loaded
    assert [a.id if a else None for a in found] == [1, 2, 3, None, None, 1]
    statements.reset()
    assert model_loader(registry, Author, session=session).load(3).result(timeout=5) is found[2]  # cached
    assert load_model([1, 2, 3], Author, session=session) == found[:3]  # identity map: no SQL
    assert statements.count == 0


def test_model_loader_by_another_column(catalogue):
    session, statements = catalogue
    registry = DataLoaderRegistry()
    by_email = model_loader(registry, Author, "email", session=session)
    statements.reset()
    futures = [by_email.load(e) for e in ("a3@example.com", "nobody@example.com", "a1@example.com")]
    registry.dispatch_all()
    assert statements.count == 1
    assert [f.result(timeout=5) and f.result().id for f in futures] == [3, None, 1]


def test_model_loader_by_a_column_that_is_not_unique_gives_the_lowest_primary_key(catalogue):
    session, statements = catalogue
    registry = DataLoaderRegistry()
    statements.reset()
    futures = [model_loader(registry, Book, "author_id", session=session).load(a) for a in (1, 2)]
    registry.dispatch_all()
    assert statements.count == 1
    assert [f.result(timeout=5).id for f in futures] == [1, 4]  # books 1-3 are author 1's, 4-6 author 2's


def test_model_loader_with_a_sessionmaker_opens_and_closes_a_session_per_batch(catalogue, engine):
    _, statements = catalogue
    registry = DataLoaderRegistry()
    loader = model_loader(registry, Publisher, session=sessionmaker(engine))
    statements.reset()
    futures = [loader.load(k) for k in (1, 2)]
    registry.dispatch_all()
    publishers = [f.result(timeout=5) for f in futures]
    assert statements.count == 1
    assert [p.name for p in publishers] == ["publisher 1", "publisher 2"]
    assert all(sqlalchemy.inspect(p).detached for p in publishers)
    assert engine.pool.checkedout() == 0


def test_model_loader_a_review_and_its_book_through_then(catalogue):
    session, statements = catalogue
    registry = DataLoaderRegistry()
    reviews = model_loader(registry, Review, session=session)
    statements.reset()
    futures = [reviews.load(k).then(lambda r: related_loader(registry, Review.book).load(r)) for k in (1, 2, 3)]
    while registry.dispatch_depth:
        registry.dispatch_all()
    assert statements.count == 2
    assert [f.result(timeout=5).id for f in futures] == [1, 1, 2]
