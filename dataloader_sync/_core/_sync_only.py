"""Refusing async callables where the package calls user code on a thread.

A batch function, a cache key function or a registry factory is called by
the package and its result used as it is: an ``async def`` given there would
return a coroutine that nobody awaits, fail later with a message about a
"coroutine" and leave a "never awaited" warning.  ``check_sync`` refuses it
at construction instead, naming the parameter and the fix.

Guarantees:
- A plain ``def`` function, lambda or bound method costs two attribute
  reads and a bit test (the constructor's common case, which ``DataLoader``
  inlines with ``SYNC_CODE_TYPES`` and ``ASYNC_FLAGS``); other callables
  (partials, objects with ``__call__``, classes) are asked through ``inspect``.
"""
from __future__ import annotations

import inspect
from types import FunctionType, MethodType
from typing import Any

__all__ = ["ASYNC_FLAGS", "SYNC_CODE_TYPES", "check_sync", "is_async_callable"]

ASYNC_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE

#: Callables whose ``__code__`` is the code they run: a function, and a bound
#: method (which reads ``__code__`` from its function).  Their flags say at
#: once whether they are async.
SYNC_CODE_TYPES = (FunctionType, MethodType)

#: What to write instead, for each parameter that refuses async callables.
_BATCH_FIX = (
    "write it with def (it runs on a thread: call your async code with asyncio.run() "
    "or asgiref's async_to_sync inside it)"
)
_FIX = {"batch_load_fn": _BATCH_FIX, "batch_fn": _BATCH_FIX}
_DEFAULT_FIX = "write it with def"


def is_async_callable(fn: Any) -> bool:
    """Whether calling *fn* returns a coroutine or an async generator (by its declaration)."""
    if type(fn) in SYNC_CODE_TYPES:
        return bool(fn.__code__.co_flags & ASYNC_FLAGS)
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):  # methods, partials, marked
        return True
    if isinstance(fn, type):
        return False
    call = getattr(type(fn), "__call__", None)  # noqa: B004 -- an object whose __call__ is async
    return call is not None and (inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call))


def check_sync(fn: Any, parameter: str) -> None:
    """Refuse an async callable given as *parameter*.

    Raises:
        TypeError: *fn* is declared ``async def`` (or returns an async
            generator), with the fix in the message.
    """
    if type(fn) in SYNC_CODE_TYPES and not fn.__code__.co_flags & ASYNC_FLAGS:
        return
    if is_async_callable(fn):
        raise TypeError(
            f"{parameter} must be a sync function, got async {_describe(fn)}: "
            f"{_FIX.get(parameter, _DEFAULT_FIX)}"
        )


def _describe(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(getattr(fn, "func", None), "__qualname__", None)
    return f"{name!r}" if name else repr(fn)
