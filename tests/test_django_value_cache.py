"""dataloader_sync.django.DjangoValueCache over Django's cache framework: LocMemCache, and Django's
own Redis backend against a real redis-server (tests/redis_server.py); and the example project's
optional ``BOOKS_VALUE_CACHE`` setting.

Django is configured as in test_django.py (``django_example_project`` in tests/conftest.py, from
tests/django_settings.py, once per process); each test picks its CACHES with ``override_settings``.
"""
from __future__ import annotations

import datetime
import importlib.util
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from conftest import FakeClock
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from redis_server import RedisServer, _free_port, redis_server, running_redis_server  # noqa: F401
from value_cache_helpers import load_all, warnings_of

from dataloader_sync import MISSING, DataLoader
from dataloader_sync._core import _value_cache

TIMEOUT = 10.0
LOCMEM = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "value-cache-tests"}

pytestmark = pytest.mark.usefixtures("django_example_project")


def _django_redis_cache() -> type:
    from django.core.cache.backends.redis import RedisCache

    return RedisCache


def _django_locmem_cache() -> type:
    from django.core.cache.backends.locmem import LocMemCache

    return LocMemCache


@pytest.fixture(autouse=True)
def fresh_failure_log(monkeypatch):
    monkeypatch.setattr(_value_cache, "FAILURES", _value_cache.FailureLog())


@pytest.fixture(params=["locmem", "redis"])
def caches(request) -> Iterator[str]:
    """CACHES with a "shared" alias on LocMemCache or on Django's RedisCache; yields the backend name."""
    from django.core.cache import caches as django_caches
    from django.test import override_settings

    if request.param == "locmem":
        shared = dict(LOCMEM, TIMEOUT=123)
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        shared = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": server.url,
                  "TIMEOUT": 123}
    with override_settings(CACHES={"default": LOCMEM, "shared": shared}):
        django_caches["shared"].clear()
        try:
            yield request.param
        finally:
            django_caches["shared"].clear()
            django_caches["shared"].close()


def raw_redis(server: RedisServer) -> Any:
    import redis

    return redis.Redis.from_url(server.url)


class Batch:
    def __init__(self) -> None:
        self.calls: list[list[Any]] = []

    def __call__(self, keys: list[Any]) -> list[Any]:
        self.calls.append(list(keys))
        return [ValueError(k) if str(k).startswith("err") else {"key": k, "tuple": (k, k)} for k in keys]


# -- construction ----------------------------------------------------------------------------
def test_DjangoValueCache_checks_its_arguments_at_once():
    from dataloader_sync.django import DjangoValueCache

    with pytest.raises(ValueError, match="not in settings.CACHES"):
        DjangoValueCache("nope", prefix="p:")
    with pytest.raises(TypeError, match="cache must be"):
        DjangoValueCache(42, prefix="p:")
    with pytest.raises(ValueError, match="prefix"):
        DjangoValueCache(prefix="")
    with pytest.raises(ValueError, match="ttl"):
        DjangoValueCache(prefix="p:", ttl=-5)
    with pytest.raises(TypeError, match="ttl"):
        DjangoValueCache(prefix="p:", ttl="60")
    with pytest.raises(NotImplementedError, match="prefix"):
        DjangoValueCache(prefix="p:").clear()


def test_DjangoValueCache_is_exported_by_dataloader_sync_django():
    import dataloader_sync.django as dj

    assert "DjangoValueCache" in dj.__all__


# -- the store, on each backend ------------------------------------------------------------------
def test_DjangoValueCache_round_trips_values_and_reports_misses(caches):
    from dataloader_sync.django import DjangoValueCache

    vc = DjangoValueCache("shared", prefix="t:")
    values = [{"nested": [1, {"deep": (2, 3)}]}, None, "é", 0]
    vc.set_values([1, 2, 3, 4], values)
    assert vc.get_values([1, 2, 3, 4, 5]) == values + [MISSING]  # a stored None is a value
    vc.delete(1)
    assert vc.get_values([1]) == [MISSING]
    assert vc.get_values([]) == []


def test_DjangoValueCache_keys_are_distinct_and_memcached_safe(caches):
    from django.core.cache import caches as django_caches

    from dataloader_sync.django import DjangoValueCache

    vc = DjangoValueCache(django_caches["shared"], prefix="k:")  # a backend object works too
    keys = [1, "1", ("a b", 1), ("a%20b", 1), "line\nbreak", "é", "x" * 500, "x" * 501, None, b"\x00"]
    # filterwarnings=error: a key memcached would refuse raises CacheKeyWarning here
    vc.set_values(keys, list(range(len(keys))))
    assert vc.get_values(keys) == list(range(len(keys)))
    names = [vc.cache_key(k) for k in keys]
    assert len(set(names)) == len(keys)
    assert all(len(n) <= 200 and " " not in n for n in names)
    assert vc.cache_key((7, 42)) == "k:[7,42]"


def test_DjangoValueCache_names_a_batch_of_int_keys_as_cache_key_names_each(caches):
    from django.core.cache import caches as django_caches

    from dataloader_sync.django import DjangoValueCache

    for big in (10**12, 10**250):  # the second's name is longer than 200: hashed
        vc = DjangoValueCache("shared", prefix=f"i{big % 7}:")
        keys = [1, big, -5, 7]
        vc.set_values(keys, ["one", "big", "minus", "seven"])
        assert vc.get_values(keys) == ["one", "big", "minus", "seven"]
        names = [vc.cache_key(k) for k in keys]
        assert django_caches["shared"].get_many(names) == dict(zip(names, ["one", "big", "minus", "seven"]))
        assert vc.get_values([True, 1]) == [MISSING, "one"]  # True is not 1 (it has a name of its own)


def test_DjangoValueCache_with_a_loader_serves_the_next_request_and_skips_errors(caches):
    from dataloader_sync.django import DjangoValueCache

    vc = DjangoValueCache("shared", prefix="l:", ttl=30)
    batch = Batch()
    first = load_all(DataLoader(batch, value_cache=vc), [1, "err", 2])
    assert first[0] == {"key": 1, "tuple": (1, 1)} and isinstance(first[1], ValueError)
    second = DataLoader(batch, value_cache=vc)
    again = load_all(second, [1, "err", 2])
    assert again[0] == {"key": 1, "tuple": (1, 1)}  # pickled by Django: the tuple stays a tuple
    assert batch.calls == [[1, "err", 2], ["err"]]  # the error was not stored
    assert second.statistics().value_cache_hit_count == 2


def test_DjangoValueCache_on_Djangos_redis_backend_writes_with_the_ttl(redis_server):
    from django.core.cache import caches as django_caches
    from django.test import override_settings

    from dataloader_sync.django import DjangoValueCache

    shared = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_server.url,
              "TIMEOUT": 123}
    raw = raw_redis(redis_server)
    try:
        with override_settings(CACHES={"default": LOCMEM, "shared": shared}):
            raw.flushall()
            backend = django_caches["shared"]
            DjangoValueCache("shared", prefix="a:", ttl=datetime.timedelta(seconds=5)).set_values(["x"], [1])
            DjangoValueCache("shared", prefix="b:", ttl=0.2).set_values(["x"], [1])  # whole seconds, at least 1
            DjangoValueCache("shared", prefix="c:").set_values(["x"], [1])  # the backend's TIMEOUT
            ttl = {p: raw.ttl(backend.make_key(f'{p}:"x"')) for p in "abc"}
            assert 0 < ttl["a"] <= 5 and ttl["b"] == 1 and 100 < ttl["c"] <= 123, ttl
            backend.close()
    finally:
        raw.close()


def test_DjangoValueCache_on_Djangos_redis_backend_degrades_when_the_server_is_gone(caplog):
    from django.core.cache import caches as django_caches
    from django.test import override_settings

    from dataloader_sync.django import DjangoValueCache

    with running_redis_server() as server:
        shared = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": server.url,
                  "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}
        with override_settings(CACHES={"default": LOCMEM, "shared": shared}):
            vc = DjangoValueCache("shared", prefix="d:")
            batch = Batch()
            load_all(DataLoader(batch, value_cache=vc), [1])
            server.kill()
            for _ in range(3):
                assert load_all(DataLoader(batch, value_cache=vc), [1, 2]) == [
                    {"key": 1, "tuple": (1, 1)}, {"key": 2, "tuple": (2, 2)}]
            warned = warnings_of(caplog)
            assert len(warned) == 1 and len(batch.calls) == 4
            django_caches["shared"].close()


class CountingRedisCache(_django_redis_cache()):  # type: ignore[misc]
    """Django's own RedisCache, counting the get_many and set_many calls it is asked for."""

    calls: list[str] = []

    def get_many(self, keys, version=None):
        CountingRedisCache.calls.append("get_many")
        return super().get_many(keys, version=version)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        CountingRedisCache.calls.append("set_many")
        return super().set_many(data, timeout=timeout, version=version)


class HangingLocMemCache(_django_locmem_cache()):  # type: ignore[misc]
    """A LocMemCache that, while ``hang`` is set, hangs for a while and then raises (a socket timeout)."""

    hang = threading.Event()
    calls: list[str] = []

    def get_many(self, keys, version=None):
        HangingLocMemCache.calls.append("get_many")
        if HangingLocMemCache.hang.is_set():
            threading.Event().wait(0.2)  # the client's timeout
            raise TimeoutError("timed out")
        return super().get_many(keys, version=version)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        HangingLocMemCache.calls.append("set_many")
        if HangingLocMemCache.hang.is_set():
            threading.Event().wait(0.2)
            raise TimeoutError("timed out")
        return super().set_many(data, timeout=timeout, version=version)


def test_DjangoValueCache_on_RedisCache_at_a_dead_port_asks_it_once_per_cool_down(caplog):
    from django.core.cache import caches as django_caches
    from django.test import override_settings

    from dataloader_sync.django import DjangoValueCache

    dead = {"BACKEND": f"{__name__}.CountingRedisCache", "LOCATION": f"redis://127.0.0.1:{_free_port()}/0",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}
    clock = FakeClock()
    CountingRedisCache.calls = []
    with override_settings(CACHES={"default": LOCMEM, "shared": dead}):
        vc = DjangoValueCache("shared", prefix="dead:", clock=clock)
        batch = Batch()
        for _ in range(5):
            assert load_all(DataLoader(batch, value_cache=vc), [1, 2]) == [
                {"key": 1, "tuple": (1, 1)}, {"key": 2, "tuple": (2, 2)}]
            clock.advance(0.5)
        assert CountingRedisCache.calls == ["get_many"]  # one refused lookup, then skipped; no write tried
        assert len(batch.calls) == 5 and vc.breaker is not None and vc.breaker.is_open
        assert len(warnings_of(caplog)) == 1 and "dead:" in warnings_of(caplog)[0].getMessage()
        clock.advance(3.0)
        load_all(DataLoader(batch, value_cache=vc), [1])
        assert CountingRedisCache.calls == ["get_many", "get_many"]  # the probe (refused again)
        django_caches["shared"].close()


def test_DjangoValueCache_on_a_hanging_backend_pays_one_timeout_per_cool_down_then_probes(caplog):
    from django.test import override_settings

    from dataloader_sync.django import DjangoValueCache

    hanging = {"BACKEND": f"{__name__}.HangingLocMemCache", "LOCATION": "hanging"}
    clock = FakeClock()
    HangingLocMemCache.calls = []
    HangingLocMemCache.hang.set()
    try:
        with override_settings(CACHES={"default": LOCMEM, "shared": hanging}):
            vc = DjangoValueCache("shared", prefix="hang:", cool_down=10, clock=clock)
            batch = Batch()
            for k in range(5):
                assert load_all(DataLoader(batch, value_cache=vc), [k]) == [{"key": k, "tuple": (k, k)}]
            assert HangingLocMemCache.calls == ["get_many"]
            HangingLocMemCache.hang.clear()
            clock.advance(10.0)
            with caplog.at_level(logging.INFO, logger="dataloader_sync"):
                load_all(DataLoader(batch, value_cache=vc), [7])  # the probe works; its write too
            # the probe's lookup, the lease, the write's check and the write
            assert HangingLocMemCache.calls == ["get_many", "get_many", "set_many", "get_many", "set_many"]
            assert vc.breaker is not None and not vc.breaker.is_open
            assert vc.get_values([7]) == [{"key": 7, "tuple": (7, 7)}]
            assert [r.levelno for r in caplog.records if "breaker" in r.getMessage()] == [logging.WARNING,
                                                                                        logging.INFO]
    finally:
        HangingLocMemCache.hang.clear()


def test_DjangoValueCache_callable_ttl_and_negative_ttl_on_RedisCache(redis_server):
    from django.core.cache import caches as django_caches
    from django.test import override_settings

    from dataloader_sync.django import DjangoValueCache

    shared = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_server.url,
              "TIMEOUT": 123}
    raw = raw_redis(redis_server)
    try:
        with override_settings(CACHES={"default": LOCMEM, "shared": shared}):
            raw.flushall()
            backend = django_caches["shared"]
            vc = DjangoValueCache("shared", prefix="t:", ttl=lambda key, value: 1000 if key == "long" else None,
                                  negative_ttl=7)
            vc.set_values(["long", "default", "none"], ["v", "w", None])
            ttl = {k: raw.ttl(backend.make_key(f't:"{k}"')) for k in ("long", "default", "none")}
            assert 990 < ttl["long"] <= 1000 and 100 < ttl["default"] <= 123 and 0 < ttl["none"] <= 7, ttl
            assert vc.get_values(["long", "default", "none"]) == ["v", "w", None]
            backend.close()
    finally:
        raw.close()


def test_DjangoValueCache_single_flight_32_threads_make_one_batch_call_per_key():
    # On LocMemCache: Django's RedisCache makes a connection pool per thread that nothing closes.
    import concurrent.futures as cf

    from django.test import override_settings

    from dataloader_sync.django import DjangoValueCache

    with override_settings(CACHES={"default": LOCMEM, "shared": dict(LOCMEM, LOCATION="single-flight")}):
        _single_flight_stampede(DjangoValueCache("shared", prefix="sf:", single_flight=True), cf)


def _single_flight_stampede(vc: Any, cf: Any) -> None:
    assert vc.flights is not None
    n = 32
    joined = threading.Condition()
    counts = [0]
    join = vc.flights.join

    def counting_join(*args: Any) -> Any:
        out = join(*args)
        with joined:
            counts[0] += 1
            joined.notify_all()
        return out

    vc.flights.join = counting_join  # type: ignore[method-assign]
    calls: list[list[Any]] = []

    def batch(keys):
        calls.append(list(keys))
        with joined:  # hold the flight until every request has joined it
            assert joined.wait_for(lambda: counts[0] == n, TIMEOUT)
        return [{"key": k} for k in keys]

    start = threading.Barrier(n)

    def request(_: int) -> Any:
        loader = DataLoader(batch, value_cache=vc)
        fut = loader.load("hot")
        start.wait(TIMEOUT)
        loader.dispatch()
        return fut.result(TIMEOUT)

    with cf.ThreadPoolExecutor(n) as pool:
        assert list(pool.map(request, range(n))) == [{"key": "hot"}] * n
    assert calls == [["hot"]]
    assert vc.get_values(["hot"]) == [{"key": "hot"}]


def test_DjangoValueCache_checks_the_cache_tier_arguments_at_once():
    from dataloader_sync.django import DjangoValueCache

    with pytest.raises(ValueError, match="cool_down must be >= 0"):
        DjangoValueCache(prefix="p:", cool_down=-1)
    with pytest.raises(TypeError, match="cool_down"):
        DjangoValueCache(prefix="p:", cool_down="5")
    with pytest.raises(ValueError, match="negative_ttl"):
        DjangoValueCache(prefix="p:", negative_ttl=0)
    with pytest.raises(TypeError, match="single_flight must be a bool"):
        DjangoValueCache(prefix="p:", single_flight=1)
    with pytest.raises(ValueError, match="single_flight_timeout"):
        DjangoValueCache(prefix="p:", single_flight_timeout=0)
    assert DjangoValueCache(prefix="p:", cool_down=0).breaker is None
    assert DjangoValueCache(prefix="p:").breaker.cool_down == 5.0


# -- the example project's optional setting ------------------------------------------------------
@pytest.fixture
def data(example_books):
    """4 authors with 2 books each and 2 reviews per book; rolled back after the test."""
    example_books(authors=4, books=2, reviews=2)


NESTED = "{ authors { name books { title reviews { rating } } } }"


def post(client: Any, query: str, **variables: Any) -> Any:
    response = client.post("/graphql", {"query": query, "variables": variables}, content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


def test_example_project_BOOKS_VALUE_CACHE_serves_rows_to_later_requests_without_SQL(data, caches):
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext

    with override_settings(BOOKS_VALUE_CACHE="shared"):
        client = Client()
        with CaptureQueriesContext(connection) as cold:
            first = post(client, NESTED)
        with CaptureQueriesContext(connection) as warm:
            second = post(client, NESTED)
    assert first == second and len(first["authors"]) == 4
    assert len(cold.captured_queries) == 3  # authors, their books, those books' reviews
    assert len(warm.captured_queries) == 1, [q["sql"] for q in warm.captured_queries]  # only the root list

    # Without the setting, every request loads alone.
    with CaptureQueriesContext(connection) as off:
        assert post(Client(), NESTED) == first
    assert len(off.captured_queries) == 3


def test_example_project_mutation_deletes_the_shared_reviews_of_its_book(data, caches):
    from books.models import Book
    from django.test import Client, override_settings

    book = Book.objects.order_by("id").first()
    query = "query Q($id: ID!) { author(id: $id) { books { id reviews { rating } } } }"
    mutation = """mutation M($id: ID!) { addReview(bookId: $id, rating: 5, body: "yes") { review { rating } } }"""
    with override_settings(BOOKS_VALUE_CACHE="shared"):
        client = Client()
        before = post(client, query, id=book.author_id)["author"]["books"][0]["reviews"]
        post(client, mutation, id=book.id)
        after = post(client, query, id=book.author_id)["author"]["books"][0]["reviews"]
    assert [r["rating"] for r in after] == [r["rating"] for r in before] + [5]
