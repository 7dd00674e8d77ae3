"""The value cache's costs, for tools/bench.py ``--value-cache``.

Needs redis-py and a ``redis-server`` binary (started here on a free port of
127.0.0.1, no persistence, stopped at the end); Django for the
``DjangoValueCache`` rows (skipped without it).

``per_key()``: ns per key of a batch of 100 keys, each the best of 5 runs of
``rounds`` fresh loaders (a new request each) doing ``load_many(100 keys)`` +
``dispatch()`` + ``result()``, side by side in one run:

  per-request cache hit      the same loader, keys already cached (no dispatch)
  value-cache hit (redis)    RedisValueCache, every key in Redis: one MGET of 100 keys, JSON values
  value-cache hit (django)   DjangoValueCache over Django's RedisCache (pickle) and over LocMemCache
  batch fn on SQLite         no value cache: one SELECT ... WHERE id IN (100 ids) on a SQLite file
  value-cache miss (redis)   MGET (all miss) + the same SELECT + one pipelined SET PX of 100 values

The rows are dicts of four fields (an id, a title, an author id, a 200-character body).

``shape()``: the Bench shape of tools/bench.py (tools/bench_workload.py) in two OS processes
sharing one Redis: process 1 serves ``--requests`` requests with a RedisValueCache per loader
(it warms the cache); process 2 serves the same number without a value cache and then with the
warm one, side by side: batch calls per request fall to 0, value-cache hits replace them.

    python tools/bench.py --value-cache            # both sections
    python tools/bench.py --value-cache --quick    # small settings
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import gc
import json
import os
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dataloader_sync import DataLoader

REPEAT = 5
KEYS = 100


# -- a redis-server of our own -------------------------------------------------------------------
class RedisProcess:
    """A redis-server on a free port of 127.0.0.1 (no persistence), until ``stop()``."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("no redis-server binary on PATH (apt-get install redis-server)")
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="bench-redis-")
        for _ in range(5):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            if self._start():
                return
        raise RuntimeError("redis-server did not start")

    def _start(self) -> bool:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return self._ready()

    def restart(self) -> None:
        """Start again on the same port, empty (after a kill: tools/soak_cache.py)."""
        if not self._start():
            raise RuntimeError("redis-server did not start again")

    def _ready(self) -> bool:
        assert self.proc.stdout is not None
        out, deadline = b"", time.monotonic() + 20
        while b"Ready to accept connections" not in out:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self.proc.stdout.fileno(), 65536) if ready else b""
            if not chunk:
                self.proc.kill()
                self.proc.wait()
                return False
            out += chunk
        self.proc.stdout.close()
        return True

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _client(port: int, hiredis: bool = False) -> Any:
    """A redis-py client; its reply parser is redis-py's own unless *hiredis* (then hiredis', if installed)."""
    import redis
    options: dict[str, Any] = {"host": "127.0.0.1", "port": port, "socket_timeout": 5, "socket_connect_timeout": 5}
    try:
        from redis._parsers import _HiredisParser, _RESP2Parser  # redis-py >= 5
        options["parser_class"] = _HiredisParser if hiredis else _RESP2Parser
    except ImportError:
        pass
    return redis.Redis(connection_pool=redis.ConnectionPool(**options))


def _has(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


# -- per key -----------------------------------------------------------------------------------------
class Books:
    """A SQLite file of 10,000 books; ``batch`` is a batch function: one SELECT per call."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("CREATE TABLE book (id INTEGER PRIMARY KEY, title TEXT, author_id INTEGER, body TEXT)")
        self.db.executemany("INSERT INTO book VALUES (?, ?, ?, ?)",
                            ((i, f"book {i}", i % 97, "x" * 200) for i in range(10_000)))
        self.db.commit()
        self.calls = 0

    def batch(self, ids: list[int]) -> list[Any]:
        self.calls += 1
        marks = ",".join("?" * len(ids))
        rows = {r[0]: {"id": r[0], "title": r[1], "author_id": r[2], "body": r[3]}
                for r in self.db.execute(f"SELECT id, title, author_id, body FROM book WHERE id IN ({marks})", ids)}
        return [rows.get(i) for i in ids]


def _best(run: Any) -> float:
    gc.collect()
    return min(run() for _ in range(REPEAT))


def _interleaved(cases: list[tuple[str, Any, str]]) -> list[tuple[str, float, float, str]]:
    """Each case's best of REPEAT runs, in wall and in CPU time, the cases run in turn within each repetition
    (the machine's load then weighs on all of them alike: compare ratios, not absolute figures).  CPU time is
    this process's only (not the redis-server's): what the library adds on top of a client shows best there."""
    best = [float("inf")] * len(cases)
    best_cpu = [float("inf")] * len(cases)
    for _ in range(REPEAT):
        for i, (_, run, _) in enumerate(cases):
            gc.collect()
            cpu0 = time.process_time()
            wall = run()
            best_cpu[i] = min(best_cpu[i], (time.process_time() - cpu0) / run.keys)
            best[i] = min(best[i], wall)
    return [(case, seconds, cpu, note) for (case, _, note), seconds, cpu in zip(cases, best, best_cpu)]


def _requests(batch: Any, value_cache: Any, rounds: int, before_each: Any = None) -> float:
    """Seconds per key: *rounds* fresh loaders, each load_many(100) + dispatch + result (best of REPEAT)."""
    return _best(_requests_run(batch, value_cache, rounds, before_each))


def _requests_run(batch: Any, value_cache: Any, rounds: int, before_each: Any = None) -> Any:
    """One run of ``_requests``: a function returning seconds per key."""
    def run() -> float:
        total = 0.0
        for r in range(rounds):
            keys = list(range((r % 50) * KEYS, (r % 50 + 1) * KEYS))
            if before_each is not None:
                before_each()
            t0 = time.perf_counter()
            loader = DataLoader(batch, value_cache=value_cache)
            many = loader.load_many(keys)
            loader.dispatch()
            values = many.result(30)
            total += time.perf_counter() - t0
            assert len(values) == KEYS and values[0]["id"] == keys[0], values[0]
        return total / (rounds * KEYS)
    run.keys = rounds * KEYS  # type: ignore[attr-defined]  # for CPU time per key
    return run


def _bare_run(fetch: Any, rounds: int) -> Any:
    """What the client alone does for one request of 100 keys (*fetch(keys)*), seconds per key."""
    def run() -> float:
        total = 0.0
        for r in range(rounds):
            keys = list(range((r % 50) * KEYS, (r % 50 + 1) * KEYS))
            t0 = time.perf_counter()
            values = fetch(keys)
            total += time.perf_counter() - t0
            assert len(values) == KEYS and values[0]["id"] == keys[0], values[0]
        return total / (rounds * KEYS)
    run.keys = rounds * KEYS  # type: ignore[attr-defined]  # for CPU time per key
    return run


def _step_run(step: Any, rounds: int) -> Any:
    """*step(r)* alone for *rounds* rounds (one request's worth of one step of a hit), seconds per key."""
    def run() -> float:
        t0 = time.perf_counter()
        for r in range(rounds):
            step(r)
        return (time.perf_counter() - t0) / (rounds * KEYS)
    run.keys = rounds * KEYS  # type: ignore[attr-defined]  # for CPU time per key
    return run


def _window(r: int) -> list[int]:
    """The keys of round *r* (as the request runs use)."""
    return list(range((r % 50) * KEYS, (r % 50 + 1) * KEYS))


class _Table:
    """A value cache that costs one list comprehension over a dict, no breaker: a hit through it is
    the loader's own share of every hit (a fresh loader, ``load_many``'s futures, the dispatch)."""

    breaker = None

    def __init__(self, values: dict[int, Any]) -> None:
        self.values = values

    def get_values(self, keys: list[int]) -> list[Any]:
        values = self.values
        return [values[k] for k in keys]

    def set_values(self, keys: list[int], values: list[Any]) -> None:
        raise AssertionError("every key is a hit")


def _cached_many_run(batch: Any, rounds: int) -> Any:
    """A per-request hit of 100 keys (``load_many`` of keys this loader already holds + result),
    seconds per key, as a run for ``_interleaved``."""
    loader = DataLoader(batch)
    loader.load_many(list(range(50 * KEYS)))
    loader.dispatch()

    def run() -> float:
        t0 = time.perf_counter()
        for r in range(rounds):
            loader.load_many(_window(r)).result(30)
        return (time.perf_counter() - t0) / (rounds * KEYS)
    run.keys = rounds * KEYS  # type: ignore[attr-defined]  # for CPU time per key
    return run


def _cached(batch: Any, rounds: int) -> tuple[float, float]:
    """(load() of a cached key, load_many of 100 cached keys + result) in seconds per key."""
    loader = DataLoader(batch)
    keys = list(range(KEYS))
    loader.load_many(keys)
    loader.dispatch()
    load = loader.load

    def one() -> float:
        t0 = time.perf_counter()
        for _ in range(rounds):
            for k in keys:
                load(k)
        return (time.perf_counter() - t0) / (rounds * KEYS)

    def many() -> float:
        t0 = time.perf_counter()
        for _ in range(rounds):
            loader.load_many(keys).result(30)
        return (time.perf_counter() - t0) / (rounds * KEYS)
    return _best(one), _best(many)


def _hit_steps(client: Any, redis_vc: Any, near_vc: Any, rounds: int) -> list[tuple[str, Any, str]]:
    """The steps of a hit (``tools/bench.py --value-cache`` prints them under the hit rows)."""
    from dataloader_sync.redis import _value_cache as redis_value_cache

    try:
        from dataloader_sync._core import _value_cache
        from dataloader_sync._key_strings import encode_key
    except ModuleNotFoundError:  # a checkout from before the _core/ move and its renames (bench_ab runs old ones)
        from dataloader_sync import _value_cache
        from dataloader_sync._shared_keys import encode_key

    prefix = "bench:book:"
    names = [[prefix + encode_key(k) for k in _window(r)] for r in range(50)]
    replies = [client.mget(n) for n in names]
    decode = redis_value_cache.RedisValueCache._decode
    local = getattr(near_vc, "get_local_futures", None)  # None: a checkout whose loaders do not ask at load time
    return [
        ("  step: key names, prefix + encode_key each", _step_run(
            lambda r: [prefix + encode_key(k) for k in _window(r)], rounds), "what the bare client does"),
        ("  step: key names, RedisValueCache._names", _step_run(lambda r: redis_vc._names(_window(r)), rounds),
         "int keys: a memo, in C"),
        ("  step: MGET, the client alone", _step_run(lambda r: client.mget(names[r % 50]), rounds),
         "redis-py: send, read, parse"),
        ("  step: json.loads of each value", _step_run(lambda r: [json.loads(d) for d in replies[r % 50]], rounds),
         "the bare client's decode"),
        ("  step: RedisValueCache._decode", _step_run(lambda r: decode(redis_vc, replies[r % 50]), rounds),
         "the cache's decode"),
        ("  step: look_up (breaker, checks) + get_values",
         _step_run(lambda r: _value_cache.look_up(redis_vc, _window(r)), rounds), "what the loader calls"),
        ("  step: near cache lookup (get_values)", _step_run(lambda r: near_vc.get_values(_window(r)), rounds),
         "names + LRU, no round trip"),
    ] + ([] if local is None else [
        ("  step: near cache lookup at load time", _step_run(lambda r: local(_window(r)), rounds),
         "get_local_futures: int keys, LRU"),
    ])


def _django_caches(redis_url: str) -> Optional[Any]:
    try:
        import django
        from django.conf import settings
    except ImportError:
        return None
    if not settings.configured:
        settings.configure(CACHES={
            "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "bench",
                        "OPTIONS": {"MAX_ENTRIES": 100_000}},
            "redis": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url},
        })
        django.setup()
    from django.core.cache import caches
    return caches


def per_key(quick: bool, server: RedisProcess) -> list[dict[str, Any]]:
    from dataloader_sync.redis import RedisValueCache

    rounds = 10 if quick else 100
    warm = min(rounds, 50)  # the key windows the measured rounds use
    tmp = tempfile.mkdtemp(prefix="bench-sqlite-")
    books = Books(os.path.join(tmp, "books.sqlite3"))
    client = _client(server.port)
    rows: list[dict[str, Any]] = []

    def add(case: str, seconds: float, note: str = "", cpu: Optional[float] = None) -> None:
        row = {"case": case, "ns_per_key": seconds * 1e9, "note": note}
        cpu_text = ""
        if cpu is not None:
            row["cpu_ns_per_key"] = cpu * 1e9
            cpu_text = f"{cpu * 1e9:>8,.0f} CPU"
        rows.append(row)
        print(f"  {case:<52} {seconds * 1e9:>8,.0f} ns/key {cpu_text:>12}  {note}", flush=True)

    fast = _client(server.port, hiredis=True) if _has("hiredis") else None
    near_vc = None
    try:
        client.flushall()
        one, many = _cached(books.batch, rounds * 10)
        add("per-request cache hit: load()", one)
        add("per-request cache hit: load_many(100)", many)
        calls = books.calls
        add("batch fn on SQLite (no value cache)", _requests(books.batch, None, rounds))
        assert books.calls - calls == REPEAT * rounds
        redis_vc = RedisValueCache(client, prefix="bench:book:", ttl=3600)
        _requests(books.batch, redis_vc, warm)  # warm: every key the rounds load is in Redis
        calls = books.calls

        def bare(keys: list[int]) -> list[Any]:  # the client's own work for the same request
            return [json.loads(d) for d in client.mget(["bench:book:" + str(k) for k in keys])]

        near_vc = RedisValueCache(client, prefix="bench:book:", ttl=3600, near_cache=50 * KEYS)
        near_vc.wait_near_cache_live(10)
        table = _Table({k: books.batch([k])[0] for k in range(50 * KEYS)})
        cases: list[tuple[str, Any, str]] = [
            ("bare client: MGET + json.loads", _bare_run(bare, rounds), "redis-py, no DataLoader"),
            ("RedisValueCache.get_values alone", _bare_run(redis_vc.get_values, rounds),
             "the cache's own layer, no DataLoader"),
            ("value-cache hit: RedisValueCache", _requests_run(books.batch, redis_vc, rounds),
             "1 MGET / 100 keys, JSON"),
            ("loader's own share: hit from a dict", _requests_run(books.batch, table, rounds),
             "fresh loader, load_many, dispatch; no I/O"),
            ("near-cache hit: RedisValueCache", _requests_run(books.batch, near_vc, rounds),
             f"near_cache={50 * KEYS}, no round trip"),
            ("per-request cache hit: load_many(100) (same group)", _cached_many_run(books.batch, rounds),
             "keys this loader holds"),
        ]
        if fast is not None:
            fast_vc = RedisValueCache(fast, prefix="bench:book:", ttl=3600)

            def bare_fast(keys: list[int]) -> list[Any]:
                return [json.loads(d) for d in fast.mget(["bench:book:" + str(k) for k in keys])]

            cases += [("bare client + hiredis: MGET + json.loads", _bare_run(bare_fast, rounds), "hiredis parser"),
                      ("value-cache hit: RedisValueCache + hiredis", _requests_run(books.batch, fast_vc, rounds),
                       "hiredis parser")]
            if _has("orjson"):
                import orjson
                orjson_vc = RedisValueCache(fast, prefix="bench:book:", ttl=3600, dumps=orjson.dumps,
                                            loads=orjson.loads)
                def bare_orjson(keys: list[int]) -> list[Any]:
                    return [orjson.loads(d) for d in fast.mget(["bench:book:" + str(k) for k in keys])]

                cases += [("bare client + hiredis + orjson", _bare_run(bare_orjson, rounds), "MGET + orjson.loads"),
                          ("value-cache hit: RedisValueCache + hiredis + orjson",
                           _requests_run(books.batch, orjson_vc, rounds), "dumps=orjson.dumps, loads=orjson.loads")]
        _requests_run(books.batch, near_vc, warm)()  # fills the near cache
        calls = books.calls
        for case, seconds, cpu, note in _interleaved(cases):
            add(case, seconds, note, cpu)
        assert books.calls == calls, "a hit called the batch function"
        print("  the steps of a RedisValueCache hit, one request's worth each:", flush=True)
        for case, seconds, cpu, note in _interleaved(_hit_steps(client, redis_vc, near_vc, rounds)):
            add(case, seconds, note, cpu)
        add("value-cache miss: RedisValueCache", _requests(books.batch, redis_vc, rounds, client.flushall),
            "MGET + SELECT + pipelined SET PX")
        caches = _django_caches(server.url)
        if caches is None:
            print("  DjangoValueCache: skipped (Django is not installed)")
        else:
            from dataloader_sync.django import DjangoValueCache
            django_cases: list[tuple[str, Any, str]] = []
            for alias, note in (("redis", "Django RedisCache, pickle"), ("default", "LocMemCache, pickle")):
                vc = DjangoValueCache(alias, prefix="bench:book:", ttl=3600)
                _requests(books.batch, vc, warm)
                backend = caches[alias]

                def bare_django(keys: list[int], vc: Any = vc, backend: Any = backend) -> list[Any]:
                    names = ["bench:book:" + str(k) for k in keys]
                    found = backend.get_many(names)
                    return [found[n] for n in names]

                django_cases += [(f"bare Django get_many ({alias})", _bare_run(bare_django, rounds), note),
                                 (f"DjangoValueCache.get_values alone ({alias})", _bare_run(vc.get_values, rounds),
                                  "the cache's own layer, no DataLoader"),
                                 (f"value-cache hit: DjangoValueCache ({alias})",
                                  _requests_run(books.batch, vc, rounds), note)]
            calls = books.calls
            for case, seconds, cpu, note in _interleaved(django_cases):
                add(case, seconds, note, cpu)
            assert books.calls == calls, "a Django hit called the batch function"
    finally:
        if near_vc is not None:
            near_vc.close()
        client.close()
        if fast is not None:
            fast.close()
        books.db.close()
        shutil.rmtree(tmp, ignore_errors=True)
    base = {r["case"]: r["ns_per_key"] for r in rows}
    cpu = {r["case"]: r["cpu_ns_per_key"] for r in rows if "cpu_ns_per_key" in r}
    hit = base["per-request cache hit: load()"]
    sqlite_ns = base["batch fn on SQLite (no value cache)"]

    def ratio(case: str, against: str) -> str:
        return f"{base[case] / base[against]:.2f}x wall, {cpu[case] / cpu[against]:.2f}x CPU"

    redis_hit = "value-cache hit: RedisValueCache"
    print(f"  ratios: RedisValueCache hit = {ratio(redis_hit, 'bare client: MGET + json.loads')} the bare client; "
          f"{base[redis_hit] / sqlite_ns:.2f}x the SQLite batch function", flush=True)
    print(f"          RedisValueCache.get_values alone = "
          f"{ratio('RedisValueCache.get_values alone', 'bare client: MGET + json.loads')} the bare client "
          "(the rest of a hit is the loader's: load_many's futures, the dispatch)", flush=True)
    own = "loader's own share: hit from a dict"
    print(f"          the loader's own share (a hit from a dict) = {ratio(own, 'bare client: MGET + json.loads')} "
          "the bare client: the floor of any hit through a fresh loader", flush=True)
    print(f"          RedisValueCache hit minus the loader's share = "
          f"{(cpu[redis_hit] - cpu[own]) / cpu['bare client: MGET + json.loads']:.2f}x CPU the bare client",
          flush=True)
    near_ns = base["near-cache hit: RedisValueCache"]
    cached_many = "per-request cache hit: load_many(100) (same group)"
    print(f"          near-cache hit = {ratio('near-cache hit: RedisValueCache', cached_many)} a per-request "
          f"load_many(100) hit ({near_ns / hit:.1f}x wall a per-request load() hit); "
          f"the loader's own share alone: {ratio(own, cached_many)}", flush=True)
    fast_hit = "value-cache hit: RedisValueCache + hiredis"
    if fast_hit in base:
        print(f"          hiredis: {ratio(fast_hit, redis_hit)} the plain hit; "
              f"{ratio(fast_hit, 'bare client + hiredis: MGET + json.loads')} its bare client", flush=True)
    if "value-cache hit: RedisValueCache + hiredis + orjson" in base:
        print("          hiredis + orjson: "
              f"{ratio('value-cache hit: RedisValueCache + hiredis + orjson', 'value-cache hit: RedisValueCache')}"
              " the plain hit; "
              f"{ratio('value-cache hit: RedisValueCache + hiredis + orjson', 'bare client + hiredis + orjson')}"
              " its bare client", flush=True)
    for alias in ("redis", "default"):
        hit_case = f"value-cache hit: DjangoValueCache ({alias})"
        if f"bare Django get_many ({alias})" in base:
            print(f"          DjangoValueCache ({alias}) hit = "
                  f"{ratio(f'value-cache hit: DjangoValueCache ({alias})', f'bare Django get_many ({alias})')}"
                  " Django's own get_many; get_values alone "
                  f"{ratio(f'DjangoValueCache.get_values alone ({alias})', f'bare Django get_many ({alias})')}; "
                  "minus the loader's share "
                  f"{(cpu[hit_case] - cpu[own]) / cpu[f'bare Django get_many ({alias})']:.2f}x CPU",
                  flush=True)
    return rows


# -- the Bench shape, two processes ---------------------------------------------------------------
def _shape_child(argv: list[str]) -> int:
    """One process of ``shape()``: serve requests with (and, with --compare, without) a value cache."""
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--concurrency", type=int, required=True)
    p.add_argument("--items", type=int, required=True)
    p.add_argument("--depth", type=int, required=True)
    p.add_argument("--io-ms", type=float, required=True)
    p.add_argument("--compare", action="store_true")
    a = p.parse_args(argv)
    import bench_workload as bw

    from dataloader_sync import DISPATCH_ALWAYS, ScheduledDataLoaderRegistry
    from dataloader_sync import DataLoader as DL
    from dataloader_sync.redis import RedisValueCache

    w = bw.Workload(items=a.items, depth=a.depth, loaders=200, io_ms=a.io_ms, io_inline=False,
                    io_threads=a.concurrency * 16, tick_ms=15.0)
    client = _client(a.port)
    caches = {name: RedisValueCache(client, prefix=f"bench:{name}:", ttl=3600) for name in w.names["all"]}

    class Shared(bw.DataLoaderSyncVariant):
        """The Bench variant whose loaders share a RedisValueCache each (one per loader name)."""

        use_cache = True
        lock = threading.Lock()
        hits = misses = 0

        def registry(self) -> ScheduledDataLoaderRegistry:
            if not self.use_cache:
                return super().registry()
            registry = self.registry_class(scheduled_executor=self.shared, ticker_mode=True, schedule=self.w.tick,
                                           dispatch_predicate=bw.DISPATCH_NEVER)
            for name in self.w.names["all"]:
                registry.register(name, DL(self.batch_fn, name=name, value_cache=caches[name]), DISPATCH_ALWAYS)
            return registry

        def run_one(self) -> Any:
            registry = self.registry()
            try:
                import graphql
                return graphql.execute_sync(self.schema, self.w.document,
                                            context_value=bw.Context(registry, bw._then_future),
                                            execution_context_class=self.execution_context_class)
            finally:
                registry.close()
                stats = registry.statistics()
                with self.lock:
                    Shared.hits += stats.value_cache_hit_count
                    Shared.misses += stats.value_cache_miss_count

    def serve(use_cache: bool) -> dict[str, Any]:
        variant = Shared(w, "single-tick", ScheduledDataLoaderRegistry)
        variant.use_cache = use_cache
        Shared.hits = Shared.misses = 0
        calls0, cpu0, t0 = w.io.calls, time.process_time(), time.perf_counter()
        errors = 0
        try:
            with cf.ThreadPoolExecutor(a.concurrency) as pool:
                for result in pool.map(lambda _: variant.run_one(), range(a.requests)):
                    if result.errors or result.data != w.expected:
                        errors += 1
        finally:
            variant.close()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        return {"value_cache": use_cache, "requests": a.requests, "errors": errors,
                "batch_calls_per_request": (w.io.calls - calls0) / a.requests,
                "value_cache_hits_per_request": Shared.hits / a.requests,
                "value_cache_misses_per_request": Shared.misses / a.requests,
                "cpu_ms_per_request": cpu / a.requests * 1e3, "throughput_rps": a.requests / wall}

    try:
        runs = ([serve(False)] if a.compare else []) + [serve(True)]
    finally:
        w.io.close()
        client.close()
    print(json.dumps({"pid": os.getpid(), "runs": runs}))
    return 0


def shape(args: argparse.Namespace, server: RedisProcess) -> list[dict[str, Any]]:
    here = os.path.abspath(__file__)
    common = ["--port", str(server.port), "--requests", str(args.requests), "--concurrency", str(args.concurrency),
              "--items", str(args.items), "--depth", str(args.depth), "--io-ms", str(args.io_ms)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(here)), env.get("PYTHONPATH", "")])
    out: list[dict[str, Any]] = []
    for label, extra in (("process 1 (cold cache)", []), ("process 2", ["--compare"])):
        done = subprocess.run([sys.executable, here, "--shape-child", *common, *extra], capture_output=True,
                              text=True, env=env, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"{label} failed:\n{done.stderr}")
        report = json.loads(done.stdout.strip().splitlines()[-1])
        for run in report["runs"]:
            run["process"] = label
            out.append(run)
    print(f"  {'process':<24}{'value cache':>12}{'batch calls/req':>17}{'vc hits/req':>13}{'vc misses/req':>15}"
          f"{'CPU ms/req':>12}{'rps':>9}{'errors':>8}")
    for r in out:
        print(f"  {r['process']:<24}{'yes' if r['value_cache'] else 'no':>12}{r['batch_calls_per_request']:>17.2f}"
              f"{r['value_cache_hits_per_request']:>13.0f}{r['value_cache_misses_per_request']:>15.1f}"
              f"{r['cpu_ms_per_request']:>12.1f}{r['throughput_rps']:>9.1f}{r['errors']:>8}")
    return out


# -- an outage: added latency per request, with and without the breaker -----------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _docs_client(port: int) -> Any:
    """The client docs/value-cache.rst recommends: 0.25 s timeouts, one retry with a short back-off."""
    import redis
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=0.25, socket_connect_timeout=0.25,
                       retry=Retry(ExponentialBackoff(cap=0.05), 1))


def outage(quick: bool) -> list[dict[str, Any]]:
    """Seconds a request (a fresh loader, 10 keys, an instant batch function) takes beyond the same request
    without a value cache, during an outage: the server gone (refused) and frozen (SIGSTOP)."""
    from dataloader_sync.redis import RedisValueCache

    n = 3 if quick else 10
    keys = list(range(10))

    def batch(ks: list[int]) -> list[Any]:
        return [{"id": k} for k in ks]

    def per_request(value_cache: Any) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            loader = DataLoader(batch, value_cache=value_cache)
            many = loader.load_many(keys)
            loader.dispatch()
            many.result(60)
        return (time.perf_counter() - t0) / n

    base = min(per_request(None) for _ in range(3))
    rows: list[dict[str, Any]] = []
    frozen = RedisProcess()
    try:
        import logging
        logging.getLogger("dataloader_sync").setLevel(logging.ERROR)  # the breaker's one warning per case
        for scenario, port in (("refused (server gone)", _free_port()), ("frozen (SIGSTOP)", frozen.port)):
            for breaker in (False, True):
                client = _docs_client(port)
                try:
                    if scenario.startswith("frozen"):
                        client.ping()  # connected before the freeze, as a running service is
                        os.kill(frozen.proc.pid, signal.SIGSTOP)
                    vc = RedisValueCache(client, prefix="bench:outage:", cool_down=5.0 if breaker else 0)
                    seconds = per_request(vc)
                finally:
                    if scenario.startswith("frozen"):
                        os.kill(frozen.proc.pid, signal.SIGCONT)
                    client.close()
                rows.append({"case": scenario, "breaker": breaker, "requests": n,
                             "added_ms_per_request": (seconds - base) * 1e3})
                print(f"  {scenario:<24} breaker {'on ' if breaker else 'off'}  {n:>3} requests  "
                      f"+{(seconds - base) * 1e3:>9,.1f} ms per request", flush=True)
    finally:
        logging.getLogger("dataloader_sync").setLevel(logging.NOTSET)
        frozen.stop()
    return rows


# -- a stampede: batch calls per key under 32 threads, with and without single flight -----------------
def stampede(quick: bool, server: RedisProcess) -> list[dict[str, Any]]:
    """32 request threads miss the same keys at once (a popular key expired): batch calls per key."""
    from dataloader_sync.redis import RedisValueCache

    threads, rounds = 32, (2 if quick else 5)
    keys = ["popular", "also", "and"]
    client = _client(server.port)
    rows: list[dict[str, Any]] = []
    try:
        for single_flight in (False, True):
            vc = RedisValueCache(client, prefix="bench:stampede:", ttl=60, single_flight=single_flight)
            calls: list[list[Any]] = []
            lock = threading.Lock()

            def batch(ks: list[Any], calls: list[list[Any]] = calls, lock: Any = lock) -> list[Any]:
                with lock:
                    calls.append(list(ks))
                threading.Event().wait(0.02)  # the query behind the key: 20 ms
                return [{"id": k} for k in ks]

            for _ in range(rounds):
                vc.invalidate(keys)  # the keys expired
                start = threading.Barrier(threads)

                def request(_: int, vc: Any = vc, batch: Any = batch, start: Any = start) -> Any:
                    loader = DataLoader(batch, value_cache=vc)
                    many = loader.load_many(keys)
                    start.wait(30)
                    loader.dispatch()
                    return many.result(60)

                with cf.ThreadPoolExecutor(threads) as pool:
                    list(pool.map(request, range(threads)))
            per_key = sum(len(c) for c in calls) / (len(keys) * rounds)
            rows.append({"single_flight": single_flight, "threads": threads, "rounds": rounds,
                         "batch_calls_per_key": per_key})
            print(f"  single_flight={'True ' if single_flight else 'False'}  {threads} threads  "
                  f"{per_key:>6.2f} batch calls per key (mean of {rounds} stampedes)", flush=True)
    finally:
        client.close()
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both sections with a redis-server of our own; the figures as a dict."""
    server = RedisProcess()
    try:
        print(f"value cache, per key (batches of {KEYS}; best of {REPEAT}; redis-server on 127.0.0.1:{server.port})",
              flush=True)
        keys = per_key(args.quick, server)
        print("\nvalue cache, an outage: added latency per request (client as docs/value-cache.rst recommends: "
              "0.25 s timeouts, 1 retry)", flush=True)
        outage_rows = outage(args.quick)
        print("\nvalue cache, a stampede (batch calls per key, 20 ms batch function)", flush=True)
        stampede_rows = stampede(args.quick, server)
        print(f"\nvalue cache, the Bench shape across two processes (requests={args.requests} "
              f"concurrency={args.concurrency} items={args.items} depth={args.depth} io-ms={args.io_ms:g})",
              flush=True)
        return {"per_key": keys, "outage": outage_rows, "stampede": stampede_rows, "shape": shape(args, server)}
    finally:
        server.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--shape-child"]:
        sys.exit(_shape_child(sys.argv[2:]))
    sys.exit("run it through tools/bench.py --value-cache")
