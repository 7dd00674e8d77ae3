"""The one calling convention of registry factories, shared by every helper.

A factory may take the request or nothing; ``DataLoaderRegistry`` and
``ScheduledDataLoaderRegistry`` are factories as they are.  The helpers'
own tests (test_flask, test_django, test_ariadne) show each one applying it.
"""
from __future__ import annotations

import functools
from typing import Any

import pytest

from dataloader_sync import DataLoader, DataLoaderRegistry, ScheduledDataLoaderRegistry
from dataloader_sync._request_registry import RequestFactory

REQUEST = object()


@pytest.mark.parametrize("cls", [DataLoaderRegistry, ScheduledDataLoaderRegistry])
def test_RequestFactory_calls_the_registry_classes_with_nothing(cls: type) -> None:
    make = RequestFactory(cls, "factory")
    assert not make.takes_request
    registry = make(REQUEST)
    assert type(registry) is cls
    registry.close()


def test_RequestFactory_calls_a_partial_of_a_registry_class_with_nothing() -> None:
    make = RequestFactory(functools.partial(ScheduledDataLoaderRegistry, schedule=0.5), "factory")
    registry = make(REQUEST)
    assert isinstance(registry, ScheduledDataLoaderRegistry)
    registry.close()


def test_RequestFactory_passes_the_request_to_a_factory_of_one_argument() -> None:
    seen: list[Any] = []

    def make_registry(request: Any) -> DataLoaderRegistry:
        seen.append(request)
        return DataLoaderRegistry()

    def with_default(request: Any = None) -> DataLoaderRegistry:
        seen.append(request)
        return DataLoaderRegistry()

    class Factory:
        def __call__(self, request: Any) -> DataLoaderRegistry:
            seen.append(request)
            return DataLoaderRegistry()

    for factory in (make_registry, with_default, Factory(), lambda *args: make_registry(*args)):
        assert RequestFactory(factory, "factory").takes_request
        RequestFactory(factory, "factory")(REQUEST)
    assert seen == [REQUEST] * 4


def test_RequestFactory_refuses_a_factory_of_two_arguments_naming_the_convention() -> None:
    def make_registry(request: Any, user: Any) -> DataLoaderRegistry:
        return DataLoaderRegistry()

    with pytest.raises(TypeError, match=r"^registry_factory must take the request or nothing, "
                                        r"e\.g\. def make_registry\(request\): \.\.\. or DataLoaderRegistry "
                                        r"itself; 'test_RequestFactory_refuses.*' takes \(request, user\)"):
        RequestFactory(make_registry, "registry_factory")
    with pytest.raises(TypeError, match="^factory must be callable, got int$"):
        RequestFactory(42, "factory")  # type: ignore[arg-type]


def test_RequestFactory_checks_what_the_factory_returns() -> None:
    with pytest.raises(TypeError, match="the registry factory must return a DataLoaderRegistry, got dict"):
        RequestFactory(lambda: {"not": "a registry"}, "factory")(REQUEST)


@pytest.mark.parametrize("given", [DataLoader, functools.partial(DataLoader, cache=False), dict])
def test_RequestFactory_refuses_a_class_that_is_not_a_registry_class_at_once(given: Any) -> None:
    name = "dict" if given is dict else "DataLoader"
    with pytest.raises(TypeError, match=(
            rf"^factory must make a DataLoaderRegistry, got the class {name}: a registry factory is a registry "
            r"class \(DataLoaderRegistry, ScheduledDataLoaderRegistry\) or a function that returns a new registry, "
            r"e\.g\. def make_registry\(request\): return DataLoaderRegistry\(\)\.register\(\"users\", "
            r"DataLoader\(load_users\)\)$")):
        RequestFactory(given, "factory")


def test_RequestFactory_takes_a_registry_subclass() -> None:
    class Mine(DataLoaderRegistry):
        pass

    registry = RequestFactory(Mine, "factory")(REQUEST)
    assert type(registry) is Mine
