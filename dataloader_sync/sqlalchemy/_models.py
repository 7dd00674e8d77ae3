"""load_model: the batch function of a mapped class by one of its columns.

``load_model(values, Author, session=s)`` returns, in the order of
*values*, the ``Author`` whose primary key is each value, or ``None``;
``field="email"`` matches another column instead.

Guarantees:
- At most one SQL statement per batch (split only past the driver's
  parameter limit, see ``_keys``); none when every value is ``None`` or, for
  ``field="pk"``, found in the session's identity map (not expired, not
  deleted).
- A value matched by several rows (a column that is not unique) gives the
  row with the lowest primary key.
- A batch on a thread that does not own the session fails all its keys
  (``RuntimeError``, see ``_sessions``).
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Optional

from sqlalchemy import inspect, select
from sqlalchemy.exc import NoInspectionAvailable
from sqlalchemy.orm import ColumnProperty, InstanceState, Mapper

from ._related import open_batch_session, run_keyed
from ._sessions import SessionArgument, check_session, check_thread, resolve

__all__ = ["ModelKey", "load_model", "model_key"]


class ModelKey:
    """A mapped class and the columns ``load_model`` matches.  Immutable, so thread-safe.

    Attributes:
        name: ``"Author.id"``, for messages.
        mapper: the class's mapper.
        columns: the matched columns (several for a composite primary key:
            values are then tuples).
        identity: the columns are the primary key (the identity map may answer).
    """

    __slots__ = ("name", "mapper", "columns", "identity")

    def __init__(self, mapper: Mapper[Any], field: str) -> None:
        self.mapper = mapper
        cls = mapper.class_.__name__
        if field == "pk":
            self.columns: tuple[Any, ...] = tuple(mapper.primary_key)
        else:
            prop = mapper.attrs.get(field) if isinstance(field, str) else None
            if not isinstance(prop, ColumnProperty) or len(prop.columns) != 1:
                raise ValueError(f"field must be \"pk\" or the name of a column attribute of {cls}, got {field!r}")
            self.columns = (prop.columns[0],)
        self.identity = [id(c) for c in self.columns] == [id(c) for c in mapper.primary_key]
        self.name = f"{cls}.{field}"


# _keys_lock guards _model_keys (mapper -> field -> ModelKey); a ModelKey is
# built outside it and the first one stored wins.  Entries live as long as
# the process, as mappers do.
_keys_lock = threading.Lock()
_model_keys: dict[Mapper[Any], dict[str, ModelKey]] = {}


def model_key(model: Any, field: str) -> ModelKey:
    """The ``ModelKey`` of a mapped class and field.

    Raises:
        TypeError: *model* is not a mapped class.
        ValueError: *field* is neither ``"pk"`` nor a column attribute.
    """
    try:
        mapper = inspect(model) if isinstance(model, type) else None
    except NoInspectionAvailable:
        mapper = None
    if not isinstance(mapper, Mapper):
        raise TypeError(f"model must be a mapped class, got {model!r}")
    with _keys_lock:
        found = _model_keys.get(mapper, {}).get(field)
    if found is None:
        made = ModelKey(mapper, field)
        with _keys_lock:
            found = _model_keys.setdefault(mapper, {}).setdefault(field, made)
    return found


def load_model(
    values: Sequence[Any], model: Any, field: str = "pk", session: SessionArgument = None
) -> list[Any]:
    """Batch-load instances of *model* by *field* (a batch function for ``loader_for``).

    Args:
        values: the values to match (tuples for a composite primary key).
        model: a mapped class.
        field: ``"pk"`` (the primary key) or the name of a column attribute.
        session: a ``Session``, a ``scoped_session`` or a ``sessionmaker``
            (each batch then opens and closes a session of its own).

    Returns:
        one instance or ``None`` per value, in order.

    Raises:
        TypeError: *model* is not mapped, or *session* is missing or of the
            wrong type.
        ValueError: *field* is not ``"pk"`` or a column attribute.
        RuntimeError: the session belongs to another thread.
    """
    key = model_key(model, field)
    check_session(session, required=True)
    given = resolve(session)
    if given is not None:
        check_thread(given, key.name)
    single = len(key.columns) == 1
    results: list[Any] = [None] * len(values)
    pending: dict[tuple[Any, ...], list[int]] = {}
    for index, value in enumerate(values):
        if value is None:
            continue
        as_key = (value,) if single else tuple(value)
        if key.identity and given is not None:
            found = given.identity_map.get(key.mapper.identity_key_from_primary_key(as_key))
            if found is not None and _usable(inspect(found)):
                results[index] = found
                continue
        pending.setdefault(as_key, []).append(index)
    if not pending:
        return results
    statement = select(key.mapper.class_, *key.columns).order_by(*key.mapper.primary_key)
    found_by_key: dict[tuple[Any, ...], Any] = {}
    with open_batch_session(session, given) as query_session:
        rows = run_keyed(query_session, statement.where, key.mapper, key.columns, list(pending))
        for row_instance, match in rows:
            found_by_key.setdefault(match, row_instance)
    for as_key, indexes in pending.items():
        instance: Optional[Any] = found_by_key.get(as_key)
        for index in indexes:
            results[index] = instance
    return results


def _usable(state: InstanceState[Any]) -> bool:
    return not (state.expired or state.deleted or state.was_deleted)
