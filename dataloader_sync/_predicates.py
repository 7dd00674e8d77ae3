"""Dispatch predicates: when a registry may dispatch a loader.

A predicate is any callable ``(name, loader) -> bool``.  ``DispatchPredicate``
wraps one so that it composes with ``&``, ``|`` and ``~`` and reads well in a
``repr`` (``dispatch_if_depth_greater_than(10) | dispatch_if_longer_than(0.05)``);
plain callables are accepted wherever a predicate is.
"""
from __future__ import annotations

import datetime
from typing import Any, Callable

from ._core import Delay
from ._core import seconds as _seconds

__all__ = [
    "DISPATCH_ALWAYS",
    "DISPATCH_NEVER",
    "DispatchPredicate",
    "as_predicate",
    "dispatch_if_depth_greater_than",
    "dispatch_if_longer_than",
]


class DispatchPredicate:
    """A named, composable ``(name, loader) -> bool``.  Immutable; thread-safe."""

    __slots__ = ("_fn", "_repr")

    def __init__(self, fn: Callable[[str, Any], bool], description: str | None = None) -> None:
        if not callable(fn):
            raise TypeError("fn must be callable")
        if description is not None and not isinstance(description, str):
            raise TypeError("description must be a str or None")
        self._fn = fn
        self._repr = description or f"DispatchPredicate({fn!r})"

    def __call__(self, name: str, loader: Any) -> bool:
        return bool(self._fn(name, loader))

    def __and__(self, other: Callable[[str, Any], bool]) -> DispatchPredicate:
        a, b = self, as_predicate(other, "other")
        return DispatchPredicate(lambda name, loader: a(name, loader) and b(name, loader), f"({a!r} & {b!r})")

    def __or__(self, other: Callable[[str, Any], bool]) -> DispatchPredicate:
        a, b = self, as_predicate(other, "other")
        return DispatchPredicate(lambda name, loader: a(name, loader) or b(name, loader), f"({a!r} | {b!r})")

    # ``plain_fn & predicate`` lands here: keep the user's order, both when
    # evaluating (short-circuit) and in the repr.
    def __rand__(self, other: Callable[[str, Any], bool]) -> DispatchPredicate:
        return as_predicate(other, "other") & self

    def __ror__(self, other: Callable[[str, Any], bool]) -> DispatchPredicate:
        return as_predicate(other, "other") | self

    def __invert__(self) -> DispatchPredicate:
        a = self
        return DispatchPredicate(lambda name, loader: not a(name, loader), f"~{a!r}")

    def __repr__(self) -> str:
        return self._repr


def as_predicate(fn: Any, parameter: str = "predicate") -> DispatchPredicate:
    """Return *fn* as a ``DispatchPredicate``.

    Raises:
        TypeError: *fn* is not callable (the message names *parameter*).
    """
    if isinstance(fn, DispatchPredicate):
        return fn
    if not callable(fn):
        raise TypeError(f"{parameter} must be callable (name, loader) -> bool")
    return DispatchPredicate(fn, getattr(fn, "__name__", None) or repr(fn))


DISPATCH_ALWAYS = DispatchPredicate(lambda name, loader: True, "DISPATCH_ALWAYS")
DISPATCH_NEVER = DispatchPredicate(lambda name, loader: False, "DISPATCH_NEVER")


def dispatch_if_depth_greater_than(n: int) -> DispatchPredicate:
    """Dispatch a loader once more than *n* keys are queued on it.

    Raises:
        TypeError: *n* is not an int (a bool is not one).
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError("n must be an int")
    return DispatchPredicate(
        lambda name, loader: loader.dispatch_depth > n, f"dispatch_if_depth_greater_than({n})"
    )


def dispatch_if_longer_than(seconds: Delay) -> DispatchPredicate:
    """Dispatch a loader once its last dispatch is more than *seconds* ago.

    Args:
        seconds: seconds or a ``datetime.timedelta``; the same rule as every
            delay of the package (finite; a negative value always passes).

    Raises:
        TypeError: *seconds* is not a number nor a timedelta.
        ValueError: *seconds* is NaN or infinite (for "never", use
            ``DISPATCH_NEVER``).
    """
    limit = _seconds("seconds", seconds)
    shown = limit if isinstance(seconds, datetime.timedelta) else seconds  # the call as written
    return DispatchPredicate(
        lambda name, loader: loader.time_since_dispatch() > limit,
        f"dispatch_if_longer_than({shown!r})",
    )
