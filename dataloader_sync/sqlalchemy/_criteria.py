"""Criteria: the ``where=``, ``order_by=`` and ``first=`` of a related loader.

The SQLAlchemy analogue of the Django loaders' ``queryset=`` and ``first=``:
``related_loader(registry, Author.books, where=Book.year >= 2000,
order_by=Book.year.desc(), first=3)`` loads each author's three latest books
since 2000, all authors of a batch in one statement.

Two criteria built separately (each resolver call builds its own
``Book.year >= 2000``) must share one loader, or nothing would be batched;
SQL expressions compare by identity, so a ``Criteria`` is keyed by the SQL
its expressions compile to and their bound values: equal SQL, equal values,
one loader.

Guarantees:
- Bad arguments fail at once: ``where``/``order_by`` not SQL expressions
  (``TypeError``), ``first`` not an int >= 1 (``TypeError``/``ValueError``).
- The key is hashable whatever the bound values (lists, as in ``in_()``,
  become tuples).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Optional, Union

from sqlalchemy.sql.elements import ColumnElement

__all__ = ["Criteria", "Clauses"]

#: What ``where=`` and ``order_by=`` accept: an expression or a sequence of them.
Clauses = Union[None, Any, Sequence[Any]]


def _as_clauses(value: Clauses, parameter: str) -> tuple[ColumnElement[Any], ...]:
    if value is None:
        return ()
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    clauses = []
    for item in items:
        element = item.__clause_element__() if hasattr(item, "__clause_element__") else item
        if not isinstance(element, ColumnElement):
            raise TypeError(f"{parameter} must be a SQL expression or a sequence of them, got {item!r}")
        clauses.append(element)
    return tuple(clauses)


def _freeze(value: Any) -> Hashable:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return repr(value)
    frozen: Hashable = value
    return frozen


def _sql_key(clauses: tuple[ColumnElement[Any], ...]) -> tuple[Hashable, ...]:
    key = []
    for clause in clauses:
        compiled = clause.compile()
        key.append((str(compiled), _freeze(compiled.params)))
    return tuple(key)


def _text(clause: ColumnElement[Any]) -> str:
    try:
        return str(clause.compile(compile_kwargs={"literal_binds": True}))
    except Exception:  # a value without a literal form (sqlalchemy raises CompileError)
        return str(clause.compile())


class Criteria:
    """Filters, order and per-parent limit of a to-many load.  Immutable, so thread-safe.

    Attributes:
        where: expressions ANDed to the statement's criteria.
        order_by: the list order, replacing the relationship's ``order_by``
            (``None``: the relationship's); the related primary key follows.
        first: keep each parent's first N, or ``None`` for all.
        key: hashable, equal for criteria of equal SQL and bound values.
    """

    __slots__ = ("where", "order_by", "first", "key")

    def __init__(self, where: Clauses = None, order_by: Clauses = None, first: Optional[int] = None) -> None:
        self.where = _as_clauses(where, "where")
        self.order_by: Optional[tuple[ColumnElement[Any], ...]] = (
            None if order_by is None else _as_clauses(order_by, "order_by"))
        if first is not None:
            if isinstance(first, bool) or not isinstance(first, int):
                raise TypeError(f"first must be an int or None, got {type(first).__name__}")
            if first < 1:
                raise ValueError("first must be >= 1")
        self.first = first
        self.key: Hashable = (
            _sql_key(self.where), None if self.order_by is None else _sql_key(self.order_by), first)

    @property
    def empty(self) -> bool:
        """No criteria: the relationship's own rows in its own order."""
        return not self.where and self.order_by is None and self.first is None

    def label(self) -> str:
        """``", where=book.year >= 2000, first=3"``: for the loader's name."""
        parts = []
        if self.where:
            parts.append("where=" + " AND ".join(_text(c) for c in self.where))
        if self.order_by is not None:
            parts.append("order_by=" + ", ".join(_text(c) for c in self.order_by))
        if self.first is not None:
            parts.append(f"first={self.first}")
        return "".join(", " + p for p in parts)
