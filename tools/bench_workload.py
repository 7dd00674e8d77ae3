"""The workload of tools/bench.py: Bench.java of the java-dataloader ticker report, on graphene.

``{ items { f0 … f9 id late children { … } } }`` over ``items`` items and
``depth`` nested levels (each item has 3 children), every request with its own
``loaders`` loaders:

- ``f0``–``f9`` load the item's id through ``loader-0``–``loader-9``;
- ``late`` loads through ``loader-100``, then (chained on that result) through
  ``loader-101`` — a load that only a tick or the execution's own dispatch sees;
- ``children`` loads through ``loader-150``, then maps the id to 3 child ids.

Every batch function returns its keys, so a correct response has ``fN = id``,
``late = id`` and ``children = [10·id, 10·id+1, 10·id+2]`` (``expected_data``).

A *variant* (``Variant``) is one way to serve that query; each builds the same
graphene schema over its own resolvers and runs one request per ``run_one()``.
This module has the variants; tools/bench.py measures them.
"""
from __future__ import annotations

import asyncio
import concurrent.futures as cf
import gc
import inspect
import itertools
import threading
import time
from typing import Any, Callable, Optional

import graphene
import graphql

from dataloader_sync import (
    DISPATCH_ALWAYS,
    DISPATCH_NEVER,
    DataLoader,
    ScheduledDataLoaderRegistry,
    ScheduledExecutor,
    completed_future,
)

FIELDS = 10  # f0..f9, as Bench.java's FIELD_LOADERS
FANOUT = 3  # children per item


# -- the query and its answer ------------------------------------------------------
def query_text(depth: int) -> str:
    scalars = " ".join(f"f{i}" for i in range(FIELDS)) + " id late"
    return scalars if depth == 0 else f"{scalars} children {{ {query_text(depth - 1)} }}"


def expected_data(items: int, depth: int) -> dict[str, Any]:
    def item(i: int, d: int) -> dict[str, Any]:
        obj: dict[str, Any] = {f"f{k}": i for k in range(FIELDS)}
        obj["id"] = obj["late"] = i
        if d:
            obj["children"] = [item(i * 10 + j, d - 1) for j in range(FANOUT)]
        return obj
    return {"items": [item(i, depth) for i in range(items)]}


def item_count(items: int, depth: int) -> int:
    return sum(items * FANOUT ** d for d in range(depth + 1))


def loader_names(loaders: int) -> dict[str, Any]:
    """Names of the loaders; the chained and children loaders move down when there are fewer than 152."""
    if loaders < FIELDS + 3:
        raise ValueError(f"loaders must be >= {FIELDS + 3}")
    return {"all": [f"loader-{i}" for i in range(loaders)], "fields": [f"loader-{i}" for i in range(FIELDS)],
            "late": (f"loader-{min(100, loaders - 3)}", f"loader-{min(101, loaders - 2)}"),
            "children": f"loader-{min(150, loaders - 1)}"}


def build_schema(items: Callable, field: Callable[[int], Callable], id_: Callable, late: Callable,
                 children: Callable) -> graphql.GraphQLSchema:
    """The graphene schema of the workload over the given resolvers."""
    attrs: dict[str, Any] = {f"f{i}": graphene.Int(resolver=field(i)) for i in range(FIELDS)}
    attrs["id"] = graphene.Int(resolver=id_)
    attrs["late"] = graphene.Int(resolver=late)
    item_type: Any = None  # children are Items: the lambda reads it once the type exists
    attrs["children"] = graphene.List(lambda: item_type, resolver=children)
    item_type = type("Item", (graphene.ObjectType,), attrs)
    query = type("Query", (graphene.ObjectType,), {"items": graphene.List(item_type, resolver=items)})
    return graphene.Schema(query=query).graphql_schema


def _children_of(i: int) -> list[int]:
    return [i * 10 + j for j in range(FANOUT)]


# -- simulated I/O -------------------------------------------------------------------
class IO:
    """Batch functions that return their keys after ``ms`` of ``time.sleep`` (which releases the GIL).

    ``inline``: sleep on the thread that dispatches.  Otherwise: on a shared
    ``ThreadPoolExecutor`` (the batch function returns its future).  ``ms == 0``:
    return at once, no pool.  ``calls`` counts batch (or, for n-plus-one, I/O) calls.
    """

    def __init__(self, ms: float, inline: bool, threads: int) -> None:
        self.seconds = ms / 1000.0
        self.inline = inline or ms == 0
        self.pool = None if self.inline else cf.ThreadPoolExecutor(threads, thread_name_prefix="bench-io")
        self._lock = threading.Lock()  # guards calls
        self.calls = 0

    def count(self) -> None:
        with self._lock:
            self.calls += 1

    def wait(self, keys: Any) -> Any:
        time.sleep(self.seconds)
        return keys

    def io(self, keys: Any) -> Any:
        """One counted I/O call, inline."""
        self.count()
        if self.seconds:
            time.sleep(self.seconds)
        return keys

    def batch_fn(self, *, blocking: bool = False) -> Callable[[list[Any]], Any]:
        """A batch function; *blocking* ones return values (a peer that takes no future)."""
        if self.pool is None or blocking:
            return self.io
        count, submit, wait = self.count, self.pool.submit, self.wait

        def batch(keys: list[Any]) -> Any:
            count()
            return submit(wait, keys)
        return batch

    def async_batch_fn(self) -> Callable[[list[Any]], Any]:
        io, count, wait, pool = self.io, self.count, self.wait, self.pool

        async def batch(keys: list[Any]) -> list[Any]:
            if pool is None:
                return io(keys)
            count()
            return await asyncio.wrap_future(pool.submit(wait, keys))
        return batch

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)


# -- variants ------------------------------------------------------------------------
class Variant:
    """One way of serving the workload.  ``run_one()`` is called from many request threads at once."""

    name = ""
    notes: list[str] = []
    scheduler: Optional[ScheduledExecutor] = None  # set by variants that schedule ticks
    scheduler_worker: Optional[int] = None  # the ident of the scheduler's one worker thread

    def __init__(self, w: Workload) -> None:
        self.w = w
        self.notes = []

    def prepare(self, requests: int) -> None:
        """Called once before the first of *requests* requests (warm-up included), outside every measurement."""

    def run_one(self) -> graphql.ExecutionResult:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Context:
    """``info.context``: the request's loaders and how to chain on a load's result."""

    __slots__ = ("loaders", "then")

    def __init__(self, loaders: Any, then: Callable[[Any, Callable], Any]) -> None:
        self.loaders = loaders
        self.then = then


def loader_schema(w: Workload) -> graphql.GraphQLSchema:
    """Resolvers that load through ``info.context.loaders[name].load`` and ``info.context.then``."""
    late_a, late_b = w.names["late"]
    kids = w.names["children"]

    def field(i: int) -> Callable:
        name = w.names["fields"][i]
        return lambda item, info: info.context.loaders[name].load(item)

    def late(item: int, info: Any) -> Any:
        ctx = info.context
        return ctx.then(ctx.loaders[late_a].load(item), lambda v: ctx.loaders[late_b].load(v))

    def children(item: int, info: Any) -> Any:
        ctx = info.context
        return ctx.then(ctx.loaders[kids].load(item), _children_of)

    return build_schema(w.root_items, field, lambda item, info: item, late, children)


class DataLoaderSyncVariant(Variant):
    """This library: a ticker-mode scheduled registry per request, built as DGS builds it, on one shared
    ScheduledExecutor whose tasks run on one worker thread (as Bench.java's single scheduler thread)."""

    registry_class: Any = ScheduledDataLoaderRegistry

    def __init__(self, w: Workload, name: str, registry_class: Any) -> None:
        super().__init__(w)
        from dataloader_sync.graphql import DataLoaderExecutionContext
        self.name = name
        self.registry_class = registry_class
        self.execution_context_class = DataLoaderExecutionContext
        self.worker_pool = cf.ThreadPoolExecutor(1, thread_name_prefix=f"bench-{name}-scheduler")
        self.scheduler_worker = self.worker_pool.submit(threading.get_ident).result()
        self.scheduler = self.shared = ScheduledExecutor(self.worker_pool, name=f"bench-{name}")
        self.schema = loader_schema(w)
        self.batch_fn = w.io.batch_fn()

    def registry(self) -> ScheduledDataLoaderRegistry:
        registry = self.registry_class(scheduled_executor=self.shared, ticker_mode=True, schedule=self.w.tick,
                                       dispatch_predicate=DISPATCH_NEVER)
        batch_fn = self.batch_fn
        for name in self.w.names["all"]:
            registry.register(name, DataLoader(batch_fn, name=name), DISPATCH_ALWAYS)
        return registry

    def run_one(self) -> graphql.ExecutionResult:
        return self.execute(self.registry())

    def execute(self, registry: Any) -> graphql.ExecutionResult:
        """One request with *registry* in its context, closed at the end."""
        try:
            return graphql.execute_sync(self.schema, self.w.document, context_value=Context(registry, _then_future),
                                        execution_context_class=self.execution_context_class)
        finally:
            registry.close()

    def close(self) -> None:
        self.shared.shutdown(wait=True, cancel_futures=True)
        self.worker_pool.shutdown(wait=True, cancel_futures=True)


def _then_future(fut: Any, fn: Callable) -> Any:
    return fut.then(fn)


# -- bounds: what a request costs with parts of the loaders' work taken away --------------
class AllCachedVariant(DataLoaderSyncVariant):
    """single-tick with every key a request loads already settled in its registry's loaders.

    The same registry (built as single-tick builds it), schema and resolvers;
    ``prepare`` builds one registry per request and primes every key each
    loader will be asked for (``prime(key, key)``, the batch functions'
    answer), then collects, so the primed futures sit in the oldest
    generation.  A request takes the next registry, executes and closes it:
    every ``load()`` is a cache hit returning a done future and every
    ``then()`` runs on a done source — no queue, no dispatch, no settle, no
    waiting field, no batch call (the batch-calls column reads 0).  Building
    and priming the registry, and freeing it (the pool is dropped at
    ``close()``), are outside the measured CPU; closing it is inside.
    """

    def __init__(self, w: Workload) -> None:
        super().__init__(w, "all-cached", ScheduledDataLoaderRegistry)
        self.pool: list[ScheduledDataLoaderRegistry] = []
        self._next: Callable[[], int] = itertools.count().__next__

    def primed(self) -> ScheduledDataLoaderRegistry:
        registry = self.registry()
        for name, keys in self.w.keys_by_loader().items():
            loader = registry[name]
            for key in keys:
                loader.prime(key, key)
        return registry

    def prepare(self, requests: int) -> None:
        self.pool = [self.primed() for _ in range(requests)]
        self._next = itertools.count().__next__
        gc.collect()
        self.notes.append(f"{requests} registries primed before the run ({requests * self.w.loads_per_request():,} "
                          "settled futures), kept in the oldest GC generation until the variant ends")

    def run_one(self) -> graphql.ExecutionResult:
        return self.execute(self.pool[self._next()])  # next() of a count is atomic: one registry per request

    def close(self) -> None:
        self.pool = []
        super().close()


class PrimedInRequestVariant(AllCachedVariant):
    """all-cached with the registry built and primed inside each request (in the measured CPU): the
    registry, one ``prime()`` per key (a done future in the cache) and the cyclic GC walking those
    futures while they live, without queueing, dispatching, settling or waiting fields.  ``prime()`` is
    no fast path (it checks the key, its future has a lock of its own), so the CPU is no lower bound;
    the GC's part is: every future a request makes for its keys, alive to its end."""

    def __init__(self, w: Workload) -> None:
        super().__init__(w)
        self.name = "primed-in-request"

    def prepare(self, requests: int) -> None:
        pass

    def run_one(self) -> graphql.ExecutionResult:
        return self.execute(self.primed())


class DoneFuturesVariant(Variant):
    """Resolvers that return an already-done ``dataloader_sync`` future, through DataLoaderExecutionContext.

    One ``completed_future`` per (resolver, item), made once for the whole
    run and shared by every request: no loader, no registry, no lookup, no
    ``then()`` (``late`` returns the item's id, ``children`` its child ids,
    each in a done future).  What handing a future through the execution
    costs at all, beside floor-ours (the same values returned plain).
    """

    def __init__(self, w: Workload) -> None:
        super().__init__(w)
        from dataloader_sync.graphql import DataLoaderExecutionContext
        self.name = "done-futures"
        self.execution_context_class = DataLoaderExecutionContext
        ids = [i for level in w.item_ids() for i in level]
        parents = [i for level in w.item_ids()[:-1] for i in level]

        def done(values: dict[int, Any]) -> Callable:
            futures = {i: completed_future(v) for i, v in values.items()}
            return lambda item, info: futures[item]

        self.schema = build_schema(w.root_items, lambda i: done({i: i for i in ids}), lambda item, info: item,
                                   done({i: i for i in ids}), done({i: _children_of(i) for i in parents}))

    def run_one(self) -> graphql.ExecutionResult:
        return graphql.execute_sync(self.schema, self.w.document, execution_context_class=self.execution_context_class)


class RegistryUnusedVariant(DataLoaderSyncVariant):
    """floor-ours with single-tick's per-request registry built, given as the context and closed, never used:
    the registry's fixed cost per request (200 loaders built and registered, its close, the execution's look
    at the context) beside floor-ours."""

    def __init__(self, w: Workload) -> None:
        super().__init__(w, "registry-unused", ScheduledDataLoaderRegistry)
        self.schema = PlainVariant(w, "floor-ours").schema  # floor-ours' own resolvers


class PlainVariant(Variant):
    """No loaders: ``floor`` returns values at once; ``n-plus-one`` does one I/O per loaded value, inline;
    ``floor-ours`` is ``floor`` run through DataLoaderExecutionContext (the execution's own cost)."""

    execution_context_class: Any = None

    def __init__(self, w: Workload, name: str) -> None:
        super().__init__(w)
        self.name = name
        if name == "floor-ours":
            from dataloader_sync.graphql import DataLoaderExecutionContext
            self.execution_context_class = DataLoaderExecutionContext
        io: Callable[[Any], Any] = (lambda v: v) if name in ("floor", "floor-ours") else w.io.io
        if name == "n-plus-one":
            self.notes.append("one time.sleep per loaded value on the request thread (no batching, no cache)")
        self.schema = build_schema(w.root_items, lambda i: lambda item, info: io(item), lambda item, info: item,
                                   lambda item, info: io(io(item)), lambda item, info: _children_of(io(item)))

    def run_one(self) -> graphql.ExecutionResult:
        if self.execution_context_class is None:
            return graphql.execute_sync(self.schema, self.w.document)
        return graphql.execute_sync(self.schema, self.w.document, execution_context_class=self.execution_context_class)


class SyncDataLoadersVariant(Variant):
    """graphql-sync-dataloaders: SyncDataLoader per loader per request, its DeferredExecutionContext."""

    def __init__(self, w: Workload) -> None:
        super().__init__(w)
        import graphql_sync_dataloaders as gsd
        self.name = "graphql-sync-dataloaders"
        self.gsd = gsd
        self.schema = loader_schema(w)
        self.batch_fn = w.io.batch_fn(blocking=True)
        self.notes.append("SyncFuture has no then(): late/children chained by a minimal adapter (_sync_then)")
        if not w.io.inline:
            self.notes.append("its batch functions must return values: I/O runs inline on the request thread")

    def run_one(self) -> graphql.ExecutionResult:
        loaders = {name: self.gsd.SyncDataLoader(self.batch_fn) for name in self.w.names["all"]}
        return graphql.execute_sync(self.schema, self.w.document, context_value=Context(loaders, self._sync_then),
                                    execution_context_class=self.gsd.DeferredExecutionContext)

    def _sync_then(self, src: Any, fn: Callable) -> Any:
        # A SyncFuture of fn(src's value), flattened.  The execution context only
        # runs the deferred_callback of futures that resolvers return, so the
        # returned future's callback dispatches the source's loader, then the
        # loader of the future fn returned (by then it has queued its key).
        out = self.gsd.SyncFuture()
        inner: list[Any] = []

        def on_src() -> None:
            value = fn(src.result())
            if not isinstance(value, self.gsd.SyncFuture):
                out.set_result(value)
            elif value.done():
                out.set_result(value.result())
            else:
                inner.append(value)
                value.add_done_callback(lambda: out.set_result(value.result()))

        def deferred() -> None:
            if src.deferred_callback:
                src.deferred_callback()
            for fut in inner:
                if fut.deferred_callback:
                    fut.deferred_callback()

        if src.done():
            on_src()
        else:
            src.add_done_callback(on_src)
        out.deferred_callback = deferred
        return out


class AioDataLoaderVariant(Variant):
    """aiodataloader on an asyncio loop per request (graphql-core's async execution)."""

    def __init__(self, w: Workload) -> None:
        super().__init__(w)
        import aiodataloader
        self.name = "aiodataloader"
        self.DataLoader = aiodataloader.DataLoader
        self.schema = loader_schema(w)
        self.batch_fn = w.io.async_batch_fn()
        self.notes.append("asyncio.run() per request; I/O awaited through asyncio.wrap_future on the same pool"
                          if w.io.pool is not None else "asyncio.run() per request")

    def run_one(self) -> graphql.ExecutionResult:
        return asyncio.run(self._run())

    async def _run(self) -> graphql.ExecutionResult:
        loaders = {name: self.DataLoader(self.batch_fn) for name in self.w.names["all"]}
        result = graphql.execute(self.schema, self.w.document, context_value=Context(loaders, _then_async))
        if inspect.isawaitable(result):
            result = await result
        return result  # type: ignore[return-value]


async def _then_async(fut: Any, fn: Callable) -> Any:
    value = fn(await fut)
    if inspect.isawaitable(value):
        value = await value
    return value


class Workload:
    """The settings shared by every variant of one run."""

    def __init__(self, *, items: int, depth: int, loaders: int, io_ms: float, io_inline: bool, io_threads: int,
                 tick_ms: float) -> None:
        self.items, self.depth, self.tick = items, depth, tick_ms / 1000.0
        self.names = loader_names(loaders)
        self.document = graphql.parse(f"{{ items {{ {query_text(depth)} }} }}")
        self.expected = expected_data(items, depth)
        self.io = IO(io_ms, io_inline, io_threads)
        ids = list(range(items))
        self.root_items: Callable = lambda root, info: ids

    def item_ids(self) -> list[list[int]]:
        """The ids of a request's items, level by level (the root items first)."""
        levels = [list(range(self.items))]
        for _ in range(self.depth):
            levels.append([c for i in levels[-1] for c in _children_of(i)])
        return levels

    def keys_by_loader(self) -> dict[str, list[int]]:
        """The keys a request loads, by loader name: every item's id, and the parents' ids for children."""
        levels = self.item_ids()
        ids = [i for level in levels for i in level]
        late_a, late_b = self.names["late"]
        out = dict.fromkeys(self.names["fields"], ids)
        out[late_a] = out[late_b] = ids
        out[self.names["children"]] = [i for level in levels[:-1] for i in level]
        return out

    def loads_per_request(self) -> int:
        """Values a request loads without a cache (what n-plus-one does, one I/O each)."""
        n = item_count(self.items, self.depth)
        return n * (FIELDS + 2) + (n - self.items * FANOUT ** self.depth)


def probe_graphql_sync_dataloaders() -> Optional[str]:
    """None when graphql-sync-dataloaders handles a failing resolver, else what breaks."""
    import graphql_sync_dataloaders as gsd

    def boom(root: Any, info: Any) -> Any:
        raise ValueError("boom")

    schema = build_schema(lambda r, i: [1], lambda i: boom, boom, boom, boom)
    try:
        result = graphql.execute_sync(schema, graphql.parse("{ items { f0 } }"),
                                      execution_context_class=gsd.DeferredExecutionContext)
    except Exception as exc:
        return f"a failing resolver raises {type(exc).__name__}: {exc}"
    return None if result.errors else "a failing resolver gives no error"
