"""Tests for dataloader_sync._predicates, after java-dataloader's DispatchPredicateTest."""
from __future__ import annotations

import datetime
from typing import Any

import pytest
from conftest import FakeClock

from dataloader_sync import (
    DISPATCH_ALWAYS,
    DISPATCH_NEVER,
    DataLoader,
    DispatchPredicate,
    dispatch_if_depth_greater_than,
    dispatch_if_longer_than,
)
from dataloader_sync._predicates import as_predicate


def id_loader(**kwargs: Any) -> DataLoader:
    return DataLoader(lambda keys: keys, **kwargs)


ALWAYS_TRUE = DispatchPredicate(lambda name, loader: True, "always_true")
ALWAYS_FALSE = DispatchPredicate(lambda name, loader: False, "always_false")


def test_DispatchPredicate_logical_operators():
    loader = id_loader()
    t, f = ALWAYS_TRUE, ALWAYS_FALSE
    assert not (f & f)("k", loader)
    assert not (f & t)("k", loader)
    assert not (t & f)("k", loader)
    assert (t & t)("k", loader)

    assert (~f)("k", loader)
    assert not (~t)("k", loader)

    assert (t | f)("k", loader)
    assert (f | t)("k", loader)
    assert not (f | f)("k", loader)
    assert (t | t)("k", loader)


def test_DispatchPredicate_and_or_short_circuit():
    calls: list[str] = []

    def recording(result: bool, label: str) -> DispatchPredicate:
        return DispatchPredicate(lambda name, loader: calls.append(label) or result, label)

    loader = id_loader()
    (recording(False, "left") & recording(True, "right"))("k", loader)
    assert calls == ["left"]
    calls.clear()
    (recording(True, "left") | recording(False, "right"))("k", loader)
    assert calls == ["left"]


def test_DispatchPredicate_receives_name_and_loader():
    seen: list[Any] = []
    pred = DispatchPredicate(lambda name, loader: seen.append((name, loader)) or True)
    loader = id_loader()
    assert pred("users", loader) is True
    assert seen == [("users", loader)]


def test_DispatchPredicate_result_is_a_bool():
    pred = DispatchPredicate(lambda name, loader: 1)
    assert pred("k", id_loader()) is True
    assert DispatchPredicate(lambda name, loader: None)("k", id_loader()) is False


def test_DISPATCH_ALWAYS_and_DISPATCH_NEVER():
    loader = id_loader()
    assert DISPATCH_ALWAYS("k", loader) is True
    assert DISPATCH_NEVER("k", loader) is False
    assert repr(DISPATCH_ALWAYS) == "DISPATCH_ALWAYS"
    assert repr(DISPATCH_NEVER) == "DISPATCH_NEVER"
    assert (~DISPATCH_NEVER)("k", loader) is True


def test_dispatch_if_depth_greater_than():
    loader = id_loader()
    pred = dispatch_if_depth_greater_than(4)
    assert not pred("k", loader)
    for k in "1234":
        loader.load(k)
    assert not pred("k", loader)
    loader.load("5")
    assert pred("k", loader)
    loader.dispatch()
    assert not pred("k", loader)


def test_dispatch_if_depth_greater_than_zero_means_any_queued_key():
    loader = id_loader()
    pred = dispatch_if_depth_greater_than(0)
    assert not pred("k", loader)
    loader.load(1)
    assert pred("k", loader)


def test_dispatch_if_longer_than_with_a_fake_clock():
    clock = FakeClock()
    loader = id_loader(clock=clock)
    pred = dispatch_if_longer_than(0.2)
    assert not pred("k", loader)
    clock.advance(0.199)
    assert not pred("k", loader)
    clock.advance(0.1)
    assert pred("k", loader)
    loader.dispatch()  # resets the time since dispatch
    assert not pred("k", loader)


def test_dispatch_if_longer_than_accepts_a_timedelta():
    clock = FakeClock()
    loader = id_loader(clock=clock)
    pred = dispatch_if_longer_than(datetime.timedelta(milliseconds=200))
    assert not pred("k", loader)
    clock.advance(0.3)
    assert pred("k", loader)
    assert repr(pred) == "dispatch_if_longer_than(0.2)"


def test_DispatchPredicate_combined_depth_and_time():
    clock = FakeClock()
    loader = id_loader(clock=clock)
    combined = dispatch_if_longer_than(0.2) & dispatch_if_depth_greater_than(4)
    assert not combined("k", loader)
    clock.advance(0.5)  # enough time for one condition
    assert not combined("k", loader)
    for k in "1234":
        loader.load(k)
    assert not combined("k", loader)
    loader.load("5")
    assert combined("k", loader)


def test_DispatchPredicate_accepts_plain_callables_on_either_side():
    def has_name_users(name: str, loader: Any) -> bool:
        return name == "users"

    loader = id_loader()
    left = has_name_users & DISPATCH_ALWAYS
    right = DISPATCH_ALWAYS & has_name_users
    either = has_name_users | DISPATCH_NEVER
    for pred in (left, right, either):
        assert isinstance(pred, DispatchPredicate)
        assert pred("users", loader) and not pred("posts", loader)
    assert (DISPATCH_NEVER | (lambda name, loader: True))("k", loader)


def test_DispatchPredicate_reprs_read_like_the_call():
    pred = dispatch_if_depth_greater_than(10) | dispatch_if_longer_than(0.05)
    assert repr(pred) == "(dispatch_if_depth_greater_than(10) | dispatch_if_longer_than(0.05))"
    assert repr(~DISPATCH_ALWAYS) == "~DISPATCH_ALWAYS"
    assert repr(DISPATCH_ALWAYS & ~DISPATCH_NEVER) == "(DISPATCH_ALWAYS & ~DISPATCH_NEVER)"

    def only_users(name: str, loader: Any) -> bool:
        return name == "users"

    assert repr(only_users & DISPATCH_ALWAYS) == "(only_users & DISPATCH_ALWAYS)"
    assert repr(DISPATCH_ALWAYS | only_users) == "(DISPATCH_ALWAYS | only_users)"
    assert repr(only_users | DISPATCH_NEVER) == "(only_users | DISPATCH_NEVER)"
    assert repr(DispatchPredicate(only_users, "users only")) == "users only"


def test_DispatchPredicate_plain_callable_on_the_left_is_evaluated_first():
    calls: list[str] = []

    def plain(name: str, loader: Any) -> bool:
        calls.append("plain")
        return False

    (plain & DispatchPredicate(lambda name, loader: calls.append("pred") or True))("k", id_loader())
    assert calls == ["plain"]


def test_as_predicate_wraps_plain_callables_once():
    assert as_predicate(DISPATCH_ALWAYS) is DISPATCH_ALWAYS

    def only_users(name: str, loader: Any) -> bool:
        return name == "users"

    wrapped = as_predicate(only_users)
    assert isinstance(wrapped, DispatchPredicate) and repr(wrapped) == "only_users"


@pytest.mark.parametrize(
    "make, error, parameter",
    [
        (lambda: dispatch_if_depth_greater_than("4"), TypeError, "n"),
        (lambda: dispatch_if_depth_greater_than(4.0), TypeError, "n"),
        (lambda: dispatch_if_depth_greater_than(True), TypeError, "n"),
        (lambda: dispatch_if_longer_than("1s"), TypeError, "seconds must be a number"),
        (lambda: dispatch_if_longer_than(float("nan")), ValueError, "seconds must be finite"),
        (lambda: dispatch_if_longer_than(None), (TypeError, ValueError), "seconds"),
        (lambda: DispatchPredicate(42), TypeError, "fn"),
        (lambda: DISPATCH_ALWAYS & 42, TypeError, "other"),
        (lambda: DISPATCH_ALWAYS | "x", TypeError, "other"),
        (lambda: as_predicate(None), TypeError, "predicate"),
    ],
)
def test_DispatchPredicate_rejects_bad_arguments_naming_the_parameter(make, error, parameter):
    with pytest.raises(error, match=parameter):
        make()
