"""The shapes of the functions users hand to the package, as types.

``DataLoader(batch_load_fn)`` takes its key and value types from the batch
function, the way typeshed's ``Executor.submit(fn) -> Future[T]`` takes its
result type from ``fn``: a typed user writes ``users = DataLoader(load_users)``
and gets a ``DataLoader[int, User]`` without an annotation.  The aliases below
name each shape of batch function the loader accepts; ``DataLoader.__init__``
has one overload per shape.

Guarantees:
- Only the standard library ``typing`` module is used; nothing here runs at
  import beyond building the aliases (the package's ``_batch`` names the
  environment type).
- A batch function receives a ``list`` of keys (its own copy), so
  ``(keys: List[int])``, ``(keys: Sequence[int])`` and
  ``(keys: Iterable[int])`` all fit and give ``K = int``.
- ``Exception`` instances may stand in for values (they fail that key only),
  so ``Sequence[Union[V, Exception]]`` is accepted and gives the value type
  ``V``.  A mapped loader gives ``None`` for a missing key: its value type is
  ``Optional[V]``.
- A future of a result is anything with ``result()`` returning it
  (``ResultOf``): ``concurrent.futures.Future`` is invariant in its type, so a
  ``Future[List[User]]`` would not match ``Future[Sequence[User]]``.
"""
from __future__ import annotations

from typing import Callable, List, Mapping, Optional, Protocol, Sequence, TypeVar, Union

from ._batch import BatchLoaderEnvironment

__all__ = [
    "EnvBatchFn",
    "EnvFutureBatchFn",
    "EnvFutureMappedBatchFn",
    "EnvMappedBatchFn",
    "FutureBatchFn",
    "FutureMappedBatchFn",
    "MappedBatchFn",
    "ResultOf",
    "SequenceBatchFn",
]

K = TypeVar("K")
V = TypeVar("V")
T_co = TypeVar("T_co", covariant=True)


class ResultOf(Protocol[T_co]):
    """Anything with ``result()``: a ``concurrent.futures.Future`` of ``T_co``, read covariantly."""

    def result(self, timeout: Optional[float] = None) -> T_co: ...


# What a batch function may return for keys of type K: values (or Exception
# instances) in key order, or a mapping from key to value.
Values = Sequence[Union[V, Exception]]
MappedValues = Mapping[K, Union[V, Exception]]

# fn(keys)
SequenceBatchFn = Callable[[List[K]], Values[V]]
MappedBatchFn = Callable[[List[K]], MappedValues[K, V]]
FutureBatchFn = Callable[[List[K]], ResultOf[Values[V]]]
FutureMappedBatchFn = Callable[[List[K]], ResultOf[MappedValues[K, V]]]

# fn(keys, env), with pass_env=True.
EnvBatchFn = Callable[[List[K], BatchLoaderEnvironment], Values[V]]
EnvMappedBatchFn = Callable[[List[K], BatchLoaderEnvironment], MappedValues[K, V]]
EnvFutureBatchFn = Callable[[List[K], BatchLoaderEnvironment], ResultOf[Values[V]]]
EnvFutureMappedBatchFn = Callable[[List[K], BatchLoaderEnvironment], ResultOf[MappedValues[K, V]]]
