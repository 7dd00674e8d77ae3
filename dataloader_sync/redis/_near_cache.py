"""NearCache: a process-local LRU in front of Redis, kept honest by a pub/sub channel.

``RedisValueCache(near_cache=N)`` holds up to N values of this process's
reads and writes, each for at most ``near_ttl`` seconds, so a hit costs no
round trip.  Whoever changes a key says so on the cache's channel
(``dataloader_sync:invalidate:<prefix>``): ``invalidate(keys)`` and every
``set_values`` of a cache with a near cache publish the Redis keys they
changed, and every process's listener evicts them.

Guarantees:
- The near cache is read and filled only while its listener is subscribed
  (``live``); until then, and from the moment the listener sees its
  connection fail, every call goes to Redis, and the entries are dropped
  (invalidations may have been missed).  A (re)subscription starts empty.
  What pub/sub cannot tell (a frozen server, a message lost between the
  failure and its detection) is bounded by ``near_ttl``.
- One listener thread per near cache, a daemon named
  ``dataloader-sync-near-<prefix>``, started on first use (and again in a
  forked child, which starts empty), ended by ``close()`` within one poll
  (0.2 s); it holds the near cache weakly, so a cache dropped without
  ``close()`` ends it too.  It runs no user code; its failures are logged
  (rate-limited) and it reconnects with a bounded back-off.
- Values are shared by the requests of the process (no copy per hit):
  treat loaded values as read-only.
- ``local_values(keys)`` is ``RedisValueCache.get_local_values``, the
  loader's load-time lookup (``local_futures``, its ``get_local_futures``:
  each entry keeps a future finished with its value, made once when the
  entry is put and handed to every loader that hits it): it answers only while live and while the
  cache's breaker is closed (a failed call to Redis says the listener may be
  missing what it cannot see fail: a frozen server, a partition), and never
  with an evicted or expired entry.  An entry is found by its *entry key*:
  an exact ``int`` cache key is its own entry key (a batch of them is looked
  up with no Redis key built, in C), any other key its Redis key (a str:
  the two never meet); an eviction, which names Redis keys, drops both
  readings of the name.
"""
from __future__ import annotations

import json
import os
import threading
import time
import uuid
import weakref
from collections import OrderedDict, deque
from collections.abc import Hashable, Sequence
from operator import itemgetter
from typing import Any, Callable, Optional

from .._core import MISSING, AllFinished, Breaker, FailureLog, Future, completed_future
from .._key_strings import encode_key

__all__ = ["NearCache"]

POLL = 0.2  # seconds the listener waits for a message before it looks at its stop flag
MAX_BACKOFF = 5.0  # seconds between two reconnection attempts at most

_LISTENER_FAILURES = FailureLog()
_INT = {int}
_EXPIRES = itemgetter(0)
_VALUE = itemgetter(1)
_FUTURE = itemgetter(2)
_consume: Callable[[Any], None] = deque(maxlen=0).extend  # runs an iterator to its end, in C
_ALL: weakref.WeakSet[NearCache] = weakref.WeakSet()  # for the at-fork hook (added to under the GIL only)


class NearCache:
    """The LRU and its listener (thread-safe).

    Args:
        client: the redis-py client (its ``pubsub()`` makes the listener's connection).
        channel: the pub/sub channel of the cache.
        size: the most entries it holds (> 0).
        ttl: the most seconds an entry lives (> 0).
        clock: a monotonic clock.
        prefix: the cache's key prefix (a Redis key is it + ``encode_key(key)``).
        breaker: the cache's breaker (``local_values`` answers nothing while it is open), or None.
    """

    def __init__(self, client: Any, channel: str, size: int, ttl: float,
                 clock: Callable[[], float] = time.monotonic, *, prefix: str = "",
                 breaker: Optional[Breaker] = None) -> None:
        self.client = client
        self.prefix = prefix
        self.breaker = breaker
        self.channel = channel
        self.size = size
        self.ttl = ttl
        self.clock = clock
        self.sender = uuid.uuid4().hex  # our own messages are not evictions for us
        self._lock = threading.Lock()  # guards _entries, _expiries, generation, live, _listener, _stop
        # entry key (an exact int cache key, else its Redis key) -> (expires, value, a future finished with
        # the value: what local_futures hands to loaders), least recently used first
        self._entries: OrderedDict[Hashable, tuple[float, Any, Future[Any]]] = OrderedDict()
        # (expires, entry key, entry) per put, in put order = expiry order (see _sweep_locked)
        self._expiries: deque[tuple[float, Hashable, tuple[float, Any, Future[Any]]]] = deque()
        self.live = False  # the listener is subscribed: entries may be trusted (up to their ttl)
        # Bumped by every eviction: a fill read from Redis before an eviction
        # it did not see must not put the evicted value back.
        self.generation = 0
        self._listener: Optional[threading.Thread] = None
        self._live_event = threading.Event()  # set while live (for wait_live)
        self._stop = threading.Event()
        self._closed = False
        _ALL.add(self)

    # -- the LRU ---------------------------------------------------------------------------
    def entry_keys(self, keys: Sequence[Any], names: Optional[Sequence[str]] = None) -> list[Hashable]:
        """The entry key of each cache key (*names*: their Redis keys, when the caller has them).

        Raises:
            TypeError: a key type that has no stable name (``encode_key``).
        """
        kinds = set(map(type, keys))
        if kinds == _INT:
            return list(keys)
        if names is None:
            prefix = self.prefix
            return [k if type(k) is int else prefix + encode_key(k) for k in keys]
        if int not in kinds:
            return list(names)
        return [k if type(k) is int else n for k, n in zip(keys, names)]

    def local_values(self, keys: Sequence[Any]) -> list[Any]:
        """``RedisValueCache.get_local_values``: the value of each key held here, or ``MISSING``.

        ``MISSING`` for every key while not live, while the breaker is open,
        or for a key type that has no stable name (the dispatch's lookup
        says so).
        """
        return self._local(keys, _VALUE)

    def local_futures(self, keys: Sequence[Any]) -> list[Any]:
        """``RedisValueCache.get_local_futures``: ``local_values`` as the entries' finished futures."""
        return self._local(keys, _FUTURE)

    def _local(self, keys: Sequence[Any], part: Any) -> list[Any]:
        if self._listener is None:
            self._ensure_listener()
        breaker = self.breaker
        if not self.live or (breaker is not None and breaker.is_open):
            return [MISSING] * len(keys)
        if set(map(type, keys)) == _INT:  # the common batch: the keys are the entry keys
            return self.lookup(keys, part)
        try:
            return self.lookup(self.entry_keys(keys), part)
        except TypeError:
            return [MISSING] * len(keys)

    def get(self, names: Sequence[str]) -> list[Any]:
        """The entry of each Redis key, or ``MISSING`` (all ``MISSING`` while not live)."""
        self._ensure_listener()
        return self.lookup([self._int_of(name) for name in names])

    def lookup(self, ekeys: Sequence[Hashable], part: Any = _VALUE) -> list[Any]:
        """The value (*part* ``_FUTURE``: the future) of each entry key, or ``MISSING`` (all
        ``MISSING`` while not live); a hit is made the most recently used.

        All hits, none expired (the common case): a few passes in C under the
        lock, no Python per key.
        """
        if not self.live:
            return [MISSING] * len(ekeys)
        now = self.clock()
        entries = self._entries
        with self._lock:
            if not self.live:
                return [MISSING] * len(ekeys)
            if self._expiries and self._expiries[0][0] <= now:
                self._sweep_locked(now)
            found = list(map(entries.get, ekeys))
            try:
                # a None (a miss): TypeError; all hits, as futures: the list type says so (see AllFinished)
                values = (AllFinished if part is _FUTURE else list)(map(part, found))
            except TypeError:  # a miss (None) among them
                return self._lookup_slow_locked(ekeys, found, now, part)
            _consume(map(entries.move_to_end, ekeys))
        return values

    def _sweep_locked(self, now: float) -> None:
        """Drop every entry expired by *now* (under ``_lock``).

        ``_expiries`` lists ``(expires, entry key, entry)`` in the order of
        the puts, which is the order of expiry (one ttl for all): the expired
        ones are at its left.  A record whose entry was replaced or dropped
        since is skipped (identity).  Invariant, after a sweep: no entry is
        expired, so a lookup checks no entry's time.
        """
        expiries = self._expiries
        entries = self._entries
        while expiries and expiries[0][0] <= now:
            _, ekey, entry = expiries.popleft()
            if entries.get(ekey) is entry:
                del entries[ekey]

    def _lookup_slow_locked(self, ekeys: Sequence[Hashable], found: list[Any], now: float, part: Any) -> list[Any]:
        """``lookup`` key by key (a miss, or an expired entry, among them), under ``_lock``."""
        entries = self._entries
        touch = entries.move_to_end
        out: list[Any] = []
        append = out.append
        for ekey, entry in zip(ekeys, found):
            if entry is None:
                append(MISSING)
            elif entry[0] <= now:
                if entries.get(ekey) is entry:  # (a key repeated in ekeys is deleted once)
                    del entries[ekey]
                append(MISSING)
            else:
                touch(ekey)
                append(part(entry))
        return out

    def put(self, ekeys: Sequence[Hashable], values: Sequence[Any], generation: int) -> None:
        """Remember these values (by entry key), read or written at *generation* (only while live, and
        no eviction since)."""
        if not self.live:
            return
        futures = list(map(completed_future, values))  # made once per fill, handed to every loader that hits
        expires = self.clock() + self.ttl
        entries = self._entries
        with self._lock:
            if not self.live or generation != self.generation:
                return
            records = []
            for ekey, value, fut in zip(ekeys, values, futures):
                entry = entries[ekey] = (expires, value, fut)
                entries.move_to_end(ekey)
                records.append((expires, ekey, entry))
            expiries = self._expiries
            if not expiries or expiries[-1][0] <= expires:
                expiries.extend(records)
            else:  # a racing put read the clock later but took the lock first: keep the order of expiry
                at = len(expiries)
                while at > 0 and expiries[at - 1][0] > expires:
                    at -= 1
                for record in reversed(records):
                    expiries.insert(at, record)
            while len(entries) > self.size:
                entries.popitem(last=False)
            if len(expiries) > 2 * self.size:  # records of replaced or dropped entries: keep it bounded
                self._expiries = deque(sorted(((e[0], k, e) for k, e in entries.items()), key=_EXPIRES))

    def _int_of(self, name: str) -> Hashable:
        """The entry key of an int key named *name*, or *name* itself (not an int's name)."""
        prefix = self.prefix
        if name.startswith(prefix):
            rest = name[len(prefix):]
            if rest[:1].isdigit() or rest[:1] == "-":
                try:
                    key = int(rest)
                except ValueError:
                    return name
                if int.__repr__(key) == rest:
                    return key
        return name

    def evict(self, names: Optional[Sequence[str]]) -> None:
        """Forget the entries of the Redis keys *names* (None: every entry).

        A name is dropped under both its readings: an int key's entry key,
        and the name itself (an int-like key of another type, an ``IntEnum``,
        has the same Redis key).
        """
        ekeys = None if names is None else [self._int_of(name) for name in names]
        with self._lock:
            self.generation += 1
            if ekeys is None or names is None:
                self._entries.clear()
                self._expiries.clear()
                return
            pop = self._entries.pop
            for name, ekey in zip(names, ekeys):
                pop(ekey, None)
                if ekey is not name:
                    pop(name, None)

    def message(self, names: Optional[Sequence[str]]) -> str:
        """The pub/sub message that evicts *names* (None: everything) in the other processes."""
        return json.dumps({"s": self.sender, "k": None if names is None else list(names)}, separators=(",", ":"))

    def __len__(self) -> int:
        return len(self._entries)

    # -- the listener ----------------------------------------------------------------------
    def _ensure_listener(self) -> None:
        if self._listener is not None:
            return
        with self._lock:
            if self._closed or self._listener is not None:
                return
            thread = threading.Thread(target=_listen, args=(weakref.ref(self), self._stop, self.client,
                                                            self.channel),
                                      name=f"dataloader-sync-near-{self.channel}", daemon=True)
            self._listener = thread
        thread.start()

    def set_live(self, live: bool) -> None:
        """The listener (re)subscribed (start empty: messages may have been missed) or lost its connection."""
        with self._lock:
            self.generation += 1
            self._entries.clear()
            self._expiries.clear()
            self.live = live and not self._closed
            if self.live:
                self._live_event.set()
            else:
                self._live_event.clear()

    def wait_live(self, timeout: float) -> bool:
        """Start the listener if needed; wait (at most *timeout* s) until it is subscribed."""
        self._ensure_listener()
        return self._live_event.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the listener (idempotent); the near cache is not used after this."""
        with self._lock:
            self._closed = True
            self.live = False
            self._live_event.clear()
            self._entries.clear()
            self._expiries.clear()
            thread, self._listener = self._listener, None
            self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _after_fork_in_child(self) -> None:
        """The child has no listener and may have missed messages: new lock, empty, not live (no user code)."""
        self._lock = threading.Lock()
        self._entries.clear()
        self._expiries.clear()
        self.live = False
        self._live_event = threading.Event()
        self._listener = None
        self._stop = threading.Event()
        self.sender = uuid.uuid4().hex

    def received(self, data: Any) -> None:
        """A message of the channel: evict the names it lists (unless we sent it)."""
        try:
            message = json.loads(data)
            if message.get("s") == self.sender:
                return
            names = message["k"]
        except Exception as exc:  # not ours: say so, and trust nothing we may have missed
            _LISTENER_FAILURES.failed(self, "reading an invalidation message (the near cache was emptied)", exc)
            self.set_live(self.live)
            return
        self.evict(names)

    def __repr__(self) -> str:
        return f"NearCache({self.channel!r}, size={self.size}, ttl={self.ttl})"


def _listen(ref: weakref.ref[NearCache], stop: threading.Event, client: Any, channel: str) -> None:
    """The listener thread: subscribe, evict on each message, reconnect on failure, end on stop."""
    backoff = 0.1
    while not stop.is_set():
        pubsub = None
        try:
            pubsub = client.pubsub()
            pubsub.subscribe(channel)
            while not stop.is_set():
                message = pubsub.get_message(timeout=POLL)
                near = ref()
                if near is None:
                    return
                if message is None:
                    continue
                if message["type"] == "subscribe":  # first, and after redis-py resubscribed on its own
                    near.set_live(True)
                    backoff = 0.1
                elif message["type"] == "message":
                    near.received(message["data"])
                del near
        except Exception as exc:
            near = ref()
            if near is None:
                return
            near.set_live(False)
            _LISTENER_FAILURES.failed(near, "its pub/sub listener (reconnecting; the near cache is not used meanwhile)",
                                      exc)
            del near
            stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
        finally:
            if pubsub is not None:
                try:
                    pubsub.close()
                except Exception:  # closing a broken connection: nothing more to do
                    pass


def _after_fork_in_child() -> None:
    for near in list(_ALL):
        near._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
