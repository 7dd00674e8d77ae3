"""RedisValueCache: a ValueCache over redis-py, shared by every process that uses the same prefix.

Guarantees:
- ``get_values`` is one ``MGET``; ``set_values`` is one pipelined round trip of
  ``SET key value [PX ttl]`` commands (no transaction: each key stands alone).
- A Redis key is ``prefix`` followed by the cache key as compact JSON
  (``dataloader_sync._key_strings``): ``books:42``, ``books:"isbn-1"``,
  ``books:[7,42]`` for the tuple ``(7, 42)``; distinct keys give distinct
  Redis keys, the same in every process.
- Values are JSON unless ``dumps``/``loads`` are given — never pickle by
  default: whoever can write to a shared cache must not be able to run code
  in every worker that reads it.  A stored value that ``loads`` cannot read
  is a miss (logged, rate-limited); a value ``dumps`` cannot write is not
  stored, the others of the batch are, and it is logged (rate-limited; not
  raised: a value the codec cannot write is no outage, the breaker stays
  closed).  With the default codec an MGET's answer is decoded by one
  ``json.loads`` of its values joined as a JSON array (a hit's cost is mostly
  decoding; see ``_json_loads_many``), with the result of one ``json.loads``
  per value.
- Redis errors propagate to the loader, which loads from the batch function
  and opens the cache's breaker (``cool_down``): for that long no loader of
  the process calls Redis through this cache, then one call probes.  How
  long one failing call takes is the client's
  ``socket_timeout``/``socket_connect_timeout`` and ``retry`` settings; the
  breaker makes an outage cost that once per cool-down, not per request.
- Invalidation is final: a miss is leased before the batch function runs
  (``lease``: one ``EVAL`` per batch, per key on a cluster), and its value is
  stored by a compare-and-set script (``set_leased_values``: one ``EVAL``)
  only where the key still holds the lease.  A lease is a token of
  ``LEASE_MARK`` followed by random bytes, stored in the value's place for at
  most ``lease_ttl`` seconds: a reader takes it for a miss, a second reader
  shares it (the first value stored with it wins, the others are not
  stored), and ``invalidate``'s ``DEL`` removes it, so a value read before an
  invalidation is refused after it.  Each key's check and write is one
  script, atomic on its server (per slot on a cluster).
- A ``redis.cluster.RedisCluster`` client is read with ``mget_nonatomic``
  (one ``MGET`` per slot, pipelined: one round trip per node) and written
  with its pipeline (the ``SET`` commands grouped by node: one round trip per
  node).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from itertools import compress, count
from typing import Any, Callable, Optional

from .._core import (
    DEFAULT_COOL_DOWN,
    MISSING,
    FailureLog,
    ValueCache,
    check_negative_ttl,
    check_prefix,
    check_ttl_rule,
    identical,
    make_breaker,
    make_single_flight,
    seconds,
    ttl_of,
)
from .._key_strings import encode_key
from ._near_cache import NearCache

__all__ = ["RedisValueCache"]

NAMES_MEMO = 16_384  # int keys whose Redis key a cache remembers (about 1.5 MB at most): a hit's names cost no Python
NEAR_TTL = 60.0  # the longest a near-cache entry lives by default: what pub/sub cannot tell is bounded by it
LEASE_TTL = 60.0  # the longest a lease stands in for a value by default (a load that outlives it stores nothing)
LEASE_MARK = "\x00dataloader_sync:lease:"  # how a lease begins: never the start of a JSON text or of a pickle

# lease: each key that holds no lease gets the caller's token (for PX ms); the answer is the token each
# key holds after it (the caller's, or one another load took first and now shares).
# KEYS: the Redis keys; ARGV: LEASE_MARK, PX, then one new token per key.
_LEASE = """
local mark, px = ARGV[1], ARGV[2]
local out = {}
for i, key in ipairs(KEYS) do
  local held = redis.call('GET', key)
  if held and string.sub(held, 1, #mark) == mark then
    out[i] = held
  else
    redis.call('SET', key, ARGV[i + 2], 'PX', px)
    out[i] = ARGV[i + 2]
  end
end
return out
"""
# set_leased_values: store each value where its key still holds its lease (compare and set). The answer
# per key: 1 stored; else what the key holds now (a value another load stored, or a lease), or 0 for nothing.
# KEYS: the Redis keys; ARGV: per key its lease, its value, its PX (0: no expiry).
_STORE = """
local out = {}
for i, key in ipairs(KEYS) do
  local held = redis.call('GET', key)
  local at = 3 * i - 2
  if held == ARGV[at] then
    local px = tonumber(ARGV[at + 2])
    if px > 0 then redis.call('SET', key, ARGV[at + 1], 'PX', px) else redis.call('SET', key, ARGV[at + 1]) end
    out[i] = 1
  elseif held then
    out[i] = held
  else
    out[i] = 0
  end
end
return out
"""

_INT = {int}
_UNREADABLE = FailureLog()  # stored values that loads() could not read, per cache
_UNWRITABLE = FailureLog()  # values dumps() or the ttl callable could not handle, per cache


def _json_dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _json_loads_many(datas: list[Any]) -> list[Any]:
    """The JSON values of *datas* (all bytes, or all str), parsed as one JSON array: one ``json.loads``
    instead of one per value (about 3x faster for rows of a few fields: one call, and the decoder's
    memo shares the dict keys of every row).

    Each value was written by ``_json_dumps``, so joined by commas they make
    an array of exactly as many elements.  A value that is not JSON on its
    own (written by someone else, or by an older version) makes the joined
    text invalid or changes the count (a value ``1,2`` adds one, ``[1``
    merges with its neighbour), and the caller decodes value by value to
    find it.  Only neighbours crafted to make up for each other could pass,
    and whoever can write those can write wrong valid values just as well.

    Raises:
        Exception: the joined text is not a JSON array of ``len(datas)`` values.
    """
    if type(datas[0]) is bytes:
        text = (b"[" + b",".join(datas) + b"]").decode("utf-8", "surrogatepass")  # json.loads' own errors
    else:
        text = "[" + ",".join(datas) + "]"
    values: list[Any] = json.loads(text)
    if len(values) != len(datas):
        raise ValueError(f"{len(values)} JSON values in {len(datas)} stored values")
    return values


def _glob_escape(text: str) -> str:
    """*text* as a literal in a Redis ``MATCH`` pattern."""
    return "".join("\\" + c if c in "\\*?[]^" else c for c in text)


class RedisValueCache(ValueCache[Any, Any]):
    """A ``ValueCache`` in Redis, through a redis-py client.

    What is cached is shared by every process (and host) whose loaders use
    the same Redis and ``prefix``: a value that depends on who asks (the
    viewer's permissions, their language) must have the viewer in its key
    (e.g. ``cache_key_fn=lambda book_id: (viewer.id, book_id)``), or use a
    prefix per viewer.  Give each loader its own prefix.

    Thread-safe (redis-py's client and its connection pool are), and usable
    after ``os.fork()`` (redis-py gives the child new connections).

    Args:
        client: a ``redis.Redis`` (or anything with its ``mget``,
            ``pipeline``, ``delete``, ``unlink`` and ``scan_iter``).  Its
            timeouts bound how long a load may wait for Redis: set
            ``socket_timeout`` and ``socket_connect_timeout`` and a small
            ``retry`` budget (redis-py's default retries a refused
            connection for seconds).
        prefix: put before every key, e.g. ``"myapp:book:"``; ``clear()``
            deletes every key that starts with it.  It also names the
            cache's breaker (logs, the ``breaker_open`` gauge).
        ttl: seconds (or a ``timedelta``) each written value lives, with
            millisecond precision (``PX``); None: no expiry; or a callable
            ``(key, value) -> seconds | None`` asked for each value written
            (a bad answer leaves that value unwritten, logged).
        negative_ttl: seconds a ``None`` value lives instead of ``ttl``
            (e.g. a short 30 for "no such row"); None: ``None`` follows ``ttl``.
        dumps: ``value -> str | bytes`` (default: JSON); give ``loads`` too.
        loads: ``str | bytes -> value``, given what the client returns
            (bytes unless the client has ``decode_responses=True``).
        cool_down: seconds the cache is skipped by every loader of the
            process after a failed call (default 5); 0 turns the breaker off.
        single_flight: when True, concurrent misses of one key in this
            process make one batch-function call; the other loaders wait for
            its outcome (at most ``single_flight_timeout`` seconds, default 10).
        single_flight_timeout: the longest a loader waits for another's
            flight before it loads the key itself.
        near_cache: the size of a process-local LRU in front of Redis (0:
            none).  Its entries live at most ``near_ttl`` seconds; a listener
            thread evicts what ``invalidate()`` and other processes'
            ``set_values`` change (see ``close()``).
        near_ttl: seconds a near entry lives (default: the smaller of a
            numeric ``ttl`` and 60).
        lease_ttl: seconds a miss's lease stands in for its value at most
            (default 60): a load that takes longer stores nothing.
        clock: a monotonic clock (the breaker's and the near cache's; injected by tests).

    Raises:
        TypeError, ValueError: at once, for an argument of the wrong kind.
    """

    def __init__(self, client: Any, *, prefix: str, ttl: Any = None, negative_ttl: Any = None,
                 dumps: Optional[Callable[[Any], Any]] = None,
                 loads: Optional[Callable[[Any], Any]] = None,
                 cool_down: Any = DEFAULT_COOL_DOWN, single_flight: bool = False,
                 single_flight_timeout: Any = 10.0, near_cache: int = 0, near_ttl: Any = None,
                 lease_ttl: Any = LEASE_TTL, clock: Callable[[], float] = time.monotonic) -> None:
        if not all(callable(getattr(client, m, None)) for m in ("mget", "pipeline", "delete", "scan_iter")):
            raise TypeError("client must be a redis.Redis (mget, pipeline, delete, scan_iter)")
        self._prefix = check_prefix(prefix)
        self._ttl = check_ttl_rule(ttl)
        self._px = None if self._ttl is None or callable(self._ttl) else max(1, round(self._ttl * 1000))
        self._lease_px = max(1, round(seconds("lease_ttl", lease_ttl, positive=True) * 1000))
        negative = check_negative_ttl(negative_ttl)
        self._negative_px = None if negative is None else max(1, round(negative * 1000))
        if (dumps is None) != (loads is None):
            raise ValueError("give both dumps and loads, or neither")
        if dumps is not None and not callable(dumps):
            raise TypeError("dumps must be callable")
        if loads is not None and not callable(loads):
            raise TypeError("loads must be callable")
        if not callable(clock):
            raise TypeError("clock must be callable")
        self._client = client
        self._dumps: Callable[[Any], Any] = dumps or _json_dumps
        self._loads: Optional[Callable[[Any], Any]] = loads  # None: JSON, decoded a whole answer at once
        # A cluster client: one MGET per slot, pipelined per node (a plain MGET must stay in one slot).
        self._cluster = callable(getattr(client, "mget_nonatomic", None))
        self._mget: Callable[[list[str]], Any] = client.mget_nonatomic if self._cluster else client.mget
        self.breaker = make_breaker(self._prefix, cool_down, clock)
        self.flights = make_single_flight(single_flight, single_flight_timeout, clock)
        if isinstance(near_cache, bool) or not isinstance(near_cache, int):
            raise TypeError("near_cache must be an int (0: no near cache)")
        if near_cache < 0:
            raise ValueError("near_cache must be >= 0")
        if near_ttl is None:
            near_seconds = NEAR_TTL if self._ttl is None or callable(self._ttl) else min(self._ttl, NEAR_TTL)
        else:
            near_seconds = seconds("near_ttl", near_ttl, positive=True)
        self._channel = "dataloader_sync:invalidate:" + self._prefix
        self._int_names: dict[int, str] = {}  # int key -> its Redis key (see _names)
        self._near: Optional[NearCache] = (
            NearCache(client, self._channel, near_cache, near_seconds, clock, prefix=self._prefix,
                      breaker=self.breaker) if near_cache else None)
        # The near cache's lookup, for loaders to ask at load time (ValueCache.get_local_values); None
        # without one, so a loader pays nothing for it.  The near cache's bound method: no cycle through self.
        self.get_local_values = None if self._near is None else self._near.local_values
        self.get_local_futures = None if self._near is None else self._near.local_futures

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def ttl(self) -> Any:
        """Seconds each written value lives (None: no expiry), or the ttl callable."""
        if callable(self._ttl):
            return self._ttl
        return None if self._px is None else self._px / 1000.0

    def __repr__(self) -> str:
        return f"RedisValueCache(prefix={self._prefix!r}, ttl={self.ttl!r})"

    def _px_of(self, key: Any, value: Any) -> Optional[int]:
        """The ``PX`` of one write (None: no expiry).

        Raises:
            Exception: the ttl callable raised or returned a bad ttl.
        """
        if value is None and self._negative_px is not None:
            return self._negative_px
        if not callable(self._ttl):
            return self._px
        ttl = ttl_of(self._ttl, key, value)
        return None if ttl is None else max(1, round(ttl * 1000))

    def redis_key(self, key: Any) -> str:
        """The Redis key of a cache key.

        Raises:
            TypeError: a key type that has no stable name (see the module notes).
        """
        return self._prefix + encode_key(key)

    def get_values(self, keys: Sequence[Any]) -> list[Any]:
        """One ``MGET`` (of the near cache's misses, with one): the value of each key, or ``MISSING``."""
        if not keys:
            return []
        names = self._names(keys)
        near = self._near
        breaker = self.breaker
        if near is None or (breaker is not None and breaker.is_open):  # a probe must ask Redis itself
            return self._decode(self._mget(names))
        ekeys = near.entry_keys(keys, names)
        found = near.lookup(ekeys)
        flags = identical(found, MISSING)
        if not any(flags):  # every key a near hit: no round trip, no Python per key
            return found
        misses = list(compress(count(), flags))
        generation = near.generation
        if len(misses) == len(names):
            found = self._decode(self._mget(names))
            near.put([e for e, v in zip(ekeys, found) if v is not MISSING],
                     [v for v in found if v is not MISSING], generation)
            return found
        loaded = self._decode(self._mget([names[i] for i in misses]))
        for i, value in zip(misses, loaded):
            found[i] = value
        near.put([ekeys[i] for i, v in zip(misses, loaded) if v is not MISSING],
                 [v for v in loaded if v is not MISSING], generation)
        return found

    def _names(self, keys: Sequence[Any]) -> list[str]:
        """The Redis key of each key; for a batch of int keys (the common one) from a memo, in C.

        The memo maps an int to its Redis key; it is asked only when every
        key is exactly an ``int`` (so ``True`` never meets ``1``), and emptied
        when it holds ``NAMES_MEMO`` entries.  No lock: lone dict operations
        are atomic, and a racing thread at worst computes a name again.
        """
        if set(map(type, keys)) != _INT:
            prefix = self._prefix
            return [prefix + encode_key(k) for k in keys]
        memo = self._int_names
        names: list[Any] = list(map(memo.get, keys))
        if None in names:  # str or None only: == is identity here
            if len(memo) >= NAMES_MEMO:
                memo.clear()
            prefix = self._prefix
            for i in compress(count(), identical(names, None)):
                key = keys[i]
                names[i] = memo[key] = prefix + int.__repr__(key)
        return names

    def _decode(self, datas: Sequence[Any]) -> list[Any]:
        """The values of an MGET's answer (a value ``loads`` cannot read is a miss, logged)."""
        if type(datas) is not list:
            datas = list(datas)
        missing = datas.count(None)  # bytes, str or None: == is identity-like here
        if missing == len(datas):
            return [MISSING] * missing
        if self._loads is None:  # the default codec: one json.loads for the whole answer
            try:
                if not missing:
                    return _json_loads_many(datas)
                values = iter(_json_loads_many([data for data in datas if data is not None]))
                return [MISSING if data is None else next(values) for data in datas]
            except Exception:  # a value that is not JSON on its own: find it below
                pass
        loads = self._loads or json.loads
        # A lease (a miss being loaded) begins with LEASE_MARK, which sorts before any text or pickle
        # that starts otherwise: the smallest stored value tells, in C, whether there is one.
        leased = _is_lease(min(filter(None, datas), default=b""))
        if not leased:
            try:  # a codec of the user's, every value readable: one loop
                return [MISSING if data is None else loads(data) for data in datas]
            except Exception:
                pass
        found: list[Any] = []
        unreadable: Optional[Exception] = None
        for data in datas:
            if data is None or (leased and _is_lease(data)):
                found.append(MISSING)
                continue
            try:
                found.append(loads(data))
            except Exception as exc:  # a value written by someone else, or by an older version
                found.append(MISSING)
                unreadable = unreadable or exc
        if unreadable is not None:
            _UNREADABLE.failed(self, "get_values (a stored value loads() cannot read: a miss)", unreadable)
        return found

    def set_values(self, keys: Sequence[Any], values: Sequence[Any]) -> None:
        """One pipelined round trip of ``SET key value [PX ttl]`` (per node, on a cluster).

        A value that ``dumps`` (or the ttl callable) cannot handle is not
        written and is logged (rate-limited); the others are written.

        Raises:
            redis.RedisError: from the client.
        """
        pipe = self._client.pipeline(transaction=False)
        failed: list[Any] = []
        near = self._near
        names: list[str] = []
        ekeys: list[Any] = []
        written: list[Any] = []
        prefix = self._prefix
        for key, value in zip(keys, values):
            try:
                data = self._dumps(value)
                px = self._px_of(key, value)
            except Exception as exc:
                failed.append((key, exc))
                continue
            name = prefix + encode_key(key)
            pipe.set(name, data, px=px)
            if near is not None:
                names.append(name)
                ekeys.append(key if type(key) is int else name)  # its entry key (see _near_cache)
                written.append(value)
        if len(pipe):
            if near is not None:  # the other processes' near entries of these keys are stale now
                generation = near.generation
                self._publish(pipe, near.message(names))
            else:
                pipe.execute()
            if near is not None:
                near.put(ekeys, written, generation)
        if failed:
            self._unwritable(failed, len(keys))

    def _unwritable(self, failed: list[Any], n_keys: int) -> None:
        """Log (rate-limited, not raised: a value the codec cannot write is no outage, it must not open
        the breaker) the ``(key, error)`` pairs whose values were not written."""
        first_key, first_error = failed[0]
        error = ValueError(
            f"{len(failed)} of {n_keys} values could not be serialized (or given a ttl) and were not "
            f"written (the first, of key {first_key!r}: {type(first_error).__name__}: {first_error})")
        error.__cause__ = first_error
        _UNWRITABLE.failed(self, "set_values", error)

    def lease(self, keys: Sequence[Any]) -> list[Any]:
        """Lease *keys*, which a load missed (``Leasing.lease``): one ``EVAL`` (one per key, pipelined
        per node, on a cluster).

        A key that holds a lease keeps it (this load shares it); any other
        gets a new token for ``lease_ttl`` seconds, in place of whatever it
        held (a value stored since the miss is loaded again: no harm).

        Raises:
            TypeError: a key type that has no stable name.
            redis.RedisError: from the client.
        """
        if not keys:
            return []
        names = self._names(keys)
        base = LEASE_MARK + os.urandom(12).hex() + ":"  # unique across processes, forks and time
        tokens = [base + str(i) for i in range(len(names))]
        if not self._cluster:
            return list(self._client.eval(_LEASE, len(names), *names, LEASE_MARK, self._lease_px, *tokens))
        return [answer[0] for answer in
                self._eval_per_key(_LEASE, names, [(LEASE_MARK, self._lease_px, token) for token in tokens])]

    def set_leased_values(self, keys: Sequence[Any], values: Sequence[Any], leases: Sequence[Any]) -> list[Any]:
        """Store each value where its key still holds its lease (``Leasing.set_leased_values``): one
        ``EVAL`` of a compare-and-set script (one per key, pipelined per node, on a cluster), with the
        near-cache ``PUBLISH`` in the same round trip.

        Returns:
            Per key: True where the value was stored (or its lease held but
            ``dumps`` or the ttl callable could not handle it: not written,
            logged); else the value another load stored in its place (a
            flight's waiters may have it), or ``MISSING``.

        Raises:
            redis.RedisError: from the client.
        """
        held: list[Any] = [True] * len(keys)
        at: list[int] = []
        args: list[Any] = []
        names: list[str] = []
        failed: list[Any] = []
        prefix = self._prefix
        for i, (key, value, lease) in enumerate(zip(keys, values, leases)):
            try:
                data = self._dumps(value)
                px = self._px_of(key, value)
            except Exception as exc:
                failed.append((key, exc))
                continue
            at.append(i)
            names.append(prefix + encode_key(key))
            args += (lease, data, px or 0)
        if names:
            near = self._near
            generation = 0 if near is None else near.generation  # before the write: see NearCache.put
            if self._cluster:
                answers = [answer[0] for answer in self._eval_per_key(
                    _STORE, names, [args[3 * j:3 * j + 3] for j in range(len(names))])]
                if near is not None:
                    self._client.publish(self._channel, near.message(names))
            elif near is None:
                answers = self._client.eval(_STORE, len(names), *names, *args)
            else:
                pipe = self._client.pipeline(transaction=False)
                pipe.eval(_STORE, len(names), *names, *args)
                pipe.publish(self._channel, near.message(names))
                answers = pipe.execute()[0]
            others = [j for j, answer in enumerate(answers) if answer != 1]
            stored = [j for j, answer in enumerate(answers) if answer == 1]
            if others:
                found = self._decode([None if answers[j] == 0 else answers[j] for j in others])
                for j, value in zip(others, found):
                    held[at[j]] = value
            if near is not None and stored:
                near.put([keys[at[j]] if type(keys[at[j]]) is int else names[j] for j in stored],
                         [values[at[j]] for j in stored], generation)
        if failed:
            self._unwritable(failed, len(keys))
        return held

    def _eval_per_key(self, script: str, names: list[str], args: list[Any]) -> list[Any]:
        """On a cluster: *script* for each key alone (a script's keys must share a slot), with its
        *args*, pipelined per node (one round trip per node); the answers (each the script's
        one-entry array) in the keys' order.

        Each node is sent its own pipeline through the cluster client's connection to it (redis-py's
        cluster pipeline asks a server for the keys of every ``EVAL``, a round trip per command).

        Raises:
            redis.RedisError: from the client (a slot that moved while it ran too).
        """
        client = self._client
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for i, name in enumerate(names):
            node = client.get_node_from_key(name)
            by_node.setdefault(node.name, (node, []))[1].append(i)
        answers: list[Any] = [None] * len(names)
        for node, indexes in by_node.values():
            pipe = client.get_redis_connection(node).pipeline(transaction=False)
            for i in indexes:
                pipe.eval(script, 1, names[i], *args[i])
            for i, answer in zip(indexes, pipe.execute()):
                answers[i] = answer
        return answers

    def delete(self, key: Any) -> None:
        """Delete the value of *key* for every process (and from every near cache)."""
        self.invalidate([key])

    def invalidate(self, keys: Sequence[Any]) -> None:
        """Delete *keys* in Redis and evict them from this and every other process's near cache.

        One round trip: ``DEL`` of the keys and a ``PUBLISH`` on the cache's
        channel (``dataloader_sync:invalidate:<prefix>``), whose listeners
        evict them within milliseconds on one host.  Call it after a write to
        the rows behind the keys (a mutation): every process then loads them
        again.  Not guarded by the breaker: it raises what the client raises.

        Raises:
            TypeError: a key type that has no stable name.
            redis.RedisError: from the client.
        """
        names = [self.redis_key(k) for k in keys]
        if not names:
            return
        near = self._near
        if near is not None:
            near.evict(names)
        pipe = self._client.pipeline(transaction=False)
        if self._cluster:  # one DEL per key (their slots differ)
            for name in names:
                pipe.delete(name)
        else:
            pipe.delete(*names)
        self._publish(pipe, json.dumps({"s": "" if near is None else near.sender, "k": names},
                                       separators=(",", ":")))
        if near is not None:  # again: a lookup of ours that read Redis before the DEL must not keep its value
            near.evict(names)
        if self.flights is not None:  # a load that begins from now on starts a flight of its own
            self.flights.forget(keys)

    def _publish(self, pipe: Any, message: str) -> None:
        """Run *pipe* with a ``PUBLISH`` of *message* on the cache's channel: in the same round trip, or
        (a cluster pipeline refuses ``PUBLISH``) right after it."""
        if self._cluster:
            pipe.execute()
            self._client.publish(self._channel, message)
        else:
            pipe.publish(self._channel, message)
            pipe.execute()

    def clear(self) -> None:
        """Delete every key that starts with the prefix (``SCAN`` + ``UNLINK``, not atomic), and every near entry."""
        for chunk in _chunks(self._client.scan_iter(match=_glob_escape(self._prefix) + "*", count=1000), 1000):
            self._client.unlink(*chunk)
        near = self._near
        if near is not None:
            near.evict(None)
        self._client.publish(self._channel, json.dumps({"s": "" if near is None else near.sender, "k": None}))
        if self.flights is not None:
            self.flights.forget(None)

    def wait_near_cache_live(self, timeout: float = 5.0) -> bool:
        """Start the near cache's listener (else started by the first lookup) and wait until it listens.

        Until then lookups go to Redis (an invalidation could be missed).

        Returns:
            True once it listens; False after *timeout* seconds, or without a near cache.
        """
        return self._near is not None and self._near.wait_live(timeout)

    def close(self) -> None:
        """Stop the near cache's listener thread (idempotent); the near cache is not used after it.

        The client is the caller's: it is not closed.  A cache without a near
        cache has nothing to close.
        """
        if self._near is not None:
            self._near.close()

    def __enter__(self) -> RedisValueCache:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def _is_lease(data: Any) -> bool:
    """Whether a stored value (bytes, or str with ``decode_responses``) is a lease."""
    if type(data) is bytes:
        return data.startswith(_LEASE_MARK_BYTES)
    return isinstance(data, str) and data.startswith(LEASE_MARK)


_LEASE_MARK_BYTES = LEASE_MARK.encode()


def _chunks(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
