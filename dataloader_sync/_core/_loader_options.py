"""The options of ``DataLoader``: their type for typed callers, and their checks.

``LoaderOptions`` is what each constructor overload takes as
``**options: Unpack[LoaderOptions]`` (PEP 692), beside the two parameters
whose types follow the batch function (``pass_env``, ``cache_key_fn``);
``check_arguments`` is the constructor's first step.

Guarantees:
- A bad argument is a ``TypeError``/``ValueError`` at construction, with a
  short message naming the parameter ("max_batch_size must be > 0").
"""
from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Hashable, MutableMapping
from typing import Any, Callable, Optional, TypedDict

from . import _value_cache
from ._future import Future
from ._instrumentation_seam import InstrumentationHooks
from ._sync_only import check_sync
from ._value_cache import ValueCache

__all__ = ["LoaderOptions", "check_arguments"]


def _positive_int_or_none(name: str, value: Optional[int]) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None")
    if value <= 0:
        raise ValueError(f"{name} must be > 0")
    return value


def _callable_or_none(name: str, value: Any) -> Any:
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be callable")
    return value


class LoaderOptions(TypedDict, total=False):
    """The keyword arguments of ``DataLoader`` whose types do not depend on its key type.

    Every one is optional, with the default and meaning the ``DataLoader``
    docstring gives; ``pass_env`` and ``cache_key_fn`` are named by each
    constructor overload itself (their types follow the batch function's).
    For typing only (``**options: Unpack[LoaderOptions]``): at run time the
    constructor takes these as ordinary keyword arguments.
    """

    name: Optional[str]
    batch: bool
    cache: bool
    max_batch_size: Optional[int]
    cache_map: Optional[MutableMapping[Hashable, Future[Any]]]
    cache_exceptions: bool
    executor: Optional[cf.Executor]
    context: Any
    context_provider: Optional[Callable[[], Any]]
    value_cache: Optional[ValueCache[Any, Any]]
    clock: Callable[[], float]
    instrumentation: Optional[InstrumentationHooks]


def check_arguments(batch_load_fn: Any, *, name: Any, flags: dict[str, Any], max_batch_size: Any,
                    cache_key_fn: Any, context: Any, context_provider: Any, executor: Any, cache_map: Any,
                    value_cache: Any) -> None:
    """``DataLoader``'s checks of its arguments, each naming the parameter.

    Raises:
        TypeError, ValueError: the first argument of the wrong kind.
    """
    for flag, value in flags.items():
        if not isinstance(value, bool):  # cache="false" from a config file would be truthy
            raise TypeError(f"{flag} must be a bool")
    if not callable(batch_load_fn):
        raise TypeError("batch_load_fn must be callable")
    if name is not None and not isinstance(name, str):
        raise TypeError("name must be a str or None")
    _positive_int_or_none("max_batch_size", max_batch_size)
    _callable_or_none("cache_key_fn", cache_key_fn)
    _callable_or_none("context_provider", context_provider)
    for parameter, fn in (("cache_key_fn", cache_key_fn), ("context_provider", context_provider)):
        if fn is not None:
            check_sync(fn, parameter)
    if context is not None and context_provider is not None:
        raise ValueError("give context or context_provider, not both")
    if executor is not None and not callable(getattr(executor, "submit", None)):
        raise TypeError("executor must be a concurrent.futures.Executor or None")
    if cache_map is not None and not all(
        callable(getattr(cache_map, m, None)) for m in ("get", "__setitem__", "__delitem__", "clear")
    ):
        raise TypeError("cache_map must be a MutableMapping (get, __setitem__, __delitem__, clear)")
    _value_cache.check_value_cache(value_cache)
    if value_cache is not None and not flags["cache"]:
        raise ValueError("value_cache needs cache=True")
