"""DjangoValueCache: a ValueCache over Django's cache framework, so any configured backend serves.

Guarantees:
- ``get_values`` is one ``get_many``; ``set_values`` one ``set_many``: one
  round trip each on Django's Redis and memcached backends.
- A cache key is ``prefix`` followed by the loader's cache key as compact
  JSON (``dataloader_sync._key_strings``), percent-encoded where memcached
  would refuse a character (spaces, control characters, ``%``, ``#`` and
  non-ASCII), and replaced by ``#`` + its SHA-256 when longer than 200
  characters: distinct keys give distinct cache keys, the same in every
  process, and Django's ``CacheKeyWarning`` stays quiet.  Django then adds
  its own ``KEY_PREFIX`` and version, as for every key.
- Values are stored as the backend stores them: Django's built-in backends
  pickle, so this cache is as trusted as the Django cache it uses (sessions
  may live there too).  Anyone who can write to that cache can already run
  code in the workers that read it; nothing here changes that.
- The alias is resolved on every call (``caches[alias]``), as Django does per
  thread, so one instance serves every thread and request.
- A backend that raises (or times out) opens the cache's breaker
  (``cool_down``, as ``RedisValueCache``): every loader of the process skips
  it for that long, then one call probes.
- Invalidation is final as far as Django's cache API allows (it has no
  compare-and-set): a miss is leased (``lease``: one ``set_many`` of tokens,
  a ``Lease`` standing in the value's place; a key whose lease the lookup
  just saw shares it) and its value is written by ``set_leased_values``
  only where the key still holds the lease: one ``get_many`` to check, then
  one ``set_many`` (two round trips, so a miss costs two more than without
  leases).  ``invalidate`` deletes the leases, so a value read before it is
  refused after it — unless the invalidation's ``delete_many`` lands in the
  gap between the check and the write (the time of one round trip): then
  the older value is stored, and lives at most ``ttl``.  For the strict
  guarantee use ``RedisValueCache`` (one atomic script per key).
- With a callable ``ttl`` or a ``negative_ttl``, ``set_values`` makes one
  ``set_many`` per distinct timeout among its values (Django's API takes one
  timeout per call).
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import threading
import time
from collections.abc import Sequence
from itertools import repeat
from typing import Any, Callable, Optional
from urllib.parse import quote

from django.core.cache.backends.base import DEFAULT_TIMEOUT

from .._core import (
    DEFAULT_COOL_DOWN,
    MISSING,
    FailureLog,
    ValueCache,
    check_negative_ttl,
    check_prefix,
    check_ttl_rule,
    make_breaker,
    make_single_flight,
    seconds,
    ttl_of,
)
from .._key_strings import encode_key

_BAD_TTL = FailureLog()  # values the ttl callable could not give a ttl, per cache
LEASE_TTL = 60  # seconds a lease stands in for a value at most by default (whole seconds, as Django keeps them)


class Lease:
    """What a leased key holds in the value's place (pickled by Django's backends): a miss to readers."""

    __slots__ = ("token",)

    def __init__(self, token: str) -> None:
        self.token = token

    def __eq__(self, other: object) -> bool:
        return type(other) is Lease and other.token == self.token

    def __hash__(self) -> int:
        return hash(self.token)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Lease, (self.token,))

    def __repr__(self) -> str:
        return f"Lease({self.token!r})"

__all__ = ["DjangoValueCache"]

_SAFE = "!\"$&'()*+,-./:;<=>?@[\\]^_`{|}~"  # printable ASCII kept as is (not %, #, space)
_INT = {int}
_MAX_KEY = 200  # memcached's limit is 250 with Django's KEY_PREFIX and version
# A character quote() would change: outside printable ASCII (space included), or % or #.
_NEEDS_QUOTING = re.compile(r"[^!-~]|[%#]").search


class DjangoValueCache(ValueCache[Any, Any]):
    """A ``ValueCache`` in a cache of Django's ``CACHES`` setting.

    Shared by every process whose loaders use the same backend and prefix;
    a value that depends on who asks must carry the viewer in its key (see
    ``RedisValueCache``).  Thread-safe as Django's cache backends are.

    Args:
        cache: the alias in ``CACHES`` (default ``"default"``), or a cache
            backend object (``caches["..."]``).
        prefix: put before every key, e.g. ``"books:author:"``; give every
            loader its own.
        ttl: seconds (or a ``timedelta``) a written value lives, rounded up
            to whole seconds as Django's backends keep them; None: the
            backend's ``TIMEOUT`` setting (Django's convention; 300 s unless
            configured); or a callable ``(key, value) -> seconds | None``
            (None: the backend's ``TIMEOUT``).
        negative_ttl: seconds a ``None`` value lives instead of ``ttl``;
            None: ``None`` follows ``ttl``.
        cool_down: seconds the cache is skipped by every loader of the
            process after a failed call (default 5); 0 turns the breaker off.
            The breaker is named after the prefix.
        single_flight: when True, concurrent misses of one key in this
            process make one batch-function call (see ``RedisValueCache``).
        single_flight_timeout: the longest a loader waits for another's
            flight (default 10 s).
        lease_ttl: seconds a miss's lease stands in for its value at most
            (default 60, whole seconds): a load that takes longer stores nothing.
        clock: a monotonic clock (the breaker's; injected by tests).

    Raises:
        TypeError, ValueError: at once, for an argument of the wrong kind, or
            an alias missing from ``CACHES`` when settings are configured.
    """

    def __init__(self, cache: Any = "default", *, prefix: str, ttl: Any = None, negative_ttl: Any = None,
                 cool_down: Any = DEFAULT_COOL_DOWN, single_flight: bool = False,
                 single_flight_timeout: Any = 10.0, lease_ttl: Any = LEASE_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(cache, str):
            from django.conf import settings

            if settings.configured and cache not in settings.CACHES:
                raise ValueError(f"cache {cache!r} is not in settings.CACHES")
        elif not all(callable(getattr(cache, m, None)) for m in ("get_many", "set_many", "delete")):
            raise TypeError("cache must be an alias of settings.CACHES or a Django cache backend")
        if not callable(clock):
            raise TypeError("clock must be callable")
        self._cache = cache
        self._prefix = check_prefix(prefix)
        self._ttl = check_ttl_rule(ttl)
        self._timeout: Any = (DEFAULT_TIMEOUT if self._ttl is None or callable(self._ttl)
                              else _whole_seconds(self._ttl))
        negative = check_negative_ttl(negative_ttl)
        self._negative_timeout: Any = None if negative is None else _whole_seconds(negative)
        self._lease_timeout = _whole_seconds(seconds("lease_ttl", lease_ttl, positive=True))
        self.breaker = make_breaker(self._prefix, cool_down, clock)
        self.flights = make_single_flight(single_flight, single_flight_timeout, clock)
        # The leases this thread's last get_values saw, by cache key: lease() shares them (a loader
        # leases the misses of a lookup right after it, on the same thread).
        self._seen = threading.local()

    @property
    def prefix(self) -> str:
        return self._prefix

    def __repr__(self) -> str:
        cache = self._cache if isinstance(self._cache, str) else type(self._cache).__name__
        timeout = "TIMEOUT" if self._timeout is DEFAULT_TIMEOUT else self._timeout
        return f"DjangoValueCache({cache!r}, prefix={self._prefix!r}, ttl={timeout!r})"

    def backend(self) -> Any:
        """The Django cache backend (this thread's, for an alias)."""
        if isinstance(self._cache, str):
            from django.core.cache import caches

            return caches[self._cache]
        return self._cache

    def cache_key(self, key: Any) -> str:
        """The Django cache key of a loader's cache key (before Django's own KEY_PREFIX and version).

        Raises:
            TypeError: a key type that has no stable name (see ``RedisValueCache``).
        """
        if type(key) is int:  # the common key: digits only, nothing to quote (the hit path's fast lane)
            name = self._prefix + int.__repr__(key)
        else:
            encoded = encode_key(key)
            name = self._prefix + (quote(encoded, safe=_SAFE) if _NEEDS_QUOTING(encoded) else encoded)
        if len(name) > _MAX_KEY:
            name = self._prefix + "#" + hashlib.sha256(name.encode("utf-8")).hexdigest()
        return name

    def get_values(self, keys: Sequence[Any]) -> list[Any]:
        """One ``get_many``: the value of each key, or ``MISSING``."""
        if not keys:
            return []
        names = self._cache_keys(keys)
        found = self.backend().get_many(names)
        values = list(map(found.get, names, repeat(MISSING, len(names))))
        if Lease not in set(map(type, found.values())):  # the common answer: no lease, no Python per key
            self._seen.leases = None
            return values
        self._seen.leases = {name: value for name, value in found.items() if type(value) is Lease}
        return [MISSING if type(value) is Lease else value for value in values]

    def lease(self, keys: Sequence[Any]) -> list[Any]:
        """Lease *keys*, which a load missed (``Leasing.lease``): one ``set_many`` of new leases, for
        ``lease_ttl``; a key whose lease this thread's last lookup saw shares that lease instead.

        Raises:
            TypeError: a key type that has no stable name.
            Exception: what the backend raises.
        """
        names = self._cache_keys(keys) if keys else []
        seen = getattr(self._seen, "leases", None) or {}
        base = os.urandom(12).hex() + ":"  # unique across processes, forks and time
        leases = [seen.get(name) or Lease(base + str(i)) for i, name in enumerate(names)]
        new = {name: lease for name, lease in zip(names, leases) if name not in seen}
        if new:
            self.backend().set_many(new, timeout=self._lease_timeout)
        return leases

    def set_leased_values(self, keys: Sequence[Any], values: Sequence[Any], leases: Sequence[Any]) -> list[Any]:
        """Write each value where its key still holds its lease (``Leasing.set_leased_values``): one
        ``get_many`` to check, then the ``set_many`` of ``set_values`` (not atomic: see the module notes).

        Returns:
            Per key: True where its lease held; else the value another load
            stored in its place, or ``MISSING``.

        Raises:
            Exception: what the backend raises.
        """
        if not keys:
            return []
        names = self._cache_keys(keys)
        current = self.backend().get_many(names)
        held: list[Any] = []
        write_keys: list[Any] = []
        write_values: list[Any] = []
        for key, value, lease, name in zip(keys, values, leases, names):
            now = current.get(name, MISSING)
            if type(now) is Lease:
                if now == lease:
                    held.append(True)
                    write_keys.append(key)
                    write_values.append(value)
                else:
                    held.append(MISSING)
            else:
                held.append(now)
        if write_keys:
            self.set_values(write_keys, write_values)
        return held

    def _cache_keys(self, keys: Sequence[Any]) -> list[str]:
        """``[self.cache_key(k) for k in keys]``, in C for a batch of int keys (the common one)."""
        if set(map(type, keys)) == _INT:
            names = list(map(self._prefix.__add__, map(int.__repr__, keys)))
            if max(map(len, names)) <= _MAX_KEY:
                return names
        return [self.cache_key(k) for k in keys]

    def set_values(self, keys: Sequence[Any], values: Sequence[Any]) -> None:
        """One ``set_many`` with the ttl (one per distinct timeout with a ttl callable or ``negative_ttl``)."""
        if not keys:
            return
        if not callable(self._ttl) and self._negative_timeout is None:
            self.backend().set_many({self.cache_key(k): v for k, v in zip(keys, values)}, timeout=self._timeout)
            return
        by_timeout: dict[Any, dict[str, Any]] = {}
        failed: Optional[Exception] = None
        for key, value in zip(keys, values):
            try:
                timeout = self._timeout_of(key, value)
            except Exception as exc:
                failed = failed or exc
                continue
            by_timeout.setdefault(timeout, {})[self.cache_key(key)] = value
        backend = self.backend()
        for timeout, mapping in by_timeout.items():
            backend.set_many(mapping, timeout=timeout)
        if failed is not None:  # not raised: a bad ttl answer is no outage (it must not open the breaker)
            _BAD_TTL.failed(self, "set_values (the ttl callable failed; those values were not written)", failed)

    def _timeout_of(self, key: Any, value: Any) -> Any:
        if value is None and self._negative_timeout is not None:
            return self._negative_timeout
        if not callable(self._ttl):
            return self._timeout
        ttl = ttl_of(self._ttl, key, value)
        return DEFAULT_TIMEOUT if ttl is None else _whole_seconds(ttl)

    def delete(self, key: Any) -> None:
        """Delete the value of *key* for every process (``invalidate([key])``)."""
        self.invalidate([key])

    def invalidate(self, keys: Sequence[Any]) -> None:
        """Delete the values of *keys* for every process: one ``delete_many`` (as ``RedisValueCache.invalidate``).

        Not guarded by the breaker: it raises what the backend raises.
        """
        if keys:
            self.backend().delete_many([self.cache_key(k) for k in keys])
            if self.flights is not None:  # a load that begins from now on starts a flight of its own
                self.flights.forget(keys)

    def clear(self) -> None:
        """Not supported: Django's cache API cannot delete by prefix.

        ``caches[alias].clear()`` empties the whole cache (sessions and all);
        use a cache alias of its own for the value caches if that is what you
        want, or change the prefix (e.g. ``"books:v2:"``) to start afresh.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError(
            "Django's cache API cannot delete by prefix: change the prefix, or give the value caches "
            "a CACHES alias of their own and call caches[alias].clear()"
        )


def _whole_seconds(ttl: float) -> int:
    return max(1, math.ceil(ttl))
