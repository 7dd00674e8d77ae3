"""Loader futures that ``SerializerMethodField`` methods returned, settled in the serialized output.

A method may return ``loader.load(obj)`` or a ``then`` chain of it instead
of a value: REST framework puts the future where the value goes.
``settle(data, registry)`` finds the futures in the output (dicts and lists,
as serializers make them), dispatches the registry, so that each loader
sends all its keys in one batch — the futures of every level at once —
and writes each future's value in its place.  A ``then`` chain whose
callback loads again is dispatched again, until its futures are done or
nothing is queued (one batch per loader per step of the chain); values that
hold futures themselves go round again.  A future of another registry is
waited for as ``result()`` waits (its loader dispatches on demand).

Guarantees:
- Only ``dataloader_sync.Future``\\ s are replaced; every other value is left
  as it is, in place (the output's own objects, ``ReturnDict`` and
  ``ReturnList`` included).
- A future that failed raises its error, as a method raising it would.
- No lock: the output is the caller's.
"""
from __future__ import annotations

from typing import Any

from .._core import Future
from .._registry import DataLoaderRegistry

__all__ = ["settle"]


def settle(data: Any, registry: DataLoaderRegistry) -> None:
    """Replace, in place, every future in *data* by its value."""
    found: list[tuple[Any, Any, Future[Any]]] = []
    _collect(data, found)
    while found:
        _dispatch_until_done(registry, [future for _, _, future in found])
        values = []
        for container, key, future in found:
            value = future.result()
            container[key] = value
            values.append(value)
        found = []
        for value in values:
            _collect(value, found)


def _dispatch_until_done(registry: DataLoaderRegistry, futures: list[Future[Any]]) -> None:
    """Dispatch the registry until the futures are done or it has nothing queued: a ``then`` chain's next
    loads go out in the next dispatch, one batch per loader each time."""
    while registry.dispatch_all_with_count() and not all(future.done() for future in futures):
        pass


def _collect(value: Any, found: list[tuple[Any, Any, Future[Any]]]) -> None:
    """Add to *found* the ``(container, key, future)`` of every future in *value*'s dicts and lists."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            pairs: Any = item.items()
        elif isinstance(item, list):
            pairs = enumerate(item)
        else:
            continue
        for key, child in pairs:
            if isinstance(child, Future):
                found.append((item, key, child))
            elif isinstance(child, (dict, list)):
                stack.append(child)
