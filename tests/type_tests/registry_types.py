"""Registries take any typed loader; predicates compose; a worker's target is checked."""
from __future__ import annotations

from typing import Any

from typing_extensions import assert_type

from dataloader_sync import (
    DISPATCH_ALWAYS,
    DataLoader,
    DataLoaderRegistry,
    DispatchPredicate,
    RestartableWorker,
    ScheduledDataLoaderRegistry,
    WorkerState,
    dispatch_if_depth_greater_than,
    dispatch_if_longer_than,
)


def load_names(ids: list[int]) -> list[str]:
    return [str(i) for i in ids]


names = DataLoader(load_names)
registry = ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.015)
assert_type(registry.register("names", names, DISPATCH_ALWAYS), ScheduledDataLoaderRegistry)
assert_type(DataLoaderRegistry().register("names", names), DataLoaderRegistry)
assert_type(registry["names"], DataLoader[Any, Any])  # by name: the types are the caller's to know
assert_type(registry.dispatch_all_with_count(), int)

either = dispatch_if_depth_greater_than(10) | dispatch_if_longer_than(0.05)
assert_type(either, DispatchPredicate)
assert_type(~either & DISPATCH_ALWAYS, DispatchPredicate)
registry.register("custom", names, lambda name, loader: loader.dispatch_depth > 3)
registry.close()


def unit() -> None:
    worker.wait(0.1)


worker = RestartableWorker(unit, name="typed", max_restarts=3, restart_window=60)
assert_type(worker.state, WorkerState)
assert_type(worker.stop(timeout=1.0), bool)
RestartableWorker(lambda x: x)  # type: ignore[arg-type, misc]


def load_scaled(ids: list[int], factor: int, *, suffix: str = "") -> list[str]:
    return [f"{i * factor}{suffix}" for i in ids]


# A loader family: the key and value types come from the batch function, and
# the arguments follow its parameters after the keys.
scaled = DataLoaderRegistry().loader_for(load_scaled, 2, suffix="!")
assert_type(scaled, DataLoader[int, str])
