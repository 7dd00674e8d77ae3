"""The shapes of the functions users hand to the package, as types.

``DataLoader(batch_load_fn)`` takes its key and value types from the batch
function, the way typeshed's ``Executor.submit(fn) -> Future[T]`` takes its
result type from ``fn``: a typed user writes ``users = DataLoader(load_users)``
and gets a ``DataLoader[int, User]`` without an annotation.  The aliases below
name each shape of batch function the loader accepts; ``DataLoader.__init__``
has one overload per shape.

Guarantees:
- Only the standard library ``typing`` module is used; nothing here runs at
  import beyond building the aliases, and nothing of the package is imported
  at run time (``_future`` imports this module).
- A batch function receives a ``list`` of keys (its own copy), so
  ``(keys: List[int])``, ``(keys: Sequence[int])`` and
  ``(keys: Iterable[int])`` all fit and give ``K = int``.
- ``Exception`` instances may stand in for values (they fail that key only),
  so ``Sequence[Union[V, Exception]]`` is accepted and gives the value type
  ``V``.  A mapped loader gives ``None`` for a missing key: its value type is
  ``Optional[V]``.
- ``P`` is the parameter list of a task function, so that
  ``ScheduledExecutor.schedule(fn, delay, *args)`` checks ``args`` against
  ``fn`` as typeshed's ``Executor.submit`` does.
- A future of a result is anything with ``result()`` returning it
  (``ResultOf``): ``concurrent.futures.Future`` is invariant in its type, so a
  ``Future[List[User]]`` would not match ``Future[Sequence[User]]``.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Callable,
    Optional,
    Protocol,
    TypeVar,
    Union,
)

if TYPE_CHECKING:  # _batch_shapes imports _future, which imports this module
    from ._batch_shapes import BatchLoaderEnvironment

__all__ = [
    "EnvBatchFn",
    "EnvFutureBatchFn",
    "EnvFutureMappedBatchFn",
    "EnvMappedBatchFn",
    "FutureBatchFn",
    "FutureMappedBatchFn",
    "MappedBatchFn",
    "P",
    "ResultOf",
    "SequenceBatchFn",
]

K = TypeVar("K")
V = TypeVar("V")
T_co = TypeVar("T_co", covariant=True)

# The parameters of a task function, as typeshed's Executor.submit(fn, *args)
# types them.  Python 3.9's typing has no ParamSpec: there, only type checkers
# see one (from typing_extensions, which they bundle); the core imports only
# the standard library at run time.
if sys.version_info >= (3, 10):
    from typing import ParamSpec

    P = ParamSpec("P")
elif TYPE_CHECKING:
    from typing_extensions import ParamSpec

    P = ParamSpec("P")
else:  # pragma: no cover - Python 3.9 at run time: annotations are never evaluated
    P = TypeVar("P")


class ResultOf(Protocol[T_co]):
    """Anything with ``result()``: a ``concurrent.futures.Future`` of ``T_co``, read covariantly."""

    def result(self, timeout: Optional[float] = None) -> T_co: ...


# What a batch function may return for keys of type K: values (or Exception
# instances) in key order, or a mapping from key to value.
Values = Sequence[Union[V, Exception]]
MappedValues = Mapping[K, Union[V, Exception]]

# fn(keys)
SequenceBatchFn = Callable[[list[K]], Values[V]]
MappedBatchFn = Callable[[list[K]], MappedValues[K, V]]
FutureBatchFn = Callable[[list[K]], ResultOf[Values[V]]]
FutureMappedBatchFn = Callable[[list[K]], ResultOf[MappedValues[K, V]]]

# fn(keys, env), with pass_env=True.
EnvBatchFn = Callable[[list[K], "BatchLoaderEnvironment"], Values[V]]
EnvMappedBatchFn = Callable[[list[K], "BatchLoaderEnvironment"], MappedValues[K, V]]
EnvFutureBatchFn = Callable[[list[K], "BatchLoaderEnvironment"], ResultOf[Values[V]]]
EnvFutureMappedBatchFn = Callable[[list[K], "BatchLoaderEnvironment"], ResultOf[MappedValues[K, V]]]
