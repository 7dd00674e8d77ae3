"""load_related: the batch function of a relationship attribute.

``load_related(instances, Book.author)`` returns, in the order of
*instances*, each one's related value: the instance or ``None`` for a
many-to-one or one-to-one, a list for a one-to-many or many-to-many.

Guarantees:
- At most one SQL statement per batch, and none when every value is
  known: a ``None`` foreign key gives ``None``, a many-to-one already loaded
  on the instance gives that value, and a many-to-one whose key is in the
  session's identity map (not expired, not deleted) gives that object.
  Batches bigger than the driver's parameter limit are split into as few
  statements as the limit allows (see ``_keys``); on PostgreSQL one
  statement takes any number of single-column keys.
- A key that cannot be loaded fails alone (its value is the exception):
  an instance of another class (``TypeError``), a detached instance without
  ``session=`` (``DetachedInstanceError``), an instance of another session
  than the batch's (``ValueError``: each batch runs in one session, that of
  the first attached instance when ``session=None``).
- Parents that did not load their key columns (``load_only()``,
  ``defer()``, an expired foreign key) cost one more statement for all of
  them, not one refresh each.
- A batch on a thread that does not own the session fails all its keys
  (``RuntimeError``, see ``_sessions``) before it touches the session.
- To-many lists are fresh lists, ordered by the relationship's
  ``order_by`` (then the related primary key), else by the related primary
  key; they do not touch the instance's own collection attribute.
- ``run_rows``/``run_keyed`` (shared with ``_query_shapes``) split a batch's
  keys into as few statements as the driver allows; ``unique=True`` makes
  each statement's rows unique as a legacy ``Query`` of entities does.
- ``where=``/``order_by=``/``first=`` (see ``_criteria``) shape the one
  statement; with ``where=`` no value is taken from the instance or the
  identity map (that would bypass the filter).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

from sqlalchemy import inspect, select
from sqlalchemy.orm import InstanceState, Session
from sqlalchemy.orm.attributes import instance_state
from sqlalchemy.orm.exc import DetachedInstanceError

from ._criteria import Clauses, Criteria
from ._keys import key_filters, max_parameters, needs_limit
from ._relations import Relation, relation_of
from ._sessions import SessionArgument, check_session, check_thread, is_factory, resolve

__all__ = ["criteria_for", "load_related", "open_batch_session", "run_keyed"]


def load_related(
    instances: Sequence[Any], attribute: Any, session: SessionArgument = None, *,
    where: Clauses = None, order_by: Clauses = None, first: Optional[int] = None, options: Sequence[Any] = (),
) -> list[Any]:
    """Batch-load a relationship attribute of *instances* (a batch function for ``loader_for``).

    Args:
        instances: instances of the attribute's class (``Book`` for
            ``Book.author``).
        attribute: a relationship attribute: many-to-one (``Book.author``),
            one-to-many (``Author.books``), many-to-many through
            ``secondary`` (``Book.tags``, ``Tag.books``), one-to-one
            (``uselist=False``).
        session: ``None`` to use the instances' own session, a ``Session``
            or ``scoped_session`` to use that one, or a ``sessionmaker`` to
            open a session for the batch (see the module).
        where: a SQL expression, or a sequence of them, on the related side
            (``Book.year >= 2000``; for many-to-many the ``secondary``
            table's columns too): only matching rows are loaded.  A to-one
            value filtered out is ``None``.
        order_by: the order of to-many lists instead of the relationship's
            ``order_by`` (the related primary key still breaks ties).
        first: to-many only: each parent's first N in that order, in the
            same single statement (``row_number() OVER (PARTITION BY ...)``).
        options: SQLAlchemy loader options for the related rows' statement
            (``joinedload(Book.author)``: each book's author joined into it).

    Returns:
        one value per instance, in order: the related instance or ``None``
        (to-one), a list (to-many), or an exception for an instance that
        cannot be loaded.

    Raises:
        TypeError: *attribute* is not a relationship attribute, *session*
            of the wrong type, *where*/*order_by* not SQL expressions,
            *first* not an int.
        ValueError: the relationship is joined by more than column
            equalities; *first* < 1 or given for a to-one relationship.
        RuntimeError: the session belongs to another thread.
    """
    relation = relation_of(attribute)
    check_session(session)
    batch = _RelatedBatch(relation, criteria_for(relation, where, order_by, first), session, len(instances))
    batch.options = tuple(options)
    for index, instance in enumerate(instances):
        batch.add(index, instance)
    batch.place_unloaded()
    if batch.pending:
        batch.query()
    return batch.results


class _RelatedBatch:
    """One call of ``load_related``: each instance's value, the keys left to query, the batch's session.

    Used by one thread, for one call.
    """

    __slots__ = ("relation", "criteria", "plain", "argument", "factory", "given", "results", "pending",
                 "session", "checked", "unloaded", "options")

    def __init__(self, relation: Relation, criteria: Criteria, session: SessionArgument, size: int) -> None:
        self.relation = relation
        self.criteria = criteria
        self.plain = criteria.empty  # shortcuts (loaded values, the identity map) would bypass where=
        self.argument = session  # load_related's session=
        self.factory = is_factory(session)
        self.given = resolve(session)
        self.results: list[Any] = [None] * size
        self.pending: dict[tuple[Any, ...], list[int]] = {}  # key -> the indexes of the instances waiting for it
        self.session: Optional[Session] = self.given  # the batch's session, once known
        self.checked: Optional[Session] = None  # the session whose thread was checked
        self.unloaded: list[tuple[int, InstanceState[Any]]] = []  # key columns deferred or expired: one statement
        self.options: tuple[Any, ...] = ()  # loader options of the related rows' statement

    def add(self, index: int, instance: Any) -> None:
        """Give *instance* (at *index*) its value, or its error, or queue its key.

        Raises:
            RuntimeError: the batch's session belongs to another thread.
        """
        relation = self.relation
        state = _state_of(instance, relation)
        if isinstance(state, Exception):
            self.results[index] = state
            return
        if self.plain and not relation.to_many and relation.key in state.dict:  # already loaded: no session needed
            self.results[index] = state.dict[relation.key]
            return
        if not self.factory:
            error = self._join_session(state)
            if error is not None:
                self.results[index] = error
                return
        try:
            key = _key_of(state, relation, may_load=not self.factory)
        except Exception as error:
            self.results[index] = error
            return
        if key is _UNLOADED:
            self.unloaded.append((index, state))
        else:
            self.place(index, key)

    def _join_session(self, state: InstanceState[Any]) -> Optional[Exception]:
        """Make *state*'s session the batch's if it has none yet, checking its thread; the key's error, if any.

        Raises:
            RuntimeError: the batch's session belongs to another thread.
        """
        own = state.session
        if own is None and self.given is None:
            return DetachedInstanceError(
                f"{_describe(state)} is not in a session, so {self.relation.name} cannot be loaded for it; "
                "pass session= to related_loader"
            )
        if self.session is None:
            assert own is not None  # given is None here
            self.session = own
        elif own is not None and own is not self.session:
            return ValueError(
                f"{_describe(state)} belongs to another session than the batch's: each batch of "
                f"{self.relation.name} runs in one session; load instances of one session, or pass session="
            )
        if self.checked is not self.session:
            check_thread(self.session, self.relation.name)
            self.checked = self.session
        return None

    def place(self, index: int, key: Optional[tuple[Any, ...]]) -> None:
        """The instance at *index* has parent key *key*: its value if known without a query, else queue the key."""
        relation = self.relation
        if key is None:
            self.results[index] = [] if relation.to_many else None
            return
        if self.plain and relation.identity and self.session is not None:
            found = _from_identity_map(self.session, relation, key)
            if found is not None:
                self.results[index] = found
                return
        self.pending.setdefault(key, []).append(index)

    def place_unloaded(self) -> None:
        """Load the key columns the instances had not loaded, all in one statement, and place them."""
        if self.unloaded:
            assert self.session is not None  # may_load: not a factory batch
            keys = _load_keys(self.session, self.relation, [state for _, state in self.unloaded])
            for index, state in self.unloaded:
                self.place(index, keys.get(state.identity, None))

    def query(self) -> None:
        """Load the related rows of the pending keys (one statement, or as few as the driver allows)."""
        relation, criteria, options = self.relation, self.criteria, self.options

        def statement(clause: Any) -> Any:
            made = relation.statement(clause, criteria)
            return made.options(*options) if options else made

        with open_batch_session(self.argument, self.session) as query_session:
            rows = run_keyed(query_session, statement, relation.target, relation.match_columns, list(self.pending))
            values: dict[tuple[Any, ...], Any] = {}
            for value, match in rows:
                if relation.to_many:
                    values.setdefault(match, []).append(value)
                else:
                    values.setdefault(match, value)
        results = self.results
        for key, indexes in self.pending.items():
            value = values.get(key)
            for index in indexes:
                results[index] = (list(value) if value else []) if relation.to_many else value


def _state_of(instance: Any, relation: Relation) -> InstanceState[Any] | Exception:
    if not isinstance(instance, relation.parent.class_):
        return TypeError(
            f"{relation.name} loads {relation.parent.class_.__name__} instances, got {type(instance).__name__}"
        )
    return instance_state(instance)  # inspect() without its dispatch: a third of a batch's own time


def _describe(state: InstanceState[Any]) -> str:
    """``"Book (1,)"``: the class and identity, without the instance's ``repr`` (which may load attributes)."""
    name = state.class_.__name__
    return f"{name} {state.identity}" if state.identity is not None else f"a new {name}"


#: What _key_of returns for a persistent instance whose key columns are not loaded.
_UNLOADED: Any = object()


def _key_of(state: InstanceState[Any], relation: Relation, *, may_load: bool) -> Optional[tuple[Any, ...]]:
    """The values of the parent's key attributes on *state* (``None`` if one is ``None``).

    Reads the instance's loaded state; an expired primary key comes from the
    identity.  A key column that is deferred or expired gives ``_UNLOADED``
    when *may_load* (the batch loads those of all its instances in one
    statement, see ``_load_keys``), except on an instance without identity
    (pending), whose attribute is read as a plain access would.

    Raises:
        ValueError: an attribute is not loaded and *may_load* is false.
    """
    values = []
    for position, attr in enumerate(relation.parent_attrs):
        if attr in state.dict:
            value = state.dict[attr]
        elif relation.parent_is_identity and state.identity is not None:
            value = state.identity[position]
        elif may_load and state.identity is not None:
            unloaded: Optional[tuple[Any, ...]] = _UNLOADED
            return unloaded
        elif may_load:
            value = getattr(state.obj(), attr)
        else:
            raise ValueError(
                f"{attr} of {_describe(state)} is not loaded, and a batch in a session of its own does not "
                "load it through the instance's session"
            )
        if value is None:
            return None
        values.append(value)
    return tuple(values)


def _load_keys(
    session: Session, relation: Relation, states: list[InstanceState[Any]]
) -> dict[Any, Optional[tuple[Any, ...]]]:
    """The key columns of persistent instances that did not load them (``load_only``, ``defer``, expired).

    One statement for all of them (split only past the parameter limit):
    ``SELECT pk, key columns FROM parent WHERE pk IN (...)``, instead of one
    refresh per instance.  The instances are not changed.

    Returns:
        ``{identity: key or None}``; an instance whose row is gone is absent.
    """
    cls = relation.parent.class_
    pk = [getattr(cls, attr) for attr in relation.parent_pk_attrs]
    key_attrs = [getattr(cls, attr) for attr in relation.parent_attrs]
    statement = select(pk[0], *pk[1:], *key_attrs)
    identities = list(dict.fromkeys(state.identity for state in states if state.identity is not None))
    width = len(pk)
    found: dict[Any, Optional[tuple[Any, ...]]] = {}
    for row in run_rows(session, statement.where, relation.parent, [c.__clause_element__() for c in pk], identities):
        values = tuple(row[width:])
        found[tuple(row[:width])] = None if any(v is None for v in values) else values
    return found


def _from_identity_map(session: Session, relation: Relation, key: tuple[Any, ...]) -> Any:
    identity_key = relation.target.identity_key_from_primary_key(key)
    found = session.identity_map.get(identity_key)
    if found is None:
        return None
    state: InstanceState[Any] = inspect(found)
    if state.expired or state.deleted or state.was_deleted:
        return None  # a plain attribute access would reload it: let the batch query do that
    return found


@contextlib.contextmanager
def open_batch_session(session: SessionArgument, batch_session: Optional[Session]) -> Iterator[Session]:
    """The session to query in: *batch_session*, or a new one from a ``sessionmaker`` (closed after)."""
    if is_factory(session):
        assert session is not None and not isinstance(session, Session)
        with session() as own:
            yield own
        return
    assert batch_session is not None
    yield batch_session


def criteria_for(relation: Relation, where: Clauses, order_by: Clauses, first: Optional[int]) -> Criteria:
    """The ``Criteria`` of these arguments for *relation*.

    Raises:
        TypeError, ValueError: see :func:`load_related`.
    """
    criteria = Criteria(where, order_by, first)
    if first is not None and not relation.to_many:
        raise ValueError(f"first applies to to-many relationships; {relation.name} is to-one")
    return criteria


def run_rows(
    session: Session, build: Callable[[Any], Any], mapper: Any, columns: Sequence[Any], keys: list[tuple[Any, ...]],
    unique: bool = False,
) -> Iterator[Any]:
    """Run ``build(key_clause)`` for *keys*, in as few statements as the dialect allows; yield the rows.

    Args:
        session: where to run the statements.
        build: makes the statement for one key clause.
        mapper: the mapper of what is selected (for the session's bind).
        columns: the key columns.
        keys: distinct key tuples.
        unique: each statement's rows made unique (``Result.unique()``), as a legacy ``Query`` of
            entities makes its rows.
    """
    dialect = session.get_bind(mapper=mapper).dialect
    limit = max_parameters(dialect)
    if needs_limit(len(keys), len(columns)) and dialect.name == "sqlite":  # ask the connection the batch runs on
        connection = session.connection(bind_arguments={"mapper": mapper})
        limit = max_parameters(dialect, connection.connection.driver_connection)
    for clause in key_filters(columns, keys, dialect, limit):
        result = session.execute(build(clause))
        yield from result.unique() if unique else result


def run_keyed(
    session: Session, build: Callable[[Any], Any], mapper: Any, columns: Sequence[Any], keys: list[tuple[Any, ...]],
    unique: bool = False,
) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    """:func:`run_rows` for statements selecting an entity, then one value per key column.

    Yields:
        ``(entity, key)`` per row.
    """
    width = len(columns)
    for row in run_rows(session, build, mapper, columns, keys, unique):
        yield row[0], tuple(row[1:width + 1])
