"""related_loader and model_loader: the loaders of a registry's loader families.

``related_loader(registry, Book.author)`` is
``registry.loader_for(load_related, Book.author, session=None)``: one loader
per attribute (and session argument) per registry, made on first use and
dispatched with the registry's other loaders.  ``model_loader`` does the same
for ``load_model``.  Both check their arguments at once, so a typo fails where
it is written rather than in every key of the first batch.

The family of ``load_related`` is keyed by the relationship property and the
``session=`` object (compared by identity), not by the attribute itself: an
attribute's ``==`` builds SQL, so it must not decide whether two families
are one; ``where=``/``order_by=``/``first=`` join the key by their SQL and
bound values (see ``_criteria``).  Its loader is named
``load_related(Book.author)`` (``, session=scoped_session`` and the
criteria added when given), ``load_model``'s ``load_model(Author.pk)``.
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Optional

from .._core import DataLoader
from .._registry import DataLoaderRegistry
from ._criteria import Clauses
from ._models import load_model, model_key
from ._related import criteria_for, load_related
from ._relations import relation_of
from ._sessions import SessionArgument, check_session

__all__ = ["model_loader", "related_loader"]


def _session_name(session: Any) -> str:
    return "" if session is None else f", session={type(session).__name__}"


def _related_key(attribute: Any, session: SessionArgument = None, **criteria: Any) -> Hashable:
    relation = relation_of(attribute)
    return ("related", relation.prop, _Identity(session), criteria_for(relation, **_criteria(criteria)).key)


def _related_name(attribute: Any, session: SessionArgument = None, **criteria: Any) -> str:
    relation = relation_of(attribute)
    return relation.name + _session_name(session) + criteria_for(relation, **_criteria(criteria)).label()


def _criteria(given: dict[str, Any]) -> dict[str, Any]:
    return {"where": given.get("where"), "order_by": given.get("order_by"), "first": given.get("first")}


def _model_key(model: Any, field: str = "pk", session: SessionArgument = None) -> Hashable:
    key = model_key(model, field)
    return ("model", key.mapper, key.name, _Identity(session))


def _model_name(model: Any, field: str = "pk", session: SessionArgument = None) -> str:
    return model_key(model, field).name + _session_name(session)


class _Identity:
    """A family-key part that compares its object by identity (sessions have no value equality)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


load_related.__dict__.update(dataloader_key=_related_key, dataloader_name=_related_name)
load_model.__dict__.update(dataloader_key=_model_key, dataloader_name=_model_name)


def _check_registry(registry: Any) -> None:
    if not isinstance(registry, DataLoaderRegistry):
        raise TypeError(f"registry must be a DataLoaderRegistry, got {type(registry).__name__}")


def related_loader(
    registry: DataLoaderRegistry, attribute: Any, session: SessionArgument = None, *,
    where: Clauses = None, order_by: Clauses = None, first: Optional[int] = None,
) -> DataLoader[Any, Any]:
    """The registry's loader of a relationship attribute: ``load(instance)`` → its related value.

    ``related_loader(info.context.loaders, Author.books).load(author)`` is a
    future of ``author``'s books, loaded with every other author's of the
    same dispatch in one statement (see :func:`load_related`).

    Args:
        registry: the request's registry.
        attribute: a relationship attribute such as ``Book.author``.
        session: ``None`` (each instance's own session), a ``Session``, a
            ``scoped_session`` such as Flask-SQLAlchemy's ``db.session``, or
            a ``sessionmaker`` (each batch in a session of its own, on any
            thread).
        where: SQL expressions on the related side; only matching rows load.
        order_by: the order of to-many lists instead of the relationship's.
        first: to-many only: each parent's first N, in the same statement.
            Criteria of equal SQL and bound values share one loader.

    Returns:
        the ``DataLoader`` of ``(load_related, attribute, session, criteria)``
        in *registry*.

    Raises:
        TypeError: *registry* is not a registry, *attribute* not a
            relationship attribute, *session* of the wrong type,
            *where*/*order_by* not SQL expressions, *first* not an int.
        ValueError: the relationship is joined by more than column
            equalities; *first* < 1 or given for a to-one relationship.
    """
    _check_registry(registry)
    criteria_for(relation_of(attribute), where, order_by, first)
    check_session(session)
    if where is None and order_by is None and first is None:
        return registry.loader_for(load_related, attribute, session=session)
    return registry.loader_for(load_related, attribute, session=session, where=where, order_by=order_by, first=first)


def model_loader(
    registry: DataLoaderRegistry, model: Any, field: str = "pk", *, session: SessionArgument
) -> DataLoader[Any, Any]:
    """The registry's loader of *model* by *field*: ``load(value)`` → the instance or ``None``.

    Args:
        registry: the request's registry.
        model: a mapped class.
        field: ``"pk"`` (the primary key; a tuple per value when composite)
            or the name of a column attribute.
        session: a ``Session``, a ``scoped_session`` or a ``sessionmaker``.

    Returns:
        the ``DataLoader`` of ``(load_model, model, field, session)`` in *registry*.

    Raises:
        TypeError: *registry* is not a registry, *model* not mapped,
            *session* missing or of the wrong type.
        ValueError: *field* is not ``"pk"`` or a column attribute.
    """
    _check_registry(registry)
    model_key(model, field)
    check_session(session, required=True)
    return registry.loader_for(load_model, model, field=field, session=session)
