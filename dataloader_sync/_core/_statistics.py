"""Frozen statistics snapshots of a DataLoader (or a sum of them)."""
from __future__ import annotations

import dataclasses
from typing import Union


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


@dataclasses.dataclass(frozen=True)
class Statistics:
    """What a loader has done, as of the ``statistics()`` call that made it.

    Attributes:
        load_count: ``load()`` calls (each key of ``load_many`` counts once).
        load_error_count: loads whose future failed (a per-key error, or a
            failed batch).
        batch_invoke_count: calls of the batch function.
        batch_load_count: keys passed to the batch function, over all calls.
        batch_load_exception_count: batch calls that failed as a whole (the
            function raised, returned a failed future or a wrong result).
        cache_hit_count: loads answered from the cache.
        value_cache_hit_count: dispatched keys answered by the loader's
            ``value_cache`` (they never reach the batch function).
        value_cache_miss_count: dispatched keys looked up in the value cache
            and not found there (or the value cache failed).

    Ratios (``0.0`` when nothing was loaded): ``load_error_ratio``,
    ``batch_load_ratio``, ``batch_load_exception_ratio``, ``cache_hit_ratio``;
    ``value_cache_hit_ratio`` is hits over value-cache lookups;
    ``cache_miss_count`` is ``load_count - cache_hit_count``.  Statistics add
    up with ``+`` (a registry sums its loaders').  New fields are added at the
    end with a default, so positional construction keeps working.
    """

    load_count: int = 0
    load_error_count: int = 0
    batch_invoke_count: int = 0
    batch_load_count: int = 0
    batch_load_exception_count: int = 0
    cache_hit_count: int = 0
    value_cache_hit_count: int = 0
    value_cache_miss_count: int = 0

    @property
    def cache_miss_count(self) -> int:
        return self.load_count - self.cache_hit_count

    @property
    def load_error_ratio(self) -> float:
        return _ratio(self.load_error_count, self.load_count)

    @property
    def batch_load_ratio(self) -> float:
        return _ratio(self.batch_load_count, self.load_count)

    @property
    def batch_load_exception_ratio(self) -> float:
        return _ratio(self.batch_load_exception_count, self.load_count)

    @property
    def cache_hit_ratio(self) -> float:
        return _ratio(self.cache_hit_count, self.load_count)

    @property
    def value_cache_hit_ratio(self) -> float:
        return _ratio(self.value_cache_hit_count, self.value_cache_hit_count + self.value_cache_miss_count)

    def __add__(self, other: Statistics) -> Statistics:
        if not isinstance(other, Statistics):
            return NotImplemented
        return Statistics(
            *(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other)))
        )

    def __radd__(self, other: object) -> Statistics:
        if other == 0:  # so that sum(stats) works
            return self
        return NotImplemented

    def to_dict(self) -> dict[str, Union[int, float]]:
        """The counts and the ratios, by name."""
        d: dict[str, Union[int, float]] = dict(dataclasses.asdict(self))
        d.update(
            cache_miss_count=self.cache_miss_count,
            load_error_ratio=self.load_error_ratio,
            batch_load_ratio=self.batch_load_ratio,
            batch_load_exception_ratio=self.batch_load_exception_ratio,
            cache_hit_ratio=self.cache_hit_ratio,
            value_cache_hit_ratio=self.value_cache_hit_ratio,
        )
        return d
