"""BatchRecorder: what one request's loaders did, batch by batch, with the SQL each batch ran.

The django-debug-toolbar panel (``debug_toolbar``) starts one per request;
it needs no toolbar and can be used alone (``start()`` ... ``stop()``).

Guarantees:
- While started, every registry created in the starting thread's
  ``contextvars`` context (the request's: ``DataLoaderMiddleware`` creates its
  registry there) reports to the recorder, through the context
  instrumentation (``_instrumentation.set_context_instrumentation``): the
  application's registry factory and its own instrumentation are untouched.
  Loaders with an instrumentation of their own keep only theirs and are not
  recorded.
- Each batch-function call is one entry, in the order the calls began:
  loader name, round, keys, value-cache hits, duration, outcome, and the
  SQL statements run inside it.  A dispatch that the value cache answered
  entirely is an entry with no keys and no duration.
- SQL is attributed by ``connection.execute_wrapper`` on the starting
  thread's database connections: a statement belongs to the batch whose
  call is running in the statement's context (``begin_batch`` sets it in the
  context the batch function runs in, a copy of the dispatcher's, so nothing
  leaks to the request).  Batch functions on ``executor=`` threads use other
  connections: their SQL is not seen.  Statements outside any batch are
  counted.
- Round: batches that begin with no load made (on any loader of the
  recorded registries) since the previous batch began share a round; in a
  GraphQL execution, a round is the execution's dispatch of one level.
- Entries are plain JSON values (str, int, float, None, lists, dicts).
- Thread-safe: batches of several threads may report at once.
"""
from __future__ import annotations

import contextvars
import threading
import time
import weakref
from typing import Any, Callable, Optional

from django.db import connections

from .._core import BatchLoaderEnvironment, DataLoader
from .._instrumentation import (
    DataLoaderInstrumentation,
    reset_context_instrumentation,
    set_context_instrumentation,
)
from .._registry import DataLoaderRegistry

__all__ = ["BatchRecorder"]

# The batch whose call runs in this context (set in the batch's own context copy).
_current_batch: contextvars.ContextVar[Optional[_Batch]] = contextvars.ContextVar(
    "dataloader_sync_recorded_batch", default=None)


def _loader_name(loader: DataLoader[Any, Any]) -> str:
    if loader.name:
        return loader.name
    # DataLoader has no public accessor for its batch function (a name is all we take of it).
    fn = getattr(loader, "_batch_load_fn", None)
    return getattr(fn, "__qualname__", None) or "DataLoader"


class _Batch:
    """One entry; ``data`` is its JSON form, filled as the batch goes."""

    __slots__ = ("recorder", "data", "start")

    def __init__(self, recorder: BatchRecorder, data: dict[str, Any]) -> None:
        self.recorder = recorder
        self.data = data
        self.start = time.perf_counter()

    def on_completed(self, result: Any, error: Optional[BaseException]) -> None:
        took = (time.perf_counter() - self.start) * 1000.0
        with self.recorder._lock:
            self.data["duration_ms"] = round(took, 3)
            if error is not None:
                self.data["error"] = f"{type(error).__name__}: {error}"
            elif isinstance(result, list):
                self.data["key_errors"] = sum(1 for value in result if isinstance(value, BaseException))


class BatchRecorder(DataLoaderInstrumentation):
    """Records the batches of the registries created while it is started (see the module notes).

    Args:
        using: database aliases whose statements are attributed (default:
            every alias of ``DATABASES``).
    """

    def __init__(self, using: Optional[list[str]] = None) -> None:
        # _lock guards _entries, _pending_hits, _registries, _loads_seen,
        # _round, _outside_sql and every entry's dict.
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []
        self._pending_hits: dict[int, int] = {}  # id(loader) -> hits of its last lookup, for its next batch
        self._registries: list[weakref.ref[DataLoaderRegistry]] = []
        self._loads_seen = -1
        self._round = 0
        self._outside_sql = 0
        self._using = using
        self._token: Optional[contextvars.Token[Any]] = None
        self._wrapped: list[Any] = []  # connections with our execute wrapper

    # -- start / stop (on the request's thread) --------------------------------------------
    def start(self) -> None:
        """Record the registries created in this context from now on, and this thread's SQL.  Idempotent."""
        if self._token is not None:
            return
        self._token = set_context_instrumentation(self)
        aliases = self._using if self._using is not None else list(connections)
        for alias in aliases:
            connection = connections[alias]
            connection.execute_wrappers.append(self._execute)
            self._wrapped.append(connection)

    def stop(self) -> None:
        """Stop recording (in the context ``start()`` ran in).  Idempotent."""
        token, self._token = self._token, None
        if token is not None:
            try:
                reset_context_instrumentation(token)
            except ValueError:  # another context: leave it to end with its request
                pass
        wrapped, self._wrapped = self._wrapped, []
        for connection in wrapped:
            try:
                connection.execute_wrappers.remove(self._execute)
            except ValueError:
                pass

    # -- what it recorded ---------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """The JSON-ready record: ``batches`` (in order), ``sql_in_batches``, ``sql_outside_batches``."""
        with self._lock:
            batches = [dict(entry, sql=list(entry["sql"])) for entry in self._entries]
            outside = self._outside_sql
        return {
            "batches": batches,
            "sql_in_batches": sum(len(b["sql"]) for b in batches),
            "sql_outside_batches": outside,
        }

    # -- the instrumentation ---------------------------------------------------------------
    def registry_created(self, registry: DataLoaderRegistry) -> None:
        with self._lock:
            self._registries.append(weakref.ref(registry))

    def _round_locked(self, loads: int) -> int:
        if loads != self._loads_seen:
            self._loads_seen = loads
            self._round += 1
        return self._round

    def _load_count(self) -> int:
        with self._lock:
            refs = list(self._registries)
        total = 0
        for ref in refs:
            registry = ref()
            if registry is not None:
                total += registry.statistics().load_count
        return total

    def value_cache_lookup(self, loader: DataLoader[Any, Any], hits: int, misses: int) -> None:
        if misses:  # the hits go with the batch of the misses
            with self._lock:
                self._pending_hits[id(loader)] = hits
            return
        loads = self._load_count()
        with self._lock:  # every key a hit: no batch call follows
            self._entries.append({
                "loader": _loader_name(loader), "round": self._round_locked(loads), "keys": 0,
                "value_cache_hits": hits, "duration_ms": None, "error": None, "key_errors": 0, "sql": [],
            })

    def begin_batch(self, loader: DataLoader[Any, Any], keys: list[Any],
                    environment: Optional[BatchLoaderEnvironment]) -> _Batch:
        loads = self._load_count()
        with self._lock:
            data = {
                "loader": _loader_name(loader), "round": self._round_locked(loads), "keys": len(keys),
                "value_cache_hits": self._pending_hits.pop(id(loader), 0), "duration_ms": None,
                "error": None, "key_errors": 0, "sql": [],
            }
            self._entries.append(data)
        batch = _Batch(self, data)
        _current_batch.set(batch)  # in the batch call's own context copy (see _instrumentation)
        return batch

    # -- SQL ------------------------------------------------------------------------------------
    def _execute(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        batch = _current_batch.get()
        if batch is None or batch.recorder is not self:
            with self._lock:
                self._outside_sql += 1
            return execute(sql, params, many, context)
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            took = (time.perf_counter() - start) * 1000.0
            text = _statement(context, sql, params)
            with self._lock:
                batch.data["sql"].append({"sql": text, "duration_ms": round(took, 3)})


def _statement(context: dict[str, Any], sql: str, params: Any) -> str:
    """The statement with its parameters, as the database saw it where the backend can say."""
    try:
        connection = context["connection"]
        text = connection.ops.last_executed_query(context["cursor"], sql, params)
    except Exception:  # a backend without it, executemany, ...
        return str(sql)
    return str(text)
