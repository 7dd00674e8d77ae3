"""Which strawberry-django fields auto relations take, and the to-one hops a selection reads through them.

- ``relation_field``: a strawberry-django relation field with no resolver
  of its own (or the connection extension's default one), not paginated,
  not opted out, and, for a connection, with a connection type pages can
  serve (``pages_of``);
- ``joinable_attname``: a to-one such field whose type has no
  ``get_queryset`` of its own: joining it into its parent's batch
  (``select_related``) gives what the field would;
- ``joins``: the paths of those hops under the field being resolved
  (``join_paths``, to ``MAX_JOIN_DEPTH``).

Reads strawberry-django's ``StrawberryDjangoField`` (``base_resolver``,
``is_relation``, ``is_paginated``, ``is_connection``, ``is_list``,
``django_type``, ``django_name``, ``extensions``) and strawberry's key of a
field's definition in graphql-core's field extensions.

Guarantees: pure functions of the schema's fields (no state of their own).
"""
from __future__ import annotations

from typing import Any, Optional

from .._auto import MARK
from ..django._auto import MAX_JOIN_DEPTH, join_hop
from ..graphql._auto_relations import join_paths

__all__ = ["DEFINITION", "joinable_attname", "joins", "pages_of", "relation_field"]

#: strawberry's key, in a graphql-core field's extensions, of its StrawberryField.
DEFINITION = "strawberry-definition"


def relation_field(graphql_field: Any) -> Optional[Any]:
    """The strawberry-django field behind *graphql_field* when auto relations take it, else None."""
    from strawberry_django.fields.field import StrawberryDjangoField

    field = (graphql_field.extensions or {}).get(DEFINITION)
    if not isinstance(field, StrawberryDjangoField) or not default_resolution(field):
        return None
    if not field.is_relation or field.is_paginated or getattr(field, MARK, False):
        return None
    if field.is_connection and pages_of(field) is None:
        return None
    return field


def joins(ctx: Any, info: Any, model: Any) -> tuple[str, ...]:
    """The to-one hops the selection of the field *info* resolves reads, from *model* (``join_paths``)."""
    return join_paths(ctx, info, model, join_hop, "__", MAX_JOIN_DEPTH, attname=joinable_attname)


def joinable_attname(ctx: Any, field_def: Any, name: str) -> Optional[str]:
    """The relation a child field reads, when joining it into its parent's batch gives what the field would
    give: a to-one strawberry-django field with no resolver, whose type has no ``get_queryset`` of its own."""
    field = relation_field(field_def)
    if field is None or field.is_connection or field.is_list:
        return None
    django_type = getattr(field, "django_type", None)
    if django_type is not None and callable(getattr(django_type, "get_queryset", None)):
        return None
    return field.django_name or field.python_name  # type: ignore[no-any-return]


def default_resolution(field: Any) -> bool:
    """Whether *field* has no resolver of its own: none, or the one strawberry-django's connection
    extension gives a connection field that has none (``default_resolver``, which reads the relation)."""
    resolver = field.base_resolver
    if resolver is None:
        return True
    wrapped = getattr(resolver, "wrapped_func", None)
    return (getattr(wrapped, "__name__", None) == "default_resolver"
            and getattr(wrapped, "__module__", None) == "strawberry_django.fields.field")


def pages_of(field: Any) -> Any:
    """A ``DataLoaderConnectionExtension`` standing for *field*'s connection extension (strawberry-django's
    own, or ours), or None when the field has another, or its connection type pages only querysets (one
    that is not a ``relay.ListConnection``: ``DjangoCursorConnection``'s cursors are its order's values)."""
    from strawberry.relay import ListConnection
    from strawberry_django.fields.field import StrawberryDjangoConnectionExtension

    from ._connection import DataLoaderConnectionExtension

    found = [e for e in field.extensions if isinstance(e, StrawberryDjangoConnectionExtension)]
    if len(found) != 1 or type(found[0]) not in (StrawberryDjangoConnectionExtension, DataLoaderConnectionExtension):
        return None
    connection_type = getattr(found[0], "connection_type", None)
    if not (isinstance(connection_type, type) and issubclass(connection_type, ListConnection)):
        return None
    pages = object.__new__(DataLoaderConnectionExtension)
    pages.__dict__.update(found[0].__dict__)  # applied to the field already: its connection type, max_results
    pages._django_field = field
    return pages
