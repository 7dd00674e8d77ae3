"""Head-of-line blocking in the shared executor, for tools/bench.py ``--hol``.

The experiment of the hotblocks seed, on our executor: request threads each
build a ticker-mode ScheduledDataLoaderRegistry (as a Flask/Django request
does), load a key and wait until a tick has dispatched it (a done-callback
and an Event: ``result()`` would dispatch on the request thread itself), then
close the registry.  Each tick that
dispatches calls a batch function that waits for its "database": a light
call waits ``--hol-light-ms``; about one call in ``--hol-heavy-every`` (1,000)
is heavy and waits 1–4 s (a stuck remote call; waiting, not CPU, as a
blocked query would).  Every registry shares one ScheduledExecutor, run in
turn over:

  fixed-4          a ThreadPoolExecutor(4): the default executor before 0.2
  thread-per-task  a new thread per task (the seed's fix, unbounded)
  elastic          the default of today: an ElasticPool of 4, a task running
                   over 0.1 s stops counting (ScheduledExecutor(max_workers=4))

each without heavy calls and then with them, with the same random seed, so
the runs see the same sequence of heavy calls.  For each task the
ScheduledExecutor ran (every tick), the bench records its due time, start and
end, by wrapping ``schedule`` of the executor under test: queue wait = due ->
start, latency = due -> end.  A light task is a tick that called a batch
function and no heavy one (ticks with nothing to dispatch are counted apart:
registries waiting for a heavy call keep ticking, and their cheap empty ticks
would flatter the percentiles).  Figures: light-task queue wait and latency mean / p50 / p99 / p99.9 (ms),
heavy tasks and their latency, the pool's peak thread count.  The target (no
head-of-line blocking, DESIGN §7): with heavy calls, the elastic pool's light
p99 queue wait is within 2x of the same run without them.

    python tools/bench.py --hol                    # 30 s per run, 6 runs
    python tools/bench.py --hol --hol-seconds 5    # shorter (fewer heavy calls, noisier tails)

The load is set so that the fixed pool of 4 is about three quarters busy
without heavy calls (16 request threads, light calls of 10 ms, 0-40 ms of
think time between requests, ticks every 5 ms): then one heavy call that
holds a worker is enough to make light tasks queue.
"""
from __future__ import annotations

import concurrent.futures as cf
import random
import threading
import time
from typing import Any, Callable, Optional

from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry, ScheduledExecutor

_clock = time.monotonic
POLICIES = ["fixed-4", "thread-per-task", "elastic"]


class ThreadPerTask(cf.Executor):
    """Each task on a new daemon thread (the seed's thread per task, with no bound)."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()  # guards _threads

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:
        future: cf.Future = cf.Future()

        def run() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:
                    future.set_exception(exc)

        thread = threading.Thread(target=run, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if wait:
            with self._lock:
                threads = list(self._threads)
            for thread in threads:
                thread.join()


def _make(policy: str) -> tuple[ScheduledExecutor, Optional[cf.Executor]]:
    if policy == "fixed-4":
        pool: Optional[cf.Executor] = cf.ThreadPoolExecutor(4, thread_name_prefix="hol-fixed")
        return ScheduledExecutor(pool, name="hol-fixed"), pool
    if policy == "thread-per-task":
        pool = ThreadPerTask()
        return ScheduledExecutor(pool, name="hol-thread"), pool
    return ScheduledExecutor(name="hol-elastic", max_workers=4), None


class _Recorder:
    """Wraps ``schedule`` of one executor: (due, start, end, kind) per task run.

    kind: "heavy" (a heavy batch call happened in the task), "light" (a light
    one did), "empty" (a tick with nothing to dispatch).
    """

    def __init__(self, executor: ScheduledExecutor) -> None:
        self.samples: list[tuple[float, float, float, str]] = []
        self.local = threading.local()  # .kind of the current task
        original = executor.schedule

        def schedule(fn: Callable[..., Any], delay: float, /, *args: Any, **kwargs: Any) -> Any:
            due = _clock() + max(delay, 0.0)

            def recorded(*a: Any, **kw: Any) -> Any:
                start = _clock()
                self.local.kind = "empty"
                try:
                    return fn(*a, **kw)
                finally:
                    # list.append is atomic: no lock needed
                    self.samples.append((due, start, _clock(), self.local.kind))

            return original(recorded, delay, *args, **kwargs)

        executor.schedule = schedule  # type: ignore[method-assign]


def _stats_ms(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "p50": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}
    v = sorted(values)

    def q(p: float) -> float:
        return v[min(len(v) - 1, int(p * len(v)))] * 1000

    return {"mean": sum(v) / len(v) * 1000, "p50": q(0.5), "p99": q(0.99), "p999": q(0.999), "max": v[-1] * 1000}


def run_one(policy: str, heavy: bool, seconds: float, threads: int, light_ms: float, heavy_every: int,
            think_ms: float, tick_ms: float, seed: int) -> dict[str, Any]:
    """One run: *threads* request threads for *seconds*; the figures of the light and heavy tasks."""
    executor, pool = _make(policy)
    recorder = _Recorder(executor)
    stop = threading.Event()
    errors: list[BaseException] = []
    requests = [0] * threads

    def request_thread(i: int) -> None:
        rng = random.Random(seed * 1000 + i)
        n = 0
        while not stop.is_set():
            heavy_wait = rng.uniform(1.0, 4.0) if heavy and rng.randrange(heavy_every) == 0 else 0.0
            think = rng.uniform(0, 2 * think_ms) / 1000

            def batch(keys: list[int], wait: float = heavy_wait) -> list[int]:
                if recorder.local.kind != "heavy":
                    recorder.local.kind = "heavy" if wait else "light"
                threading.Event().wait(wait or light_ms / 1000)
                return keys

            registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True,
                                                   schedule=tick_ms / 1000)
            try:
                registry.register("db", DataLoader(batch))
                registry.dispatch_all()  # arms the ticker, as the first resolver level does
                # Wait for the tick to dispatch (result() would dispatch on this thread itself).
                loaded = threading.Event()
                future = registry["db"].load(n)
                future.add_done_callback(lambda _f, loaded=loaded: loaded.set())
                if not loaded.wait(30):
                    raise TimeoutError("no tick dispatched the load within 30 s")
            except BaseException as exc:
                errors.append(exc)
            finally:
                registry.close()
            n += 1
            requests[i] += 1
            stop.wait(think)

    workers = [threading.Thread(target=request_thread, args=(i,), daemon=True) for i in range(threads)]
    t0 = _clock()
    for t in workers:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in workers:
        t.join(10)
    elapsed = _clock() - t0
    peak = executor.statistics().pool
    executor.shutdown(wait=True)  # nothing runs into the next run
    if pool is not None:
        pool.shutdown(wait=True)
    samples = list(recorder.samples)
    light = [s for s in samples if s[3] == "light"]
    heavy_runs = [s for s in samples if s[3] == "heavy"]
    return {
        "policy": policy, "heavy": heavy, "seconds": round(elapsed, 1), "requests": sum(requests),
        "errors": len(errors), "first_error": repr(errors[0]) if errors else None,
        "light_tasks": len(light), "empty_ticks": sum(1 for s in samples if s[3] == "empty"),
        "light_queue_wait_ms": _stats_ms([s[1] - s[0] for s in light]),
        "light_latency_ms": _stats_ms([s[2] - s[0] for s in light]),
        "heavy_tasks": len(heavy_runs),
        "heavy_latency_ms": _stats_ms([s[2] - s[0] for s in heavy_runs]),
        "peak_threads": peak.peak_threads if peak is not None else None,
    }


def hol(seconds: float = 30.0, threads: int = 16, light_ms: float = 10.0, heavy_every: int = 1000,
        think_ms: float = 20.0, tick_ms: float = 5.0, seed: int = 1,
        policies: Optional[list[str]] = None) -> dict[str, Any]:
    """Print and return the table: every policy without and with heavy calls."""
    rows = []
    print(f"head-of-line: {threads} request threads, {seconds:g} s per run, tick {tick_ms:g} ms, light calls wait "
          f"{light_ms:g} ms, 1 in {heavy_every} waits 1-4 s, think time 0-{2 * think_ms:g} ms, seed {seed}",
          flush=True)
    for policy in policies or POLICIES:
        for heavy in (False, True):
            row = run_one(policy, heavy, seconds, threads, light_ms, heavy_every, think_ms, tick_ms, seed)
            rows.append(row)
            print(f"  {policy} {'with' if heavy else 'without'} heavy: {row['requests']} requests, "
                  f"{row['errors']} errors", flush=True)
    print("\n| policy           | heavy | light tasks | light queue wait ms mean / p50 / p99 / p99.9 "
          "| light latency ms mean / p50 / p99 / p99.9 | heavy tasks | heavy latency ms mean / max | peak threads |")
    for r in rows:
        w, lat, hv = r["light_queue_wait_ms"], r["light_latency_ms"], r["heavy_latency_ms"]
        print(f"| {r['policy']:<16} | {'yes' if r['heavy'] else 'no':<5} | {r['light_tasks']:>11} "
              f"| {w['mean']:7.2f} / {w['p50']:6.2f} / {w['p99']:7.2f} / {w['p999']:7.2f}"
              f"{'':<7}| {lat['mean']:7.2f} / {lat['p50']:6.2f} / {lat['p99']:7.2f} / {lat['p999']:7.2f}"
              f"{'':<4}| {r['heavy_tasks']:>11} | {hv['mean']:8.0f} / {hv['max']:6.0f}{'':<6}"
              f"| {r['peak_threads'] if r['peak_threads'] is not None else '-':>12} |")
    targets = []
    by = {(r["policy"], r["heavy"]): r for r in rows}
    for policy in policies or POLICIES:
        if (policy, False) in by and (policy, True) in by:
            base = by[policy, False]["light_queue_wait_ms"]["p99"]
            loaded = by[policy, True]["light_queue_wait_ms"]["p99"]
            ratio = loaded / base if base else float("inf")
            targets.append({"policy": policy, "p99_with_heavy_ms": round(loaded, 2),
                            "p99_without_ms": round(base, 2), "ratio": round(ratio, 2), "met": ratio <= 2.0})
            print(f"target: {policy}: light p99 queue wait with / without heavy calls = {loaded:.2f} / {base:.2f} ms "
                  f"= {ratio:.2f}x (goal <= 2x{', the new default' if policy == 'elastic' else ''}): "
                  f"{'met' if ratio <= 2.0 else 'MISSED'}")
    return {"rows": rows, "targets": targets}
