"""dataloader_sync.redis: RedisValueCache against a real redis-server started by the tests.

The server (tests/redis_server.py) runs on a free port of 127.0.0.1 with no
persistence; every test starts from an empty database.
"""
from __future__ import annotations

import concurrent.futures as cf
import datetime
import gc
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

redis = pytest.importorskip("redis")

from conftest import FakeClock  # noqa: E402
from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402
from redis_server import RedisServer, redis_cluster, redis_server, running_redis_server  # noqa: E402,F401
from value_cache_helpers import load_all, warnings_of  # noqa: E402

from dataloader_sync import MISSING, DataLoader  # noqa: E402
from dataloader_sync._core import _value_cache  # noqa: E402
from dataloader_sync.redis import RedisValueCache  # noqa: E402
from dataloader_sync.redis import _value_cache as redis_value_cache  # noqa: E402

TIMEOUT = 10.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CountingRedis(redis.Redis):
    """A real redis-py client that counts the MGETs, EVALs and pipelines it is asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mgets = 0
        self.pipelines = 0
        self.evals = 0

    def eval(self, *args: Any, **kwargs: Any) -> Any:
        self.evals += 1
        return super().eval(*args, **kwargs)

    def mget(self, *args: Any, **kwargs: Any) -> Any:
        self.mgets += 1
        return super().mget(*args, **kwargs)

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        self.pipelines += 1
        return super().pipeline(*args, **kwargs)


def make_client(server: RedisServer, timeout: float = 2.0) -> CountingRedis:
    # A client that gives up quickly: no retries, short socket timeouts.
    return CountingRedis(host="127.0.0.1", port=server.port, socket_timeout=timeout,
                         socket_connect_timeout=timeout, retry=Retry(NoBackoff(), 0))


@pytest.fixture
def client(redis_server) -> Iterator[CountingRedis]:
    c = make_client(redis_server)
    c.flushall()
    c.config_resetstat()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(autouse=True)
def fresh_failure_logs(monkeypatch):
    monkeypatch.setattr(_value_cache, "FAILURES", _value_cache.FailureLog())
    monkeypatch.setattr(redis_value_cache, "_UNREADABLE", _value_cache.FailureLog())


class Batch:
    """Records its calls; "err*" keys fail, other keys load as {"key": key, "n": [1, {"deep": key}]}."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []

    def __call__(self, keys: list[Any]) -> list[Any]:
        self.calls.append(list(keys))
        return [ValueError(f"no {k}") if isinstance(k, str) and k.startswith("err") else self.value(k) for k in keys]

    @staticmethod
    def value(key: Any) -> Any:
        return {"key": key, "n": [1, {"deep": key}]}


# -- construction -------------------------------------------------------------------------
def test_RedisValueCache_checks_its_arguments_at_once(client):
    with pytest.raises(TypeError, match="client"):
        RedisValueCache(object(), prefix="p:")
    with pytest.raises(TypeError, match="prefix"):
        RedisValueCache(client, prefix=b"p:")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix"):
        RedisValueCache(client, prefix="")
    for bad in ("1", True, [1]):
        with pytest.raises(TypeError, match="ttl"):
            RedisValueCache(client, prefix="p:", ttl=bad)
    for bad in (0, -1, float("nan"), float("inf"), datetime.timedelta(0)):
        with pytest.raises(ValueError, match="ttl"):
            RedisValueCache(client, prefix="p:", ttl=bad)
    with pytest.raises(ValueError, match="both dumps and loads"):
        RedisValueCache(client, prefix="p:", dumps=json.dumps)
    with pytest.raises(TypeError, match="loads"):
        RedisValueCache(client, prefix="p:", dumps=json.dumps, loads=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RedisValueCache(client, "p:")  # type: ignore[misc]  # prefix is keyword-only


# -- the store ----------------------------------------------------------------------------
def test_RedisValueCache_round_trips_nested_values_as_JSON(client):
    vc = RedisValueCache(client, prefix="t:")
    values = [{"title": "Dune", "tags": ["sf", "épique"], "rating": 4.5, "meta": {"n": None, "ok": True}},
              [1, [2, [3, []]]], "plain", 0, None]
    keys = list(range(len(values)))
    vc.set_values(keys, values)
    assert vc.get_values(keys) == values
    assert vc.get_values([99]) == [MISSING]
    raw = client.get("t:0")
    assert json.loads(raw) == values[0]  # JSON text in Redis: no pickle
    assert not raw.startswith(b"\x80")
    vc.set_values(["tuple"], [(1, 2)])
    assert vc.get_values(["tuple"]) == [[1, 2]]  # JSON has no tuples (documented)


def test_RedisValueCache_distinct_keys_are_distinct_redis_keys(client):
    vc = RedisValueCache(client, prefix="k:")
    keys = [1, "1", 1.5, None, (7, 42), (42, 7), ("7", 42), (7, (42,)), b"7", uuid.UUID(int=7), "", ("a b", "é")]
    vc.set_values(keys, [f"value {i}" for i in range(len(keys))])
    assert vc.get_values(keys) == [f"value {i}" for i in range(len(keys))]
    assert len(set(client.keys("k:*"))) == len(keys)
    assert vc.redis_key((7, 42)) == "k:[7,42]" and vc.redis_key("isbn") == 'k:"isbn"'
    with pytest.raises(TypeError, match="cache_key_fn"):
        vc.redis_key(frozenset([1]))


def test_RedisValueCache_a_miss_costs_one_MGET_one_lease_and_one_write_a_hit_one_MGET(client):
    vc = RedisValueCache(client, prefix="b:", ttl=60)
    batch = Batch()
    loader = DataLoader(batch, value_cache=vc)
    assert load_all(loader, list(range(100))) == [Batch.value(k) for k in range(100)]
    # Three round trips for a batch of misses: the lookup, the leases (one script), the write (one script).
    assert (client.mgets, client.evals, client.pipelines) == (1, 2, 0)
    stats = client.info("commandstats")
    assert stats["cmdstat_mget"]["calls"] == 1 and stats["cmdstat_eval"]["calls"] == 2
    assert client.pttl("b:7") > 50_000  # the value's ttl, not the lease's
    second = DataLoader(batch, value_cache=vc)
    assert load_all(second, list(range(100))) == [Batch.value(k) for k in range(100)]
    assert (client.mgets, client.evals, client.pipelines) == (2, 2, 0) and len(batch.calls) == 1
    assert second.statistics().value_cache_hit_count == 100


def test_RedisValueCache_ttl_sets_the_expiry_of_each_write(client):
    RedisValueCache(client, prefix="n:").set_values(["a"], [1])
    assert client.pttl("n:\"a\"") == -1  # no ttl: no expiry
    RedisValueCache(client, prefix="m:", ttl=datetime.timedelta(minutes=5)).set_values(["a"], [1])
    assert 290_000 < client.pttl('m:"a"') <= 300_000
    RedisValueCache(client, prefix="s:", ttl=1).set_values(["a", "b"], [1, 2])
    assert 0 < client.pttl('s:"a"') <= 1000 and 0 < client.pttl('s:"b"') <= 1000


def test_RedisValueCache_expired_values_are_loaded_again(client):
    vc = RedisValueCache(client, prefix="e:", ttl=0.2)
    batch = Batch()
    load_all(DataLoader(batch, value_cache=vc), ["a"])
    assert client.pttl('e:"a"') <= 200
    # Wait for Redis to expire it, polling (EXISTS expires a key lazily) up to a deadline.
    gone = threading.Event()
    for _ in range(250):
        if not client.exists('e:"a"'):
            gone.set()
            break
        gone.wait(0.02)
    assert gone.is_set(), "Redis did not expire the key within 5 s"
    assert load_all(DataLoader(batch, value_cache=vc), ["a"]) == [Batch.value("a")]
    assert batch.calls == [["a"], ["a"]]


def test_RedisValueCache_callable_ttl_and_negative_ttl(client, caplog):
    seen: list[Any] = []

    def ttl(key: Any, value: Any) -> Any:
        seen.append((key, value))
        return {"hot": 1000, "forever": None, "bad": -1}.get(key, 60)

    vc = RedisValueCache(client, prefix="n:", ttl=ttl, negative_ttl=5)
    assert vc.ttl is ttl
    vc.set_values(["hot", "forever", "plain", "gone", "bad"], ["h", "f", "p", None, "b"])
    assert 990_000 < client.pttl('n:"hot"') <= 1_000_000
    assert client.pttl('n:"forever"') == -1  # None: no expiry
    assert 0 < client.pttl('n:"plain"') <= 60_000
    assert 0 < client.pttl('n:"gone"') <= 5_000  # a None value: negative_ttl, the callable is not asked
    assert not client.exists('n:"bad"')  # a bad answer: not written, logged
    assert ("gone", None) not in seen
    assert vc.get_values(["gone"]) == [None]
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "ttl must be" in warned[0].exc_text
    assert vc.breaker is not None and not vc.breaker.is_open  # a bad ttl is no outage


def test_RedisValueCache_negative_ttl_caches_None_results_of_a_mapped_loader(client):
    vc = RedisValueCache(client, prefix="m:", ttl=3600, negative_ttl=2)
    calls: list[list[int]] = []

    def batch(keys):
        calls.append(list(keys))
        return {k: f"row {k}" for k in keys if k % 2}  # a mapped loader: even keys have no row (None)

    assert load_all(DataLoader(batch, value_cache=vc), [1, 2]) == ["row 1", None]
    assert load_all(DataLoader(batch, value_cache=vc), [1, 2]) == ["row 1", None]
    assert calls == [[1, 2]]
    assert client.pttl("m:2") <= 2000 < client.pttl("m:1")


def test_RedisValueCache_checks_the_cache_tier_arguments_at_once(client):
    with pytest.raises(ValueError, match="cool_down must be >= 0"):
        RedisValueCache(client, prefix="p:", cool_down=-1)
    with pytest.raises(TypeError, match="cool_down"):
        RedisValueCache(client, prefix="p:", cool_down=None)
    for bad in (0, -2, float("nan")):
        with pytest.raises(ValueError, match="negative_ttl"):
            RedisValueCache(client, prefix="p:", negative_ttl=bad)
    with pytest.raises(TypeError, match="negative_ttl"):
        RedisValueCache(client, prefix="p:", negative_ttl="5")
    with pytest.raises(TypeError, match="single_flight must be a bool"):
        RedisValueCache(client, prefix="p:", single_flight="yes")
    for bad in (0, -1, float("inf")):
        with pytest.raises(ValueError, match="single_flight_timeout"):
            RedisValueCache(client, prefix="p:", single_flight=True, single_flight_timeout=bad)
    with pytest.raises(TypeError, match="ttl"):
        RedisValueCache(client, prefix="p:", ttl=int)  # a class is not a ttl rule
    with pytest.raises(TypeError, match="clock"):
        RedisValueCache(client, prefix="p:", clock=5)
    vc = RedisValueCache(client, prefix="p:", cool_down=datetime.timedelta(seconds=2))
    assert vc.breaker is not None and vc.breaker.cool_down == 2.0 and vc.flights is None


def test_RedisValueCache_tuple_keys_keep_viewers_apart(client):
    vc = RedisValueCache(client, prefix="v:")
    seen: list[Any] = []

    def visible_titles(keys):  # (viewer, book): what the viewer may see of the book
        seen.append(list(keys))
        return [f"book {book} as seen by {viewer}" for viewer, book in keys]

    ann = DataLoader(visible_titles, value_cache=vc)
    assert load_all(ann, [("ann", 1), ("ann", 2)]) == ["book 1 as seen by ann", "book 2 as seen by ann"]
    bob = DataLoader(visible_titles, value_cache=vc)
    assert load_all(bob, [("bob", 1), ("ann", 2)]) == ["book 1 as seen by bob", "book 2 as seen by ann"]
    assert seen == [[("ann", 1), ("ann", 2)], [("bob", 1)]]
    assert client.exists('v:["ann",1]', 'v:["ann",2]', 'v:["bob",1]') == 3


def test_RedisValueCache_never_stores_per_key_errors(client):
    vc = RedisValueCache(client, prefix="x:")
    batch = Batch()
    first = load_all(DataLoader(batch, value_cache=vc), ["a", "err", "b"])
    assert isinstance(first[1], ValueError)
    # The failed key is not stored: its lease stays (a miss to readers) until it expires or a load stores.
    assert vc.get_values(["a", "b", "err"]) == [Batch.value("a"), Batch.value("b"), MISSING]
    second = load_all(DataLoader(batch, value_cache=vc), ["a", "err", "b"])
    assert second[0] == Batch.value("a") and isinstance(second[1], ValueError)
    assert batch.calls == [["a", "err", "b"], ["err"]]


def test_RedisValueCache_writes_what_JSON_can_hold_and_logs_the_rest(client, caplog):
    vc = RedisValueCache(client, prefix="j:")
    loader = DataLoader(lambda keys: [{1, 2} if k == "set" else k for k in keys], value_cache=vc)
    assert load_all(loader, ["set", "fine"]) == [{1, 2}, "fine"]  # the load itself succeeds
    assert vc.get_values(["fine", "set"]) == ["fine", MISSING]
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "1 of 2 values could not be serialized" in warned[0].exc_text


def test_RedisValueCache_value_it_cannot_read_is_a_miss(client, caplog):
    vc = RedisValueCache(client, prefix="g:")
    client.set('g:"a"', b"\x80\x04not json")
    batch = Batch()
    assert load_all(DataLoader(batch, value_cache=vc), ["a"]) == [Batch.value("a")]
    assert batch.calls == [["a"]]
    assert json.loads(client.get('g:"a"')) == Batch.value("a")  # rewritten
    assert len(warnings_of(caplog)) == 1


@pytest.mark.parametrize("decode_responses", [False, True])
def test_RedisValueCache_decodes_a_whole_answer_with_one_json_loads(redis_server, monkeypatch, decode_responses):
    c = redis.Redis(host="127.0.0.1", port=redis_server.port, decode_responses=decode_responses)
    try:
        c.flushall()
        vc = RedisValueCache(c, prefix="w:")
        values = [{"id": 1, "t": "é"}, None, [1, 2.5, "x"], "s", 7]
        vc.set_values([1, 2, 3, 4, 5], values)
        calls: list[Any] = []
        real = json.loads
        monkeypatch.setattr(json, "loads", lambda s, **kw: calls.append(s) or real(s, **kw))
        assert vc.get_values([1, 2, 9, 3, 4, 5]) == [values[0], None, MISSING, *values[2:]]
        assert len(calls) == 1  # one parse for the answer, not one per value
        assert vc.get_values([8, 9]) == [MISSING, MISSING] and len(calls) == 1  # nothing to parse
    finally:
        c.close()


@pytest.mark.parametrize("bad", [
    [b"1,2"],  # one stored value that is two JSON values joined: the count changes
    [b"[1", b"2]"],  # two neighbours that merge into one: the count changes
    [b'"open'],  # the joined text is not JSON
    [b"\xff"],  # not UTF-8
])
def test_RedisValueCache_a_value_that_is_not_JSON_on_its_own_is_a_miss_and_its_neighbours_are_read(
        client, caplog, bad):
    vc = RedisValueCache(client, prefix="n:")
    keys = list(range(len(bad) + 2))
    vc.set_values([keys[0], keys[-1]], [{"first": 1}, ["last"]])
    for key, data in zip(keys[1:], bad):
        client.set(f"n:{key}", data)
    assert vc.get_values(keys) == [{"first": 1}, *[MISSING] * len(bad), ["last"]]
    assert len(warnings_of(caplog)) == 1


def test_RedisValueCache_reads_what_json_loads_reads_whitespace_and_a_BOM_too(client, caplog):
    vc = RedisValueCache(client, prefix="p:")
    client.set("p:1", b' {"a": 1} ')
    client.set("p:2", b"\n[2]\t")
    client.set("p:3", b"\xef\xbb\xbf3")  # a UTF-8 BOM: json.loads of bytes skips it (not inside the array)
    assert vc.get_values([1, 2, 3]) == [{"a": 1}, [2], 3]
    assert not warnings_of(caplog)


def test_RedisValueCache_names_int_keys_from_a_bounded_memo_never_confusing_True_and_1(client, monkeypatch):
    monkeypatch.setattr(redis_value_cache, "NAMES_MEMO", 4)
    vc = RedisValueCache(client, prefix="m:")
    vc.set_values([1, True, 1.0, "1", 2], ["int", "bool", "float", "str", "two"])
    for _ in range(2):  # the second time from the memo
        assert vc.get_values([1, 2]) == ["int", "two"]
        assert vc.get_values([True, 1, 1.0, "1"]) == ["bool", "int", "float", "str"]
    assert vc._names([1, 2]) == [vc.redis_key(1), vc.redis_key(2)] == ["m:1", "m:2"]
    assert vc._names(list(range(10))) == [f"m:{k}" for k in range(10)]  # past the bound: emptied, then filled
    assert vc._names([-3, 10**30]) == ["m:-3", f"m:{10**30}"]
    assert sorted(vc._int_names) == [-3, 10**30]  # it held 10 >= NAMES_MEMO: emptied first


def test_RedisValueCache_custom_dumps_and_loads(client):
    vc = RedisValueCache(client, prefix="c:", dumps=lambda v: v.encode("utf-16"), loads=lambda b: b.decode("utf-16"))
    vc.set_values(["a"], ["é"])
    assert client.get('c:"a"') == "é".encode("utf-16")
    assert vc.get_values(["a", "b"]) == ["é", MISSING]


def _parsers() -> list[Any]:
    """redis-py's reply parsers: its own, and hiredis' when installed (the fast path)."""
    try:
        from redis._parsers import _HiredisParser, _RESP2Parser  # redis-py >= 5
    except ImportError:  # older redis-py: the client's default only
        return [None]
    hiredis = pytest.param(_HiredisParser, marks=pytest.mark.skipif(
        not redis.utils.HIREDIS_AVAILABLE, reason="hiredis is not installed"), id="hiredis")
    return [pytest.param(_RESP2Parser, id="resp2"), hiredis]


@pytest.mark.parametrize("parser", _parsers())
def test_RedisValueCache_reads_hits_misses_and_unreadable_values_with_either_reply_parser(
        redis_server, caplog, parser):
    options: dict[str, Any] = {"host": "127.0.0.1", "port": redis_server.port}
    if parser is not None:
        options["parser_class"] = parser
    c = redis.Redis(connection_pool=redis.ConnectionPool(**options))
    try:
        c.flushall()
        vc = RedisValueCache(c, prefix="r:")
        batch = Batch()
        assert load_all(DataLoader(batch, value_cache=vc), [1, "b"]) == [Batch.value(1), Batch.value("b")]
        c.set("r:3", b"not json")
        loader = DataLoader(batch, value_cache=vc)
        assert load_all(loader, [1, 2, 3, "b"]) == [Batch.value(k) for k in (1, 2, 3, "b")]
        assert batch.calls == [[1, "b"], [2, 3]]
        assert len(warnings_of(caplog)) == 1
    finally:
        c.close()


def test_RedisValueCache_with_orjson_as_its_codec(client):
    orjson = pytest.importorskip("orjson")
    vc = RedisValueCache(client, prefix="o:", dumps=orjson.dumps, loads=orjson.loads)
    batch = Batch()
    assert load_all(DataLoader(batch, value_cache=vc), [1, "é"]) == [Batch.value(1), Batch.value("é")]
    assert load_all(DataLoader(batch, value_cache=vc), ["é", 1, 2]) == [Batch.value(k) for k in ("é", 1, 2)]
    assert batch.calls == [[1, "é"], [2]]
    assert json.loads(client.get('o:"é"')) == Batch.value("é")  # the same JSON in Redis: codecs can mix
    assert RedisValueCache(client, prefix="o:").get_values([1]) == [Batch.value(1)]


def test_RedisValueCache_delete_and_clear_touch_only_their_prefix(client):
    vc = RedisValueCache(client, prefix="p[1]*:")
    other = RedisValueCache(client, prefix="p[1]x:")  # what an unescaped glob would also match
    vc.set_values(list(range(2500)), list(range(2500)))
    other.set_values([1], ["other"])
    vc.delete(0)
    assert vc.get_values([0, 1]) == [MISSING, 1]
    vc.clear()
    assert client.dbsize() == 1 and other.get_values([1]) == ["other"]


# -- across processes ----------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import json, sys
    import redis
    from dataloader_sync import DataLoader
    from dataloader_sync.redis import RedisValueCache

    port, keys = int(sys.argv[1]), json.loads(sys.argv[2])
    calls = []
    def batch(ks):
        calls.append(list(ks))
        return [{"key": k, "pid_free": [k, {"n": k * 2}]} for k in ks]
    client = redis.Redis(port=port)
    loader = DataLoader(batch, value_cache=RedisValueCache(client, prefix="shared:book:", ttl=60))
    many = loader.load_many(keys)
    loader.dispatch()
    print(json.dumps({"values": many.result(10), "calls": calls}))
""")


def run_child(server: RedisServer, keys: list[int]) -> Any:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", CHILD, str(server.port), json.dumps(keys)],
                         capture_output=True, text=True, timeout=60, env=env, check=True)
    return json.loads(out.stdout)


def test_RedisValueCache_two_processes_share_values(redis_server, client):
    first = run_child(redis_server, [1, 2, 3])
    second = run_child(redis_server, [1, 2, 3, 4])
    expected = [{"key": k, "pid_free": [k, {"n": k * 2}]} for k in (1, 2, 3, 4)]
    assert first == {"values": expected[:3], "calls": [[1, 2, 3]]}
    assert second == {"values": expected, "calls": [[4]]}  # the first process's values, from Redis


# -- the server fails ----------------------------------------------------------------------------
@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A server of the test's own, for tests that kill or stop it."""
    with running_redis_server() as server:
        yield server


def test_RedisValueCache_server_killed_opens_the_breaker_once_and_a_probe_closes_it_when_back(own_server, caplog):
    clock = FakeClock()
    c = make_client(own_server, timeout=1.0)
    vc = RedisValueCache(c, prefix="k:", cool_down=5.0, clock=clock)
    batch = Batch()
    try:
        assert load_all(DataLoader(batch, value_cache=vc), [1, 2]) == [Batch.value(1), Batch.value(2)]
        own_server.kill()
        mgets, pipelines = c.mgets, c.pipelines
        for _request in range(10):  # ten requests while Redis is down: each loads through the batch function
            assert load_all(DataLoader(batch, value_cache=vc), [1, 2, 3]) == [Batch.value(k) for k in (1, 2, 3)]
            clock.advance(0.4)  # 4 s in all: within the cool-down
        assert len(batch.calls) == 11
        assert (c.mgets, c.pipelines) == (mgets + 1, pipelines)  # one failed MGET; no write was tried
        assert vc.breaker is not None and vc.breaker.is_open
        warned = warnings_of(caplog)
        assert len(warned) == 1 and "ConnectionError" in warned[0].exc_text and "breaker opened" in warned[0].message

        own_server.start()  # same port, empty (no persistence)
        assert load_all(DataLoader(batch, value_cache=vc), [1]) == [Batch.value(1)]
        assert c.mgets == mgets + 1  # still cooling down: Redis is not asked
        clock.advance(1.0)
        with caplog.at_level(logging.INFO, logger="dataloader_sync"):
            assert load_all(DataLoader(batch, value_cache=vc), [1, 2, 3]) == [Batch.value(k) for k in (1, 2, 3)]
        assert c.mgets == mgets + 2 and not vc.breaker.is_open  # the probe worked
        closed = [r for r in caplog.records if r.levelno == logging.INFO and "breaker closed" in r.getMessage()]
        assert len(closed) == 1
        resumed = DataLoader(batch, value_cache=vc)
        assert load_all(resumed, [1, 2, 3]) == [Batch.value(k) for k in (1, 2, 3)]
        assert len(batch.calls) == 13  # the last request was served by Redis
        assert resumed.statistics().value_cache_hit_count == 3
        assert len(warnings_of(caplog)) == 1
    finally:
        c.close()


def test_RedisValueCache_failed_probe_keeps_the_breaker_open_for_another_cool_down(own_server, caplog):
    clock = FakeClock()
    c = make_client(own_server, timeout=1.0)
    vc = RedisValueCache(c, prefix="p:", cool_down=2.0, clock=clock)
    batch = Batch()
    try:
        own_server.kill()
        load_all(DataLoader(batch, value_cache=vc), [1])
        clock.advance(2.0)
        load_all(DataLoader(batch, value_cache=vc), [1])  # the probe: refused again
        assert c.mgets == 2
        clock.advance(1.9)
        load_all(DataLoader(batch, value_cache=vc), [1])
        assert c.mgets == 2  # the cool-down restarted at the failed probe
        clock.advance(0.1)
        load_all(DataLoader(batch, value_cache=vc), [1])
        assert c.mgets == 3
        assert len(batch.calls) == 4 and len(warnings_of(caplog)) == 1  # failed probes are not warned again
    finally:
        c.close()


def test_RedisValueCache_cool_down_0_turns_the_breaker_off(own_server):
    c = make_client(own_server, timeout=1.0)
    vc = RedisValueCache(c, prefix="o:", cool_down=0)
    assert vc.breaker is None
    batch = Batch()
    try:
        own_server.kill()
        for _ in range(3):
            assert load_all(DataLoader(batch, value_cache=vc), [1]) == [Batch.value(1)]
        # Every request pays the client's failure (as before 0.3), once: a key whose lookup failed is not
        # leased (nor, with no lease, written).
        assert (c.mgets, c.evals, c.pipelines) == (3, 0, 0)
    finally:
        c.close()


def test_RedisValueCache_frozen_server_costs_one_timeout_per_cool_down_not_one_per_request(own_server, caplog):
    clock = FakeClock()
    c = make_client(own_server, timeout=0.5)
    vc = RedisValueCache(c, prefix="h:", clock=clock)
    batch = Batch()
    try:
        load_all(DataLoader(batch, value_cache=vc), [1])  # connected
        assert own_server.proc is not None
        os.kill(own_server.proc.pid, signal.SIGSTOP)  # alive, listening, silent
        try:
            for k in range(2, 12):  # ten requests: the first MGET times out (0.5 s), then Redis is skipped
                loader = DataLoader(batch, value_cache=vc)
                fut = loader.load(k)
                loader.dispatch()
                assert fut.result(TIMEOUT) == Batch.value(k)
            assert (c.mgets, c.evals, c.pipelines) == (2, 2, 0)  # no lease nor write was tried while it was open
        finally:
            os.kill(own_server.proc.pid, signal.SIGCONT)
        assert batch.calls == [[k] for k in range(1, 12)]
        assert len(warnings_of(caplog)) == 1 and "Timeout" in warnings_of(caplog)[0].exc_text
        clock.advance(5.0)
        load_all(DataLoader(batch, value_cache=vc), [20])  # thawed: the probe works, the write goes through
        assert vc.breaker is not None and not vc.breaker.is_open
        assert json.loads(c.get("h:20")) == Batch.value(20)
    finally:
        c.close()


def test_RedisValueCache_breakers_are_live_and_named_after_the_prefix(client):
    from dataloader_sync._core._breaker import live_breakers

    vc = RedisValueCache(client, prefix="named:")
    assert vc.breaker is not None and vc.breaker.name == "named:" and not vc.breaker.is_open
    assert vc.breaker in live_breakers()
    breaker = vc.breaker
    del vc
    gc.collect()
    assert breaker in live_breakers()  # it is alive as long as someone holds it
    name = breaker.name
    del breaker
    gc.collect()
    assert name not in [b.name for b in live_breakers()]


# -- threads and forks ----------------------------------------------------------------------------
def test_RedisValueCache_one_instance_serves_many_threads(client):
    vc = RedisValueCache(client, prefix="th:")
    batch_keys: list[Any] = []
    lock = threading.Lock()

    def batch(keys):
        with lock:
            batch_keys.extend(keys)
        return [{"key": k} for k in keys]

    def request(i: int) -> list[Any]:
        loader = DataLoader(batch, value_cache=vc)
        keys = [(i + j) % 40 for j in range(10)]
        return [v["key"] for v in load_all(loader, keys)] == keys

    with cf.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(request, range(200)))
    assert set(batch_keys) == set(range(40))  # every key loaded; after the first writes, from Redis
    assert len(batch_keys) < 200 * 10


FORKS = textwrap.dedent("""
    import os, sys
    import redis
    from dataloader_sync import DataLoader
    from dataloader_sync.redis import RedisValueCache

    client = redis.Redis(port=int(sys.argv[1]), socket_timeout=5, socket_connect_timeout=5)
    vc = RedisValueCache(client, prefix="fork:")
    def load(keys, calls=[]):
        calls.append(list(keys))
        return [k * 10 for k in keys]
    def request(keys):
        loader = DataLoader(load, value_cache=vc)
        many = loader.load_many(keys)
        loader.dispatch()
        return many.result(10)
    assert request([1, 2]) == [10, 20]  # the parent's pool holds a connection now
    bad = 0
    for i in range(30):
        pid = os.fork()
        if pid == 0:
            try:
                ok = request([1, 2, 100 + i]) == [10, 20, (100 + i) * 10]
                ok = ok and load.__defaults__[0][-1] == [100 + i]  # 1 and 2 came from Redis
            except BaseException:
                ok = False
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        bad += status != 0
    assert request([1, 2]) == [10, 20]  # the parent's connection still works
    print(bad)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_RedisValueCache_works_in_forked_children(redis_server, client):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", FORKS, str(redis_server.port)], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"  # no child failed
    assert client.exists(*[f"fork:{100 + i}" for i in range(30)]) == 30


# -- single flight ----------------------------------------------------------------------------------
@pytest.mark.parametrize("single_flight", [True, False])
def test_RedisValueCache_single_flight_stampede_of_32_threads_makes_one_batch_call_per_key(client, single_flight):
    vc = RedisValueCache(client, prefix="sf:", ttl=60, single_flight=single_flight)
    n = 32
    calls: list[list[Any]] = []
    lock = threading.Lock()
    arrived = threading.Barrier(n)
    joined = threading.Condition()
    if single_flight:
        assert vc.flights is not None
        join = vc.flights.join
        counts = [0]

        def counting_join(*args: Any) -> Any:
            out = join(*args)
            with joined:
                counts[0] += 1
                joined.notify_all()
            return out

        vc.flights.join = counting_join  # type: ignore[method-assign]

    def batch(keys):
        with lock:
            calls.append(list(keys))
        if single_flight:  # hold the flight until every request has joined it
            with joined:
                assert joined.wait_for(lambda: counts[0] == n, TIMEOUT)
        else:  # hold until every request has called its batch function
            arrived.wait(TIMEOUT)
        return [Batch.value(k) for k in keys]

    start = threading.Barrier(n)

    def request(_: int) -> list[Any]:
        loader = DataLoader(batch, value_cache=vc)
        many = loader.load_many(["popular", "other"])
        start.wait(TIMEOUT)
        loader.dispatch()
        return many.result(TIMEOUT)

    with cf.ThreadPoolExecutor(n) as pool:
        assert list(pool.map(request, range(n))) == [[Batch.value("popular"), Batch.value("other")]] * n
    per_key = sum("popular" in c for c in calls)
    assert per_key == (1 if single_flight else n)
    assert json.loads(client.get('sf:"popular"')) == Batch.value("popular")


# -- Redis Cluster --------------------------------------------------------------------------------
SENT: dict[int, int] = {}  # round trips (packed writes) per node port


def count_round_trips(monkeypatch: Any) -> None:
    original = redis.connection.Connection.send_packed_command

    def send_packed_command(self: Any, command: Any, check_health: bool = True) -> None:
        SENT[self.port] = SENT.get(self.port, 0) + 1
        original(self, command, check_health)

    monkeypatch.setattr(redis.connection.Connection, "send_packed_command", send_packed_command)


def test_RedisValueCache_on_a_cluster_reads_and_writes_keys_of_many_slots_one_round_trip_per_node(
        redis_cluster, monkeypatch):
    from redis.cluster import ClusterNode, RedisCluster

    cluster = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in redis_cluster.ports],
                           socket_timeout=5)
    count_round_trips(monkeypatch)
    try:
        vc = RedisValueCache(cluster, prefix="cl:book:", ttl=60)
        keys = list(range(100))
        slots = {cluster.keyslot(vc.redis_key(k)) for k in keys}
        nodes = {cluster.get_node_from_key(vc.redis_key(k)).port for k in keys}
        assert len(slots) > 90 and nodes == set(redis_cluster.ports)  # many slots, on every node
        batch = Batch()
        assert vc.get_values(keys) == [MISSING] * 100  # connects to every node (a connection's setup is not counted)
        SENT.clear()
        assert load_all(DataLoader(batch, value_cache=vc), keys) == [Batch.value(k) for k in keys]
        assert batch.calls == [keys]
        # Per node, one round trip each: the MGETs, the leases, the compare-and-set writes.
        assert SENT == dict.fromkeys(redis_cluster.ports, 3)
        assert vc.breaker is not None and not vc.breaker.is_open  # no lookup failed

        SENT.clear()
        again = DataLoader(batch, value_cache=vc)
        assert load_all(again, keys) == [Batch.value(k) for k in keys]
        assert again.statistics().value_cache_hit_count == 100 and len(batch.calls) == 1
        assert SENT == dict.fromkeys(redis_cluster.ports, 1)
        for port in redis_cluster.ports:  # the values are spread over the nodes
            node = redis.Redis(port=port)
            try:
                assert node.dbsize() > 0
            finally:
                node.close()
    finally:
        cluster.close()


# -- the near cache -------------------------------------------------------------------------------
@pytest.fixture
def near(client) -> Iterator[Any]:
    """A factory of RedisValueCaches with a near cache, closed after the test."""
    made: list[RedisValueCache] = []

    def make(**kwargs: Any) -> RedisValueCache:
        vc = RedisValueCache(client, **{"prefix": "near:", "near_cache": 100, **kwargs})
        made.append(vc)
        assert vc.wait_near_cache_live(TIMEOUT)
        return vc

    try:
        yield make
    finally:
        for vc in made:
            vc.close()


def test_RedisValueCache_near_cache_hits_cost_no_round_trip(near, client):
    vc = near()
    batch = Batch()
    assert load_all(DataLoader(batch, value_cache=vc), [1, 2]) == [Batch.value(1), Batch.value(2)]
    mgets = client.mgets
    again = DataLoader(batch, value_cache=vc)
    assert load_all(again, [1, 2]) == [Batch.value(1), Batch.value(2)]  # from this process's writes
    assert client.mgets == mgets and again.statistics().value_cache_hit_count == 2
    client.set("near:3", json.dumps("from redis"))
    assert vc.get_values([1, 3]) == [Batch.value(1), "from redis"]  # one MGET, of the near miss only
    assert client.mgets == mgets + 1
    client.set("near:3", json.dumps("changed behind its back"))  # no publish: the near entry stands
    assert vc.get_values([3]) == ["from redis"] and client.mgets == mgets + 1


def test_RedisValueCache_near_entries_live_near_ttl_and_the_lru_keeps_near_cache_entries(near, client):
    clock = FakeClock()
    vc = near(ttl=30, near_cache=2, clock=clock)
    assert vc._near is not None and vc._near.ttl == 30  # min(ttl, 60)
    vc.set_values([1, 2, 3], ["a", "b", "c"])
    mgets = client.mgets
    assert vc.get_values([2, 3]) == ["b", "c"] and client.mgets == mgets  # 1 was the least recently used
    assert vc.get_values([1]) == ["a"] and client.mgets == mgets + 1
    clock.advance(30)
    assert vc.get_values([1]) == ["a"] and client.mgets == mgets + 2  # expired: read from Redis again
    assert RedisValueCache(client, prefix="d:", near_cache=1)._near.ttl == 60  # type: ignore[union-attr]
    assert RedisValueCache(client, prefix="d:", near_cache=1, ttl=120, near_ttl=5)._near.ttl == 5  # type: ignore[union-attr]


def test_RedisValueCache_near_cache_arguments_are_checked_at_once(client):
    for bad in (-1,):
        with pytest.raises(ValueError, match="near_cache"):
            RedisValueCache(client, prefix="p:", near_cache=bad)
    for bad in (1.5, True, "10"):
        with pytest.raises(TypeError, match="near_cache"):
            RedisValueCache(client, prefix="p:", near_cache=bad)
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="near_ttl"):
            RedisValueCache(client, prefix="p:", near_cache=10, near_ttl=bad)


def test_RedisValueCache_close_ends_the_listener_thread_and_stops_using_the_near_cache(client):
    vc = RedisValueCache(client, prefix="cl:", near_cache=10)
    assert vc.wait_near_cache_live(TIMEOUT)
    listeners = [t for t in threading.enumerate() if t.name == "dataloader-sync-near-dataloader_sync:invalidate:cl:"]
    assert len(listeners) == 1 and listeners[0].daemon
    vc.set_values([1], ["one"])
    vc.close()
    vc.close()  # idempotent
    assert not listeners[0].is_alive()
    mgets = client.mgets
    assert vc.get_values([1]) == ["one"] and client.mgets == mgets + 1  # Redis, not the near cache


NEAR_CHILD = textwrap.dedent("""
    import json, sys, threading, time
    import redis
    from dataloader_sync import MISSING
    from dataloader_sync.redis import RedisValueCache

    client = redis.Redis(port=int(sys.argv[1]), socket_timeout=5, socket_connect_timeout=5)
    vc = RedisValueCache(client, prefix="x:", near_cache=100)
    assert vc.wait_near_cache_live(10)
    calls = []
    real_mget = client.mget
    def mget(*a, **k):
        calls.append(1)
        return real_mget(*a, **k)
    client.mget = mget
    print(json.dumps(vc.get_values([1])), flush=True)  # fills the near cache
    for line in sys.stdin:  # "<old json>": wait until key 1 no longer reads as it
        old = json.loads(line)
        before = len(calls)
        assert vc.get_values([1]) == [old] and len(calls) == before, "not served by the near cache"
        print("ready", flush=True)
        t0 = time.monotonic()
        while vc._near.get(["x:1"]) != [MISSING]:  # the near entry, until the listener evicts it
            if time.monotonic() - t0 > 10:
                break
            threading.Event().wait(0.002)
        seconds = time.monotonic() - t0
        now = ["MISSING" if v is MISSING else v for v in vc.get_values([1])]
        print(json.dumps({"seconds": seconds, "now": now}), flush=True)
    vc.close()
""")


def test_RedisValueCache_invalidate_and_set_values_evict_other_processes_near_entries(client, redis_server):
    client.set("x:1", json.dumps("v1"))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", NEAR_CHILD, str(redis_server.port)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    writer = RedisValueCache(client, prefix="x:", near_cache=10)
    try:
        assert writer.wait_near_cache_live(TIMEOUT)
        assert child.stdout is not None and child.stdin is not None
        assert json.loads(child.stdout.readline()) == ["v1"]

        child.stdin.write(json.dumps("v1") + "\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "ready"
        writer.set_values([1], ["v2"])  # another process's write evicts the stale near entry
        seen = json.loads(child.stdout.readline())
        assert seen["now"] == ["v2"] and seen["seconds"] < 1.0, seen

        child.stdin.write(json.dumps("v2") + "\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "ready"
        writer.invalidate([1])  # "these keys changed": deleted in Redis, evicted everywhere
        seen = json.loads(child.stdout.readline())
        assert seen["now"] == ["MISSING"] and seen["seconds"] < 1.0, seen
        assert not client.exists("x:1")
        _, err = child.communicate(timeout=TIMEOUT)
        assert child.returncode == 0, err
    finally:
        writer.close()
        if child.poll() is None:
            child.kill()
        child.communicate()  # closes the pipes


def test_RedisValueCache_near_cache_is_emptied_and_unused_while_pub_sub_is_down(own_server):
    c = make_client(own_server, timeout=1.0)
    vc = RedisValueCache(c, prefix="pd:", near_cache=10, cool_down=0)
    try:
        assert vc.wait_near_cache_live(TIMEOUT)
        vc.set_values([1], ["one"])
        assert vc._near is not None and len(vc._near) == 1
        own_server.kill()
        deadline = threading.Event()
        for _ in range(500):  # the listener notices within one poll: a bounded wait for it
            if not vc._near.live:
                break
            deadline.wait(0.01)
        assert not vc._near.live and len(vc._near) == 0
        with pytest.raises(redis.ConnectionError):
            vc.get_values([1])  # not served from the near cache: it may have missed an invalidation
        own_server.start()  # empty
        assert vc.wait_near_cache_live(TIMEOUT)  # resubscribed (with back-off)
        assert vc.get_values([1]) == [MISSING]
    finally:
        vc.close()
        c.close()


NEAR_FORKS = textwrap.dedent("""
    import os, sys
    import redis
    from dataloader_sync.redis import RedisValueCache

    client = redis.Redis(port=int(sys.argv[1]), socket_timeout=5, socket_connect_timeout=5)
    vc = RedisValueCache(client, prefix="nf:", near_cache=10)
    assert vc.wait_near_cache_live(10)
    vc.set_values([1], ["parent"])
    bad = 0
    for i in range(10):
        pid = os.fork()
        if pid == 0:
            try:  # the child starts empty, not live; its own listener makes it live
                ok = len(vc._near) == 0 and not vc._near.live
                ok = ok and vc.get_values([1]) == ["parent"] and vc.wait_near_cache_live(10)
                vc.close()
            except BaseException:
                ok = False
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        bad += status != 0
    assert vc.get_values([1]) == ["parent"] and vc._near.live
    vc.close()
    print(bad)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_RedisValueCache_near_cache_in_forked_children_starts_empty_with_a_listener_of_its_own(redis_server, client):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", NEAR_FORKS, str(redis_server.port)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


def test_RedisValueCache_near_cache_on_a_cluster_is_invalidated_through_cluster_pub_sub(redis_cluster):
    from redis.cluster import ClusterNode, RedisCluster

    cluster = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in redis_cluster.ports],
                           socket_timeout=5)
    writer = RedisValueCache(cluster, prefix="cn:", near_cache=10)
    reader = RedisValueCache(cluster, prefix="cn:", near_cache=10)  # another near cache: as another process's
    try:
        assert writer.wait_near_cache_live(TIMEOUT) and reader.wait_near_cache_live(TIMEOUT)
        near = reader._near
        assert near is not None
        wait = threading.Event()

        def until(condition: Any) -> None:
            for _ in range(500):  # the listener acts within milliseconds: a bounded wait for it
                if condition():
                    return
                wait.wait(0.01)

        seen = near.generation
        writer.set_values([1, 2], ["a", "b"])  # its message reaches the reader's listener (which evicts)
        until(lambda: near.generation > seen)
        assert near.generation > seen
        assert reader.get_values([1, 2]) == ["a", "b"] and len(near) == 2
        writer.invalidate([1])  # DEL per slot, then PUBLISH (a cluster pipeline refuses PUBLISH)
        until(lambda: near.get(["cn:1"]) == [MISSING])
        assert reader.get_values([1, 2]) == [MISSING, "b"]
    finally:
        writer.close()
        reader.close()
        cluster.close()


def test_RedisValueCache_probe_of_an_open_breaker_asks_Redis_not_the_near_cache(own_server):
    clock = FakeClock()
    c = make_client(own_server, timeout=0.5)
    vc = RedisValueCache(c, prefix="np:", near_cache=10, clock=clock)
    try:
        assert vc.wait_near_cache_live(TIMEOUT)
        vc.set_values([1], ["one"])  # in the near cache
        assert own_server.proc is not None
        os.kill(own_server.proc.pid, signal.SIGSTOP)  # frozen: the listener cannot tell
        try:
            assert load_all(DataLoader(Batch(), value_cache=vc), [2]) == [Batch.value(2)]  # MGET times out
            assert vc.breaker is not None and vc.breaker.is_open
            clock.advance(5.0)
            mgets = c.mgets
            assert load_all(DataLoader(Batch(), value_cache=vc), [1]) == [Batch.value(1)]  # the probe times out
            assert c.mgets == mgets + 1 and vc.breaker.is_open  # a near hit did not close it
        finally:
            os.kill(own_server.proc.pid, signal.SIGCONT)
    finally:
        vc.close()
        c.close()


# -- the near cache at load time (DataLoader asks get_local_values) ---------------------------------
def commands_sent(client: Any) -> int:
    """Commands the server ran, all connections (INFO commandstats), less the INFO calls that ask."""
    stats = client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")


def test_RedisValueCache_near_hit_at_load_time_sends_no_command_and_calls_no_batch_function(near, client):
    vc = near()
    assert callable(vc.get_local_values)
    batch = Batch()
    assert load_all(DataLoader(batch, value_cache=vc), [1, 2]) == [Batch.value(1), Batch.value(2)]  # fills
    sent, mgets, pipelines, calls = commands_sent(client), client.mgets, client.pipelines, len(batch.calls)
    loader = DataLoader(batch, value_cache=vc)
    many = loader.load_many([1, 2])
    assert many.done() and many.result(0) == [Batch.value(1), Batch.value(2)]
    one = loader.load(1)
    assert one.done() and one.result(0) == Batch.value(1) and loader.load(1) is one
    assert loader.dispatch_depth == 0 and loader.dispatch_count() == 0
    assert commands_sent(client) == sent and (client.mgets, client.pipelines) == (mgets, pipelines)
    assert len(batch.calls) == calls
    stats = loader.statistics()
    assert (stats.value_cache_hit_count, stats.value_cache_miss_count, stats.batch_invoke_count) == (2, 0, 0)
    mixed = DataLoader(batch, value_cache=vc)
    both = mixed.load_many([2, 3])  # 2 at load time; 3 queued, looked up at dispatch (one MGET), loaded
    assert mixed.load(2).done() and mixed.dispatch_depth == 1
    mixed.dispatch()
    assert both.result(TIMEOUT) == [Batch.value(2), Batch.value(3)] and batch.calls[-1] == [3]
    assert client.mgets == mgets + 1


def test_RedisValueCache_without_a_near_cache_offers_no_load_time_lookup(client):
    vc = RedisValueCache(client, prefix="nn:")
    assert vc.get_local_values is None
    loader = DataLoader(Batch(), value_cache=vc)
    assert loader._local is None and loader._plain  # load() keeps the plain loader's path
    fut = loader.load(1)
    assert not fut.done()
    loader.dispatch()
    assert fut.result(TIMEOUT) == Batch.value(1) and client.mgets == 1


def test_RedisValueCache_near_cache_not_live_falls_back_to_the_dispatch(near, client):
    vc = near()
    vc.set_values([1], ["one"])
    loader = DataLoader(Batch(), value_cache=vc)
    assert loader.load(1).done()  # live: a load-time hit
    vc.close()  # not live any more: the near cache answers nothing
    assert vc.get_local_values([1]) == [MISSING]
    mgets = client.mgets
    later = DataLoader(Batch(), value_cache=vc)
    fut = later.load(1)
    assert not fut.done() and later.dispatch_depth == 1
    later.dispatch()
    assert fut.result(TIMEOUT) == "one" and client.mgets == mgets + 1  # from Redis


def test_RedisValueCache_near_cache_answers_nothing_at_load_time_while_the_breaker_is_open(near, client):
    clock = FakeClock()
    vc = near(clock=clock)
    vc.set_values([1], ["one"])
    assert vc.get_local_values([1]) == ["one"]
    assert vc.breaker is not None
    vc.breaker.failed(ConnectionError("down"), "get_values")  # as a failed call opens it
    assert vc.get_local_values([1]) == [MISSING]
    fut = DataLoader(Batch(), value_cache=vc).load(1)
    assert not fut.done()  # queued: the dispatch decides (the breaker's probe asks Redis itself)


def test_RedisValueCache_near_lookup_keeps_int_keys_apart_from_equal_keys_of_other_types(near, client):
    vc = near()
    vc.set_values([1, True, 1.0, "1"], ["int", "bool", "float", "str"])
    assert vc.get_local_values([True, 1, 1.0, "1"]) == ["bool", "int", "float", "str"]
    assert vc.get_local_values([1, 1]) == ["int", "int"]
    vc.invalidate([1])  # the int's entry goes, the others stay
    assert vc.get_local_values([1, True, 1.0, "1"]) == [MISSING, "bool", "float", "str"]
    assert vc.get_local_values([[1]]) == [MISSING]  # a key with no stable name: nothing (the dispatch says so)


def test_RedisValueCache_near_entries_expire_at_load_time_too(near, client):
    clock = FakeClock()
    vc = near(near_ttl=10, clock=clock)
    vc.set_values([1], ["one"])
    clock.advance(5)
    vc.set_values([2], ["two"])
    assert vc.get_local_values([1, 2]) == ["one", "two"]
    clock.advance(5)  # 1 has lived 10 s: expired; 2 has 5 s left
    assert vc.get_local_values([2]) == ["two"] and vc.get_local_values([1, 2]) == [MISSING, "two"]
    clock.advance(5)
    assert vc.get_local_values([2]) == [MISSING]


INVALIDATOR = textwrap.dedent("""
    import sys
    import redis
    from dataloader_sync.redis import RedisValueCache

    client = redis.Redis(port=int(sys.argv[1]), socket_timeout=5, socket_connect_timeout=5)
    RedisValueCache(client, prefix="near:").invalidate([1])  # another process says "1 changed"
""")


def test_RedisValueCache_load_time_lookups_honour_an_invalidation_from_another_process(near, client, redis_server):
    vc = near()
    batch = Batch()
    vc.set_values([1, 2], ["stale", "two"])
    assert DataLoader(batch, value_cache=vc).load(1).result(0) == "stale"  # a load-time hit
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-c", INVALIDATOR, str(redis_server.port)], env=env, check=True, timeout=60)
    wait = threading.Event()
    for _ in range(500):  # the listener evicts within milliseconds: a bounded wait for it
        if vc.get_local_values([1]) == [MISSING]:
            break
        wait.wait(0.01)
    loader = DataLoader(batch, value_cache=vc)
    fut, other = loader.load(1), loader.load(2)
    assert not fut.done() and other.done()  # 1 is queued (invalidated), 2 is still a near hit
    loader.dispatch()
    assert fut.result(TIMEOUT) == Batch.value(1) and batch.calls == [[1]]  # deleted in Redis too: loaded


def test_RedisValueCache_near_hits_share_the_near_entries_finished_futures_until_an_invalidation(near, client):
    vc = near()
    vc.set_values([1, 2], ["one", "two"])
    futures = vc.get_local_futures([1, 2])
    assert type(futures) is _value_cache.AllFinished and [f.result(0) for f in futures] == ["one", "two"]
    assert vc.get_local_futures([1, 3]) == [futures[0], MISSING] and type(vc.get_local_futures([3])) is list
    first, second = DataLoader(Batch(), value_cache=vc), DataLoader(Batch(), value_cache=vc)
    assert first.load_many([1, 2]).result(0) == ["one", "two"] and second.load_many([1]).result(0) == ["one"]
    assert first.load(1) is futures[0] is second.load(1)  # made once, when the entry was put
    vc.invalidate([1])
    later = DataLoader(Batch(), value_cache=vc)
    fut = later.load_many([1, 2])
    assert later.dispatch_depth == 1 and later.load(2).done()  # 2 still a near hit (a future of its own here)
    later.dispatch()
    assert fut.result(TIMEOUT) == [Batch.value(1), "two"] and first.load(1).result(0) == "one"  # a request's own


def test_RedisValueCache_near_eviction_drops_both_readings_of_an_int_like_name(near, client):
    import enum

    class Shelf(enum.IntEnum):
        FIRST = 1

    vc = near()
    vc.set_values([1, Shelf.FIRST], ["int", "enum"])  # one Redis key (near:1), two near entries
    assert vc.redis_key(Shelf.FIRST) == vc.redis_key(1) == "near:1"
    assert vc.get_local_values([1, Shelf.FIRST]) == ["int", "enum"]  # the enum member is not confused with 1
    assert vc._near is not None
    vc._near.evict(["near:1"])  # what a message of another process's invalidate([1]) does
    assert vc.get_local_values([1, Shelf.FIRST]) == [MISSING, MISSING]


def test_NearCache_entries_put_out_of_clock_order_still_expire_on_time(client):
    from dataloader_sync.redis._near_cache import NearCache

    readings = iter([10.0, 5.0])  # the second put read the clock first but took the lock last
    now = [0.0]
    near = NearCache(client, "dataloader_sync:invalidate:ord:", 10, 30.0, clock=lambda: next(readings, now[0]),
                     prefix="ord:")
    try:
        near.set_live(True)
        near.put([1], ["late"], near.generation)  # expires at 40
        near.put([2], ["early"], near.generation)  # expires at 35: recorded before the one at 40
        now[0] = 34.0
        assert near.lookup([1, 2]) == ["late", "early"]
        now[0] = 35.0
        assert near.lookup([2]) == [MISSING] and near.lookup([1]) == ["late"]
        now[0] = 40.0
        assert near.lookup([1]) == [MISSING] and len(near) == 0
    finally:
        near.close()
