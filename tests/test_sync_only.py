"""Async callables refused where the package calls user code on a thread (``_sync_only``).

A ``DataLoader``'s batch function, ``cache_key_fn`` and ``context_provider``,
a family's batch function and a registry factory: an ``async def`` given
there fails at construction with the fix in the message, instead of a
"coroutine" error and a "never awaited" warning at the first dispatch.
"""
from __future__ import annotations

import functools
from typing import Any

import pytest

from dataloader_sync import DataLoader, DataLoaderRegistry
from dataloader_sync._core._sync_only import is_async_callable
from dataloader_sync._request_registry import RequestFactory

FIX = ("write it with def (it runs on a thread: call your async code with asyncio.run() "
       "or asgiref's async_to_sync inside it)")


async def load_users(ids: list[int]) -> list[int]:
    return ids


async def load_stream(ids: list[int]) -> Any:
    yield ids


class AsyncCallable:
    async def __call__(self, ids: list[int]) -> list[int]:
        return ids

    async def method(self, ids: list[int]) -> list[int]:
        return ids


ASYNC = {
    "async def": load_users,
    "async generator": load_stream,
    "partial": functools.partial(load_users),
    "async __call__": AsyncCallable(),
    "async method": AsyncCallable().method,
}


@pytest.mark.parametrize("fn", ASYNC.values(), ids=list(ASYNC))
def test_DataLoader_refuses_an_async_batch_function_at_construction_naming_the_fix(fn: Any) -> None:
    with pytest.raises(TypeError, match="^batch_load_fn must be a sync function, got async ") as caught:
        DataLoader(fn)
    assert str(caught.value).endswith(": " + FIX)
    with pytest.raises(TypeError, match="^batch_load_fn must be a sync function"):
        DataLoader(fn, max_batch_size=10)  # the constructor's other path too


def test_the_message_names_the_function() -> None:
    with pytest.raises(TypeError) as caught:
        DataLoader(load_users)
    assert str(caught.value) == f"batch_load_fn must be a sync function, got async 'load_users': {FIX}"


def test_loader_for_refuses_an_async_family_batch_function() -> None:
    with pytest.raises(TypeError, match="^batch_fn must be a sync function, got async 'load_users': "):
        DataLoaderRegistry().loader_for(load_users, 1)


@pytest.mark.parametrize("parameter", ["cache_key_fn", "context_provider"])
def test_DataLoader_refuses_async_option_callables(parameter: str) -> None:
    message = f"^{parameter} must be a sync function, got async 'load_users': write it with def$"
    with pytest.raises(TypeError, match=message):
        DataLoader(lambda keys: keys, **{parameter: load_users})


def test_a_registry_factory_may_not_be_async() -> None:
    async def make_registry(request: Any) -> DataLoaderRegistry:
        return DataLoaderRegistry()

    with pytest.raises(TypeError, match="^factory must be a sync function, got async '.*make_registry'"):
        RequestFactory(make_registry, "factory")


def test_sync_callables_are_not_async() -> None:
    class Sync:
        def __call__(self, ids: list[int]) -> list[int]:
            return ids

    for fn in (lambda ids: ids, len, Sync(), Sync, functools.partial(lambda ids: ids), DataLoaderRegistry):
        assert not is_async_callable(fn)
        DataLoader(fn) if fn is not DataLoaderRegistry else None


def test_a_sync_wrapper_returning_a_coroutine_fails_its_futures_naming_the_fix() -> None:
    loader = DataLoader(lambda ids: load_users(ids))  # undetectable at construction
    future = loader.load(1)
    loader.dispatch()
    with pytest.raises(Exception, match="got a coroutine: it is async; write it with def") as caught:
        future.result(timeout=5)
    assert FIX.split(" (")[1] in str(caught.value)  # and no "never awaited" warning (filterwarnings=error)
