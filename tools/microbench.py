"""Microbenchmark of the DataLoader core: what one load, one dispatch, one future cost.

Usage: python tools/microbench.py [--repeat N]

Prints nanoseconds per operation, best of N runs (``timeit`` style: the cyclic
GC is off while timing).  Targets on a development machine: a cached
``load()`` <= 1 us, a queued ``load()`` (a new key: one future) <= 2 us.
This is a report, not a test: performance figures do not belong in assertions.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import gc
import itertools
import platform
import sys
import time
from typing import Callable, List, Tuple

from dataloader_sync import DataLoader, Future

Row = Tuple[str, float, str]


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


def bench_load_many(n: int, repeat: int) -> Tuple[float, float]:
    """(load_many call, load_many + dispatch + result), seconds per key."""
    keys = list(range(n))
    call: List[float] = []
    total: List[float] = []
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


def main(argv: List[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="best of N runs (default 5)")
    args = parser.parse_args(argv)
    repeat = max(1, args.repeat)

    overhead = loop_overhead(200_000, repeat)
    rows: List[Row] = [
        ("cached load()", bench_cached_load(repeat) - overhead, "target <= 1000"),
        ("queued load() (new key, one future)", bench_queued_load(repeat), "target <= 2000"),
        ("dispatch() of 100 keys", bench_dispatch(repeat), "per dispatch"),
        ("concurrent.futures.Future()", bench_future_create(cf.Future, repeat) - overhead, ""),
        ("dataloader_sync.Future()", bench_future_create(Future, repeat) - overhead, ""),
        ("cf.Future set_result+result", bench_future_cycle(cf.Future, repeat) - overhead, "incl. creation"),
        ("Future set_result+result", bench_future_cycle(Future, repeat) - overhead, "incl. creation"),
    ]
    for n in (5_000, 50_000, 500_000):
        call, total = bench_load_many(n, repeat)
        rows.append((f"load_many({n:,} keys) call", call, "per key"))
        rows.append((f"load_many({n:,}) + dispatch + result", total, "per key"))

    print(f"dataloader_sync microbench — Python {platform.python_version()} on {platform.machine()}, "
          f"best of {repeat}, ns per operation")
    width = max(len(name) for name, _, _ in rows)
    print(f"{'operation':<{width}}  {'ns':>10}  note")
    print(f"{'-' * width}  {'-' * 10}  {'-' * 16}")
    for name, seconds, note in rows:
        print(f"{name:<{width}}  {seconds * 1e9:>10,.0f}  {note}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
