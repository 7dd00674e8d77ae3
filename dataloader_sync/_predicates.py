"""Dispatch predicates: when a registry may dispatch a loader.

A predicate is any callable ``(name, loader) -> bool``.  ``DispatchPredicate``
wraps one so that it composes with ``&``, ``|`` and ``~`` and reads well in a
``repr`` (``dispatch_if_depth_greater_than(10) | dispatch_if_longer_than(0.05)``);
plain callables are accepted wherever a predicate is.
"""
from __future__ import annotations

import math
from typing import Any, Callable

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
        self._fn = fn
        self._repr = description or f"DispatchPredicate({fn!r})"

    def __call__(self, name: str, loader: Any) -> bool:
        return bool(self._fn(name, loader))

    def __and__(self, other: Callable[[str, Any], bool]) -> "DispatchPredicate":
        a, b = self, as_predicate(other, "other")
        return DispatchPredicate(lambda name, loader: a(name, loader) and b(name, loader), f"({a!r} & {b!r})")

    def __or__(self, other: Callable[[str, Any], bool]) -> "DispatchPredicate":
        a, b = self, as_predicate(other, "other")
        return DispatchPredicate(lambda name, loader: a(name, loader) or b(name, loader), f"({a!r} | {b!r})")

    # ``plain_fn & predicate`` lands here: keep the user's order, both when
    # evaluating (short-circuit) and in the repr.
    def __rand__(self, other: Callable[[str, Any], bool]) -> "DispatchPredicate":
        return as_predicate(other, "other") & self

    def __ror__(self, other: Callable[[str, Any], bool]) -> "DispatchPredicate":
        return as_predicate(other, "other") | self

    def __invert__(self) -> "DispatchPredicate":
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
    """Dispatch a loader once more than *n* keys are queued on it."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError("n must be an int")
    return DispatchPredicate(
        lambda name, loader: loader.dispatch_depth > n, f"dispatch_if_depth_greater_than({n})"
    )


def dispatch_if_longer_than(seconds: float) -> DispatchPredicate:
    """Dispatch a loader once its last dispatch is more than *seconds* ago."""
    if hasattr(seconds, "total_seconds"):
        seconds = seconds.total_seconds()
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError("seconds must be a number of seconds or a timedelta")
    if math.isnan(seconds):
        raise ValueError("seconds must not be NaN")
    return DispatchPredicate(
        lambda name, loader: loader.time_since_dispatch() > seconds,
        f"dispatch_if_longer_than({seconds!r})",
    )
