"""strawberry-django's connection extension, also served by ``related_loader`` futures.

strawberry-django's ``StrawberryDjangoConnectionExtension`` hands whatever
the resolver returns to the connection type's ``resolve_connection``, which
slices it: a loader future fails there (``'Future' object is not
subscriptable``).  :class:`DataLoaderConnectionExtension` installs a
``PageRequest`` while the resolver runs (see
``dataloader_sync.django._connection_scope``), so ``related_loader`` hands the
resolver the loader of the connection's own family: the field's queryset as
strawberry-django builds it for a queryset resolver (the type's
``get_queryset``, permissions, ``filters``, ``order``/``ordering``, the
optimizer's ``only()``), the rows the page needs (strawberry's own slice:
``after`` + ``first`` + 1 for ``hasNextPage``; all rows for ``last`` without
``before``) and, when ``totalCount`` is selected, the count.  The page is
then resolved by the connection type from the loaded list.

Guarantees:
- One SQL query per batch (one batch per level per field), the counts of
  ``totalCount`` read in it (``COUNT(*) OVER (PARTITION BY parent)``), or,
  for a field whose queryset joins another table (its filters across a
  relation), one more query for them when ``totalCount`` is selected and the
  rows are limited.
- ``DjangoListConnection.totalCount`` (``ListConnectionWithTotalCount``)
  reads ``len(nodes)``: the count of all the parent's matching rows
  (``Page``'s ``len``).
- Any other resolver result (a queryset, a list, another future) takes
  strawberry-django's own path unchanged.
"""
from __future__ import annotations

import concurrent.futures as cf
import sys
from typing import Any, Callable, Optional

from strawberry.relay.utils import SliceMetadata
from strawberry_django.fields.field import StrawberryDjangoConnectionExtension
from strawberry_django.fields.field import connection as _stock_connection

from ..django._connection_scope import requesting
from ..django._pages import PageRequest, selects

try:
    from strawberry_django.relay.utils import resolve_edge_class
except ImportError:  # strawberry-django < 0.93: the same steps, from strawberry's own API
    def resolve_edge_class(connection: Any) -> Any:
        """The edge type of *connection*: its ``edges`` field's type, unwrapped."""
        from strawberry.types import get_object_definition
        from strawberry_django.utils.typing import unwrap_type

        type_def = get_object_definition(connection, strict=True)
        edges: Any = type_def.get_field("edges")  # a connection type has one
        return unwrap_type(edges.resolve_type(type_definition=type_def))

__all__ = ["DataLoaderConnectionExtension", "connection"]


class DataLoaderConnectionExtension(StrawberryDjangoConnectionExtension):  # type: ignore[misc]
    """strawberry-django's connection extension; its field's resolver may return a related loader's future.

    See the module notes.  Thread-safe as strawberry extensions are: applied
    once when the schema is built; resolution state lives in the call.
    """

    _django_field: Any = None

    def apply(self, field: Any) -> None:
        """strawberry-django's ``apply``; remembers the field, whose queryset the pages use."""
        super().apply(field)
        self._django_field = field

    def _rows_needed(self, info: Any, before: Optional[str], after: Optional[str], first: Optional[int],
                     last: Optional[int]) -> Optional[int]:
        try:
            edge_class = resolve_edge_class(self.connection_type)
            page = SliceMetadata.from_arguments(info, before=before, after=after, first=first, last=last,
                                                max_results=self.max_results, prefix=edge_class.CURSOR_PREFIX)
        except (TypeError, ValueError):  # a bad argument: resolve_connection raises it, as it would without us
            return None
        return None if page.end == sys.maxsize else int(page.overfetch)

    def resolve(self, next_: Callable[..., Any], source: Any, info: Any, *, before: Optional[str] = None,
                after: Optional[str] = None, first: Optional[int] = None, last: Optional[int] = None,
                **kwargs: Any) -> Any:
        """Run the resolver with a page request; a served future resolves to the connection."""
        field = self._django_field
        model = field.django_model

        def make_queryset(base: Any) -> Any:
            if base is None:
                base = model._default_manager.all()
            return field.get_queryset(base, info, **kwargs)

        # strawberry's Info has no public graphql-core info; selects() walks its field nodes and fragments.
        request = PageRequest(model, make_queryset, self._rows_needed(info, before, after, first, last),
                              selects(info._raw_info, "totalCount"), (field, repr(sorted(kwargs.items()))))
        with requesting(request):
            nodes = next_(source, info, **kwargs)
        page_args = {"before": before, "after": after, "first": first, "last": last}
        if request.served and isinstance(nodes, cf.Future):
            then = getattr(nodes, "then", None)
            if then is not None:
                return then(lambda page: self.connection_type.resolve_connection(
                    page, info=info, max_results=self.max_results, **page_args, **kwargs))
        return super().resolve(lambda *_args, **_kwargs: nodes, source, info, **page_args, **kwargs)


def connection(graphql_type: Any = None, **options: Any) -> Any:
    """``strawberry_django.connection`` (same arguments) with :class:`DataLoaderConnectionExtension`.

    Use it where ``strawberry_django.connection`` would be used, as a field
    or as a decorator of a resolver.

    Returns:
        The field.
    """
    field = _stock_connection(graphql_type, **options)
    field.extensions = [
        DataLoaderConnectionExtension(max_results=extension.max_results)
        if type(extension) is StrawberryDjangoConnectionExtension else extension
        for extension in field.extensions
    ]
    return field
