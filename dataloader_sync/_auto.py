"""``no_auto_relations``: a field that auto relations leave to its own resolver.

Auto relations (``dataloader_sync.graphql.AutoRelationsExecutionContext``,
the ``DATALOADER_SYNC_AUTO_RELATIONS`` Django setting) resolve a
default-resolved relation field through that relation's loader.  A field
wrapped here keeps the framework's own resolution under the switch.

The core imports no integration: a field is recognised by what it has, not
by its class.

Guarantees:
- ``no_auto_relations(field)`` returns *field* itself, marked; a field of a
  framework the switch does not know is returned unchanged (there is
  nothing to opt out of) as long as it is a field-like object.
- The mark is read once per field per execution plan (``opted_out``): a
  field opted out costs one call more per resolution, nothing else.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

__all__ = ["NoAutoRelations", "no_auto_relations", "opted_out"]

F = TypeVar("F")

#: The attribute that marks a field object (strawberry-django fields, graphql-core fields).
MARK = "dataloader_sync_no_auto_relations"


class NoAutoRelations:
    """A resolver left alone by auto relations: calls *resolver* (or, if None, the
    default resolver the execution passes as ``default``) unchanged.

    Thread-safe: immutable.
    """

    __slots__ = ("resolver",)

    def __init__(self, resolver: Any) -> None:
        self.resolver = resolver

    def __call__(self, root: Any, info: Any, **args: Any) -> Any:
        resolver = self.resolver
        if resolver is None:  # a graphql-core field without a resolver: graphql-core's default
            from graphql import default_field_resolver

            resolver = default_field_resolver
        return resolver(root, info, **args)


def opted_out(resolver: Any) -> bool:
    """Whether *resolver* (a field's resolve function) was marked by ``no_auto_relations``."""
    return isinstance(resolver, NoAutoRelations)


def no_auto_relations(field: F) -> F:
    """*field*, resolved as without auto relations even when the switch is on.

    Wrap the field where it is declared:
    ``books = no_auto_relations(DjangoListField(BookType))`` in a graphene /
    graphene-django type body, ``no_auto_relations(GraphQLField(...))`` for a
    graphql-core field, a strawberry-django field likewise.  Writing a
    resolver of one's own opts a field out as well.

    Args:
        field: a graphene ``Field`` (or subclass: ``List`` mounted as a field,
            ``DjangoListField``, ``DjangoConnectionField``...), a graphql-core
            ``GraphQLField``, or any field object that accepts attributes.

    Returns:
        *field*, marked.

    Raises:
        TypeError: *field* is a class (``no_auto_relations(BookType)``: wrap the
            field, not its type) or an object that cannot be marked.
    """
    if isinstance(field, type):
        raise TypeError(f"field must be a field object, not the class {field.__name__} "
                        "(wrap the field: no_auto_relations(DjangoListField(BookType)))")
    target: Any = field
    wrap: Any = getattr(target, "wrap_resolve", None)
    if wrap is None and callable(getattr(target, "mount_as", None)) and callable(getattr(target, "Field", None)):
        # a graphene type instance in a type body (graphene.List(Book)): mounted as the field graphene
        # would make of it (UnmountedType.Field()), so that its resolver can be wrapped
        field = target = target.Field()
        wrap = getattr(target, "wrap_resolve", None)
    if callable(wrap):  # graphene: the field makes its resolver when the schema is built
        original: Callable[[Any], Any] = wrap

        def wrap_resolve(parent_resolver: Any) -> Any:
            return NoAutoRelations(original(parent_resolver))

        target.wrap_resolve = wrap_resolve
    elif type(target).__name__ == "GraphQLField" and type(target).__module__.startswith("graphql."):
        # a graphql-core GraphQLField: its resolve function (None: the default) is wrapped now
        resolve = target.resolve
        if not isinstance(resolve, NoAutoRelations):
            target.resolve = NoAutoRelations(resolve)
    try:
        setattr(field, MARK, True)
    except (AttributeError, TypeError) as exc:
        raise TypeError(f"field must be a field object that can be marked (got {type(field).__name__})") from exc
    return field
