"""Soak the shared cache tier: threads load through RedisValueCache while a writer commits and invalidates
and a real redis-server is killed, restarted and frozen; counts stale and corrupt values.

    python tools/soak_cache.py                                  # 60 s, 16 threads, default options
    python tools/soak_cache.py --seconds 180 --near-cache 1000 --single-flight
    PYTHONPATH=../other-checkout python tools/soak_cache.py     # the same soak on another checkout

The source of truth is a dict of 5,000 rows, each a version number; the batch
function reads the versions of its keys (and waits ``--read-ms`` after the
read, widening the window in which a commit can land between a load's read and
its write-back).  The writer bumps a random row's version ("commits"), calls
``invalidate([key])`` and then records the version as the key's *floor*.

A load is **stale** when it began after ``invalidate`` returned for a version
newer than the one it got: a value older than the last invalidation that
preceded it.  A value that is not a row of the expected shape is **corrupt**.
Errors are loads that failed (there should be none: an outage sends loads to
the batch function).  The client is the one docs/value-cache.rst recommends
(0.25 s timeouts, one retry).

Chaos, on a cycle of ``--cycle`` seconds: the server is killed (SIGKILL) and
restarted after 1 s, later after 8 s, and once frozen (SIGSTOP) for 6 s; it
restarts empty (no persistence).  Needs redis-py and a ``redis-server`` binary.
Exits 1 when any load was stale or corrupt.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import redis  # noqa: E402
from bench_value_cache import RedisProcess  # noqa: E402
from redis.backoff import ConstantBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

from dataloader_sync import DataLoader  # noqa: E402
from dataloader_sync.redis import RedisValueCache  # noqa: E402


class Source:
    """The rows (key -> version) and the floors (key -> the newest version invalidated); thread-safe."""

    def __init__(self, n_keys: int, read_ms: float) -> None:
        self.versions = dict.fromkeys(range(n_keys), 0)
        self.floors = dict.fromkeys(range(n_keys), 0)
        self.read_s = read_ms / 1000
        self.lock = threading.Lock()  # guards versions and floors
        self.batch_calls = 0

    def load(self, keys: list[int]) -> list[dict[str, int]]:
        with self.lock:
            rows = [{"key": k, "version": self.versions[k]} for k in keys]
            self.batch_calls += 1
        if self.read_s:
            time.sleep(self.read_s)  # the read is done; the write-back comes this much later
        return rows


class Chaos(threading.Thread):
    """Kills, restarts and freezes the server on a cycle; counts what it did."""

    def __init__(self, server: RedisProcess, cycle: float, stop: threading.Event) -> None:
        super().__init__(name="soak-chaos", daemon=True)
        self.server, self.cycle, self.stop = server, cycle, stop
        self.events: Counter[str] = Counter()

    def run(self) -> None:
        steps = [("kill", 1.0), ("kill", 8.0), ("freeze", 6.0)]
        i = 0
        while not self.stop.wait(self.cycle):
            what, length = steps[i % len(steps)]
            i += 1
            if what == "kill":
                self.server.proc.kill()
                self.server.proc.wait()
                if self.stop.wait(length):
                    break
                self.server.restart()
            else:
                os.kill(self.server.proc.pid, signal.SIGSTOP)
                self.stop.wait(length)
                os.kill(self.server.proc.pid, signal.SIGCONT)
            self.events[what] += 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--keys", type=int, default=5000)
    p.add_argument("--hot", type=int, default=50, help="loads draw from this many hot keys half the time")
    p.add_argument("--batch", type=int, default=20, help="keys per request")
    p.add_argument("--read-ms", type=float, default=1.0)
    p.add_argument("--writes-per-s", type=float, default=200.0)
    p.add_argument("--cycle", type=float, default=20.0, help="seconds between two chaos steps")
    p.add_argument("--near-cache", type=int, default=0)
    p.add_argument("--single-flight", action="store_true")
    p.add_argument("--ttl", type=float, default=None)
    args = p.parse_args()

    server = RedisProcess()
    client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=0.25, socket_connect_timeout=0.25,
                         retry=Retry(ConstantBackoff(0.05), 1))
    cache = RedisValueCache(client, prefix="soak:", ttl=args.ttl, near_cache=args.near_cache,
                            single_flight=args.single_flight, cool_down=1.0)
    if args.near_cache:
        cache.wait_near_cache_live(5.0)
    source = Source(args.keys, args.read_ms)
    stop = threading.Event()
    counts: Counter[str] = Counter()
    counts_lock = threading.Lock()  # guards counts
    worst: list[Any] = []

    def reader(seed: int) -> None:
        rnd = random.Random(seed)
        mine: Counter[str] = Counter()
        while not stop.is_set():
            keys = [rnd.randrange(args.hot) if rnd.random() < 0.5 else rnd.randrange(args.keys)
                    for _ in range(args.batch)]
            with source.lock:  # the floor each load must reach: read as the load begins
                floors = [source.floors[k] for k in keys]
            loader = DataLoader(source.load, value_cache=cache)
            futures = [loader.load(k) for k in keys]
            loader.dispatch()
            for key, floor, fut in zip(keys, floors, futures):
                mine["loads"] += 1
                try:
                    row = fut.result(30)
                except Exception:
                    mine["errors"] += 1
                    continue
                if not (isinstance(row, dict) and row.get("key") == key and isinstance(row.get("version"), int)):
                    mine["corrupt"] += 1
                elif row["version"] < floor:
                    mine["stale"] += 1
                    if len(worst) < 5:
                        worst.append((key, row["version"], floor))
        with counts_lock:
            counts.update(mine)

    def writer() -> None:
        mine: Counter[str] = Counter()
        try:
            write(mine)
        finally:
            with counts_lock:
                counts.update(mine)

    def write(counts: Counter[str]) -> None:
        rnd = random.Random(0)
        pause = 1.0 / args.writes_per_s
        while not stop.wait(pause):
            key = rnd.randrange(args.hot) if rnd.random() < 0.5 else rnd.randrange(args.keys)
            with source.lock:
                source.versions[key] += 1  # the commit
                version = source.versions[key]
            try:
                cache.invalidate([key])
            except redis.RedisError:  # an outage: the write says it did not reach every process
                counts["invalidate_failed"] += 1
                continue  # no floor: nobody was promised anything
            with source.lock:
                source.floors[key] = max(source.floors[key], version)
            counts["invalidations"] += 1

    chaos = Chaos(server, args.cycle, stop)
    threads = [threading.Thread(target=reader, args=(i,), name=f"soak-reader-{i}") for i in range(args.threads)]
    threads.append(threading.Thread(target=writer, name="soak-writer"))
    started = time.monotonic()
    for t in threads:
        t.start()
    chaos.start()
    stop.wait(args.seconds)
    stop.set()
    for t in threads:
        t.join(60)
    chaos.join(20)
    if server.proc is not None and server.proc.poll() is None:
        os.kill(server.proc.pid, signal.SIGCONT)
    cache.close()
    client.close()
    server.stop()
    elapsed = time.monotonic() - started
    print(f"soak: {elapsed:.0f} s, {args.threads} threads, near_cache={args.near_cache}, "
          f"single_flight={args.single_flight}, ttl={args.ttl}")
    print(f"  loads {counts['loads']:,}  batch calls {source.batch_calls:,}  invalidations "
          f"{counts['invalidations']:,} (failed in outages: {counts['invalidate_failed']:,})")
    print(f"  outages: {chaos.events['kill']} kills, {chaos.events['freeze']} freezes")
    print(f"  stale {counts['stale']}  corrupt {counts['corrupt']}  errors {counts['errors']}")
    for key, got, floor in worst:
        print(f"    e.g. key {key}: got version {got} after version {floor} was invalidated")
    return 1 if counts["stale"] or counts["corrupt"] else 0


if __name__ == "__main__":
    sys.exit(main())
