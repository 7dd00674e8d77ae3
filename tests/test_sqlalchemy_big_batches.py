"""Batches of 70,000 keys: split by the driver's parameter limit, as few statements as it allows.

SQLite refuses more than 32,766 bound parameters in one statement (999 before
3.32.0); PostgreSQL's drivers 65,535.  On SQLite a batch of 70,000
single-column keys is three statements; on PostgreSQL one (``= ANY(array)``);
composite keys are split by the limit on SQLite and sent as one array per
column on PostgreSQL (a long ``(a, b) IN (...)`` list exhausts its parser's
stack).  Real SQLAlchemy 2 ORM on each
database, values and statements asserted.
"""
from __future__ import annotations

import sqlite3

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")

from sqlalchemy import ForeignKey, create_engine, insert, select  # noqa: E402
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


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def big(request, tmp_path_factory):
    """``(engine, statements)`` on N writers with one work each (work i by writer N + 1 - i), and N cells.

    Module-scoped (the tests only read): filling a database takes seconds.
    """
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('big') / 'big.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    engine = create_engine(url)
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


def _expected_statements(engine, columns: int) -> int:
    if engine.dialect.name == "postgresql":
        return 1
    limit = 32_766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999
    return -(-N // ((limit - RESERVED_PARAMETERS) // columns))


def test_max_parameters_follows_the_dialect_and_the_sqlite_library(big):
    engine, _ = big
    expected = {"postgresql": 65_535}.get(
        engine.dialect.name, 32_766 if sqlite3.sqlite_version_info >= (3, 32, 0) else 999)
    assert max_parameters(engine.dialect) == expected
    assert statement_count(N, 1, engine.dialect) == _expected_statements(engine, 1)
    assert statement_count(0, 1, engine.dialect) == 0


def test_a_many_to_one_batch_of_70000_keys(big):
    engine, statements = big
    with Session(engine) as session:
        works = session.scalars(select(Work).order_by(Work.id)).all()
        statements.reset()
        writers = load_related(works, Work.writer)
        if engine.dialect.name == "postgresql":
            assert "= ANY (" in statements.sql[0] and len(statements.sql[0]) < 1000  # one array parameter
        assert statements.count == _expected_statements(engine, 1)
        assert statements.count == (1 if engine.dialect.name == "postgresql" else 3)
        assert [w.id for w in writers] == [N + 1 - i for i in range(1, N + 1)]


def test_a_one_to_many_batch_of_70000_keys(big):
    engine, statements = big
    with Session(engine) as session:
        writers = session.scalars(select(Writer).order_by(Writer.id)).all()
        statements.reset()
        works = load_related(writers, Writer.works)
        assert statements.count == (1 if engine.dialect.name == "postgresql" else 3)
        assert [[w.id for w in ws] for ws in works] == [[N + 1 - i] for i in range(1, N + 1)]


def test_a_model_batch_of_70000_keys_with_some_missing(big):
    engine, statements = big
    with Session(engine) as session:
        keys = list(range(N // 2, N + N // 2))  # the second half does not exist
        statements.reset()
        found = load_model(keys, Writer, session=session)
        assert statements.count == (1 if engine.dialect.name == "postgresql" else 3)
        assert [w.id if w else None for w in found] == [k if k <= N else None for k in keys]


def test_a_composite_key_batch_of_70000_keys_split_on_sqlite_one_statement_on_postgresql(big):
    engine, statements = big
    with Session(engine) as session:
        keys = [(i // 100, i % 100) for i in range(N)]
        statements.reset()
        cells = load_model(keys, Cell, session=session)
        assert statements.count == _expected_statements(engine, 2)
        assert statements.count == (1 if engine.dialect.name == "postgresql" else 5)
        assert [(c.row, c.col) for c in cells] == keys
