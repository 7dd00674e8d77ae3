"""The cache tier's settings and seams: argument checks, the breaker and single-flight table of a cache.

``RedisValueCache`` and ``DjangoValueCache`` build their ``breaker`` and
``flights`` attributes with ``make_breaker``/``make_single_flight`` and check
their ttls here; ``DataLoader``'s batch call finds them through
``breaker_of``/``flights_of`` (any value cache may carry them: the seam is
the ``CacheTier`` protocol).  A cache that carries no ``breaker`` attribute
gets one made for it on first use (``_DefaultBreakers``), so a user's own
``ValueCache`` is protected too.

Standard library only.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Optional, Protocol

from . import _fork
from ._breaker import Breaker
from ._single_flight import SingleFlight
from ._time import seconds

__all__: list[str] = []

# The breaker's default cool-down: long enough that an outage costs a request
# a client timeout at most once per 5 s per process (not on every request),
# short enough that a cache that is back is used again within seconds.
DEFAULT_COOL_DOWN = 5.0


class CacheTier(Protocol):
    """What a value cache may carry for the loader: both attributes are optional (see ``breaker_of``)."""

    breaker: Optional[Breaker]
    flights: Optional[SingleFlight]


def check_prefix(prefix: Any) -> str:
    """A shared cache's key prefix.

    Raises:
        TypeError: not a str; ValueError: empty (loaders sharing a store need their own prefixes).
    """
    if not isinstance(prefix, str):
        raise TypeError("prefix must be a str")
    if not prefix:
        raise ValueError("prefix must not be empty")
    return prefix


def check_ttl(ttl: Any) -> Optional[float]:
    """A time to live in seconds (a number or a ``timedelta``), or None for none.

    Raises:
        TypeError: not a number, timedelta or None; ValueError: not finite and > 0.
    """
    if ttl is None:
        return None
    return seconds("ttl", ttl, positive=True)  # the one rule for every delay (see _time)


def check_ttl_rule(ttl: Any) -> Any:
    """``ttl=`` of a shared cache: seconds, a ``timedelta``, None, or a callable ``(key, value) -> seconds | None``.

    Raises:
        TypeError, ValueError: as ``check_ttl`` for a non-callable.
    """
    return ttl if callable(ttl) and not isinstance(ttl, type) else check_ttl(ttl)


def ttl_of(rule: Any, key: Any, value: Any) -> Optional[float]:
    """The seconds *value* of *key* lives under *rule* (None: no expiry).

    Raises:
        TypeError, ValueError: the callable returned something that is not a valid ttl.
        Exception: what the callable raised.
    """
    if not callable(rule):
        return rule  # type: ignore[no-any-return]
    return check_ttl(rule(key, value))


def check_negative_ttl(negative_ttl: Any) -> Optional[float]:
    """``negative_ttl=``: seconds a ``None`` value lives, or None (``None`` values follow ``ttl``).

    Raises:
        TypeError, ValueError: not a number of seconds > 0 (or a timedelta), nor None.
    """
    return None if negative_ttl is None else seconds("negative_ttl", negative_ttl, positive=True)


def make_breaker(name: str, cool_down: Any, clock: Callable[[], float]) -> Optional[Breaker]:
    """The breaker of a shared cache: None when ``cool_down`` is 0.

    Raises:
        TypeError, ValueError: ``cool_down`` is not a number of seconds >= 0 (or a timedelta).
    """
    value = seconds("cool_down", cool_down)
    if value < 0:
        raise ValueError("cool_down must be >= 0 (0 turns the breaker off)")
    return None if value == 0 else Breaker(name, value, clock=clock)


def make_single_flight(single_flight: Any, timeout: Any, clock: Callable[[], float]) -> Optional[SingleFlight]:
    """The flights of a shared cache, or None when ``single_flight`` is False.

    Raises:
        TypeError: ``single_flight`` is not a bool; TypeError, ValueError: a bad timeout.
    """
    if not isinstance(single_flight, bool):
        raise TypeError("single_flight must be a bool")
    flights = SingleFlight(timeout, clock=clock)  # checks the timeout even when off
    return flights if single_flight else None


class _DefaultBreakers:
    """The breakers made for value caches that carry no ``breaker`` attribute (thread-safe).

    Found by ``id()`` and checked against a weak reference (a new cache at a
    dead one's address gets a new breaker); ``_lock`` guards the writers of
    ``_table``.  A dead cache's entry is dropped by its weak reference's
    callback, which takes no lock (a GC pass may run it on a thread that holds
    ``_lock``): a lone ``dict.pop`` is atomic, and the writers iterate over a
    copy.  So a breaker lives as long as its cache, as ``live_breakers()``
    expects.
    """

    MAX_ENTRIES = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the writers of _table (see above)
        self._table: dict[int, tuple[weakref.ref[Any], Breaker]] = {}
        _fork.renew_lock_in_child(self)  # a lock held by another thread at fork stays held in the child

    def _forget(self, key: int, ref: weakref.ref[Any]) -> None:
        entry = self._table.get(key)
        if entry is not None and entry[0] is ref:
            self._table.pop(key, None)

    def get(self, cache: Any) -> Optional[Breaker]:
        entry = self._table.get(id(cache))
        if entry is not None and entry[0]() is cache:
            return entry[1]
        key = id(cache)
        try:
            ref = weakref.ref(cache, lambda r: self._forget(key, r))
        except TypeError:
            return None  # no weak reference: the rate-limited failure log alone
        name = getattr(cache, "prefix", None)
        breaker = Breaker(name if isinstance(name, str) else type(cache).__qualname__, DEFAULT_COOL_DOWN)
        with self._lock:
            entry = self._table.get(key)
            if entry is not None and entry[0]() is cache:
                return entry[1]
            if len(self._table) >= self.MAX_ENTRIES:  # bounded: the oldest entry goes (its cache gets a new one)
                self._table.pop(next(iter(list(self._table))), None)
            self._table[key] = (ref, breaker)
        return breaker


_DEFAULT_BREAKERS = _DefaultBreakers()
_NONE = object()


def breaker_of(value_cache: Any) -> Optional[Breaker]:
    """The breaker in front of *value_cache*: its ``breaker`` attribute, or one made for it (see the notes)."""
    breaker = getattr(value_cache, "breaker", _NONE)
    if breaker is _NONE:
        return _DEFAULT_BREAKERS.get(value_cache)
    return breaker if isinstance(breaker, Breaker) else None


def flights_of(value_cache: Any) -> Optional[SingleFlight]:
    """The single-flight table of *value_cache* (its ``flights`` attribute), or None."""
    flights = getattr(value_cache, "flights", None)
    return flights if isinstance(flights, SingleFlight) else None
