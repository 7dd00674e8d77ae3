"""Batches of 70,000 keys: split by the driver's parameter limit, as few statements as it allows.

SQLite refuses more bound parameters in one statement than its connection's
``SQLITE_LIMIT_VARIABLE_NUMBER`` (32,766 by default from 3.32.0, 999 before;
Debian builds it with 250,000); PostgreSQL's drivers 65,535.  Three
databases: SQLite as built, SQLite with the default limit of 32,766 set on
each connection (``setlimit``, Python 3.11+: the limit most users have, and
SQLite really refuses more), and PostgreSQL, where no batch is split
(``= ANY(array)``; ``unnest`` of one array per column for composite keys, as
a long ``(a, b) IN (...)`` list exhausts its parser's stack).  Real
SQLAlchemy 2 ORM, values and statements asserted.
"""
from __future__ import annotations

import sqlite3

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")

from sqlalchemy import ForeignKey, create_engine, event, insert, select  # noqa: E402
from sqlalchemy.exc import OperationalError  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship  # noqa: E402
from sqlalchemy_helpers import Statements, postgres_url  # noqa: E402, F401

from dataloader_sync.sqlalchemy import load_model, load_related  # noqa: E402
from dataloader_sync.sqlalchemy._keys import RESERVED_PARAMETERS, max_parameters, statement_count  # noqa: E402

pytestmark = pytest.mark.slow

N = 70_000


class _Base(DeclarativeBase):
    pass


class Writer(_Base):
    __tablename__ = "big_writer"
    id: Mapped[int] = mapped_column(primary_key=True)
    works: Mapped[list[Work]] = relationship(back_populates="writer")


class Work(_Base):
    __tablename__ = "big_work"
    id: Mapped[int] = mapped_column(primary_key=True)
    writer_id: Mapped[int] = mapped_column(ForeignKey("big_writer.id"))
    writer: Mapped[Writer] = relationship(back_populates="works")


class Cell(_Base):
    __tablename__ = "big_cell"
    row: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    col: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)


DEFAULT_SQLITE_LIMIT = 32_766


@pytest.fixture(scope="module", params=["sqlite", "sqlite-32766", "postgresql"])
def big(request, tmp_path_factory):
    """``(engine, statements)`` on N writers with one work each (work i by writer N + 1 - i), and N cells.

    Module-scoped (the tests only read): filling a database takes seconds.
    """
    if request.param.startswith("sqlite"):
        url = f"sqlite:///{tmp_path_factory.mktemp('big') / 'big.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    engine = create_engine(url)
    if request.param == "sqlite-32766":
        if not hasattr(sqlite3.Connection, "setlimit"):
            pytest.skip("sqlite3.Connection.setlimit needs Python 3.11")

        @event.listens_for(engine, "connect")
        def default_limit(dbapi_connection, record):
            dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, DEFAULT_SQLITE_LIMIT)

    _Base.metadata.drop_all(engine)
    _Base.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(Writer), [{"id": i} for i in range(1, N + 1)])
        conn.execute(insert(Work), [{"id": i, "writer_id": N + 1 - i} for i in range(1, N + 1)])
        conn.execute(insert(Cell), [{"row": i // 100, "col": i % 100} for i in range(N)])
    statements = Statements(engine)
    try:
        yield engine, statements
    finally:
        statements.close()
        _Base.metadata.drop_all(engine)
        engine.dispose()


def _limit(engine) -> int:
    with engine.connect() as conn:
        return max_parameters(engine.dialect, conn.connection.driver_connection)


def _expected_statements(engine, columns: int) -> int:
    if engine.dialect.name == "postgresql":
        return 1
    return -(-N // ((_limit(engine) - RESERVED_PARAMETERS) // columns))


def _is_default_sqlite(engine) -> bool:
    return engine.dialect.name == "sqlite" and _limit(engine) == DEFAULT_SQLITE_LIMIT


def test_max_parameters_is_the_connection_limit_and_sqlite_really_refuses_more(big):
    engine, _ = big
    limit = _limit(engine)
    if engine.dialect.name == "postgresql":
        assert limit == 65_535
    elif hasattr(sqlite3.Connection, "getlimit"):
        with engine.connect() as conn:
            assert limit == conn.connection.driver_connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        with Session(engine) as session, pytest.raises(OperationalError, match="too many SQL variables"):
            session.execute(select(Writer).where(Writer.id.in_(range(limit + 1)))).all()
    else:
        assert limit == (32_766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999)
    assert statement_count(N, 1, engine.dialect, limit) == _expected_statements(engine, 1)
    assert statement_count(0, 1, engine.dialect, limit) == 0


def test_a_many_to_one_batch_of_70000_keys(big):
    engine, statements = big
    with Session(engine) as session:
        works = session.scalars(select(Work).order_by(Work.id)).all()
        statements.reset()
        writers = load_related(works, Work.writer)
        if engine.dialect.name == "postgresql":
            assert "= ANY (" in statements.sql[0] and len(statements.sql[0]) < 1000  # one array parameter
        assert statements.count == _expected_statements(engine, 1)
        assert statements.count == 3 or not _is_default_sqlite(engine)
        assert [w.id for w in writers] == [N + 1 - i for i in range(1, N + 1)]


def test_a_one_to_many_batch_of_70000_keys(big):
    engine, statements = big
    with Session(engine) as session:
        writers = session.scalars(select(Writer).order_by(Writer.id)).all()
        statements.reset()
        works = load_related(writers, Writer.works)
        assert statements.count == _expected_statements(engine, 1)
        assert statements.count == 3 or not _is_default_sqlite(engine)
        assert [[w.id for w in ws] for ws in works] == [[N + 1 - i] for i in range(1, N + 1)]


def test_a_model_batch_of_70000_keys_with_some_missing(big):
    engine, statements = big
    with Session(engine) as session:
        keys = list(range(N // 2, N + N // 2))  # the second half does not exist
        statements.reset()
        found = load_model(keys, Writer, session=session)
        assert statements.count == _expected_statements(engine, 1)
        assert statements.count == 3 or not _is_default_sqlite(engine)
        assert [w.id if w else None for w in found] == [k if k <= N else None for k in keys]


def test_a_composite_key_batch_of_70000_keys(big):
    engine, statements = big
    with Session(engine) as session:
        keys = [(i // 100, i % 100) for i in range(N)]
        statements.reset()
        cells = load_model(keys, Cell, session=session)
        assert statements.count == _expected_statements(engine, 2)
        assert statements.count == 5 or not _is_default_sqlite(engine)
        assert [(c.row, c.col) for c in cells] == keys
