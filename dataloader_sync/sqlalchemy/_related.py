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
- A batch on a thread that does not own the session fails all its keys
  (``RuntimeError``, see ``_sessions``) before it touches the session.
- To-many lists are fresh lists, ordered by the relationship's
  ``order_by`` (then the related primary key), else by the related primary
  key; they do not touch the instance's own collection attribute.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Optional

from sqlalchemy import inspect
from sqlalchemy.orm import InstanceState, Session
from sqlalchemy.orm.exc import DetachedInstanceError

from ._keys import key_filters, max_parameters, needs_limit
from ._relations import Relation, relation_of
from ._sessions import SessionArgument, check_session, check_thread, is_factory, resolve

__all__ = ["load_related", "open_batch_session", "run_keyed"]


def load_related(instances: Sequence[Any], attribute: Any, session: SessionArgument = None) -> list[Any]:
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

    Returns:
        one value per instance, in order: the related instance or ``None``
        (to-one), a list (to-many), or an exception for an instance that
        cannot be loaded.

    Raises:
        TypeError: *attribute* is not a relationship attribute, or
            *session* of the wrong type.
        ValueError: the relationship is joined by more than column
            equalities.
        RuntimeError: the session belongs to another thread.
    """
    relation = relation_of(attribute)
    check_session(session)
    factory = is_factory(session)
    given = resolve(session)
    results: list[Any] = [None] * len(instances)
    pending: dict[tuple[Any, ...], list[int]] = {}
    batch_session: Optional[Session] = given
    checked: Optional[Session] = None
    for index, instance in enumerate(instances):
        state = _state_of(instance, relation)
        if isinstance(state, Exception):
            results[index] = state
            continue
        if not relation.to_many and relation.key in state.dict:  # already loaded: no session needed
            results[index] = state.dict[relation.key]
            continue
        if not factory:
            own = state.session
            if own is None and given is None:
                results[index] = DetachedInstanceError(
                    f"{_describe(state)} is not in a session, so {relation.name} cannot be loaded for it; "
                    "pass session= to related_loader"
                )
                continue
            if batch_session is None:
                assert own is not None  # given is None here
                batch_session = own
            elif own is not None and own is not batch_session:
                results[index] = ValueError(
                    f"{_describe(state)} belongs to another session than the batch's: each batch of "
                    f"{relation.name} runs in one session; load instances of one session, or pass session="
                )
                continue
            if checked is not batch_session:
                check_thread(batch_session, relation.name)
                checked = batch_session
        try:
            key = _key_of(state, relation, may_load=not factory)
        except Exception as error:
            results[index] = error
            continue
        if key is None:
            results[index] = [] if relation.to_many else None
            continue
        if relation.identity and batch_session is not None:
            found = _from_identity_map(batch_session, relation, key)
            if found is not None:
                results[index] = found
                continue
        pending.setdefault(key, []).append(index)
    if not pending:
        return results
    with open_batch_session(session, batch_session) as query_session:
        rows = run_keyed(query_session, relation.statement(), relation.match_columns, list(pending))
        values: dict[tuple[Any, ...], Any] = {}
        for value, match in rows:
            if relation.to_many:
                values.setdefault(match, []).append(value)
            else:
                values.setdefault(match, value)
    for key, indexes in pending.items():
        value = values.get(key)
        for index in indexes:
            results[index] = (list(value) if value else []) if relation.to_many else value
    return results


def _state_of(instance: Any, relation: Relation) -> InstanceState[Any] | Exception:
    if not isinstance(instance, relation.parent.class_):
        return TypeError(
            f"{relation.name} loads {relation.parent.class_.__name__} instances, got {type(instance).__name__}"
        )
    state: InstanceState[Any] = inspect(instance)
    return state


def _describe(state: InstanceState[Any]) -> str:
    """``"Book (1,)"``: the class and identity, without the instance's ``repr`` (which may load attributes)."""
    name = state.class_.__name__
    return f"{name} {state.identity}" if state.identity is not None else f"a new {name}"


def _key_of(state: InstanceState[Any], relation: Relation, *, may_load: bool) -> Optional[tuple[Any, ...]]:
    """The values of the parent's key attributes on *state* (``None`` if one is ``None``).

    Reads the instance's loaded state; an expired primary key comes from the
    identity; anything else expired is loaded through the instance's session
    (one statement, as a plain attribute access would) when *may_load*.

    Raises:
        ValueError: an attribute is not loaded and *may_load* is false.
    """
    values = []
    for position, attr in enumerate(relation.parent_attrs):
        if attr in state.dict:
            value = state.dict[attr]
        elif relation.parent_is_identity and state.identity is not None:
            value = state.identity[position]
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


def run_keyed(
    session: Session, statement: Any, columns: Sequence[Any], keys: list[tuple[Any, ...]]
) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    """Run *statement* filtered to *keys* (in as few statements as the dialect allows).

    Yields:
        ``(entity, key)`` per row: the first selected column, and the rest
        as the tuple they match.
    """
    mapper = statement.column_descriptions[0].get("entity")
    dialect = session.get_bind(mapper=mapper).dialect
    width = len(columns)
    limit = max_parameters(dialect)
    if needs_limit(len(keys), width) and dialect.name == "sqlite":  # ask the connection the batch runs on
        connection = session.connection(bind_arguments={"mapper": mapper})
        limit = max_parameters(dialect, connection.connection.driver_connection)
    for clause in key_filters(columns, keys, dialect, limit):
        for row in session.execute(statement.where(clause)):
            yield row[0], tuple(row[1:width + 1])
