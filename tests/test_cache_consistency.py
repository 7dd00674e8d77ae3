"""Invalidation is final: the cache-aside races, each forced with events, for every shared cache kind.

The interleaving of each test is the one that made the shared cache serve a
stale value for ever: a load reads a row (v1), a writer commits v2 and calls
``invalidate``, then the load writes back what it read.  With leases the
write is refused; with single flight, a load that begins after the
invalidation starts its own flight.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Iterator
from typing import Any, Callable

import pytest

redis = pytest.importorskip("redis")
from redis_server import RedisServer, redis_cluster, redis_server, running_redis_server  # noqa: E402,F401

from dataloader_sync import MISSING, DataLoader  # noqa: E402
from dataloader_sync.redis import RedisValueCache  # noqa: E402

TIMEOUT = 10.0


class Rows:
    """The source of truth, and a batch function over it whose first call can be held after its read."""

    def __init__(self) -> None:
        self.rows: dict[Any, str] = {}
        self.calls: list[list[Any]] = []
        self.read = threading.Event()  # the held call has read its rows
        self.go = threading.Event()  # ... and may return them
        self.hold_next = True

    def __call__(self, keys: list[Any]) -> list[str]:
        values = [self.rows[k] for k in keys]  # the read
        self.calls.append(list(keys))
        if self.hold_next:
            self.hold_next = False
            self.read.set()
            assert self.go.wait(TIMEOUT)
        return values


def load_in_thread(loader: DataLoader[Any, Any], key: Any) -> cf.Future[Any]:
    """``loader.load(key)`` dispatched on a thread of its own; the future of its value."""
    done: cf.Future[Any] = cf.Future()

    def run() -> None:
        try:
            fut = loader.load(key)
            loader.dispatch()
            done.set_result(fut.result(TIMEOUT))
        except BaseException as exc:  # the test's failure, reported through the future
            done.set_exception(exc)

    thread = threading.Thread(target=run, name="test-load")
    thread.start()
    done.add_done_callback(lambda _: None)
    done.thread = thread  # type: ignore[attr-defined]
    return done


def finish(done: cf.Future[Any]) -> Any:
    value = done.result(TIMEOUT)
    done.thread.join(TIMEOUT)  # type: ignore[attr-defined]
    return value


def race_read_before_commit(cache: Any, rows: Rows, commit: Callable[[], None] = lambda: None) -> Any:
    """A load reads v1, the writer commits v2 and invalidates, then the load writes back: returns what a
    new load gets afterwards."""
    rows.rows[1] = "v1"
    first = load_in_thread(DataLoader(rows, value_cache=cache), 1)
    assert rows.read.wait(TIMEOUT)
    rows.rows[1] = "v2"  # the writer's commit ...
    commit()
    cache.invalidate([1])  # ... then its invalidation, which returns before the load writes back
    rows.go.set()
    assert finish(first) == "v1"  # the load began before the commit: v1 is its answer
    later = DataLoader(rows, value_cache=cache)
    return later.load(1).result(TIMEOUT)


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[Any]:
    c = redis.Redis(host="127.0.0.1", port=redis_server.port, socket_timeout=2, socket_connect_timeout=2)
    c.flushall()
    try:
        yield c
    finally:
        c.close()


def test_RedisValueCache_a_value_read_before_an_invalidation_is_never_stored_after_it(client):
    rows = Rows()
    cache = RedisValueCache(client, prefix="race:")
    assert race_read_before_commit(cache, rows) == "v2"
    assert cache.get_values([1]) == ["v2"]
    assert rows.calls == [[1], [1]]


def test_RedisValueCache_with_a_near_cache_keeps_no_value_read_before_an_invalidation(client):
    rows = Rows()
    with RedisValueCache(client, prefix="race-near:", near_cache=100) as cache:
        assert cache.wait_near_cache_live(TIMEOUT)
        assert race_read_before_commit(cache, rows) == "v2"
        assert cache.get_local_values([1]) in (["v2"], [MISSING])
        assert cache.get_values([1]) == ["v2"]


def test_RedisValueCache_on_a_cluster_refuses_a_value_read_before_an_invalidation(redis_cluster):
    from redis.cluster import ClusterNode, RedisCluster

    cluster = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in redis_cluster.ports],
                           socket_timeout=5)
    try:
        rows = Rows()
        cache = RedisValueCache(cluster, prefix="race-cluster:")
        assert race_read_before_commit(cache, rows) == "v2"
        assert cache.get_values([1]) == ["v2"]
    finally:
        cluster.close()


def test_DjangoValueCache_refuses_a_value_read_before_an_invalidation(django_example_project):
    pytest.importorskip("django")
    from django.core.cache.backends.locmem import LocMemCache

    from dataloader_sync.django import DjangoValueCache

    backend = LocMemCache("race", {})
    rows = Rows()
    cache = DjangoValueCache(backend, prefix="race:")
    assert race_read_before_commit(cache, rows) == "v2"
    assert cache.get_values([1]) == ["v2"]


def test_single_flight_a_load_that_begins_after_invalidate_starts_its_own_flight(client):
    rows = Rows()
    cache = RedisValueCache(client, prefix="race-flight:", single_flight=True)
    rows.rows[1] = "v1"
    first = load_in_thread(DataLoader(rows, value_cache=cache), 1)
    assert rows.read.wait(TIMEOUT)  # its flight is in the air, with v1
    rows.rows[1] = "v2"
    cache.invalidate([1])
    later = load_in_thread(DataLoader(rows, value_cache=cache), 1)  # begins after invalidate() returned
    assert finish(later) == "v2"  # its own flight: it did not wait for the first
    rows.go.set()
    assert finish(first) == "v1"
    assert cache.get_values([1]) == ["v2"]
    assert rows.calls == [[1], [1]]


def test_single_flight_waiters_of_a_flight_whose_lease_was_lost_load_the_key_themselves(client):
    # The invalidation reaches Redis only (another process's, say): this process's flight is not told,
    # but its owner's write is refused, so the loads waiting on it do not take its value.
    rows = Rows()
    cache = RedisValueCache(client, prefix="race-waiters:", single_flight=True)
    other_process = RedisValueCache(client, prefix="race-waiters:")
    rows.rows[1] = "v1"
    first = load_in_thread(DataLoader(rows, value_cache=cache), 1)
    assert rows.read.wait(TIMEOUT)
    waiter = load_in_thread(DataLoader(rows, value_cache=cache), 1)  # joins the flight in the air
    assert _wait_until(lambda: _has_waiter(cache, 1))
    rows.rows[1] = "v2"
    other_process.invalidate([1])
    rows.go.set()
    assert finish(first) == "v1"
    assert finish(waiter) == "v2"  # its flight's value was refused: it loaded the key itself
    assert cache.get_values([1]) == ["v2"]


def _wait_until(condition: Callable[[], bool]) -> bool:
    """Poll *condition* (a state another thread reaches with no event to tell) for at most TIMEOUT."""
    tick = threading.Event()
    for _ in range(int(TIMEOUT / 0.001)):
        if condition():
            return True
        tick.wait(0.001)
    return False


def _has_waiter(cache: RedisValueCache, key: Any) -> bool:
    assert cache.flights is not None
    flight = cache.flights._flights.get(key)
    return flight is not None and flight.event is not None


class ReplayingRedis(redis.Redis):
    """A real redis-py client whose scripts, when the server is gone, wait until the test lets them go
    on and then run once more: the write of a load replayed after an outage, as a retrying client or a
    proxy replays it (redis-py's own retry does not reach every version's connection step)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed = threading.Event()
        self.resume = threading.Event()

    def eval(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().eval(*args, **kwargs)
        except redis.ConnectionError:
            self.failed.set()
            assert self.resume.wait(TIMEOUT)
            return super().eval(*args, **kwargs)


def test_RedisValueCache_a_write_replayed_after_an_outage_does_not_resurrect_an_old_value():
    with running_redis_server() as server:
        c = ReplayingRedis(host="127.0.0.1", port=server.port, socket_timeout=2, socket_connect_timeout=2)
        try:
            rows = Rows()
            cache = RedisValueCache(c, prefix="outage:")
            rows.rows[1] = "v1"
            first = load_in_thread(DataLoader(rows, value_cache=cache), 1)
            assert rows.read.wait(TIMEOUT)  # leased and read v1
            server.kill()  # the outage: the load's write fails ...
            rows.go.set()
            assert c.failed.wait(TIMEOUT)  # ... and waits to be replayed
            server.start()  # back, on the same port, empty (no persistence)
            rows.rows[1] = "v2"
            cache.invalidate([1])
            c.resume.set()  # the write is replayed now
            assert finish(first) == "v1"
            assert cache.get_values([1]) == [MISSING]  # the replay found no lease: nothing stored
            later = DataLoader(rows, value_cache=cache)
            assert later.load(1).result(TIMEOUT) == "v2"
        finally:
            c.close()
