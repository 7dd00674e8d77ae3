"""Tests for dataloader_sync._registry (DataLoaderRegistry), after java-dataloader's
DataLoaderRegistryTest."""
from __future__ import annotations

import threading
from typing import Any

import pytest
from conftest import FakeClock

from dataloader_sync import DataLoader, DataLoaderRegistry, Statistics

TIMEOUT = 10.0


def id_loader(name: Any = None, calls: Any = None) -> DataLoader:
    def batch(keys: list[Any]) -> list[Any]:
        if calls is not None:
            calls.append((name, list(keys)))
        return keys

    return DataLoader(batch, name=name)


def test_DataLoaderRegistry_registration_works():
    a, b, c = id_loader("a"), id_loader("b"), id_loader("c")
    registry = DataLoaderRegistry()
    assert registry.register("a", a).register("b", b).register("c", c) is registry
    assert list(registry.values()) == [a, b, c]
    assert list(registry.keys()) == ["a", "b", "c"]
    assert list(registry) == ["a", "b", "c"]
    assert list(registry.items()) == [("a", a), ("b", b), ("c", c)]
    assert len(registry) == 3


def test_DataLoaderRegistry_registering_the_same_name_twice_is_one_entry():
    a, b, c = id_loader("a"), id_loader("b"), id_loader("c")
    registry = DataLoaderRegistry().register("a", a).register("b", b).register("c", c).register("b", b)
    assert list(registry.values()) == [a, b, c]
    b2 = id_loader("b2")
    registry.register("b", b2)  # replaces, keeping the position
    assert list(registry.values()) == [a, b2, c]


def test_DataLoaderRegistry_unregister_is_fluent_and_tolerant():
    a, b, c = id_loader("a"), id_loader("b"), id_loader("c")
    registry = DataLoaderRegistry().register("a", a).register("b", b).register("c", c)
    assert registry.unregister("c") is registry
    assert list(registry.values()) == [a, b]
    assert "c" not in registry
    assert registry.unregister("never registered") is registry


def test_DataLoaderRegistry_lookup_by_name():
    a = id_loader("a")
    registry = DataLoaderRegistry().register("a", a)
    assert registry["a"] is a
    assert registry.get("a") is a
    assert registry.get("missing") is None
    assert registry.get("missing", a) is a
    assert "a" in registry and "missing" not in registry
    with pytest.raises(KeyError):
        registry["missing"]


def test_DataLoaderRegistry_keys_is_a_snapshot():
    registry = DataLoaderRegistry().register("a", id_loader())
    keys = registry.keys()
    registry.register("b", id_loader())
    assert list(keys) == ["a"]
    for name in registry:  # iterating while registering does not fail
        registry.register(name + "x", id_loader())


def test_DataLoaderRegistry_compute_if_absent_creates_a_loader():
    registry = DataLoaderRegistry()
    a = id_loader("a")
    made: list[str] = []
    got = registry.compute_if_absent("a", lambda name: made.append(name) or a)
    assert got is a and registry["a"] is a
    assert made == ["a"]


def test_DataLoaderRegistry_compute_if_absent_returns_an_existing_loader_without_calling_the_factory():
    registry = DataLoaderRegistry()
    a = id_loader("a")
    registry.compute_if_absent("a", lambda name: a)
    calls: list[str] = []
    got = registry.compute_if_absent("a", lambda name: calls.append(name) or id_loader("a2"))
    assert got is a and calls == []
    assert list(registry.values()) == [a]


def test_DataLoaderRegistry_compute_if_absent_race_one_loader_wins():
    registry = DataLoaderRegistry()
    n = 8
    start = threading.Barrier(n, timeout=TIMEOUT)
    got: list[DataLoader] = [None] * n  # type: ignore[list-item]
    made: list[DataLoader] = []
    made_lock = threading.Lock()

    def factory(name: str) -> DataLoader:
        loader = id_loader(name)
        with made_lock:
            made.append(loader)
        return loader

    def worker(i: int) -> None:
        start.wait()
        got[i] = registry.compute_if_absent("shared", factory)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    winner = registry["shared"]
    assert all(g is winner for g in got)
    assert winner in made
    assert len(registry) == 1


def test_DataLoaderRegistry_dispatch_all_visits_loaders_in_registration_order():
    calls: list[Any] = []
    registry = DataLoaderRegistry()
    for name in ("c", "a", "b"):
        registry.register(name, id_loader(name, calls))
    futures = [registry[name].load(name + "1") for name in ("a", "b", "c")]
    assert registry.dispatch_all() is None
    assert [name for name, _ in calls] == ["c", "a", "b"]
    assert [f.result(TIMEOUT) for f in futures] == ["a1", "b1", "c1"]


def test_DataLoaderRegistry_dispatch_all_with_count_and_dispatch_depth():
    registry = DataLoaderRegistry()
    a = id_loader()
    b = id_loader()
    registry.register("a", a).register("b", b)
    a.load("av1")
    a.load("av2")
    b.load("bv1")
    b.load("bv2")
    b.load("bv2")  # cached: not queued twice
    assert registry.dispatch_depth == 4
    assert registry.dispatch_all_with_count() == 4
    assert registry.dispatch_depth == 0
    assert registry.dispatch_all_with_count() == 0


def test_DataLoaderRegistry_dispatch_all_of_an_empty_registry():
    registry = DataLoaderRegistry()
    assert registry.dispatch_all_with_count() == 0
    assert registry.dispatch_depth == 0
    assert registry.statistics() == Statistics()


def test_DataLoaderRegistry_statistics_are_summed():
    registry = DataLoaderRegistry()
    a, b, c = id_loader(), id_loader(), id_loader()
    registry.register("a", a).register("b", b).register("c", c)
    for _ in range(2):
        registry["a"].load("X")
        registry["b"].load("Y")
        registry["c"].load("Z")
        registry.dispatch_all()
    stats = registry.statistics()
    assert stats.load_count == 6
    assert stats.batch_load_count == 3
    assert stats.cache_hit_count == 3
    assert stats.load_error_count == 0
    assert stats.batch_load_exception_count == 0
    assert stats == a.statistics() + b.statistics() + c.statistics()


def test_DataLoaderRegistry_dispatch_all_includes_loaders_registered_by_callbacks_later():
    registry = DataLoaderRegistry()
    a = id_loader("a")
    registry.register("a", a)
    late = id_loader("late")

    def register_and_load(value: int) -> Any:
        registry.register("late", late)
        return late.load(value)

    chained = a.load(1).then(register_and_load)
    registry.dispatch_all()
    assert "late" in registry
    # the load queued by the callback is dispatched now or by the next dispatch_all
    registry.dispatch_all()
    assert registry.dispatch_depth == 0
    assert chained.result(TIMEOUT) == 1


def test_DataLoaderRegistry_repr_counts_loaders():
    registry = DataLoaderRegistry().register("a", id_loader())
    assert "1" in repr(registry)


@pytest.mark.parametrize(
    "call, error, parameter",
    [
        (lambda r: r.register(1, id_loader()), TypeError, "name"),
        (lambda r: r.register("a", lambda keys: keys), TypeError, "loader"),
        (lambda r: r.register("a", None), TypeError, "loader"),
        (lambda r: r.compute_if_absent("a", None), TypeError, "factory"),
        (lambda r: r.compute_if_absent("a", lambda name: "not a loader"), TypeError, "factory"),
        (lambda r: r.compute_if_absent(1, lambda name: id_loader()), TypeError, "name"),
    ],
)
def test_DataLoaderRegistry_rejects_bad_arguments_naming_the_parameter(call, error, parameter):
    registry = DataLoaderRegistry()
    with pytest.raises(error, match=parameter):
        call(registry)
    assert len(registry) == 0


def test_DataLoaderRegistry_close_is_idempotent_and_loaders_keep_working():
    calls = []
    registry = DataLoaderRegistry()
    registry.register("a", DataLoader(lambda keys: calls.append(list(keys)) or keys))
    with registry as entered:
        assert entered is registry and not registry.closed
    assert registry.closed
    registry.close()
    fut = registry["a"].load(1)
    registry.dispatch_all()
    assert fut.result(timeout=5) == 1 and calls == [[1]]


# -- work proportional to work -----------------------------------------------------------


def test_DataLoaderRegistry_dispatch_all_visits_only_loaders_with_queued_keys():
    clock = FakeClock()
    registry = DataLoaderRegistry()
    loaders = [DataLoader(lambda keys: keys, clock=clock) for _ in range(5)]
    for i, loader in enumerate(loaders):
        registry.register(f"l{i}", loader)
    clock.now = 10.0
    fut = loaders[3].load("k")
    assert registry.dispatch_depth == 1
    assert registry.dispatch_all_with_count() == 1
    assert fut.result(TIMEOUT) == "k"
    # a dispatch resets a loader's clock: only the loader that had keys was dispatched
    assert [loader.time_since_dispatch() for loader in loaders] == [10.0, 10.0, 10.0, 0.0, 10.0]


def test_DataLoaderRegistry_dispatch_all_includes_a_chained_load_of_a_loader_registered_later():
    calls: list[Any] = []
    registry = DataLoaderRegistry()
    registry.register("a", id_loader("a", calls)).register("b", id_loader("b", calls))
    chained = registry["a"].load(1).then(registry["b"].load)
    assert registry.dispatch_all_with_count() == 2  # b comes after a: the same walk reaches it
    assert chained.result(TIMEOUT) == 1
    assert calls == [("a", [1]), ("b", [1])]


def test_DataLoaderRegistry_dispatch_all_leaves_a_chained_load_of_a_loader_registered_earlier_to_the_next():
    calls: list[Any] = []
    registry = DataLoaderRegistry()
    registry.register("b", id_loader("b", calls)).register("a", id_loader("a", calls))
    chained = registry["a"].load(1).then(registry["b"].load)
    assert registry.dispatch_all_with_count() == 1  # b was passed already, as in a walk over every loader
    assert registry.dispatch_depth == 1 and not chained.done()
    assert registry.dispatch_all_with_count() == 1
    assert chained.result(TIMEOUT) == 1


def test_DataLoaderRegistry_registering_a_loader_with_queued_keys_dispatches_them():
    loader = id_loader()
    fut = loader.load("early")
    registry = DataLoaderRegistry().register("a", loader)
    assert registry.dispatch_all_with_count() == 1
    assert fut.result(TIMEOUT) == "early"
    other = id_loader()
    fut2 = other.load("made")
    assert registry.compute_if_absent("b", lambda name: other) is other
    assert registry.dispatch_all_with_count() == 1 and fut2.result(TIMEOUT) == "made"


def test_DataLoaderRegistry_an_unregistered_or_replaced_loader_is_not_dispatched():
    registry = DataLoaderRegistry()
    old, new, gone = id_loader(), id_loader(), id_loader()
    registry.register("a", old).register("g", gone)
    old.load(1)
    gone.load(2)
    registry.register("a", new)
    registry.unregister("g")
    assert registry.dispatch_all_with_count() == 0
    assert old.dispatch_depth == 1 and gone.dispatch_depth == 1
    new.load(3)
    assert registry.dispatch_all_with_count() == 1


def test_DataLoaderRegistry_a_loader_registered_twice_is_dispatched_once_per_walk():
    calls: list[Any] = []
    loader = id_loader("x", calls)
    registry = DataLoaderRegistry().register("one", loader).register("two", loader)
    loader.load(1)
    assert registry.dispatch_depth == 1
    assert registry.dispatch_all_with_count() == 1
    assert calls == [("x", [1])]


def test_DataLoaderRegistry_keeps_queued_names_when_a_batch_function_raises_a_BaseException():
    class Stop(BaseException):
        pass

    def stop(keys: list[Any]) -> list[Any]:
        raise Stop()

    registry = DataLoaderRegistry().register("a", DataLoader(stop)).register("b", id_loader())
    registry["a"].load(1)
    fut = registry["b"].load(2)
    with pytest.raises(Stop):
        registry.dispatch_all()
    assert registry.dispatch_depth == 1  # b was not reached, and not forgotten
    assert registry.dispatch_all_with_count() == 1 and fut.result(TIMEOUT) == 2


def test_DataLoaderRegistry_and_its_loaders_are_freed_without_the_cyclic_gc():
    import gc
    import weakref

    gc.disable()
    try:
        registry = DataLoaderRegistry()
        for i in range(3):
            registry.register(f"l{i}", id_loader())
        registry["l0"].load(1)
        registry.dispatch_all()
        registry["l1"].load(2)  # still queued when the request ends
        refs = [weakref.ref(registry)] + [weakref.ref(loader) for loader in registry.values()]
        del registry
        assert [ref() for ref in refs] == [None] * 4
    finally:
        gc.enable()


def test_DataLoader_shared_by_many_registries_keeps_no_trace_of_those_gone():
    import gc

    shared = id_loader()
    for _ in range(50):
        DataLoaderRegistry().register("shared", shared)
    gc.collect()
    DataLoaderRegistry().register("shared", shared)
    assert len(shared._registries) == 2  # one (registry, name) pair, flat


def test_DataLoaderRegistry_dispatch_order_after_unregistering_follows_registration():
    calls: list[Any] = []
    registry = DataLoaderRegistry()
    for name in ("a", "b", "z"):
        registry.register(name, id_loader(name, calls))
    registry.unregister("a")
    registry.register("c", id_loader("c", calls))
    registry.register("a", id_loader("a", calls))
    for name in ("a", "c", "z", "b"):
        registry[name].load(1)
    registry.dispatch_all()
    assert [name for name, _ in calls] == ["b", "z", "c", "a"]


# -- loader families (loader_for) ------------------------------------------------------------------


def test_DataLoaderRegistry_loader_for_makes_one_loader_per_distinct_arguments():
    calls = []

    def load_scaled(keys, factor, *, offset=0):
        calls.append((list(keys), factor, offset))
        return [k * factor + offset for k in keys]

    registry = DataLoaderRegistry()
    double = registry.loader_for(load_scaled, 2)
    assert registry.loader_for(load_scaled, 2) is double
    triple = registry.loader_for(load_scaled, 3)
    shifted = registry.loader_for(load_scaled, 2, offset=1)
    assert len({id(double), id(triple), id(shifted)}) == 3
    assert registry.loader_for(load_scaled, 2, offset=1) is shifted
    futures = [double.load(1), double.load(2), triple.load(1), shifted.load(5)]
    registry.dispatch_all()
    assert [f.result(0) for f in futures] == [2, 4, 3, 11]
    assert sorted(calls) == [([1], 3, 0), ([1, 2], 2, 0), ([5], 2, 1)]  # one batch per family member


def test_DataLoaderRegistry_loader_for_registers_under_a_readable_name():
    def load_scaled(keys, factor, *, offset=0):
        return keys

    registry = DataLoaderRegistry()
    loader = registry.loader_for(load_scaled, 2, offset=1)
    assert loader.name == ("test_DataLoaderRegistry_loader_for_registers_under_a_readable_name.<locals>"
                           ".load_scaled(2, offset=1)")
    assert registry[loader.name] is loader
    loader.load("x")
    registry.dispatch_all()
    assert registry.statistics_by_loader()[loader.name].batch_invoke_count == 1
    assert registry.statistics().load_count == 1


def test_DataLoaderRegistry_loader_for_tells_equal_arguments_of_other_types_apart():
    registry = DataLoaderRegistry()

    def load(keys, arg):
        return [arg] * len(keys)

    loaders = [registry.loader_for(load, a) for a in (1, 1.0, True)]
    assert len({id(x) for x in loaders}) == 3
    assert len({x.name for x in loaders}) == 3  # "load(1)", "load(1.0)", "load(True)"


def test_DataLoaderRegistry_loader_for_a_taken_name_gets_a_number():
    registry = DataLoaderRegistry()

    def load(keys, arg):
        return keys

    other = id_loader()
    label = "test_DataLoaderRegistry_loader_for_a_taken_name_gets_a_number.<locals>.load(1)"
    registry.register(label, other)
    loader = registry.loader_for(load, 1)
    assert loader.name == label + " #2"
    assert registry[label] is other


@pytest.mark.parametrize("call, named", [
    (lambda r, f: r.loader_for(f, [1]), "argument 1 of loader_for is unhashable (list)"),
    (lambda r, f: r.loader_for(f, 1, {}), "argument 2 of loader_for is unhashable (dict)"),
    (lambda r, f: r.loader_for(f, where={"a": 1}), "keyword argument 'where' of loader_for is unhashable (dict)"),
])
def test_DataLoaderRegistry_loader_for_an_unhashable_argument_is_a_TypeError_naming_it(call, named):
    registry = DataLoaderRegistry()
    with pytest.raises(TypeError) as info:
        call(registry, lambda keys, *a, **k: keys)
    assert str(info.value) == named
    assert len(registry) == 0


def test_DataLoaderRegistry_loader_for_rejects_a_batch_fn_that_is_not_callable():
    with pytest.raises(TypeError, match="batch_fn must be callable"):
        DataLoaderRegistry().loader_for("load_users")


def test_DataLoaderRegistry_loader_for_takes_loader_options_from_the_family():
    calls = []

    def load(keys, tag):
        calls.append(list(keys))
        return keys

    load.dataloader_options = {"max_batch_size": 2, "cache": False}
    registry = DataLoaderRegistry()
    loader = registry.loader_for(load, "t")
    futures = [loader.load(k) for k in (1, 2, 3, 1)]
    registry.dispatch_all()
    assert [f.result(0) for f in futures] == [1, 2, 3, 1]
    assert calls == [[1, 2], [3, 1]]  # slices of 2, and no cache: key 1 twice


@pytest.mark.parametrize("options, message", [
    ([("cache", False)], "dataloader_options must be a mapping of DataLoader keyword arguments"),
    ({"name": "x"}, "dataloader_options may not set name"),
    ({"pass_env": True, "batch_load_fn": len}, "dataloader_options may not set batch_load_fn, pass_env"),
])
def test_DataLoaderRegistry_loader_for_rejects_bad_loader_options(options, message):
    def load(keys):
        return keys

    load.dataloader_options = options
    with pytest.raises(TypeError) as info:
        DataLoaderRegistry().loader_for(load)
    assert str(info.value) == message


def test_DataLoaderRegistry_loader_for_name_hook_may_give_the_whole_name():
    def load(keys, relation):
        return list(keys)

    load.dataloader_name = lambda relation: relation
    load.dataloader_name_is_label = True
    registry = DataLoaderRegistry()
    assert registry.loader_for(load, "Author.books").name == "Author.books"
    assert registry.loader_for(load, "Book.tags").name == "Book.tags"
    load.dataloader_name_is_label = "yes"  # only True makes the hook's text the whole name
    assert registry.loader_for(load, "Tag.books").name.endswith(".load(Tag.books)")
    assert sorted(registry.keys())[:2] == ["Author.books", "Book.tags"]


def test_DataLoaderRegistry_loader_for_uses_the_family_key_and_name_hooks():
    class Query:
        """Equal by the text it holds, but deliberately unhashable."""

        __hash__ = None  # type: ignore[assignment]

        def __init__(self, text):
            self.text = text

    seen = []

    def load(keys, query):
        seen.append(query)
        return [f"{query.text}:{k}" for k in keys]

    load.dataloader_key = lambda query: query.text
    load.dataloader_name = lambda query: f"text={query.text}"
    registry = DataLoaderRegistry()
    first, again = Query("a"), Query("a")
    loader = registry.loader_for(load, first)
    assert registry.loader_for(load, again) is loader
    assert registry.loader_for(load, Query("b")) is not loader
    assert loader.name.endswith(".load(text=a)")
    fut = loader.load(1)
    registry.dispatch_all()
    assert fut.result(0) == "a:1"
    assert seen == [first]  # the loader calls with the arguments of its first caller


def test_DataLoaderRegistry_loader_for_forgets_an_unregistered_or_replaced_family_loader():
    registry = DataLoaderRegistry()

    def load(keys):
        return keys

    loader = registry.loader_for(load)
    registry.unregister(loader.name)
    renewed = registry.loader_for(load)
    assert renewed is not loader and registry[renewed.name] is renewed
    registry.register(renewed.name, id_loader())
    assert registry.loader_for(load) is not renewed


def test_DataLoaderRegistry_loader_for_two_threads_at_once_get_one_loader():
    def load(keys, n):
        return keys

    def ask(registry, barrier, got, n):
        # Every thread is past the lookup and about to make a loader when the
        # name hook lets them go: only the registry's lock can keep it at one.
        load.dataloader_name = lambda n: barrier.wait(TIMEOUT) and str(n) or str(n)
        got.append(registry.loader_for(load, n))

    for round_ in range(20):
        registry = DataLoaderRegistry()
        barrier = threading.Barrier(4)
        got = []
        threads = [threading.Thread(target=ask, args=(registry, barrier, got, round_)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert len(got) == 4 and len({id(x) for x in got}) == 1
        assert list(registry.values()) == got[:1]


def test_DataLoaderRegistry_loader_for_loaders_get_the_registry_instrumentation():
    from dataloader_sync import DataLoaderInstrumentation

    names = []

    class Names(DataLoaderInstrumentation):
        def begin_batch(self, loader, keys, environment):
            names.append((loader.name, list(keys)))
            return None

    def load_pages(keys, size):
        return keys

    registry = DataLoaderRegistry(instrumentation=Names())
    registry.loader_for(load_pages, 10).load("p")
    registry.dispatch_all()
    assert names == [(registry.loader_for(load_pages, 10).name, ["p"])]
    assert names[0][0].endswith("load_pages(10)")


def test_DataLoaderRegistry_getitem_of_an_unknown_name_lists_the_registered_names():
    registry = DataLoaderRegistry()
    with pytest.raises(KeyError) as caught:
        registry["authors"]
    assert str(caught.value) == "no loader is registered as 'authors' in this registry; registered: none"
    registry.register("author", DataLoader(lambda keys: keys)).register("book", DataLoader(lambda keys: keys))
    with pytest.raises(KeyError) as caught:
        registry["authors"]
    assert str(caught.value) == (
        "no loader is registered as 'authors' in this registry; registered: 'author', 'book'"
    )
    assert caught.value.args == ("authors",)  # a KeyError like any other for code that catches it


def test_a_misspelt_loader_name_in_a_resolver_shows_the_registered_names_in_the_graphql_error():
    graphene = pytest.importorskip("graphene")
    from dataloader_sync.graphql import DataLoaderExecutionContext

    class Query(graphene.ObjectType):
        name = graphene.String()

        def resolve_name(root, info):
            return info.context["loaders"]["authors"].load(1)

    registry = DataLoaderRegistry().register("author", DataLoader(lambda keys: [str(k) for k in keys]))
    result = graphene.Schema(query=Query).execute("{ name }", context_value={"loaders": registry},
                                                  execution_context_class=DataLoaderExecutionContext)
    assert [error.message for error in result.errors] == [
        "no loader is registered as 'authors' in this registry; registered: 'author'"
    ]


def test_an_unknown_name_in_a_large_registry_lists_twenty_names_and_counts_the_rest():
    registry = DataLoaderRegistry()
    for i in range(25):
        registry.register(f"loader{i:02}", DataLoader(lambda keys: keys))
    with pytest.raises(KeyError) as caught:
        registry["nope"]
    assert str(caught.value).endswith("'loader18', 'loader19' and 5 more")
