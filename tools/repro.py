"""The pending-task table of the java-dataloader ticker report (Repro.java), in Python.

For 1, 2, 10 and 50 ``dispatch_all()`` calls on a ticker-mode registry of 200
loaders with a 15 ms schedule, print the executor's pending tasks, the task
runs per second while it ticks, and the pending tasks one tick after
``close()`` (``TICKS_AFTER_CLOSE``) — for this library's single-tick registry
and for java-dataloader 6.0.0's per-loader-chain design (modelled in ``tools/per_loader_chains.py``).
Each row gets a fresh ScheduledExecutor with one worker thread, as Repro.java's
``ScheduledThreadPoolExecutor(1)``.  "Pending tasks" counts what Java's
``executor.getQueue().size()`` counts: tasks waiting for their time plus tasks
that are due and waiting for the worker (``pending_count + queued_count``).

    python tools/repro.py            # the table
    python tools/repro.py --json     # the rows as JSON
    python tools/repro.py --plot repro.png   # and a figure of them (needs matplotlib: the [plot] extra)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from typing import Any, Callable, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from per_loader_chains import PerLoaderChainsRegistry

from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry, ScheduledExecutor

VARIANTS = {"single-tick": ScheduledDataLoaderRegistry, "per-loader-chains": PerLoaderChainsRegistry}

#: How many ticks after ``close()`` the last column is read; its label says so.
TICKS_AFTER_CLOSE = 1
AFTER_CLOSE_LABEL = f"pending {TICKS_AFTER_CLOSE} tick{'s' if TICKS_AFTER_CLOSE != 1 else ''} after close"


def _echo(keys: list[Any]) -> list[Any]:
    return keys


def run(variant: str, calls: int, loaders: int, schedule: float, seconds: float,
        *, wait: Optional[Callable[[float], Any]] = None) -> dict[str, Any]:
    """One row: build a registry, call dispatch_all() *calls* times, watch the executor.

    *wait* (seconds) lets a test see the pauses; by default an ``Event`` that
    is never set, an interruptible, honest timer here.
    """
    executor = ScheduledExecutor(name=f"repro-{variant}", max_workers=1)
    pause = wait if wait is not None else threading.Event().wait
    try:
        registry = VARIANTS[variant](scheduled_executor=executor, ticker_mode=True, schedule=schedule)
        for i in range(loaders):
            registry.register(f"loader-{i}", DataLoader(_echo, name=f"loader-{i}"))
        for _ in range(calls):
            registry.dispatch_all()
        pending = executor.pending_count + executor.queued_count
        before = executor.completed_count
        pause(seconds)
        runs_per_second = (executor.completed_count - before) / seconds
        registry.close()
        pause(schedule * TICKS_AFTER_CLOSE)
        after_close = executor.pending_count + executor.queued_count
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    return {
        "variant": variant,
        "dispatch_all_calls": calls,
        "pending_tasks": pending,
        "tasks_run_per_second": round(runs_per_second),
        "pending_after_close": after_close,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    parser.add_argument("--loaders", type=int, default=200)
    parser.add_argument("--schedule-ms", type=float, default=15.0)
    parser.add_argument("--seconds", type=float, default=1.0, help="how long each row ticks")
    parser.add_argument("--calls", type=int, nargs="+", default=[1, 2, 10, 50])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--plot", metavar="FILE.png", help="also draw the rows (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.loaders <= 0 or args.schedule_ms <= 0 or args.seconds <= 0:
        parser.error("--loaders, --schedule-ms and --seconds must be > 0")
    if args.plot:  # before measuring: a missing matplotlib is said at once
        import plots

        plots.check_path(args.plot)
        plots.pyplot()
    schedule = args.schedule_ms / 1000.0
    if not args.json:
        print(f"dataloader_sync repro: {args.loaders} data loaders, ticker mode, schedule {args.schedule_ms:g} ms, "
              f"{os.cpu_count()} cores, Python {sys.version.split()[0]}")
        print(f"{'variant':<18} {'dispatch_all calls':>18} {'pending tasks':>14} {'tasks run / second':>19} "
              f"{AFTER_CLOSE_LABEL:>27}", flush=True)
    rows = []
    for variant in args.variants:
        for calls in args.calls:
            row = run(variant, calls, args.loaders, schedule, args.seconds)
            rows.append(row)
            if not args.json:
                print(f"{variant:<18} {calls:>18} {row['pending_tasks']:>14,} {row['tasks_run_per_second']:>19,} "
                      f"{row['pending_after_close']:>27,}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    if args.plot:
        plots.plot_repro(rows, args.plot, loaders=args.loaders, schedule_ms=args.schedule_ms)
        if not args.json:
            print(f"figure: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
