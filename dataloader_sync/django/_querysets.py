"""Querysets as loader-family arguments, their order, and key filters sized to the database.

Guarantees:
- A queryset's family key is its model, its explicit database alias
  (``.using()``, or None) and the SQL and parameters it compiles to on that
  database, and its ``prefetch_related`` lookups (a ``Prefetch`` by its
  path, ``to_attr`` and queryset's key): two querysets built alike share one
  loader, whatever object each caller holds; two whose prefetches differ do
  not (the rows one loads would lack what the other prefetches; Django has no
  public reader of them: ``QuerySet._prefetch_related_lookups``).  A queryset is compiled once for its key (cached by
  identity, weakly).  A queryset that can match nothing (``.none()``,
  ``filter(pk__in=[])``) has a key of its own and costs no query.
- The order of the related rows (``ordering_of``) is the queryset's
  ``order_by()``, or its model's ``Meta.ordering``, or the primary key when
  it has neither; the primary key is appended as the last tie-breaker, so
  the order (and ``first=N``) is the same on every run and every database.
- Keys are matched with one statement per batch where the database allows:
  on PostgreSQL ``= ANY(%s)`` with one array parameter, whatever the number
  of keys; elsewhere ``IN (...)`` in chunks of the backend's limit of bound
  parameters, less those the rest of the query uses.  The limit is SQLite's
  own (``SQLITE_LIMIT_VARIABLE_NUMBER``, read from the connection on Python
  3.11+; 32,766 before that on SQLite 3.32+, 999 on older ones), else
  ``connection.features.max_query_params`` (None: no limit, one statement).
"""
from __future__ import annotations

import sqlite3
import sys
import weakref
from collections.abc import Hashable, Sequence
from typing import Any, Optional

from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import F, Lookup, Prefetch, QuerySet
from django.db.models.query import ModelIterable

__all__ = ["EMPTY", "check_queryset", "key_chunks", "ordering_of", "queryset_key", "queryset_label", "using_alias"]

EMPTY = "<no rows>"  # the SQL part of the key of a queryset that can match nothing
_KEYS: weakref.WeakKeyDictionary[QuerySet[Any], Hashable] = weakref.WeakKeyDictionary()
_SLACK = 10  # bound parameters kept free per chunk: a margin for what the backend adds itself


def check_queryset(queryset: Any, model: Any, parameter: str = "queryset") -> None:
    """Raises TypeError/ValueError when *queryset* cannot serve rows of *model* to a loader."""
    if not isinstance(queryset, QuerySet):
        raise TypeError(f"{parameter} must be a QuerySet or None")
    if queryset.model is None or queryset.model._meta.concrete_model is not model._meta.concrete_model:
        raise ValueError(f"{parameter} must be a queryset of {model.__name__} (got {queryset.model.__name__})")
    if queryset.query.is_sliced:
        raise ValueError(f"{parameter} must not be sliced (use first=)")
    # values()/values_list() have no public mark but the iterable class they set.
    if queryset._iterable_class is not ModelIterable:
        raise ValueError(f"{parameter} must give model instances (not values() or values_list())")


def using_alias(queryset: QuerySet[Any]) -> Optional[str]:
    """The database alias *queryset* was given with ``using()``, or None."""
    # QuerySet.db falls back to the router's choice; only _db says whether using() named one.
    return queryset._db  # type: ignore[no-any-return]


def _hashable(value: Any) -> Hashable:
    try:
        hash(value)
    except TypeError:
        return ("<unhashable>", type(value).__name__, repr(value))
    return (type(value), value)


def queryset_key(queryset: Optional[QuerySet[Any]]) -> Hashable:
    """The family key of *queryset* (see the module notes); None for None."""
    if queryset is None:
        return None
    key = _KEYS.get(queryset)
    if key is None:
        try:
            sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
        except EmptyResultSet:
            sql, params = EMPTY, ()
        key = (queryset.model, using_alias(queryset), sql, tuple(_hashable(p) for p in params))
        lookups = queryset._prefetch_related_lookups
        if lookups:
            key = (*key, tuple(_prefetch_key(lookup) for lookup in lookups))
        _KEYS[queryset] = key
    return key


def _prefetch_key(lookup: Any) -> Hashable:
    """A ``prefetch_related`` lookup as part of a family key: a path as it is, a ``Prefetch`` by what it loads."""
    if isinstance(lookup, Prefetch):
        return ("Prefetch", lookup.prefetch_through, lookup.to_attr, queryset_key(lookup.queryset))
    return _hashable(lookup)


def queryset_label(queryset: QuerySet[Any]) -> str:
    """A short readable form for a loader's name: ``Book WHERE ... ORDER BY ...`` (parameters inlined),
    ``Book all``, with `` using ALIAS`` after it when the queryset names its database."""
    key = queryset_key(queryset)
    assert isinstance(key, tuple)
    sql = key[2]
    if sql == EMPTY:
        return f"{queryset.model.__name__} {EMPTY}"
    try:
        text = str(queryset.query)
    except Exception:  # a parameter str() cannot render: the SQL is enough
        text = sql
    cut = min([i for i in (text.find(" WHERE "), text.find(" ORDER BY ")) if i >= 0], default=-1)
    text = text[cut + 1:] if cut >= 0 else "all"
    alias = using_alias(queryset)
    using = f" using {alias}" if alias else ""
    return f"{queryset.model.__name__} {text if len(text) <= 80 else text[:77] + '...'}{using}"


def ordering_of(queryset: QuerySet[Any]) -> list[Any]:
    """The rows' order (see the module notes) as ``order_by()`` arguments, the primary key last.

    Raises:
        ValueError: the queryset orders at random (``order_by("?")``).
    """
    query = queryset.query
    if query.order_by:
        ordering = list(query.order_by)
    elif query.default_ordering and query.get_meta().ordering:
        ordering = list(query.get_meta().ordering)
    else:
        ordering = []
    if "?" in ordering:
        raise ValueError("queryset must not be ordered at random")
    pk_names = {"pk", "-pk", query.get_meta().pk.name, "-" + query.get_meta().pk.name}
    if not any(isinstance(o, str) and o in pk_names for o in ordering):
        ordering.append("pk")
    return ordering


class _EqualsAny(Lookup):  # type: ignore[misc]  # Django ships no types
    """``lhs = ANY(%s::type[])``: every key in one array parameter (PostgreSQL)."""

    lookup_name = "dataloader_sync_any"
    prepare_rhs = False

    def __init__(self, lhs: Any, rhs: list[Any], db_type: str) -> None:
        self.db_type = db_type
        super().__init__(lhs, rhs)

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs_sql, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs_sql} = ANY(%s::{self.db_type}[])", [*lhs_params, self.rhs]


def _param_limit(alias: str) -> Optional[int]:
    connection = connections[alias]
    if connection.vendor == "sqlite":
        if sys.version_info >= (3, 11):
            connection.ensure_connection()
            limit: int = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
            return limit
        return 32766 if sqlite3.sqlite_version_info >= (3, 32) else 999
    features_limit: Optional[int] = connection.features.max_query_params
    return features_limit


def key_chunks(queryset: QuerySet[Any], name: str, key_field: Any, keys: Sequence[Any]) -> list[QuerySet[Any]]:
    """*queryset* filtered to rows whose annotation or field *name* is one of *keys*: one queryset per statement.

    *key_field* is the model field the keys are values of (their SQL type).
    """
    alias = queryset.db
    connection = connections[alias]
    prepared = [key_field.get_db_prep_value(k, connection, prepared=False) for k in keys]
    if connection.vendor == "postgresql":
        return [queryset.filter(_EqualsAny(F(name), prepared, key_field.cast_db_type(connection)))]
    limit = _param_limit(alias)
    if limit is None or len(keys) + _SLACK <= limit:
        return [queryset.filter(**{f"{name}__in": list(keys)})]
    try:
        _, params = queryset.query.get_compiler(using=alias).as_sql()
        used = len(params)
    except EmptyResultSet:
        used = 0
    size = max(1, limit - used - _SLACK)
    return [queryset.filter(**{f"{name}__in": list(keys[i:i + size])}) for i in range(0, len(keys), size)]
