"""graphene-django's connection fields, also served by ``related_loader`` futures.

``dataloader_sync.django.DjangoConnectionField`` and
``DjangoFilterConnectionField`` are graphene-django's fields of the same
names (subclasses: same arguments, same schema, same results for resolvers
that return a queryset, a manager or None).  A resolver may also return
``related_loader(info.context.loaders, Author.books).load(author)``: while the
resolver runs, the field installs a ``_pages.PageRequest`` (see
``_connection_scope``), so that ``related_loader`` hands it the loader of the
connection's own family — the field's queryset (the node type's
``get_queryset``, then the filterset with the field's filter arguments and
``order_by``), the rows the page needs per parent (``first``/``offset``/
``after``, one more for ``hasNextPage``; all rows with ``last`` or
``before``) and, when ``totalCount`` (any field of the connection besides
``edges`` and ``pageInfo``, ``_pages.reads_length``) is selected, the count.  graphene-django
then slices the page from the loaded list as it would from a queryset.

Guarantees:
- One SQL query per batch (one batch per level per field), the counts in it
  when ``totalCount`` is selected and the rows are limited (``_pages``);
  cursors are offsets into the whole filtered list, as with a queryset.
- ``connection.length`` (what a ``totalCount`` resolver reads) is the count
  of all the parent's matching rows (``_pages.Page``'s ``len``).
- A filter field whose resolver returns some other future fails that field
  with a ``TypeError`` saying what to return (graphene-django's own field
  fails with ``'Future' object has no attribute 'model'``); the plain
  connection field passes it to graphene-django unchanged (the whole list is
  sliced, as before).

Imported on first use of those names (it imports graphene-django; the
filter field needs django-filter).
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
from typing import Any, Callable, Optional

from graphene_django.fields import DjangoConnectionField as _StockConnectionField
from graphene_django.utils import maybe_queryset
from graphql_relay import cursor_to_offset, get_offset_with_default

from .._optional import missing_dependency
from ._connection_scope import requesting
from ._pages import PageRequest, reads_length

__all__ = ["DjangoConnectionField", "filter_connection_field_class", "rows_needed"]


def rows_needed(args: dict[str, Any], max_limit: Optional[int]) -> Optional[int]:
    """How many leading rows per parent a graphene-django connection page needs, or None for all.

    The rows before the page (``offset``, ``after``), the page (``first``,
    else the field's ``max_limit``) and one more, which tells
    ``hasNextPage``; None with ``last`` or ``before`` (slicing from the end
    needs every row) or when nothing limits the page.
    """
    if args.get("last") is not None or args.get("before") is not None:
        return None
    first = args.get("first")
    if first is None:
        first = max_limit
    if first is None:
        return None
    offset, after = args.get("offset"), args.get("after")
    if offset:  # graphene-django turns offset (counted after `after`) into an after cursor
        start = offset + ((cursor_to_offset(after) or 0) + 1 if after else 0)
    else:
        start = get_offset_with_default(after, -1) + 1
    return int(start + first + 1)


def _frozen(args: dict[str, Any]) -> str:
    """The arguments of a field as part of a reuse key (their values need not be hashable)."""
    return repr(sorted(args.items()))


def _not_a_page(field_name: str) -> TypeError:
    return TypeError(f"{field_name}: a filter connection field resolves to a queryset or to "
                     "related_loader(registry, Model.relation).load(instance), not to another future")


def _served(request: PageRequest, field_name: str, value: Any) -> Any:
    """*value*, if it came from the page family *request* handed out; else the field's error."""
    if not request.served:
        raise _not_a_page(field_name)
    return value


class _LoaderPages:
    """The resolution shared by both fields (mixed in before graphene-django's class)."""

    #: A future the page request did not serve cannot be filtered: fail the field.
    _needs_queryset = False

    @classmethod
    def connection_resolver(cls, resolver: Callable[..., Any], connection: Any, default_manager: Any,
                            queryset_resolver: Callable[..., Any], max_limit: Optional[int],
                            enforce_first_or_last: bool, root: Any, info: Any, **args: Any) -> Any:
        """graphene-django's ``connection_resolver``, the resolver run with a page request installed."""
        requests: list[PageRequest] = []

        def resolve(root: Any, info: Any, **resolver_args: Any) -> Any:
            def make_queryset(base: Any) -> Any:
                if base is None:
                    base = maybe_queryset(default_manager)
                return queryset_resolver(connection, base, info, dict(resolver_args))

            # _meta: graphene's documented type options (the node type) and Django's Model._meta.
            request = PageRequest(connection._meta.node._meta.model, make_queryset,
                                  rows_needed(resolver_args, max_limit), reads_length(info),
                                  (queryset_resolver, default_manager, _frozen(resolver_args)))
            requests.append(request)
            with requesting(request):
                return resolver(root, info, **resolver_args)

        def resolve_queryset(connection: Any, iterable: Any, info: Any, qargs: dict[str, Any]) -> Any:
            if isinstance(iterable, cf.Future):
                request = requests[0] if requests else None
                if request is not None and request.served:
                    return iterable  # filtered, ordered and limited in the batch
                if cls._needs_queryset:
                    # A then() chain may ask related_loader later, in its
                    # callback (it runs in a copy of the resolver's context):
                    # check when its value is there.
                    then = getattr(iterable, "then", None)
                    if request is None or then is None:
                        raise _not_a_page(info.field_name)
                    return then(functools.partial(_served, request, info.field_name))
            return queryset_resolver(connection, iterable, info, qargs)

        parent = super().connection_resolver  # type: ignore[misc]
        return parent(resolve, connection, default_manager, resolve_queryset, max_limit, enforce_first_or_last,
                      root, info, **args)


class DjangoConnectionField(_LoaderPages, _StockConnectionField):  # type: ignore[misc]
    """graphene-django's ``DjangoConnectionField``; its resolver may return a related loader's future.

    See the module notes.  Thread-safe as graphene fields are: the field is
    built once with the schema; resolution state lives in the call.
    """


@functools.cache
def filter_connection_field_class() -> type:
    """``DjangoFilterConnectionField`` (graphene-django's, with the loader pages), made on first use.

    Raises:
        ImportError: django-filter is not installed.
    """
    try:
        import django_filters  # noqa: F401 -- without it graphene_django.filter defines nothing
        from graphene_django.filter import DjangoFilterConnectionField as Stock
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise missing_dependency("dataloader_sync.django.DjangoFilterConnectionField", exc, "graphene-django") from exc

    class DjangoFilterConnectionField(_LoaderPages, Stock):  # type: ignore[misc]
        """graphene-django's ``DjangoFilterConnectionField``; its resolver may return a related loader's future.

        The filterset (with the field's arguments) and the node type's
        ``get_queryset`` are applied inside the batch.  Thread-safe as
        graphene fields are.
        """

        _needs_queryset = True

    DjangoFilterConnectionField.__module__ = "dataloader_sync.django"
    return DjangoFilterConnectionField


DjangoConnectionField.__module__ = "dataloader_sync.django"
