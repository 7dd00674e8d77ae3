"""dataloader_sync._core._cache_tier: which breaker and single-flight table a value cache carries; the shared checks."""
from __future__ import annotations

import gc
import weakref

import pytest
from conftest import FakeClock

from dataloader_sync import Breaker
from dataloader_sync._core._breaker import live_breakers
from dataloader_sync._core._cache_tier import (
    DEFAULT_COOL_DOWN,
    breaker_of,
    check_negative_ttl,
    check_ttl_rule,
    flights_of,
    make_breaker,
    make_single_flight,
    ttl_of,
)
from dataloader_sync._core._single_flight import SingleFlight


class Plain:
    """A cache of a user's own, with no breaker attribute."""


class Prefixed:
    prefix = "books:"


class Slotted:
    __slots__ = ()  # cannot be weakly referenced


def test_breaker_of_makes_one_breaker_per_cache_named_after_its_prefix_or_class():
    a, b, p = Plain(), Plain(), Prefixed()
    assert breaker_of(a) is breaker_of(a) and breaker_of(a) is not breaker_of(b)
    assert breaker_of(a).name == "Plain" and breaker_of(p).name == "books:"  # type: ignore[union-attr]
    assert breaker_of(a).cool_down == DEFAULT_COOL_DOWN  # type: ignore[union-attr]
    made = weakref.ref(breaker_of(a))  # type: ignore[arg-type]
    assert made() in live_breakers()
    del a
    gc.collect()
    assert made() is None  # the cache's breaker goes with it (no reference from the table)


def test_breaker_of_honours_a_breaker_attribute_and_None():
    own = Plain()
    chosen = Breaker("chosen", 1.0)
    own.breaker = chosen  # type: ignore[attr-defined]
    assert breaker_of(own) is chosen
    own.breaker = None  # type: ignore[attr-defined]
    assert breaker_of(own) is None
    assert breaker_of(Slotted()) is None  # no weak reference: the rate-limited failure log alone


def test_flights_of_is_the_flights_attribute_when_it_is_a_SingleFlight():
    cache = Plain()
    assert flights_of(cache) is None
    cache.flights = SingleFlight(1.0)  # type: ignore[attr-defined]
    assert flights_of(cache) is cache.flights  # type: ignore[attr-defined]
    cache.flights = True  # type: ignore[attr-defined]
    assert flights_of(cache) is None


def test_make_breaker_and_make_single_flight_check_their_arguments():
    assert make_breaker("x", 0, FakeClock()) is None
    assert make_breaker("x", 2, FakeClock()).cool_down == 2.0  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="cool_down must be >= 0"):
        make_breaker("x", -0.5, FakeClock())
    with pytest.raises(TypeError, match="cool_down"):
        make_breaker("x", None, FakeClock())
    assert make_single_flight(False, 10, FakeClock()) is None
    assert make_single_flight(True, 3, FakeClock()).timeout == 3.0  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="single_flight_timeout"):
        make_single_flight(False, 0, FakeClock())  # checked even when off


def test_ttl_rules_numbers_callables_and_negative_ttls():
    assert check_ttl_rule(None) is None and check_ttl_rule(5) == 5.0
    rule = check_ttl_rule(lambda key, value: 10 if key else None)
    assert ttl_of(rule, 1, "v") == 10.0 and ttl_of(rule, 0, "v") is None and ttl_of(7.0, 1, "v") == 7.0
    with pytest.raises(ValueError, match="ttl"):
        ttl_of(lambda key, value: -1, 1, "v")
    with pytest.raises(TypeError, match="ttl"):
        check_ttl_rule(str)  # a class is not a rule
    assert check_negative_ttl(None) is None and check_negative_ttl(30) == 30.0
    with pytest.raises(ValueError, match="negative_ttl"):
        check_negative_ttl(0)
