"""Per-operation costs for tools/bench.py ``--micro`` and their shape for ``--scaling``.

``micro()``: ns per ``load()`` (cached, queued), per ``dispatch()`` of 100 keys,
per tick of an idle 200-loader registry, per request for building
and closing that registry (the fixed cost of a request), per one-key batch with and without
the OpenTelemetry instrumentations (when opentelemetry-sdk is installed), beside graphql-sync-dataloaders'
``SyncDataLoader`` (when installed) and a bare ``concurrent.futures.Future``
lifecycle, in the same run.  Each figure is the best of 5 repeats with the
cyclic GC off (``timeit``'s way); the peer's are measured the same way.
These are reports, not tests: performance figures do not belong in assertions.

``scaling()``: ``load_many`` of 5k / 50k / 500k keys (GC on and off), one
``load()`` + ``result()`` and one queued ``load()`` with 5k / 50k / 500k keys pending (their cost
must not grow with the pending keys, the efficiency defect of graphql-ruby's
``Dataloader::Source#sync`` that this library avoids),
and the executor case: a level of k loaders with t ms of I/O each costs ≈ t
with ``DataLoader(executor=pool)``, k·t without.
"""
from __future__ import annotations

import concurrent.futures as cf
import gc
import itertools
import time
from typing import Any, Callable

from dataloader_sync import (
    DISPATCH_ALWAYS,
    DISPATCH_NEVER,
    DataLoader,
    DataLoaderRegistry,
    Future,
    ScheduledDataLoaderRegistry,
    ScheduledExecutor,
)

_now = time.perf_counter_ns
REPEAT = 5


# -- measuring: best of N, cyclic GC off; each case returns seconds per operation ---------------
def best_of(repeat: int, run: Callable[[], float]) -> float:
    """The smallest of *repeat* results of *run* (which returns seconds per op)."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        return min(run() for _ in range(repeat))
    finally:
        if enabled:
            gc.enable()


def per_op(fn: Callable[[], object], number: int) -> Callable[[], float]:
    def run() -> float:
        t0 = time.perf_counter()
        for _ in itertools.repeat(None, number):
            fn()
        return (time.perf_counter() - t0) / number

    return run


def loop_overhead(number: int, repeat: int) -> float:
    return best_of(repeat, per_op(lambda: None, number))


def bench_cached_load(repeat: int) -> float:
    loader = DataLoader(lambda keys: keys)
    loader.load(1)
    loader.dispatch()
    load = loader.load
    return best_of(repeat, per_op(lambda: load(1), 200_000))


def bench_queued_load(repeat: int) -> float:
    number = 100_000

    def run() -> float:
        loader = DataLoader(lambda keys: keys)
        load = loader.load
        keys = range(number)
        t0 = time.perf_counter()
        for k in keys:
            load(k)
        return (time.perf_counter() - t0) / number

    return best_of(repeat, run)


def bench_dispatch(repeat: int, n_keys: int = 100, rounds: int = 500) -> float:
    loader = DataLoader(lambda keys: keys, cache=False)
    keys = list(range(n_keys))

    def run() -> float:
        total = 0.0
        for _ in range(rounds):
            loader.load_many(keys)
            t0 = time.perf_counter()
            loader.dispatch()
            total += time.perf_counter() - t0
        return total / rounds

    return best_of(repeat, run)


def bench_future_create(cls: type, repeat: int) -> float:
    return best_of(repeat, per_op(cls, 200_000))


def bench_future_cycle(cls: type, repeat: int) -> float:
    def cycle() -> object:
        fut = cls()
        fut.set_result(1)
        return fut.result()

    return best_of(repeat, per_op(cycle, 200_000))


def bench_load_many(n: int, repeat: int) -> tuple[float, float]:
    """(load_many call, load_many + dispatch + result), seconds per key."""
    keys = list(range(n))
    call: list[float] = []
    total: list[float] = []
    runs = max(1, min(repeat, 3 if n >= 500_000 else repeat))
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            loader = DataLoader(lambda ks: ks)
            t0 = time.perf_counter()
            fut = loader.load_many(keys)
            t1 = time.perf_counter()
            loader.dispatch()
            values = fut.result()
            t2 = time.perf_counter()
            assert len(values) == n
            call.append((t1 - t0) / n)
            total.append((t2 - t0) / n)
            del loader, fut, values
            gc.collect()
    finally:
        gc.enable()
    return min(call), min(total)


def _echo(keys: list[Any]) -> list[Any]:
    return keys


def _timed(case: Callable[[], float]) -> float:
    """ns per operation: the best of REPEAT runs of *case* (seconds per op), cyclic GC off."""
    return best_of(REPEAT, case) * 1e9


# -- more cases ------------------------------------------------------------------------------------
def _dispatch_100(make: Callable[[], Any], dispatch: str) -> float:
    """Seconds per ``loader.<dispatch>()`` of 100 keys queued by ``load()``, on fresh loaders."""
    total = 0.0
    for _ in range(200):
        loader = make()
        for k in range(100):
            loader.load(k)
        t = time.perf_counter()
        getattr(loader, dispatch)()
        total += time.perf_counter() - t
    return total / 200


def _dispatch_count_100() -> float:
    """``dispatch_count()`` of 100 keys queued by ``load()`` (no gather callbacks, as SyncDataLoader's)."""
    return _dispatch_100(lambda: DataLoader(_echo), "dispatch_count")


def _chained_100(flatten: bool) -> float:
    """Seconds per key of ``load(k).then(fn)`` for 100 keys, their dispatch and the chains' settling.

    With *flatten*, ``fn`` returns a cached load of a second loader (the
    chain's second stage: the "late" load of tools/bench_workload.py).
    """
    total = 0.0
    other = DataLoader(_echo)
    other.load(0)
    other.dispatch()
    step = (lambda v: other.load(0)) if flatten else (lambda v: v)
    for _ in range(200):
        loader = DataLoader(_echo)
        load = loader.load
        t = time.perf_counter()
        for k in range(100):
            load(k).then(step)
        loader.dispatch_count()
        total += time.perf_counter() - t
    return total / 200 / 100


def _dgs_registry(executor: ScheduledExecutor, loaders: int = 200) -> ScheduledDataLoaderRegistry:
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=3600,
                                           dispatch_predicate=DISPATCH_NEVER)
    for i in range(loaders):
        registry.register(f"loader-{i}", DataLoader(_echo, name=f"loader-{i}"), DISPATCH_ALWAYS)
    return registry


def _registry_per_request() -> float:
    """Seconds to build the Bench shape's per-request registry (200 ``DataLoader()`` + ``register``) and close it."""
    executor = ScheduledExecutor(name="bench-micro")
    try:
        total = 0.0
        for _ in range(20):
            t = time.perf_counter()
            _dgs_registry(executor).close()
            total += time.perf_counter() - t
        return total / 20
    finally:
        executor.shutdown(cancel_futures=True)


def _idle_tick(path: str) -> Callable[[], float]:
    """``dispatch_all_with_count()`` of an idle 200-loader registry, or its ``_tick`` (which also re-arms)."""
    def case() -> float:
        executor = ScheduledExecutor(name="bench-micro")
        try:
            registry = _dgs_registry(executor)
            registry.dispatch_all()
            call = registry.dispatch_all_with_count if path == "dispatch_all" else registry._tick
            t = time.perf_counter()
            for _ in range(200):
                call()
            elapsed = time.perf_counter() - t
            registry.close()
            return elapsed / 200
        finally:
            executor.shutdown(cancel_futures=True)
    return case


def _gsd_cases(overhead: float) -> list[Any]:
    """``(name, seconds per op)`` for graphql-sync-dataloaders' SyncDataLoader, measured as ours."""
    try:
        from graphql_sync_dataloaders import SyncDataLoader
    except ImportError:
        return []
    cached_loader = SyncDataLoader(_echo)
    cached_loader.load(1)
    cached_loader.dispatch_queue()
    load = cached_loader.load

    def queued() -> float:
        loader = SyncDataLoader(_echo)
        load = loader.load
        t = time.perf_counter()
        for k in range(100_000):
            load(k)
        return (time.perf_counter() - t) / 100_000

    def dispatch() -> float:
        return _dispatch_100(lambda: SyncDataLoader(_echo), "dispatch_queue")

    return [("SyncDataLoader.load, cached", _timed(per_op(lambda: load(1), 200_000)) - overhead),
            ("SyncDataLoader.load, queued", _timed(queued)),
            ("SyncDataLoader.dispatch_queue, 100 keys", _timed(dispatch))]


def _batch_1(instrumentation: Any) -> Callable[[], float]:
    """Seconds per ``dispatch()`` of one key queued by ``load()``: the per-batch cost of *instrumentation*."""
    def case() -> float:
        loader = DataLoader(_echo, name="bench", cache=False, instrumentation=instrumentation)
        load, dispatch = loader.load, loader.dispatch
        total = 0.0
        for k in range(2000):
            load(k)
            t = time.perf_counter()
            dispatch()
            total += time.perf_counter() - t
        return total / 2000
    return case


def _otel_cases() -> list[Any]:
    """``(name, ns)`` of a one-key batch without and with the OpenTelemetry instrumentations (real SDK)."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider

        from dataloader_sync import ChainedInstrumentation
        from dataloader_sync.otel import OpenTelemetryInstrumentation, OpenTelemetryMetrics
    except ImportError:
        return []
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    tracers = TracerProvider()  # no span processor: spans are made and dropped
    metrics = OpenTelemetryMetrics(meter_provider=meters)
    both = ChainedInstrumentation([OpenTelemetryInstrumentation(tracer_provider=tracers), metrics])
    try:
        return [("batch of 1 key: dispatch, no instrumentation", _timed(_batch_1(None))),
                ("batch of 1 key: dispatch with OpenTelemetryMetrics", _timed(_batch_1(metrics))),
                ("batch of 1 key: dispatch with spans + OpenTelemetryMetrics", _timed(_batch_1(both)))]
    finally:
        meters.shutdown()
        tracers.shutdown()


def micro(quick: bool = False) -> dict[str, float]:
    """Print and return ns per operation (the DataLoader's beside the peer's and the registry's)."""
    overhead = loop_overhead(200_000, REPEAT) * 1e9
    rows = [
        ("DataLoader.load, cached", bench_cached_load(REPEAT) * 1e9 - overhead),
        ("DataLoader.load, queued", bench_queued_load(REPEAT) * 1e9),
        ("DataLoader.dispatch, 100 keys queued by load_many", bench_dispatch(REPEAT) * 1e9),
        ("DataLoader.dispatch_count, 100 keys queued by load()", _timed(_dispatch_count_100)),
        ("DataLoader.load(k).then(fn) + dispatch, per key of 100", _timed(lambda: _chained_100(False))),
        ("... fn returning a cached load (flattened), per key of 100", _timed(lambda: _chained_100(True))),
    ]
    gsd = _gsd_cases(overhead)
    rows += gsd
    rows += [
        ("registry dispatch_all_with_count, 200 idle loaders", _timed(_idle_tick("dispatch_all"))),
        ("registry _tick (re-arm + 200 idle loaders)", _timed(_idle_tick("tick"))),
        ("registry per request: 200 DataLoader() + register + close", _timed(_registry_per_request)),
        ("dataloader_sync.Future: create, set_result, result", bench_future_cycle(Future, REPEAT) * 1e9 - overhead),
        ("concurrent.futures.Future: create, set_result, result",
         bench_future_cycle(cf.Future, REPEAT) * 1e9 - overhead),
    ]
    otel = _otel_cases()
    rows += otel
    print(f"\nmicro: ns per operation, best of {REPEAT}, cyclic GC off"
          + ("" if gsd else "; graphql-sync-dataloaders not installed")
          + ("" if otel else "; opentelemetry-sdk not installed"))
    for name, ns in rows:
        print(f"  {name:<66} {ns:>10,.0f}", flush=True)
    return dict(rows)


# -- scaling ----------------------------------------------------------------------------------
def _load_many_gc_on(n: int) -> float:
    """ns per key of ``load_many`` + ``dispatch`` + ``result`` with the cyclic GC on (as in a server)."""
    keys = list(range(n))
    loader = DataLoader(_echo)
    gc.collect()
    t = _now()
    fut = loader.load_many(keys)
    loader.dispatch()
    fut.result()
    return (_now() - t) / n


def _with_pending(pending: int, m: int = 5000) -> dict[str, float]:
    """ns of one cached load()+result() and of one queued load(), *pending* keys queued (best of 5, GC off)."""
    loader = DataLoader(_echo)
    for k in range(pending):
        loader.load(k)
    loader.prime("hit", 1)
    load = loader.load
    cached, queued = [], []
    gc.collect()
    gc.disable()  # what grows with the heap is the cyclic GC's work, not the load (see load_many above)
    for r in range(5):
        t = _now()
        for _ in range(m):
            load("hit").result()
        cached.append((_now() - t) / m)
        t = _now()
        for i in range(m):
            load((r, i))
        queued.append((_now() - t) / m)
    gc.enable()
    del loader
    return {"cached load()+result()": min(cached), "queued load()": min(queued)}


def _result_in_order(sizes: tuple[int, ...], chained: bool, repeat: int = 5) -> dict[int, float]:
    """ms to call ``result()`` on each of n loads nobody dispatched, in order (GC on, best of *repeat*).

    The first call dispatches the loader (sync on demand: one batch of n
    keys); every later call must be O(1) in the keys still pending
    (graphql-ruby's ``Source#sync`` was not).  *chained*: each future is
    ``a.load(k).then(b.load)``, so the chain dispatches b when it gets there.
    The sizes are measured in turn within each repeat, so a busy machine
    weighs on all of them alike.
    """
    best = {n: float("inf") for n in sizes}
    for _ in range(repeat):
        for n in sizes:
            a, b = DataLoader(_echo), DataLoader(_echo)
            futures = [a.load(k).then(b.load) for k in range(n)] if chained else [a.load(k) for k in range(n)]
            gc.collect()
            t = time.thread_time_ns()  # this thread's CPU: other processes on a busy machine do not count
            for f in futures:
                f.result()
            best[n] = min(best[n], (time.thread_time_ns() - t) / 1e6)
            del a, b, futures
    return best


def executor_case(k: int, ms: float) -> dict[str, float]:
    """Wall ms to dispatch a level of *k* loaders with *ms* of I/O each, with and without an executor."""
    def io(keys: list[Any]) -> list[Any]:
        time.sleep(ms / 1000.0)
        return keys

    out: dict[str, float] = {}
    with cf.ThreadPoolExecutor(k, thread_name_prefix="bench-executor-case") as pool:
        list(pool.map(lambda _: None, range(k)))  # start the threads outside the timing
        for label, executor in (("with executor", pool), ("inline", None)):
            registry = DataLoaderRegistry()
            futures = []
            for i in range(k):
                registry.register(f"l{i}", DataLoader(io, executor=executor))
                futures.append(registry[f"l{i}"].load(i))
            t = _now()
            registry.dispatch_all()
            for f in futures:
                f.result()
            out[label] = (_now() - t) / 1e6
    return out


def scaling(quick: bool = False) -> dict[str, Any]:
    """Print and return how costs grow with keys (they should not, per key)."""
    sizes = (5_000, 50_000, 500_000)
    print("\nscaling: load_many(n keys) + dispatch + result, ns per key (cyclic GC on / off)")
    many = {n: (_load_many_gc_on(n), bench_load_many(n, 1 if quick else 3)[1] * 1e9) for n in sizes}
    for n in sizes:
        on, off = many[n]
        print(f"  {n:>9,} keys  {on:>8,.0f} / {off:>8,.0f} ns/key  "
              f"({on / many[sizes[0]][0]:.2f}× / {off / many[sizes[0]][1]:.2f}× the 5k figure)")
    print("scaling: one operation with n keys pending, GC off (must not grow with n)")
    pending = (5_000, 50_000, 500_000)
    pend = {n: _with_pending(n) for n in pending}
    for op in ("cached load()+result()", "queued load()"):
        cells = "   ".join(f"{n // 1000}k pending {pend[n][op]:>6,.0f} ns" for n in pending)
        print(f"  {op:<24} {cells}   ratio 500k/5k {pend[pending[-1]][op] / pend[pending[0]][op]:.2f}")
    print("scaling: result() on each of n loads nobody dispatched, in order; the first dispatches"
          " (GC on, thread CPU ms)")
    in_order = {}
    for label, chained in (("load(k)", False), ("load(k).then(b.load)", True)):
        timed = _result_in_order((5_000, 50_000), chained, 3 if quick else 5)
        small, large = timed[5_000], timed[50_000]
        in_order[label] = {"5000_ms": small, "50000_ms": large, "ratio": large / small}
        print(f"  {label:<24} 5k {small:>8.2f} ms   50k {large:>8.2f} ms   ratio {large / small:.1f}× "
              f"(target ≤ ~12×: O(1) per call)")
    k, ms = 10, (10.0 if quick else 20.0)
    ex = executor_case(k, ms)
    print(f"executor case: a level of {k} loaders × {ms:g} ms I/O: {ex['with executor']:.1f} ms with "
          f"DataLoader(executor=pool) (≈ t = {ms:g}), {ex['inline']:.1f} ms inline (≈ k·t = {k * ms:g})")
    return {"load_many_ns_per_key": {str(n): {"gc_on": on, "gc_off": off} for n, (on, off) in many.items()},
            "with_pending_ns": {str(n): v for n, v in pend.items()},
            "result_in_order": in_order,
            "executor_case": {"loaders": k, "io_ms": ms, **{f"{lbl}_ms": v for lbl, v in ex.items()}}}
