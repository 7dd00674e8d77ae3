"""Where the CPU of a loaded field goes: the bench's workload profiled with the GC off, split into parts.

    python tools/bench_parts.py [--requests 20] [--variants single-tick floor-ours]

For each variant (as ``tools/bench.py`` builds it): the request thread's CPU
per load with the cyclic GC disabled (the least of ``--rounds`` runs of
``--requests`` requests, no profiler), then one more run under ``cProfile``
whose own time per function is summed by part (``part_of``) and scaled to
that CPU: read the shares, not the second digit (the profiler weighs parts
made of many small calls a little more than they cost).  The GC's own part
is ``tools/bench.py``'s ``gc_cpu_ms_per_request``.

To profile another checkout's library with these tools, put it first on
``PYTHONPATH`` (the header says which ``dataloader_sync`` was imported).
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench
import bench_workload as bw

import dataloader_sync

REGISTRY = "per-request registry: DataLoader(), register, close"
LOOKUP = "registry lookup (info.context.loaders[name])"
LOAD = "load(): cache lookup, lock, queueing, its future"
THEN = "then() chains and the futures' other methods"
DISPATCH = "dispatch and batch call (tick, registry, batch call)"
SETTLE = "settling (settle_many)"
RESUME = "resuming the waiting fields (the loop's walk)"
RESOLVERS = "resolvers (the bench's own)"
OURS = "GraphQL completion, ours"
CORE = "GraphQL completion, graphql-core and graphene"
BUILTINS = "builtins not attributed to a part"
OTHER = "other (the harness)"
PARTS = [REGISTRY, LOOKUP, LOAD, THEN, DISPATCH, SETTLE, RESUME, RESOLVERS, OURS, CORE, BUILTINS, OTHER]

# Functions whose part their name says, wherever they live (the modules moved between versions).
_BY_NAME = {"settle_many": SETTLE, "loader_future": LOAD, "check_arguments": REGISTRY, "check_clock": REGISTRY,
            "_resume_done": RESUME, "_drain": RESUME, "_resume_pending": RESUME, "first_done": RESUME,
            "resume_done": RESUME, "complete_into": RESUME}
_REGISTRY_FUNCTIONS = {"__init__", "register", "unregister", "close", "_close"}


def part_of(filename: str, function: str) -> str:
    """The part that *function* of *filename* (a ``pstats`` key) belongs to."""
    if filename == "~":
        return BUILTINS
    if "bench_workload" in filename:
        if function == "registry":
            return REGISTRY
        if function == "batch":
            return DISPATCH
        return OTHER if function in ("execute", "run_one") else RESOLVERS
    if "dataloader_sync" + os.sep not in filename:
        return CORE if ("graphql" in filename or "graphene" in filename) else OTHER
    module = filename.rsplit("dataloader_sync" + os.sep, 1)[1].replace(os.sep, "/")
    if module.startswith("_core/"):  # the loader and its futures (a flat checkout has them at the top)
        module = module[len("_core/"):]
    if function in _BY_NAME and (module.startswith("graphql/") or _BY_NAME[function] is not RESUME):
        return _BY_NAME[function]
    if module.startswith("graphql/"):
        return RESUME if module.endswith("_loop.py") else OURS
    if module in ("_fork.py", "_loader_options.py") or function == "__init__" and module == "_batch_call.py":
        return REGISTRY
    if function in _REGISTRY_FUNCTIONS and ("registry" in module or module == "_dataloader.py"):
        return REGISTRY
    if function == "__getitem__" and "registry" in module:
        return LOOKUP
    if module == "_dispatch_scope.py":  # a queued load reads the scope; the execution sets it
        return LOAD if function == "current_scope" else OURS
    if function == "load" and module == "_dataloader.py" or module in ("_listeners.py", "_new_futures.py"):
        return LOAD
    if module in ("_future.py", "_future_lock.py"):
        return THEN
    return DISPATCH


def measure(name: str, w: bw.Workload, requests: int, rounds: int) -> dict[str, Any]:
    """The variant's request-thread CPU per load with the GC off, and its parts (µs per load)."""
    variant = bench.make_variant(name, w)
    if isinstance(variant, str):
        raise SystemExit(f"{name}: {variant}")
    loads = w.loads_per_request()
    was_enabled = gc.isenabled()
    try:
        for _ in range(3):
            variant.run_one()
        gc.collect()
        gc.disable()
        best = float("inf")
        for _ in range(rounds):
            start = time.thread_time_ns()
            for _ in range(requests):
                variant.run_one()
            best = min(best, (time.thread_time_ns() - start) / requests / 1000 / loads)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(requests):
            variant.run_one()
        profiler.disable()
    finally:
        if was_enabled:
            gc.enable()
        variant.close()
    own: dict[str, float] = dict.fromkeys(PARTS, 0.0)
    stats: Any = pstats.Stats(profiler).stats  # {(file, line, function): (cc, nc, tottime, cumtime, callers)}
    for (filename, _, function), (_, _, tottime, _, _) in stats.items():
        own[part_of(filename, function)] += tottime
    total = sum(own.values()) or 1.0
    return {"cpu_us_per_load": best, "parts_us_per_load": {p: t / total * best for p, t in own.items()}}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", nargs="+", default=["single-tick", "floor-ours"],
                   choices=[v for v in bench.VARIANTS if v not in ("graphql-sync-dataloaders", "aiodataloader")])
    p.add_argument("--requests", type=int, default=20, help="requests per run")
    p.add_argument("--rounds", type=int, default=3, help="unprofiled runs (the least is the CPU per load)")
    p.add_argument("--items", type=int, default=20)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--loaders", type=int, default=200)
    p.add_argument("--json", default=None, help="also write the figures here")
    args = p.parse_args(argv)
    for flag in ("requests", "rounds", "items", "loaders"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} must be at least 1")
    if args.depth < 0:
        p.error("--depth must be at least 0")
    w = bw.Workload(items=args.items, depth=args.depth, loaders=args.loaders, io_ms=0.0, io_inline=True,
                    io_threads=1, tick_ms=15.0)
    try:
        rows = {name: measure(name, w, args.requests, args.rounds) for name in args.variants}
    finally:
        w.io.close()
    print(f"dataloader_sync from {os.path.dirname(dataloader_sync.__file__)}; {w.loads_per_request():,} loads per "
          f"request; request-thread CPU with the GC off, µs per load (least of {args.rounds} × {args.requests} "
          "requests), split by one profiled run")
    print(f"  {'part':<56}" + "".join(f"{name:>14}" for name in rows))
    for part in PARTS:
        print(f"  {part:<56}" + "".join(f"{row['parts_us_per_load'][part]:14.2f}" for row in rows.values()))
    print(f"  {'total':<56}" + "".join(f"{row['cpu_us_per_load']:14.2f}" for row in rows.values()))
    report = {"loads_per_request": w.loads_per_request(), "variants": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return report


if __name__ == "__main__":
    main()
