"""Loader families: one loader per distinct arguments of a batch function.

``registry.loader_for(batch_fn, *args, **kwargs)`` is graphql-ruby's
``dataloader.with(Source, *args)``: the loader made for ``(batch_fn, args,
kwargs)`` on first use, calling ``batch_fn(keys, *args, **kwargs)``.  This
module holds what the registry needs for it and nothing of the registry's
state: the family key of a call, the loader's readable name, the options its
loader is made with, and the batch callable bound to the arguments.

A batch function may shape its family through three optional attributes
(``FamilyHooks``), read when ``loader_for`` is called:

- ``dataloader_options``: a mapping of ``DataLoader`` keyword arguments
  (``max_batch_size``, ``cache``, ``executor``, ``value_cache``, ...) for
  every loader of the family.  Options belong to the family, not to a call:
  every caller of one family gets loaders made the same way.
- ``dataloader_key(*args, **kwargs) -> Hashable``: the family key of the
  arguments, when their equality is not the right one (``dataloader_sync.django``
  keys a queryset by its SQL, its parameters and its database alias).
- ``dataloader_name(*args, **kwargs) -> str``: the readable part of the
  loader's name (the default renders the arguments with ``repr``); with
  ``dataloader_name_is_label = True`` beside it, the whole name (auto
  relations name their loaders ``Author.books``).

Guarantees:
- Arguments are part of the key with their type: ``1``, ``1.0`` and
  ``True`` are equal in Python but make three loaders.
- An unhashable argument is a ``TypeError`` naming it, raised before any
  loader is made.
- Nothing here takes a lock; the hooks are user code and the registry calls
  this module outside its lock.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Callable, Optional, Protocol

__all__ = ["FamilyHooks", "family_key", "family_label", "family_options", "BoundBatch"]

# DataLoader arguments a family may not set: loader_for supplies the batch
# function and the name, and pass_env would change the call's shape.
_RESERVED_OPTIONS = frozenset({"batch_load_fn", "name", "pass_env"})
_MAX_REPR = 60  # characters of one argument in a default name


class FamilyHooks(Protocol):
    """The optional attributes of a batch function that shape its family (see the module notes)."""

    dataloader_options: Mapping[str, Any]

    def dataloader_key(self, *args: Any, **kwargs: Any) -> Hashable: ...

    def dataloader_name(self, *args: Any, **kwargs: Any) -> str: ...


def _checked(value: Any, what: str) -> tuple[type, Any]:
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"{what} of loader_for is unhashable ({type(value).__name__})") from None
    return (type(value), value)


def family_key(batch_fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
    """The registry's key for ``loader_for(batch_fn, *args, **kwargs)``.

    Raises:
        TypeError: an argument (or the key a ``dataloader_key`` hook made) is
        unhashable; the message names it (``argument 2``, ``keyword argument 'queryset'``).
    """
    hook = getattr(batch_fn, "dataloader_key", None)
    if hook is not None:
        return (batch_fn, _checked(hook(*args, **kwargs), f"the key dataloader_key made for {_qualname(batch_fn)}"))
    positional = tuple(_checked(a, f"argument {i}") for i, a in enumerate(args, 1))
    named = tuple(sorted((k, _checked(v, f"keyword argument {k!r}")) for k, v in kwargs.items()))
    return (batch_fn, positional, named)


def _qualname(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def family_label(batch_fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The readable name of the family's loader: ``load_related(Author.books)``, ``load_users(1, active=True)``."""
    hook = getattr(batch_fn, "dataloader_name", None)
    if hook is not None:
        inner = str(hook(*args, **kwargs))
        if getattr(batch_fn, "dataloader_name_is_label", False) is True:
            return inner
    else:
        inner = ", ".join([_short_repr(a) for a in args] + [f"{k}={_short_repr(v)}" for k, v in kwargs.items()])
    return f"{_qualname(batch_fn)}({inner})"


def family_options(batch_fn: Callable[..., Any]) -> dict[str, Any]:
    """The ``DataLoader`` keyword arguments of the family's loaders (``dataloader_options``).

    Raises:
        TypeError: ``dataloader_options`` is not a mapping with str keys, or it
        sets ``batch_load_fn``, ``name`` or ``pass_env``.
    """
    options: Optional[Any] = getattr(batch_fn, "dataloader_options", None)
    if options is None:
        return {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise TypeError("dataloader_options must be a mapping of DataLoader keyword arguments")
    reserved = sorted(_RESERVED_OPTIONS.intersection(options))
    if reserved:
        raise TypeError(f"dataloader_options may not set {', '.join(reserved)}")
    return dict(options)


class BoundBatch:
    """``keys -> batch_fn(keys, *args, **kwargs)``: a family loader's batch function.

    Its ``__qualname__`` and ``repr`` are the family's, so a slow-task
    warning or a traceback names the user's function.
    """

    def __init__(self, batch_fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.batch_fn = batch_fn
        self.args = args
        self.kwargs = kwargs
        self.__qualname__ = _qualname(batch_fn)

    def __call__(self, keys: list[Any]) -> Any:
        return self.batch_fn(keys, *self.args, **self.kwargs)

    def __repr__(self) -> str:
        return f"<family batch {family_label(self.batch_fn, self.args, self.kwargs)}>"
