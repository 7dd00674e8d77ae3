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
"""
from __future__ import annotations

import json
import os
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Callable, Optional

from .._value_cache import MISSING, FailureLog

__all__ = ["NearCache"]

POLL = 0.2  # seconds the listener waits for a message before it looks at its stop flag
MAX_BACKOFF = 5.0  # seconds between two reconnection attempts at most

_LISTENER_FAILURES = FailureLog()
_ALL: weakref.WeakSet[NearCache] = weakref.WeakSet()  # for the at-fork hook (added to under the GIL only)


class NearCache:
    """The LRU and its listener (thread-safe).

    Args:
        client: the redis-py client (its ``pubsub()`` makes the listener's connection).
        channel: the pub/sub channel of the cache.
        size: the most entries it holds (> 0).
        ttl: the most seconds an entry lives (> 0).
        clock: a monotonic clock.
    """

    def __init__(self, client: Any, channel: str, size: int, ttl: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.channel = channel
        self.size = size
        self.ttl = ttl
        self.clock = clock
        self.sender = uuid.uuid4().hex  # our own messages are not evictions for us
        self._lock = threading.Lock()  # guards _entries, live, _listener, _pid, _stop
        self._entries: OrderedDict[str, tuple[float, Any]] = OrderedDict()  # redis key -> (expires, value)
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
    def get(self, names: Sequence[str]) -> list[Any]:
        """The entry of each name, or ``MISSING`` (all ``MISSING`` while not live)."""
        self._ensure_listener()
        if not self.live:
            return [MISSING] * len(names)
        now = self.clock()
        out: list[Any] = []
        append = out.append
        entries = self._entries
        get, touch = entries.get, entries.move_to_end
        with self._lock:
            for name in names:
                entry = get(name)
                if entry is None:
                    append(MISSING)
                elif entry[0] <= now:
                    del entries[name]
                    append(MISSING)
                else:
                    touch(name)
                    append(entry[1])
        return out

    def put(self, names: Sequence[str], values: Sequence[Any], generation: int) -> None:
        """Remember these values, read or written at *generation* (only while live, and no eviction since)."""
        if not self.live:
            return
        expires = self.clock() + self.ttl
        entries = self._entries
        with self._lock:
            if not self.live or generation != self.generation:
                return
            for name, value in zip(names, values):
                entries[name] = (expires, value)
                entries.move_to_end(name)
            while len(entries) > self.size:
                entries.popitem(last=False)

    def evict(self, names: Optional[Sequence[str]]) -> None:
        """Forget *names* (None: every entry)."""
        with self._lock:
            self.generation += 1
            if names is None:
                self._entries.clear()
                return
            for name in names:
                self._entries.pop(name, None)

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
            thread, self._listener = self._listener, None
            self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _after_fork_in_child(self) -> None:
        """The child has no listener and may have missed messages: new lock, empty, not live (no user code)."""
        self._lock = threading.Lock()
        self._entries.clear()
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
