"""SQLAlchemy loaders off the request thread: a session is never used by two threads at once.

A batch that runs on another thread than the one that began the session's
transaction (a loader ``executor=``, a tick of a ticker-mode registry) fails
its keys with a ``RuntimeError`` before it touches the session; with
``session=sessionmaker(...)`` each batch opens a session of its own on the
thread that runs it and closes it, so no connection stays checked out.
Real SQLAlchemy on SQLite and PostgreSQL, statements counted per thread.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import queue
import threading

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")

from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Session, sessionmaker  # noqa: E402
from sqlalchemy_helpers import (  # noqa: E402
    Author,
    Book,
    catalogue,  # noqa: F401
    database_url,  # noqa: F401
    engine,  # noqa: F401
    postgres_url,  # noqa: F401
)

from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry  # noqa: E402
from dataloader_sync.sqlalchemy import load_model, load_related, model_loader, related_loader  # noqa: E402

OWNED = "the session is in use by thread"


def _all(session: Session, model):
    return session.scalars(select(model).order_by(model.id)).all()


def _settled(futures, timeout=10.0):
    """Wait for *futures* without driving them (a done-callback and a queue: no dispatch on this thread)."""
    done: queue.Queue = queue.Queue()
    for f in futures:
        f.add_done_callback(done.put)
    for _ in futures:
        done.get(timeout=timeout)
    return futures


def test_a_batch_on_an_executor_thread_refuses_the_request_session(catalogue):
    session, statements = catalogue
    books = _all(session, Book)
    with cf.ThreadPoolExecutor(1) as pool:
        loader = DataLoader(functools.partial(load_related, attribute=Book.author), executor=pool)
        statements.reset()
        futures = [loader.load(b) for b in books[:4]]
        loader.dispatch()
        _settled(futures)
    assert statements.count == 0  # refused before touching the session
    errors = [f.exception() for f in futures]
    assert all(isinstance(e, RuntimeError) and OWNED in str(e) for e in errors)
    assert f"thread {threading.get_ident()}" in str(errors[0])
    # The same loads on this thread work, in one statement.
    statements.reset()
    assert [a.id for a in load_related(books[:4], Book.author)] == [1, 1, 1, 2]
    assert statements.count == 1


def test_a_model_batch_on_an_executor_thread_refuses_the_request_session(catalogue):
    session, statements = catalogue
    _all(session, Author)  # this thread begins the session's transaction
    with cf.ThreadPoolExecutor(1) as pool:
        loader = DataLoader(functools.partial(load_model, model=Author, session=session), executor=pool)
        statements.reset()
        future = loader.load(1)
        loader.dispatch()
        _settled([future])
    assert isinstance(future.exception(), RuntimeError) and OWNED in str(future.exception())
    assert statements.count == 0


def test_a_tick_of_a_ticker_registry_refuses_the_request_session(catalogue):
    session, statements = catalogue
    books = _all(session, Book)
    with ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.005) as registry:
        statements.reset()
        futures = [related_loader(registry, Book.author).load(b) for b in books[:3]]
        registry.reschedule_now()  # the ticker dispatches them, on a pool thread
        _settled(futures)
    assert all(isinstance(f.exception(), RuntimeError) for f in futures)
    assert statements.count == 0


def test_a_sessionmaker_runs_each_batch_in_its_own_session_on_the_executor_thread(catalogue, engine):
    session, statements = catalogue
    books = _all(session, Book)
    busy = engine.pool.checkedout()  # the request session's connection
    factory = sessionmaker(engine)
    with cf.ThreadPoolExecutor(2) as pool:
        loader = DataLoader(functools.partial(load_related, attribute=Book.author, session=factory), executor=pool)
        statements.reset()
        futures = [loader.load(b) for b in books]
        loader.dispatch()
        authors = [f.result(timeout=10) for f in _settled(futures)]
    assert statements.count == 1
    assert statements.threads[0] != threading.get_ident()
    assert [a.id if a else None for a in authors] == [b.author_id for b in books]
    assert all(a is None or sqlalchemy.inspect(a).detached for a in authors)  # their session is closed
    assert engine.pool.checkedout() == busy == 1


def test_a_sessionmaker_batch_reads_the_keys_without_the_request_session(catalogue, engine):
    session, statements = catalogue
    authors = _all(session, Author)
    books = _all(session, Book)
    session.expire_all()  # primary keys come from the identity; a foreign key would need the session
    busy = engine.pool.checkedout()
    with cf.ThreadPoolExecutor(1) as pool:
        factory = sessionmaker(engine)
        to_books = DataLoader(functools.partial(load_related, attribute=Author.books, session=factory), executor=pool)
        to_author = DataLoader(functools.partial(load_related, attribute=Book.author, session=factory), executor=pool)
        statements.reset()
        lists = [to_books.load(a) for a in authors]
        expired = to_author.load(books[0])
        to_books.dispatch()
        to_author.dispatch()
        _settled([*lists, expired])
    assert [len(f.result()) for f in lists] == [3, 3, 3, 3]
    error = expired.exception()
    assert isinstance(error, ValueError) and "author_id of Book (1,) is not loaded" in str(error)
    assert statements.count == 1  # the lists; nothing through the request session
    assert engine.pool.checkedout() == busy


def test_200_requests_with_ticker_registries_leave_no_connection_checked_out(catalogue, engine):
    session, statements = catalogue
    factory = sessionmaker(engine)
    books = _all(session, Book)
    session.close()  # its connection goes back (the books stay loaded): only the loaders' could stay out
    statements.reset()
    for request in range(200):
        with ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.005) as registry:
            authors = [related_loader(registry, Book.author, session=factory).load(b) for b in books[:3]]
            publisher = model_loader(registry, Author, session=factory).load(1 + request % 4)
            registry.reschedule_now()
            _settled([*authors, publisher])
            assert [a.result().id for a in authors] == [1, 1, 1]
            assert publisher.result().id == 1 + request % 4
    assert statements.count == 400  # two loaders, one batch each, per request
    assert threading.get_ident() not in set(statements.threads)
    assert engine.pool.checkedout() == 0
    assert engine.pool.checkedin() <= engine.pool.size()
