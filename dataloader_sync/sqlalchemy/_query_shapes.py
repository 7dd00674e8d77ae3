"""The shape of a SQLAlchemy query a resolver returns: what is the same for every parent, and the parent's key.

``author.book_query.filter(Book.year >= 2001).order_by(Book.year.desc())``
(``book_query`` a ``lazy="dynamic"`` relationship) is, to SQLAlchemy, the
query ``session.query(Book).filter(Book.year >= 2001)...`` with one more
criterion ANDed in: the relationship's lazy clause with the parent's key
bound, ``:param_1 = book.author_id`` (what ``with_parent(author,
Author.books)`` makes too, and what ``Book.author_id == author.id`` says by
hand).  ``shape_of`` finds that criterion among the conjuncts of the query's
``WHERE``, and splits the query into a ``QueryShape``:

- ``query``: a copy of the query without that criterion and without its
  ``LIMIT``/``OFFSET``: equal for every parent of a level whose resolver built
  the same query, so one loader, keyed by its SQL and bound values (and its
  session), serves them all;
- ``columns``: the criterion's columns (``book.author_id``; for a dynamic
  many-to-many relationship the ``secondary`` table's, which the dynamic
  query already has in its ``FROM``); ``value``: the parent's key they were
  compared with.

The rows of ``query`` whose ``columns`` equal ``value`` are exactly the rows
of the original query, whatever else its ``WHERE`` says: a criterion ANDed at
the top keeps or drops each row of the rest.  A criterion is taken as the
parent's only when it is an equality of a column of the relationship's table
(not an alias) with a bound value equal to the parent's own column, for every
column pair of a relationship from the parent's class to the query's entity.
``LIMIT``/``OFFSET`` become the same window per parent (``row_number() OVER
(PARTITION BY columns ORDER BY ...)``).  The rows of a parent come in the
query's order, the primary key breaking ties.

SQLAlchemy privates read (there is no public reader for a ``Query``'s parts):
``Query._where_criteria`` (also assigned on a copy, as the dynamic
relationship's own ``AppenderMixin._generate`` does), ``_order_by_clauses``,
``_limit_clause``/``_offset_clause`` and their ``_limit_offset_value``,
``_statement``, ``_setup_joins``, ``_group_by_clauses``, ``_having_criteria``,
``_distinct``, ``_distinct_on``, ``_for_update_arg``, ``_params``,
``_execution_options``, ``_iter``/``_statement_20`` (compared with
``Query``'s own), ``load_options`` (``_populate_existing``,
``_yield_per``, ``_version_check``, ``_refresh_state``, ``_autoflush``,
``_identity_token``, ``_only_return_tuples``);
``sqlalchemy.orm.dynamic.AppenderMixin`` (2.0; ``_AppenderMixin`` in 2.1: the
dynamic query's class; its ``session`` property is public).  Tests cover the installed SQLAlchemy 2.x.

Guarantees:
- ``shape_of`` returns None (the query runs as it is, one statement per
  parent) for anything it does not recognise: a query of columns, of several
  entities or of an alias; ``from_statement()``; joins; ``group_by``,
  ``having``, ``distinct``; ``with_for_update``; ``params()``; execution or
  load options (``populate_existing``, ``yield_per``, ...); a ``Query``
  subclass that overrides how it runs (``__iter__``, ``_iter``,
  ``_statement_20``); a ``LIMIT`` or
  ``OFFSET`` that is not a plain int; a dynamic query of a parent not in a
  session (its in-memory collection); no criterion equal to a relationship's
  to this parent; a ``None`` key.  Never a wrong answer.
- The query given is not changed.
- A parent's key is taken only when its values are of the key columns'
  Python type (``TypeEngine.python_type``), so the rows' keys the database
  gives back are the parents' keys (asserted as the rows are placed).
- Loader options of a query with no ``LIMIT``/``OFFSET`` are kept; a limited
  query's rows are read from a subquery, where they do not apply (the rows
  are the same; what the options would have loaded is loaded when read).
"""
from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from typing import Any, Optional

from sqlalchemy import func, inspect, select
from sqlalchemy.orm import Mapper, Query, aliased, dynamic
from sqlalchemy.orm.attributes import instance_state
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import BinaryExpression, BindParameter, BooleanClauseList, ColumnClause

from ._criteria import _freeze
from ._related import run_keyed
from ._sessions import check_thread

#: The class of every dynamic relationship's query (``AppenderQuery`` and the classes of a
#: ``query_class=``): ``AppenderMixin`` in SQLAlchemy 2.0, ``_AppenderMixin`` in 2.1.
_APPENDER: Any = vars(dynamic).get("_AppenderMixin") or vars(dynamic)["AppenderMixin"]

__all__ = ["QueryShape", "shape_of"]

_ROW = "dataloader_row"  # the row's position within its parent's window


class QueryShape:
    """A query split into its common part and one parent's key (see the module notes).  Immutable.

    Attributes:
        query: the query without the parent's criterion and without ``LIMIT``/``OFFSET``.
        columns: the criterion's columns, one per key value.
        value: the parent's key: the values the columns were compared with (a tuple).
        low, high: the rows kept per parent, as a slice (``high`` None: no end).
        key: what two shapes that load alike have equal (hashable): *sql* (the query's SQL and
            bound values, see ``_sql_of``), the session, the columns, the slice.
    """

    __slots__ = ("columns", "high", "key", "low", "mapper", "query", "session", "value")

    def __init__(self, query: Query[Any], mapper: Mapper[Any], columns: tuple[Any, ...], value: tuple[Any, ...],
                 low: int, high: Optional[int], sql: Hashable) -> None:
        self.query = query
        self.mapper = mapper
        self.session = query.session
        self.columns = columns
        self.value = value
        self.low = low
        self.high = high
        self.key: Hashable = (sql, self.session, tuple((c.table, c.name) for c in columns), low, high)

    def load(self, values: Sequence[tuple[Any, ...]], name: str) -> dict[tuple[Any, ...], list[Any]]:
        """``{key: its rows}`` for the parents' keys *values*: one statement (or as few as the driver's
        parameter limit allows), each parent's rows in the query's order, sliced per parent.

        Raises:
            RuntimeError: the query's session belongs to another thread (*name* says whose loader).
        """
        check_thread(self.session, name)
        found: dict[tuple[Any, ...], list[Any]] = {key: [] for key in values}
        rows = run_keyed(self.session, self._statement, self.mapper, self.columns, list(values), unique=True)
        for row, key in rows:
            # Invariant: every row's key is a parent's (shape_of took only values of the key columns'
            # Python type, which is what the database gives back for them).
            assert key in found, (name, key)
            found[key].append(row)
        return found

    def _order(self) -> list[Any]:
        order = list(self.query._order_by_clauses)
        return order + [col for col in self.mapper.primary_key if not any(col is o for o in order)]

    def _statement(self, clause: Any) -> Any:
        """``SELECT entity, key columns`` for the keys of *clause*, windowed when the query was sliced."""
        query = self.query.filter(clause).order_by(None)
        if not self.low and self.high is None:
            return query.add_columns(*self.columns).order_by(*self._order()).statement
        labels = [col.label(f"dataloader_key_{i}") for i, col in enumerate(self.columns)]
        row = func.row_number().over(partition_by=list(self.columns), order_by=self._order())
        sub = query.add_columns(*labels, row.label(_ROW)).subquery()
        entity = aliased(self.mapper.class_, sub)
        stmt = select(entity, *(sub.c[label.name] for label in labels)).where(sub.c[_ROW] > self.low)
        if self.high is not None:
            stmt = stmt.where(sub.c[_ROW] <= self.high)
        return stmt.order_by(sub.c[_ROW])


def _plain_int(clause: Any) -> Any:
    """A ``LIMIT``/``OFFSET`` clause as an int; None for none; False when it is not a plain int."""
    if clause is None:
        return None
    value = getattr(clause, "_limit_offset_value", None)
    return value if type(value) is int and value >= 0 else False


def _conjuncts(criteria: Sequence[Any]) -> Iterator[Any]:
    for criterion in criteria:
        if isinstance(criterion, BooleanClauseList) and criterion.operator is operators.and_:
            yield from _conjuncts(criterion.clauses)
        else:
            yield criterion


def _bound(criterion: Any, column: Any) -> Any:
    """The bound value *criterion* compares *column* with (``column = :value`` either way round), else a marker."""
    if not isinstance(criterion, BinaryExpression) or criterion.operator is not operators.eq:
        return _NO
    for side, other in ((criterion.left, criterion.right), (criterion.right, criterion.left)):
        if isinstance(side, ColumnClause) and isinstance(other, BindParameter) and \
                getattr(side, "table", None) is column.table and side.name == column.name:
            try:
                return other.effective_value
            except Exception:  # a callable value that fails (as the query would when it runs)
                return _NO
    return _NO


_NO: Any = object()

# load options a query may have and still be batched: the defaults
_PLAIN_LOADS = {"_autoflush": True, "_populate_existing": False, "_yield_per": None, "_version_check": False,
                "_refresh_state": None, "_identity_token": None, "_only_return_tuples": False}


def _plain(query: Query[Any]) -> Optional[Mapper[Any]]:
    """The mapper of the one entity *query* selects when nothing else in it stops a batch, else None."""
    if query._statement is not None or query._setup_joins or query._group_by_clauses or query._having_criteria \
            or query._distinct or query._distinct_on or query._for_update_arg is not None or query._params \
            or query._execution_options:
        return None
    options = query.load_options
    if any(getattr(options, name, default) != default for name, default in _PLAIN_LOADS.items()):
        return None
    described = query.column_descriptions
    if len(described) != 1 or described[0]["aliased"] or described[0]["expr"] is not described[0]["entity"]:
        return None
    mapper = inspect(described[0]["entity"], raiseerr=False)
    return mapper if isinstance(mapper, Mapper) else None


def _parent_criterion(conjuncts: list[Any], parent: Any, mapper: Mapper[Any]) -> Optional[tuple[Any, ...]]:
    """``(indexes, columns, values)``: the conjuncts that bind a relationship of *parent*'s class to
    *mapper* to *parent*'s key, or None."""
    state = instance_state(parent)
    parent_mapper = state.mapper
    for prop in parent_mapper.relationships:
        if prop.mapper is not mapper:
            continue
        pairs = prop.synchronize_pairs if prop.secondary is not None else prop.local_remote_pairs
        indexes, columns, values = [], [], []
        for local, remote in pairs:
            value = getattr(parent, parent_mapper.get_property_by_column(local).key)
            found = next((i for i, c in enumerate(conjuncts) if i not in indexes and value is not None
                          and _same(_bound(c, remote), value, remote)), None)
            if found is None:
                break
            indexes.append(found)
            columns.append(remote)
            values.append(value)
        else:
            if indexes:
                return tuple(indexes), tuple(columns), tuple(values)
    return None


def _same(bound: Any, value: Any, column: Any) -> bool:
    """*bound* is the parent's *value*, of *column*'s Python type."""
    if bound is _NO or type(bound) is not type(value):
        return False
    try:
        if type(value) is not column.type.python_type:
            return False
    except NotImplementedError:  # a type that does not say
        return False
    try:
        hash(value)
    except TypeError:
        return False
    return bool(bound == value)


def shape_of(query: Any, parent: Any) -> Optional[QueryShape]:
    """The ``QueryShape`` of *query*, a query a resolver returned for *parent*, or None (see the module notes)."""
    if not isinstance(query, Query):
        return None
    if isinstance(query, _APPENDER):
        if query.session is None:  # a parent not in a session, or pending: its in-memory collection
            return None
        query = query.filter()  # the plain query the dynamic relationship runs (its ``_generate``)
    if query.session is None:
        return None
    kind = type(query)
    if kind.__iter__ is not Query.__iter__ or kind._iter is not Query._iter \
            or kind._statement_20 is not Query._statement_20:  # a Query class that runs its own way
        return None
    mapper = _plain(query)
    limit, offset = _plain_int(query._limit_clause), _plain_int(query._offset_clause)
    if mapper is None or limit is False or offset is False:
        return None
    conjuncts = list(_conjuncts(query._where_criteria))
    found = _parent_criterion(conjuncts, parent, mapper)
    if found is None:
        return None
    indexes, columns, value = found
    shape = query.limit(None).offset(None)
    shape._where_criteria = tuple(c for i, c in enumerate(conjuncts) if i not in indexes)
    sql = _sql_of(shape, mapper)
    if sql is None:
        return None
    low = offset or 0
    return QueryShape(shape, mapper, columns, value, low, None if limit is None else low + limit, sql)


def _sql_of(query: Query[Any], mapper: Mapper[Any]) -> Optional[Hashable]:
    """The SQL of *query* in its session's dialect and its bound values, or None when it does not compile."""
    try:
        assert query.session is not None
        compiled = query.statement.compile(dialect=query.session.get_bind(mapper=mapper).dialect)
        return str(compiled), _freeze(compiled.params)
    except Exception:  # sqlalchemy's CompileError, a bound value's callable that fails: run it as written
        return None
