"""Key filters sized for the database: ``col IN (...)`` in chunks, or one array.

A batch of keys becomes a WHERE clause on the key columns.  Drivers limit the
bound parameters of one statement (SQLite: its connection's
``SQLITE_LIMIT_VARIABLE_NUMBER``, 32,766 by default from 3.32.0, 999 before,
250,000 in Debian's build; psycopg and most others: 65,535; SQL Server:
2,100; Oracle: 1,000 items in an IN list), so a big batch is split into as
few statements as the limit allows.  On PostgreSQL no batch is split: ``col = ANY(:keys)`` (or
``unnest`` of one array per column for a composite key) sends the whole
batch as one array parameter per column.

Guarantees:
- Every key is in exactly one clause; keys keep their order across clauses.
- A clause never holds more than the dialect's limit of parameters, less
  :data:`RESERVED_PARAMETERS` for the rest of the statement.
- No keys, no clause (so no statement).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import any_, bindparam, func, select, tuple_
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ColumnElement

__all__ = ["RESERVED_PARAMETERS", "key_filters", "max_parameters", "needs_limit", "statement_count"]

#: Parameters left for the rest of a statement (its other criteria).
RESERVED_PARAMETERS = 100

# Bound parameters per statement by dialect name, where no check is needed.
_LIMITS = {
    "postgresql": 65_535,
    "mysql": 65_535,
    "mariadb": 65_535,
    "mssql": 2_100,
    "oracle": 1_000,  # items in one IN list (ORA-01795)
}
_DEFAULT_LIMIT = 999


def max_parameters(dialect: Dialect, driver_connection: Any = None) -> int:
    """The most bound parameters one statement may carry on *dialect*.

    SQLite's limit is the connection's (``sqlite3.Connection.getlimit``,
    Python 3.11+: the library's compile-time ``SQLITE_MAX_VARIABLE_NUMBER``
    unless lowered with ``setlimit``); without a connection that can say,
    the default of the library's version (32,766 from 3.32.0, 999 before).
    Unknown dialects get 999.

    Args:
        dialect: the engine's dialect.
        driver_connection: the DB-API connection the statements will run
            on, if at hand.
    """
    if dialect.name == "sqlite":
        getlimit = getattr(driver_connection, "getlimit", None)
        if getlimit is not None:
            import sqlite3

            return int(getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
        version = getattr(getattr(dialect, "dbapi", None), "sqlite_version_info", (0, 0, 0))
        return 32_766 if tuple(version) >= (3, 32, 0) else 999
    return _LIMITS.get(dialect.name, _DEFAULT_LIMIT)


def needs_limit(key_count: int, column_count: int) -> bool:
    """Whether *key_count* keys might exceed some dialect's limit (else the limit need not be looked up)."""
    return key_count * column_count + RESERVED_PARAMETERS > _DEFAULT_LIMIT


def _uses_arrays(dialect: Dialect) -> bool:
    return dialect.name == "postgresql"


def _array_filter(columns: Sequence[ColumnElement[Any]], keys: Sequence[tuple[Any, ...]]) -> ColumnElement[bool]:
    """PostgreSQL: the keys as one array parameter per column, whatever their number.

    One column: ``col = ANY(:keys)``.  Several: ``(a, b) IN (SELECT * FROM
    unnest(:a_keys, :b_keys))`` -- a long ``(a, b) IN ((..), (..), ...)``
    list is not only limited by the driver: PostgreSQL's parser runs out of
    stack ("stack depth limit exceeded") at some 30,000 pairs.
    """
    from sqlalchemy.dialects.postgresql import ARRAY

    arrays = [
        bindparam(f"dataloader_keys_{i}", [key[i] for key in keys], type_=ARRAY(column.type))
        for i, column in enumerate(columns)
    ]
    if len(columns) == 1:
        return columns[0] == any_(arrays[0])
    rows = func.unnest(*arrays).table_valued(*[f"k{i}" for i in range(len(columns))]).render_derived()
    return tuple_(*columns).in_(select(*rows.c))


def key_filters(
    columns: Sequence[ColumnElement[Any]], keys: Sequence[tuple[Any, ...]], dialect: Dialect, limit: int
) -> Iterator[ColumnElement[bool]]:
    """Yield WHERE clauses that together select the rows whose *columns* match *keys*.

    Args:
        columns: the key columns (one, or several for a composite key).
        keys: distinct tuples of values, one value per column.
        dialect: the dialect the statements run on.
        limit: its parameters per statement (:func:`max_parameters`).

    Returns:
        an iterator of clauses, one per statement to run.
    """
    if not keys:
        return
    if _uses_arrays(dialect):
        yield _array_filter(columns, keys)
        return
    size = max(1, (limit - RESERVED_PARAMETERS) // len(columns))
    for start in range(0, len(keys), size):
        chunk = keys[start:start + size]
        if len(columns) == 1:
            yield columns[0].in_([key[0] for key in chunk])
        else:
            yield tuple_(*columns).in_(chunk)


def statement_count(key_count: int, column_count: int, dialect: Dialect, limit: int) -> int:
    """How many statements :func:`key_filters` makes for *key_count* keys (for docs and tests)."""
    if key_count == 0:
        return 0
    if _uses_arrays(dialect):
        return 1
    size = max(1, (limit - RESERVED_PARAMETERS) // column_count)
    return -(-key_count // size)
