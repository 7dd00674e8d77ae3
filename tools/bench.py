"""The end-to-end benchmark of the java-dataloader ticker report (Bench.java), on graphene / graphql-core.

Every variant serves the same query (tools/bench_workload.py: 200 loaders per
request, 20 items × 3 nested levels, 10 field loaders, one chained "late" load
per item) from ``--concurrency`` request threads, one after another in this
process with identical settings, so their ratios hold on a noisy machine:

  single-tick               this library: ticker-mode ScheduledDataLoaderRegistry per request (registry
                            predicate DISPATCH_NEVER, each loader DISPATCH_ALWAYS, as DGS builds it), on
                            ONE shared ScheduledExecutor with one worker thread, DataLoaderExecutionContext
  per-loader-chains         the same with java-dataloader 6.0.0's per-loader chains (tools/per_loader_chains.py)
  floor                     plain resolvers returning values, no loaders, no I/O: the lower bound
  floor-ours                the same plain resolvers through DataLoaderExecutionContext: the execution's own cost
  n-plus-one                plain resolvers, one I/O per loaded value (what users have without loaders)
  graphql-sync-dataloaders  peers, when installed (never dependencies of this library)
  aiodataloader

Bounds, run only when named in --variants (parts of the loaders' work taken
away, to see what any design with a Future per load can reach; CPU-bound:
--io-ms 0):

  all-cached                single-tick (same registry, schema, resolvers) with every key each request loads
                            primed in its registry before the run: every load() a cache hit returning a done
                            future, no queue, dispatch, settle or waiting field (batch calls 0); building and
                            priming the registries is outside the measured CPU, closing them inside
  primed-in-request         all-cached with each request building and priming its registry itself (measured):
                            one settled future per key made in the request, and the GC walking them
                            (prime() is no fast path: a bound for the GC's part, not for the CPU)
  done-futures              resolvers return a pre-made done dataloader_sync future (one per resolver and item,
                            shared by every request) through DataLoaderExecutionContext: no loader, no registry
  registry-unused           floor-ours with single-tick's per-request registry built, in the context, closed:
                            the registry's fixed cost

Columns: throughput; latency p50/p99; batch calls per request (n-plus-one: I/O
calls); scheduled tasks per request (the ScheduledExecutor's task_count
delta); scheduler queue peak/end (pending + queued tasks, sampled every 5 ms);
timer-thread CPU per request (the ScheduledExecutor's timer thread) and
tick-worker CPU per request (the one thread running the ticks): their sum is
what Bench.java calls scheduler-thread CPU; process CPU per request and per
load (the loads a request makes without a cache: 9,860 at the default
settings), cyclic-GC collections (all generations), the thread CPU spent
inside them (timed from ``gc.callbacks``) and context switches per request.  Python
threads share one GIL: the timer thread and the tick worker wait for it like
the request threads, so under load ticks run late
(fewer scheduled tasks, not more), and CPU per request rises with the objects
that concurrent requests keep alive (the cyclic GC walks them).

    python tools/bench.py                      # the table, default settings
    python tools/bench.py --quick              # small settings, under a minute
    python tools/bench.py --io-ms 0            # CPU-bound
    python tools/bench.py --gc-threshold 50000 # the same with fewer cyclic-GC passes (see the header's gc line)
    python tools/bench.py --gc-freeze --gc-threshold 100000  # the documented server tuning (dataloader_sync.tune_gc)
    python tools/bench.py --micro --scaling    # per-operation costs and their shape (tools/bench_micro.py)
    python tools/bench.py --value-cache        # value-cache costs per key; the Bench shape on a shared Redis
    python tools/bench.py --hol                # head-of-line blocking in the shared executor (tools/bench_hol.py)
    python tools/bench.py --json out.json      # the same figures as JSON too
    python tools/bench.py --io-ms 0 --plot cpu.png  # the run at 1 and at 48 request threads, drawn
                                               # (--plot-concurrency; needs matplotlib: the [plot] extra)
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import gc
import json
import os
import platform
import resource
import sys
import threading
import time
from importlib import metadata
from typing import Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_workload as bw
import graphql
from per_loader_chains import PerLoaderChainsRegistry

from dataloader_sync import ScheduledDataLoaderRegistry

DEFAULT_VARIANTS = ["single-tick", "per-loader-chains", "floor", "floor-ours", "n-plus-one", "graphql-sync-dataloaders",
                    "aiodataloader"]
BOUND_VARIANTS = ["all-cached", "primed-in-request", "done-futures", "registry-unused"]  # run only when named
VARIANTS = DEFAULT_VARIANTS + BOUND_VARIANTS
N_PLUS_ONE_BUDGET = 30.0  # seconds of (estimated) wall time n-plus-one may take (5 with --quick)


def _version(dist: str) -> Optional[str]:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# -- building the variants -------------------------------------------------------------
def make_variant(name: str, w: bw.Workload) -> Any:
    """The variant, or a string saying why it does not run."""
    if name in ("single-tick", "per-loader-chains"):
        try:
            import dataloader_sync.graphql
        except ImportError as exc:
            return f"dataloader_sync.graphql is not importable: {exc}"
        cls = ScheduledDataLoaderRegistry if name == "single-tick" else PerLoaderChainsRegistry
        return bw.DataLoaderSyncVariant(w, name, cls)
    if name in BOUND_VARIANTS:
        try:
            import dataloader_sync.graphql
        except ImportError as exc:
            return f"dataloader_sync.graphql is not importable: {exc}"
        return {"all-cached": bw.AllCachedVariant, "primed-in-request": bw.PrimedInRequestVariant,
                "done-futures": bw.DoneFuturesVariant,
                "registry-unused": bw.RegistryUnusedVariant}[name](w)
    if name in ("floor", "floor-ours", "n-plus-one"):
        if name == "floor-ours":
            try:
                import dataloader_sync.graphql  # noqa: F401
            except ImportError as exc:
                return f"dataloader_sync.graphql is not importable: {exc}"
        return bw.PlainVariant(w, name)
    if name == "graphql-sync-dataloaders":
        version = _version("graphql-sync-dataloaders")
        if version is None:
            return "not installed (pip install graphql-sync-dataloaders)"
        variant = bw.SyncDataLoadersVariant(w)
        broken = bw.probe_graphql_sync_dataloaders()
        if broken:  # the happy path may still run: the run itself checks every response
            variant.notes.append(f"{version} is broken on graphql-core {graphql.__version__}: {broken}")
        return variant
    if name == "aiodataloader":
        if _version("aiodataloader") is None:
            return "not installed (pip install aiodataloader)"
        return bw.AioDataLoaderVariant(w)
    raise ValueError(name)


# -- measuring -------------------------------------------------------------------------
def thread_cpu(ident: Optional[int]) -> float:
    """CPU seconds of the thread with pthread id *ident* (0.0 when unknown or gone)."""
    if ident is None or not hasattr(time, "pthread_getcpuclockid"):
        return 0.0
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, OverflowError):
        return 0.0


class QueueSampler:
    """Samples ``pending_count + queued_count`` of a ScheduledExecutor every 5 ms on its own thread."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-queue-sampler", daemon=True)

    def size(self) -> int:
        return self.scheduler.pending_count + self.scheduler.queued_count

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self.size())

    def __enter__(self) -> QueueSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


class Outcome:
    """Latencies and errors of a batch of requests (appends are atomic: any thread may add)."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.started = 0


def run_requests(variant: Any, n: int, concurrency: int, expected: dict[str, Any], deadline: float) -> Outcome:
    """Run *n* requests, at most *concurrency* at once (a semaphore over a pool of request threads)."""
    out = Outcome()
    permits = threading.Semaphore(concurrency)

    def one() -> None:
        try:
            start = time.perf_counter()
            result = variant.run_one()
            out.latencies.append(time.perf_counter() - start)
            if result.errors:
                out.errors.append(f"{len(result.errors)} error(s), first: {result.errors[0]}")
            elif result.data != expected:
                out.errors.append("wrong data")
        except Exception as exc:
            out.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            permits.release()

    with cf.ThreadPoolExecutor(concurrency, thread_name_prefix="bench-request") as pool:
        for _ in range(n):
            permits.acquire()
            if time.monotonic() > deadline:
                permits.release()
                break
            out.started += 1
            pool.submit(one)
    return out


def _switches() -> int:
    """Context switches of the process so far (voluntary + involuntary): GIL hand-offs show up here."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def _collections() -> list[int]:
    """Cyclic-GC collections so far, per generation (any thread's)."""
    return [generation["collections"] for generation in gc.get_stats()]


class GCTimer:
    """Thread CPU spent inside the cyclic GC, any thread's, from ``gc.callbacks`` (installed once).

    A collection runs on the thread whose allocation triggered it, holding the
    GIL from its "start" callback to its "stop", so one pair of readings of
    ``time.thread_time()`` brackets it and collections never overlap.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._start


GC_TIMER = GCTimer()


def _timer_ident(sched: Any) -> Optional[int]:
    thread = sched.timer_thread if sched is not None else None
    return thread.ident if thread is not None else None


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[int((len(sorted_values) - 1) * q)] if sorted_values else float("nan")


def measure(variant: Any, args: argparse.Namespace, requests: int, warmup: int) -> dict[str, Any]:
    """Warm up, then run *requests* requests and gather every metric."""
    w, sched = variant.w, variant.scheduler
    variant.prepare(warmup + requests)
    deadline = time.monotonic() + args.variant_timeout
    warm = run_requests(variant, warmup, args.concurrency, w.expected, deadline)
    tasks0 = sched.task_count if sched else 0
    timer0, worker0 = thread_cpu(_timer_ident(sched)), thread_cpu(variant.scheduler_worker)  # 0.0: not started
    gc0, gc_cpu0 = _collections(), GC_TIMER.seconds
    calls0, cpu0, switches0, t0 = w.io.calls, time.process_time(), _switches(), time.perf_counter()
    sampler = QueueSampler(sched) if sched is not None else None
    if sampler:
        sampler.__enter__()
    try:
        run = run_requests(variant, requests, args.concurrency, w.expected, deadline)
    finally:
        wall = time.perf_counter() - t0
        if sampler:
            sampler.__exit__()
    cpu = time.process_time() - cpu0
    gc_cpu = GC_TIMER.seconds - gc_cpu0
    gc_runs = [b - a for a, b in zip(gc0, _collections())]
    done = max(len(run.latencies), 1)
    lat = sorted(run.latencies)
    row: dict[str, Any] = {
        "variant": variant.name, "status": "ran", "notes": list(variant.notes),
        "requests": len(run.latencies), "warmup_requests": len(warm.latencies),
        "errors": len(run.errors) + len(warm.errors), "first_error": next(iter(warm.errors + run.errors), None),
        "throughput_rps": len(run.latencies) / wall if wall else 0.0,
        "latency_p50_ms": percentile(lat, 0.5) * 1e3, "latency_p99_ms": percentile(lat, 0.99) * 1e3,
        "batch_calls_per_request": (w.io.calls - calls0) / done,
        "process_cpu_ms_per_request": cpu * 1e3 / done,
        "cpu_us_per_load": cpu * 1e6 / done / w.loads_per_request(),
        "gc_cpu_ms_per_request": gc_cpu * 1e3 / done,
        "context_switches_per_request": (_switches() - switches0) / done,
        "gc_collections_per_request": sum(gc_runs) / done,
        "gc_collections_per_request_by_generation": [n / done for n in gc_runs],
    }
    if run.started < requests:
        row["notes"].append(f"stopped after {run.started} of {requests} requests: --variant-timeout "
                            f"{args.variant_timeout:g} s reached")
    if sched is not None:
        row.update({
            "scheduled_tasks_per_request": (sched.task_count - tasks0) / done,
            "queue_peak": max(sampler.peak, sampler.size()) if sampler else 0,
            "queue_end": sched.pending_count + sched.queued_count,
            "timer_cpu_ms_per_request": (thread_cpu(_timer_ident(sched)) - timer0) * 1e3 / done,
            "tick_worker_cpu_ms_per_request": (thread_cpu(variant.scheduler_worker) - worker0) * 1e3 / done,
        })
    return row


def plan_requests(name: str, w: bw.Workload, args: argparse.Namespace) -> Any:
    """``(requests, warmup)`` for a variant, or why it is skipped (n-plus-one's serial I/O is slow)."""
    if name != "n-plus-one" or w.io.seconds == 0:
        return args.requests, args.warmup
    per_request = w.loads_per_request() * w.io.seconds
    fits = int((5.0 if args.quick else N_PLUS_ONE_BUDGET) * args.concurrency / per_request)
    if fits < 1 and not args.explicit:
        return (f"~{per_request:.1f} s of serial I/O per request ({w.loads_per_request()} loads × "
                f"{w.io.seconds * 1e3:g} ms); name it in --variants to run one wave of --concurrency requests")
    return min(args.requests, max(fits, args.concurrency)), 0


# -- reporting ---------------------------------------------------------------------------
COLUMNS = [  # (header, key, format)
    ("variant", "variant", "{}"), ("rps", "throughput_rps", "{:.1f}"), ("p50 ms", "latency_p50_ms", "{:.1f}"),
    ("p99 ms", "latency_p99_ms", "{:.1f}"), ("batch calls/req", "batch_calls_per_request", "{:.1f}"),
    ("sched tasks/req", "scheduled_tasks_per_request", "{:,.1f}"), ("queue peak/end", "queue", "{}"),
    ("timer CPU ms/req", "timer_cpu_ms_per_request", "{:.3f}"),
    ("tick-worker CPU ms/req", "tick_worker_cpu_ms_per_request", "{:.3f}"),
    ("process CPU ms/req", "process_cpu_ms_per_request", "{:.1f}"),
    ("CPU µs/load", "cpu_us_per_load", "{:.2f}"),
    ("GC/req", "gc_collections_per_request", "{:.1f}"), ("GC CPU ms/req", "gc_cpu_ms_per_request", "{:.2f}"),
    ("ctx switches/req", "context_switches_per_request", "{:,.0f}"), ("errors", "errors", "{}"),
]


def print_table(rows: list[dict[str, Any]]) -> None:
    cells = [[h for h, _, _ in COLUMNS]]
    for row in rows:
        if "queue_peak" in row:
            row = dict(row, queue=f"{row['queue_peak']:,} / {row['queue_end']:,}")
        cells.append([fmt.format(row[key]) if key in row else "-" for _, key, fmt in COLUMNS])
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    for r in cells:
        print("| " + " | ".join(c.ljust(wd) if i == 0 else c.rjust(wd) for i, (c, wd) in enumerate(zip(r, widths)))
              + " |")


def cpu_goal(concurrency: int, tuned: bool) -> float:
    """The CPU-bound goal for single-tick / floor: ≤ 1.0× at 1 request thread, ≤ 1.2× at many (batched loading
    costs no more than plain resolvers, and concurrency adds nothing of ours); the same with tuned GC."""
    return 1.0 if concurrency <= 1 else 1.2


def gc_cpu_goal(concurrency: int) -> float:
    """The goal for single-tick's cyclic-GC CPU per request, ms: ≤ 1.5 at 1 request thread, ≤ 2.5 at many."""
    return 1.5 if concurrency <= 1 else 2.5


def targets(rows: list[dict[str, Any]], io_ms: float, tick_ms: float, concurrency: int = 1,
            tuned: bool = False) -> list[dict[str, Any]]:
    """The design's performance targets, reported (never asserted) for the variants that ran.

    Throughput ratios move with whatever else the machine runs; the process-CPU
    ratios beside them do not, so both are given.  The CPU-bound ratio is given
    against both floors: plain graphql-core, and the same plain resolvers
    through DataLoaderExecutionContext (floor-ours).
    """
    by = {r["variant"]: r for r in rows if r["status"] == "ran" and r["requests"]}
    out: list[dict[str, Any]] = []

    def add(name: str, value: Optional[float], goal: str, met: bool, why: str = "") -> None:
        out.append({"target": name, "value": None if value is None else round(value, 2), "goal": goal,
                    "met": bool(met), "context": why})

    def ratio(a: float, b: float) -> Optional[float]:
        return a / b if b else None

    st, ch, fl, gsd = (by.get(n) for n in ("single-tick", "per-loader-chains", "floor", "graphql-sync-dataloaders"))
    fo = by.get("floor-ours")
    if st and ch:
        r = ratio(st["throughput_rps"], ch["throughput_rps"])
        add("throughput single-tick / per-loader-chains", r, ">= 2", r is not None and r >= 2)
        tasks = st["scheduled_tasks_per_request"]
        on_time = st["latency_p50_ms"] / tick_ms
        add("scheduled tasks per request, single-tick", tasks, "<= 5", tasks <= 5,
            f"one pending tick per open registry, so ≈ 1 + (time open after the first dispatch) / tick; "
            f"p50 / tick = {on_time:.1f}" + (" — far fewer ran: ticks were late (the timer and the tick worker "
                                             "wait for the GIL like every thread)" if tasks < on_time / 4 else ""))
        r = ratio(ch["timer_cpu_ms_per_request"], st["timer_cpu_ms_per_request"])
        add("timer-thread CPU per request, per-loader-chains / single-tick", r, ">= 10", r is None or r >= 10)
    goal = cpu_goal(concurrency, tuned)
    gc_mode = "tuned GC" if tuned else "default GC"
    for floor, label in ((fl, "floor"), (fo, "floor-ours")):
        if io_ms == 0 and st and floor:
            r = ratio(st["process_cpu_ms_per_request"], floor["process_cpu_ms_per_request"])
            floor_goal: Optional[float] = goal if label == "floor" else 2.0 if concurrency <= 1 else None
            add(f"CPU-bound, {concurrency} request thread(s), {gc_mode}: process CPU per request, "
                f"single-tick / {label}", r, "(context)" if floor_goal is None else f"<= {floor_goal}",
                r is not None and (floor_goal is None or r <= floor_goal),
                f"time per request (1 / throughput) ratio: "
                f"{ratio(floor['throughput_rps'], st['throughput_rps']) or 0:.2f}; GC collections per request "
                f"{st['gc_collections_per_request']:.1f} vs {floor['gc_collections_per_request']:.1f}")
    if io_ms == 0 and st:
        gc_goal = gc_cpu_goal(concurrency)
        add(f"CPU-bound, {concurrency} request thread(s), {gc_mode}: cyclic-GC CPU per request (ms), single-tick",
            st["gc_cpu_ms_per_request"], f"<= {gc_goal}", st["gc_cpu_ms_per_request"] <= gc_goal,
            f"{st['gc_collections_per_request']:.1f} collections per request"
            + (f"; floor {fl['gc_cpu_ms_per_request']:.2f} ms, {fl['gc_collections_per_request']:.1f} collections"
               if fl else ""))
    if io_ms == 0 and st and gsd:
        r = ratio(gsd["process_cpu_ms_per_request"], st["process_cpu_ms_per_request"])
        add("CPU-bound: graphql-sync-dataloaders / single-tick, process CPU per request", r, ">= 4",
            r is not None and r >= 4,
            f"throughput ratio: {ratio(st['throughput_rps'], gsd['throughput_rps']) or 0:.2f}")
    if st:
        add("batch calls per request, single-tick (one per loader per level)", st["batch_calls_per_request"],
            "(context)", True)
    return out


def header(args: argparse.Namespace, w: bw.Workload) -> dict[str, Any]:
    io = ("none (batch functions return at once)" if w.io.seconds == 0 else
          f"{args.io_ms:g} ms time.sleep " + ("inline on the dispatching thread" if w.io.inline else
                                              f"on a shared ThreadPoolExecutor({args.io_threads})"))
    return {
        "settings": {"requests": args.requests, "warmup": args.warmup, "concurrency": args.concurrency,
                     "io_ms": args.io_ms, "io": io, "loaders": args.loaders, "items": args.items,
                     "depth": args.depth, "items_per_request": bw.item_count(args.items, args.depth),
                     "tick_ms": args.tick_ms, "late_loaders": list(w.names["late"]),
                     "children_loader": w.names["children"]},
        "environment": {"python": platform.python_version(), "implementation": platform.python_implementation(),
                        "graphql_core": graphql.__version__, "graphene": _version("graphene"),
                        "gc_threshold": list(gc.get_threshold()), "gc_frozen": gc.get_freeze_count(),
                        "cores": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
                        "platform": platform.platform()},
    }


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=400, help="measured requests per variant")
    p.add_argument("--warmup", type=int, default=None, help="warm-up requests per variant (default requests/10)")
    p.add_argument("--concurrency", type=int, default=48, help="request threads")
    p.add_argument("--io-ms", type=float, default=3.0, help="simulated I/O per batch call (0: none)")
    p.add_argument("--io-inline", action="store_true", help="sleep on the dispatching thread, not on an I/O pool")
    p.add_argument("--io-threads", type=int, default=None, help="I/O pool size (default concurrency × 16)")
    p.add_argument("--loaders", type=int, default=200, help="loaders registered per request")
    p.add_argument("--items", type=int, default=20)
    p.add_argument("--depth", type=int, default=3, help="nested children levels")
    p.add_argument("--tick-ms", type=float, default=15.0, help="the registries' schedule")
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=None,
                   help=f"default: all but the bounds ({', '.join(BOUND_VARIANTS)}: see above)")
    p.add_argument("--variant-timeout", type=float, default=600.0, help="seconds before a variant stops early")
    p.add_argument("--gc-threshold", type=int, default=None, metavar="N",
                   help="gc.set_threshold(N, …) for the run: the cyclic GC's cost grows with the objects that "
                        "concurrent requests keep alive (default: the interpreter's)")
    p.add_argument("--gc-freeze", action="store_true",
                   help="gc.freeze() the heap once the bench and its libraries are imported, as a server does at "
                        "startup (dataloader_sync.tune_gc; add --gc-threshold 100000 for its full tuning)")
    p.add_argument("--json", metavar="PATH", help="also write every figure as JSON to PATH")
    p.add_argument("--plot", metavar="FILE.png",
                   help="run the end-to-end table at each --plot-concurrency and draw process CPU per request "
                        "against the floor (needs matplotlib)")
    p.add_argument("--plot-concurrency", type=int, nargs="+", default=[1, 48], metavar="N",
                   help="request threads of the --plot runs (default: 1 48)")
    p.add_argument("--quick", action="store_true", help="small settings: the whole run takes under a minute")
    p.add_argument("--micro", action="store_true", help="ns per load/dispatch/tick (tools/bench_micro.py)")
    p.add_argument("--scaling", action="store_true", help="cost vs keys pending; the executor case")
    p.add_argument("--value-cache", action="store_true",
                   help="value-cache costs per key and the Bench shape across two processes sharing Redis "
                        "(tools/bench_value_cache.py; needs redis-server and redis-py)")
    p.add_argument("--hol", action="store_true",
                   help="head-of-line blocking: light ticks beside rare heavy tasks, per executor policy "
                        "(tools/bench_hol.py)")
    p.add_argument("--hol-seconds", type=float, default=30.0, help="seconds per --hol run (6 runs)")
    p.add_argument("--hol-threads", type=int, default=16, help="request threads of --hol")
    p.add_argument("--hol-heavy-every", type=int, default=1000, help="1 batch call in N is heavy (1-4 s)")
    args = p.parse_args(argv)
    args.explicit = args.variants is not None
    if args.quick:
        given = {a.split("=")[0] for a in (argv if argv is not None else sys.argv[1:])}
        for opt, value in (("requests", 40), ("concurrency", 8), ("items", 10), ("depth", 2)):
            if f"--{opt}" not in given:
                setattr(args, opt.replace("-", "_"), value)
    args.variants = args.variants or DEFAULT_VARIANTS
    args.warmup = max(args.requests // 10, 1) if args.warmup is None else args.warmup
    args.io_threads_given = args.io_threads is not None
    args.io_threads = args.io_threads or args.concurrency * 16
    for name in ("requests", "concurrency", "io_threads", "items", "tick_ms", "variant_timeout"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0")
    if args.gc_threshold is not None and args.gc_threshold < 0:
        p.error("--gc-threshold must be >= 0 (0 disables the cyclic GC)")
    if args.hol_seconds <= 0 or args.hol_threads <= 0 or args.hol_heavy_every <= 0:
        p.error("--hol-seconds, --hol-threads and --hol-heavy-every must be > 0")
    if args.io_ms < 0 or args.depth < 0 or args.warmup < 0:
        p.error("--io-ms, --depth and --warmup must be >= 0")
    if args.loaders < bw.FIELDS + 3:
        p.error(f"--loaders must be >= {bw.FIELDS + 3}")
    if any(n <= 0 for n in args.plot_concurrency):
        p.error("--plot-concurrency must be > 0")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    if args.gc_freeze:
        gc.collect()
        gc.freeze()  # what dataloader_sync.tune_gc does (the bench must run against older versions too)
    if args.gc_threshold is not None:
        gc.set_threshold(args.gc_threshold, *gc.get_threshold()[1:])
    report: dict[str, Any] = {}
    if args.micro or args.scaling:
        import bench_micro
        if args.micro:
            report["micro"] = bench_micro.micro(quick=args.quick)
        if args.scaling:
            report["scaling"] = bench_micro.scaling(quick=args.quick)
    if args.value_cache:
        import bench_value_cache
        report["value_cache"] = bench_value_cache.run(args)
    if args.hol:
        import bench_hol
        report["hol"] = bench_hol.hol(seconds=args.hol_seconds, threads=args.hol_threads,
                                      heavy_every=args.hol_heavy_every)
    if args.plot:
        report["plot"] = plot_runs(args)
    elif not (args.micro or args.scaling or args.value_cache or args.hol) or args.explicit:
        report.update(end_to_end(args))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, default=str)
    return 0


def plot_runs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The end-to-end table at each ``--plot-concurrency``, one after the other, drawn to ``--plot``."""
    import plots

    plots.check_path(args.plot)
    plots.pyplot()  # a missing matplotlib is said before anything runs
    runs = []
    for concurrency in args.plot_concurrency:
        args.concurrency = concurrency
        if not args.io_threads_given:
            args.io_threads = concurrency * 16
        report = end_to_end(args)
        report["concurrency"] = concurrency
        runs.append(report)
        print()
    s = runs[0]["settings"]
    io = f"{args.io_ms:g} ms I/O per batch call" if args.io_ms else "CPU-bound (no I/O)"
    title = (f"tools/bench.py: process CPU per request, {s['loaders']} loaders, {s['items_per_request']} items "
             f"per request, {io}, {args.requests} requests per variant")
    plots.plot_bench([(r["concurrency"], r["variants"]) for r in runs], args.plot, title=title)
    print(f"figure: {args.plot}")
    return runs


def end_to_end(args: argparse.Namespace) -> dict[str, Any]:
    w = bw.Workload(items=args.items, depth=args.depth, loaders=args.loaders, io_ms=args.io_ms,
                    io_inline=args.io_inline, io_threads=args.io_threads, tick_ms=args.tick_ms)
    report = header(args, w)
    s, e = report["settings"], report["environment"]
    print(f"dataloader_sync bench: requests={s['requests']} (+{s['warmup']} warm-up) concurrency={s['concurrency']} "
          f"loaders={s['loaders']} items={s['items']} depth={s['depth']} ({s['items_per_request']} items/request) "
          f"tick={s['tick_ms']:g}ms\nI/O: {s['io']}\nPython {e['python']} ({e['implementation']}), graphql-core "
          f"{e['graphql_core']}, graphene {e['graphene']}, {e['cores']} cores, load average {e['load_average']}, "
          f"gc threshold {tuple(e['gc_threshold'])}, {e['gc_frozen']:,} objects frozen",
          flush=True)
    rows: list[dict[str, Any]] = []
    try:
        for name in args.variants:
            plan = plan_requests(name, w, args)
            variant = plan if isinstance(plan, str) else make_variant(name, w)
            if isinstance(variant, str):
                rows.append({"variant": name, "status": "skipped", "reason": variant})
                print(f"  {name}: skipped: {variant}", flush=True)
                continue
            try:
                row = measure(variant, args, *plan)
            finally:
                variant.close()
            rows.append(row)
            print(f"  {name}: {row['requests']} requests, {row['throughput_rps']:.1f} rps, {row['errors']} errors",
                  flush=True)
    finally:
        w.io.close()
    print()
    print_table([r for r in rows if r["status"] == "ran"])
    print("batch calls: batch function calls (n-plus-one: I/O calls); sched tasks: ScheduledExecutor.task_count "
          "delta; queue: pending + queued tasks (peak of 5 ms samples / at the end); timer + tick-worker CPU = "
          "Bench.java's scheduler-thread CPU; all per measured request")
    for row in rows:
        for note in row.get("notes", []):
            print(f"note: {row['variant']}: {note}")
        if row.get("first_error"):
            print(f"error: {row['variant']}: {row['first_error']}")
        if row["status"] == "skipped":
            print(f"skipped: {row['variant']}: {row['reason']}")
    report["variants"] = rows
    tuned = args.gc_freeze and (args.gc_threshold or 0) >= 100_000
    report["targets"] = targets(rows, args.io_ms, args.tick_ms, args.concurrency, tuned)
    for t in report["targets"]:
        print(f"target: {t['target']}: {t['value']} (goal {t['goal']}): {'met' if t['met'] else 'MISSED'}"
              + (f" [{t['context']}]" if t["context"] else ""))
    return report


if __name__ == "__main__":
    sys.exit(main())
