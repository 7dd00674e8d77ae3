"""A field in ``Meta.no_auto_relations``: what REST framework reads through it runs as written.

The walk does not follow such a field; and while REST framework reads it —
its ``get_attribute`` and its ``to_representation``, the nested serializers
below it included — the in-place answers of the pass
(``dataloader_sync.django._inplace``, which would otherwise answer
``author.books.all()`` for the whole level) step aside
(``_inplace.run_alone``): the field costs what it costs without
``dataloader_sync``.

``leave_alone(field)`` sets the two methods on that field object only (REST
framework deep-copies its declared fields per serializer instance, so no
other serializer sees them) as ``_Alone`` wrappers, which call the class's
methods and find the pass in progress through the current levels
(``_execution_levels.current_levels``): the same field object serialized
again later is left alone in that pass too.

REST framework behaviour relied on: ``Serializer.to_representation`` calls
``field.get_attribute(instance)`` and ``field.to_representation(attribute)``
as attribute lookups on each field object.

Guarantees:
- The wrappers hold the field weakly (no cycle through its own attribute)
  and no pass: nothing outlives the serializer.
- Outside a pass (no current levels, or levels without in-place answers) a
  wrapper is the class's method plus one context-variable read.
"""
from __future__ import annotations

import weakref
from typing import Any

from .._execution_levels import current_levels
from ..django import _inplace

__all__ = ["leave_alone"]

_METHODS = ("get_attribute", "to_representation")


class _Alone:
    """One of a field's methods, run with the pass's in-place answers stepped aside.  Immutable."""

    __slots__ = ("_field", "_method")

    def __init__(self, field: Any, name: str) -> None:
        self._field = weakref.ref(field)
        self._method = getattr(type(field), name)

    def __call__(self, *args: Any) -> Any:
        field = self._field()
        owner = current_levels()
        if owner is None:
            return self._method(field, *args)
        return _inplace.run_alone(owner, self._method, field, *args)


def leave_alone(field: Any) -> None:
    """Make *field*'s reads run as written during a pass (once per field object)."""
    if isinstance(field.__dict__.get(_METHODS[0]), _Alone):
        return
    for name in _METHODS:
        setattr(field, name, _Alone(field, name))
