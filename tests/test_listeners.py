"""Tests for dataloader_sync._core._listeners and the registry's seam for executions (holds, wake_tickers)."""
from __future__ import annotations

import pytest

from dataloader_sync import DataLoader, DataLoaderRegistry, ScheduledDataLoaderRegistry, ScheduledExecutor
from dataloader_sync._core._dispatch_scope import using_scope
from dataloader_sync._core._listeners import left_to_execution
from dataloader_sync._registry import holds, wake_tickers

WAIT = 10.0
FAR = 3600.0  # a schedule so long that no tick fires during a test


class Execution:
    """A dispatch scope as a GraphQL execution at work is one."""

    def __init__(self) -> None:
        self.dispatches_itself = True
        self.told: list[DataLoader] = []

    def loader_queued(self, loader: DataLoader) -> None:
        self.told.append(loader)


@pytest.fixture
def executor():
    ex = ScheduledExecutor(name="test-listeners")
    yield ex
    ex.shutdown(wait=True, cancel_futures=True)


def id_loader() -> DataLoader:
    return DataLoader(lambda keys: list(keys))


def fire(registry: ScheduledDataLoaderRegistry) -> None:
    """What the timer does when the pending tick is due."""
    registry._pending.tick.cancel()
    registry._tick()


def test_holds_is_true_for_a_registered_loader_until_it_is_unregistered():
    loader = id_loader()
    mine, other = DataLoaderRegistry(), DataLoaderRegistry()
    mine.register("a", loader).register("b", loader)
    assert holds(mine, loader) and not holds(other, loader)
    mine.unregister("a")
    assert holds(mine, loader)  # still registered under "b"
    mine.unregister("b")
    assert not holds(mine, loader)


def test_left_to_execution_while_only_an_executions_keys_are_queued():
    loader = id_loader()
    scope = Execution()
    assert not left_to_execution(loader)  # nothing queued
    with using_scope(scope):
        loader.load(1)
        loader.load(2)
    assert left_to_execution(loader) and scope.told == [loader]  # told once per queue
    scope.dispatches_itself = False  # the execution waits: a tick may take the keys
    assert not left_to_execution(loader)
    scope.dispatches_itself = True
    loader.load(3)  # outside any scope: the queue is a mix, never left to the execution
    assert not left_to_execution(loader)
    assert loader.dispatch().result(timeout=WAIT) == [1, 2, 3]
    with using_scope(scope):
        loader.load(4)
    assert left_to_execution(loader) and scope.told == [loader, loader]  # a new queue: told again


def test_wake_tickers_wakes_every_sleeping_ticker_holding_a_loader_with_keys(executor):
    held = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR, ticker_mode=True)
    loader, idle = id_loader(), id_loader()
    held.register("loader", loader).register("idle", idle)
    held.dispatch_all()  # starts the ticker
    scope = Execution()
    with using_scope(scope):
        fut = loader.load(1)
    fire(held)
    assert executor.pending_count == 0  # asleep: every queued key is the execution's
    scope.dispatches_itself = False  # the execution ended
    wake_tickers(None, [idle])  # a loader without keys wakes nobody
    assert executor.pending_count == 0
    wake_tickers(None, [loader])  # the execution's context had no registry: the loader's are woken
    assert executor.pending_count == 1
    fire(held)
    assert fut.result(timeout=WAIT) == 1
    held.close()


def test_wake_tickers_wakes_the_executions_registry(executor):
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR, ticker_mode=True)
    registry.register("loader", id_loader())
    registry.dispatch_all()
    with using_scope(Execution()):
        registry["loader"].load(1)
    fire(registry)
    assert executor.pending_count == 0
    wake_tickers(registry, [])
    assert executor.pending_count == 1
    registry.close()
