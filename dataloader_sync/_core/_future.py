"""A lean ``concurrent.futures.Future`` with ``then``.

``gather`` (many futures into one) lives in ``_gather``.

Every ``load()`` creates a future, so its cost is the cost of a load.  The
standard ``Future.__init__`` builds a ``threading.Condition`` (a lock, a
waiter list and bound methods) for every future; this one holds a lock —
its own ``Lock``, or, for a loader's futures, the loader's ``RLock``
(``_new_futures.loader_future``) — and builds a Condition only when a thread actually has
to wait (``tools/bench.py --micro`` measures both side by side).

Duplicated for speed (said once here, as cachetools does): ``then`` and
``_new_futures.loader_future`` have ``__init__``'s stores inline, and ``_future_lock``'s
``settle_many`` has ``_settle``'s steps inline for a batch under one lock
acquisition; the hot paths take the lock with ``acquire``/``release`` rather
than ``with``.  Each copy has a plain twin in ``_reference_path`` (the
switch ``DATALOADER_SYNC_REFERENCE_PATH=1`` routes every call through them),
and ``tests/test_reference_path.py`` checks that both do the same; the
figures are in docs/performance.rst, not in docstrings.

A future's lock is its own or, for a loader's futures, its loader's until it
first needs a Condition: the lock protocol (the states, who moves a future
between them and under which lock, the invariants) is one table in
``_future_lock``, with every step that moves a future's lock.

Guarantees:
- It *is* a ``concurrent.futures.Future``: ``isinstance`` holds, and
  ``concurrent.futures.wait``/``as_completed`` work (they reach for
  ``_condition`` and ``_waiters``, which are created on demand).
- State transitions happen under ``_lock``; ``_state`` is written last, so a
  reader that sees FINISHED without the lock also sees the result.
- Done-callbacks run outside the lock, on the thread that completes the future
  (or at once, on the caller's thread, when added to a done future).
- ``then(fn)`` runs ``fn`` with the dispatch scope that was current when
  ``then`` was called (see ``_dispatch_scope``), so loads made in a chain are
  batched with the execution that started the chain.
- Awaitable on a running asyncio loop (``await fut``, see ``_asyncio_bridge``):
  the loads it waits on are dispatched off the loop at the loop's batching
  point, and the loop is woken once per batch.  Where no loop runs, only a
  coroutine sees ``__await__`` (awaiting there is a clear ``RuntimeError``);
  anything else asking (graphql-core's ``is_awaitable`` in a synchronous
  execution that is not ``DataLoaderExecutionContext``) gets a ``TypeError``
  naming the fix (``NOT_OUR_EXECUTION``).
- Sync on demand (see ``_sync_on_demand``): blocking on a future (``result()``,
  ``exception()``, ``concurrent.futures.wait``/``as_completed``) that waits,
  directly or through a ``then`` chain or a ``gather``, on a load its loader
  has not dispatched yet dispatches that loader, outside every lock, and
  waits only for this future.
"""
from __future__ import annotations

import concurrent.futures as cf
import inspect
import logging
import threading
from collections.abc import Generator
from contextvars import copy_context
from typing import TYPE_CHECKING, Any, Callable, Generic, Optional, TypeVar, overload

from . import _asyncio_bridge, _fork
from ._compat import CANCELLED, CANCELLED_AND_NOTIFIED, CHAIN_CALLBACK_NAME, FINISHED, PENDING, RUNNING, getframe
from ._future_lock import acquire, own_lock, renew_lock_in_child, settle_many
from ._sync_on_demand import drive_and_wait, waiters_for

__all__ = ["NOT_OUR_EXECUTION", "USED_AS_VALUE", "Future", "abandon_in_child", "renew_lock_in_child", "settle",
           "settle_many"]

T = TypeVar("T")
U = TypeVar("U")
# Bound to the bare class (not cf.Future[Any]): pyright solves a lambda's
# future against the bound, and Future[Any] would make its type Any.
_FutureT = TypeVar("_FutureT", bound="cf.Future")  # type: ignore[type-arg]

_LOGGER = logging.getLogger("dataloader_sync")
_Lock = threading.Lock
_running_loop = _asyncio_bridge.running_loop
_FUNCTION: Any = type(lambda: None)  # (types.FunctionType: a type test is cheaper than a missing attribute's getattr)
_COROUTINE_FLAGS = inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE

#: The fix every misuse message below names.
_FIX = (
    "use DataLoaderExecutionContext (execution_context_class=dataloader_sync.graphql.DataLoaderExecutionContext)"
    " or an async execution"
)
#: The error of a future that reached synchronous code asking whether it is awaitable (see ``_AwaitOnLoop``).
NOT_OUR_EXECUTION = (
    "a dataloader_sync future reached an execution that does not wait for futures (it asked whether the future"
    f" is awaitable, with no asyncio event loop running): {_FIX} (graphql-core 3.3: executor_class=;"
    " graphene-django: GraphQLView.as_view(execution_context_class=...)); outside GraphQL, call .result()"
)
#: The words a future used as the value it will hold shows (``Future.__iter__``, ``__inspect__``).
USED_AS_VALUE = f"a dataloader_sync future, not its value: {_FIX}"

#: The modules whose serializers and default resolvers take a value for data: a future reaching them was
#: served as data by an execution that is not ours (``Future.__str__``, ``Future.__class__``).
_GRAPHQL_READERS = frozenset({
    "graphql.type.scalars",  # String's and ID's serializers: str(value)
    "graphql.execution.execute",  # 3.2: default_field_resolver's isinstance(source, Mapping), complete_value's
    # isinstance(result, Exception); a scalar whose serialize is str itself (graphene's ID)
    "graphql.execution.executor",  # 3.3: the same
    "graphene.types.scalars",  # graphene's String.serialize: str(value)
    "graphene.types.resolver",  # graphene's default resolver: isinstance(root, dict)
    "ariadne.resolvers",  # Ariadne's resolve_parent_field: isinstance(value, Mapping)
})



def _await(fut: Future[T]) -> Generator[Any, None, T]:
    """``fut.__await__()``: the value at once when done, else ``_asyncio_bridge.wait``'s iterator.

    Raises:
        RuntimeError: pending, with no running loop (and no synchronous driver).
    """
    if fut._state is PENDING or fut._state is RUNNING:
        return _asyncio_bridge.wait(fut)  # the loop never blocks; RuntimeError at once with no loop
    return _outcome_of(fut)


def _outcome_of(fut: Future[T]) -> Generator[Any, None, T]:
    """An iterator that yields nothing and returns (or raises) the outcome of the done *fut*."""
    value: T = fut._outcome()
    return value
    yield  # a generator, for await


class _AwaitOnLoop:
    """``Future.__await__``: a method where an asyncio loop runs or a coroutine awaits; an error elsewhere.

    graphql-core asks ``is_awaitable`` (``hasattr(value, "__await__")``) of
    each resolver's value inside the ``try`` that makes a field's error.
    Under its async execution a loop runs: the future is awaitable.  In a
    synchronous execution that is not ours no loop runs: the answer is a
    ``TypeError`` (``NOT_OUR_EXECUTION``, which ``hasattr`` does not
    swallow), so the field fails at its path naming the fix, instead of
    becoming a coroutine nobody runs (graphql-core's "failed to complete
    synchronously") or a value read as null.  An ``await`` with no loop
    running (the asking frame is a coroutine's) gets the method, which fails
    at once naming the loop.  The class itself always has it
    (``collections.abc.Awaitable``, ``inspect.isawaitable``).
    """

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        if _running_loop() is None and not getframe(1).f_code.co_flags & _COROUTINE_FLAGS:
            raise TypeError(NOT_OUR_EXECUTION)
        return _await.__get__(obj)


class Future(cf.Future[T], Generic[T]):
    """A ``concurrent.futures.Future`` that is cheap to create, with ``then``.

    Awaitable on a running asyncio loop: ``await loader.load(key)`` batches
    the loads awaited together, runs the batch function off the loop and
    wakes the loop once per batch (docs/asgi.rst).

    Thread-safe: any thread may complete it, wait on it, await it or add callbacks.
    """

    # _lock guards _state, _result, _exception, _done_callbacks, _waiter_list,
    # _follow, _drivers and the creation of _cond.  _cond (a Condition over
    # _lock, signalling "done") and _waiter_list (the waiters of
    # concurrent.futures.wait/as_completed, and Blockers: threads blocked in
    # result()) exist only once needed.
    #
    # A loader's futures share their loader's lock until they first need a
    # Condition: the lock protocol is _future_lock's (its table says who
    # may move _lock, and when).
    #
    # Sync on demand (see _sync_on_demand.py); class-level defaults, so a future that
    # needs none of them costs nothing:
    # _ticket: a loader future whose key is queued: its loader's ticket for that
    #   queue (it holds only a weak reference to the loader: no cycle through
    #   the cache).  Written once, before the future is handed out.
    # _follow: what this future currently waits on: a then() future's source,
    #   then the future its function returned; a gather's _Gather; a primed
    #   future's source.  None once it completes (that breaks the cycle).
    # _drivers: blockers to notify when _follow changes (threads blocked on a
    #   future whose chain passes through this one, driving it).
    _ticket: Any = None
    _follow: Any = None
    # _shared: the loader's lock this future was made to share, or None;
    # never changes (detaching changes _lock only), so a then() future reads
    # it without a lock.  A future shares while _lock is _shared.
    _shared: Any = None
    _drivers: Optional[list[Any]] = None

    def __init__(self) -> None:
        # Every attribute a settle reads is an instance attribute from the
        # start: a read that finds a class attribute instead is not
        # specialized by CPython 3.11+ and costs more than these stores.
        self._lock = _Lock()
        self._state = PENDING
        self._result: Any = None
        self._exception: Optional[BaseException] = None
        self._done_callbacks: Any = None  # None, one callable, or a list of them
        self._cond: Optional[threading.Condition] = None
        self._waiter_list: Optional[list[Any]] = None
        self._follow = None

    # -- the lock (the protocol and its steps: _future_lock) -------------------
    #: Acquire this future's current lock and return it (``_future_lock.acquire``).
    _acquire = acquire
    #: Make sure ``_cond`` exists over a lock of this future's alone; return it, held
    #: (``_future_lock.own_lock``: where a sharing future detaches).
    _own_lock = own_lock

    # -- what concurrent.futures.wait / as_completed reach for --------------
    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            self._own_lock().release()
            cond = self._cond
            assert cond is not None
        return cond

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        # Callers (wait/as_completed) hold _condition, i.e. _lock.  A future
        # that can be driven gets a list that makes their wait drive it.
        if self._waiter_list is None:
            self._waiter_list = waiters_for(self) if (self._ticket is not None or self._follow is not None) else []
        return self._waiter_list

    # -- awaiting (see _AwaitOnLoop) ---------------------------------------------
    if TYPE_CHECKING:
        def __await__(self) -> Generator[Any, None, T]: ...
    else:
        __await__ = _AwaitOnLoop()

    # -- used as its value by mistake -------------------------------------------
    # A synchronous execution that is not ours (graphql_sync, graphene's
    # execute) never asks is_awaitable: it completes the future itself as the
    # value.  A list field iterates it, a scalar field shows it in its error
    # (graphql-core's inspect), a String or ID field's serializer calls str()
    # on it, and an object field's own fields go to default resolvers, which
    # first ask isinstance(root, dict) or isinstance(root, Mapping) — and a
    # failing isinstance() reads the instance's __class__: each then fails
    # naming the fix.  str() and __class__ fail so only when the caller is a
    # GraphQL serializer or default resolver (_GRAPHQL_READERS, the caller's
    # module); anywhere else a future prints its repr and has its class.
    # Why not a __getattr__ for the default resolvers' getattr(root, name,
    # None): on CPython 3.9-3.11 it makes every attribute read of every future
    # slower (dispatch of 100 keys 2.2x, tools/bench.py --micro on 3.11), while
    # __class__ is read only by a failing isinstance() and by code that reads
    # it by name: the library's own hot paths ask type(value) of a value that
    # may be a future (a __class__ read costs a Python call, about 250 ns).
    def __iter__(self) -> Any:
        raise TypeError(USED_AS_VALUE)

    def __inspect__(self) -> str:
        return f"{self!r} ({USED_AS_VALUE})"

    def __str__(self) -> str:
        if getframe(1).f_globals.get("__name__") in _GRAPHQL_READERS:
            raise TypeError(USED_AS_VALUE)
        return self.__repr__()

    if not TYPE_CHECKING:
        @property
        def __class__(self) -> type:
            caller = getframe(1)
            if caller.f_globals.get("__name__") == "abc":  # isinstance(root, Mapping): ABCMeta.__instancecheck__
                caller = caller.f_back  # type: ignore[assignment]
            if caller is not None and caller.f_globals.get("__name__") in _GRAPHQL_READERS:
                raise TypeError(USED_AS_VALUE)
            return type(self)

    # -- inspection ----------------------------------------------------------
    def __repr__(self) -> str:
        state = self._state
        if state == FINISHED:
            if self._exception is not None:
                raised = type(self._exception).__name__
                return f"<{type(self).__name__} at {id(self):#x} state=finished raised {raised}>"
            return f"<{type(self).__name__} at {id(self):#x} state=finished returned {type(self._result).__name__}>"
        return f"<{type(self).__name__} at {id(self):#x} state={state.lower()}>"

    def cancelled(self) -> bool:
        return self._state in (CANCELLED, CANCELLED_AND_NOTIFIED)

    def running(self) -> bool:
        return self._state == RUNNING

    def done(self) -> bool:
        return self._state in (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)

    # -- waiting ---------------------------------------------------------------
    def _wait(self, timeout: Optional[float]) -> None:
        """Wait until done, or *timeout* seconds (None: no limit), on ``_cond``."""
        lock = self._own_lock()
        try:
            if self._state in (PENDING, RUNNING):
                cond = self._cond
                assert cond is not None
                cond.wait_for(lambda: self._state not in (PENDING, RUNNING), timeout)
        finally:
            lock.release()

    def _outcome(self) -> Any:
        if self._state == FINISHED:
            if self._exception is not None:
                raise self._exception
            return self._result
        if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED):
            raise cf.CancelledError()
        raise cf.TimeoutError()

    def result(self, timeout: Optional[float] = None) -> T:
        """The value, waiting up to *timeout* seconds (None: no limit).

        A future that waits on a load its loader has not dispatched yet
        (directly, or along a ``then`` chain or a ``gather``) dispatches that
        loader first, on this thread, whatever the timeout (0 included): the
        timeout bounds the wait for others, not a batch function this call
        runs itself.

        Raises:
            concurrent.futures.TimeoutError: not done in time.
            concurrent.futures.CancelledError: the future was cancelled.
            BaseException: the future's exception.
        """
        if self._state != FINISHED:
            if self._ticket is not None or self._follow is not None:
                drive_and_wait(self, timeout)
            else:
                self._wait(timeout)
        value: T = self._outcome()  # typed here: _outcome serves result() and exception()
        return value

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """The exception (None on success), waiting as ``result()`` does (and dispatching as it does).

        Raises:
            concurrent.futures.TimeoutError: not done in time.
            concurrent.futures.CancelledError: the future was cancelled.
        """
        if self._state != FINISHED:
            if self._ticket is not None or self._follow is not None:
                drive_and_wait(self, timeout)
            else:
                self._wait(timeout)
        if self._state == FINISHED:
            return self._exception
        if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED):
            raise cf.CancelledError()
        raise cf.TimeoutError()

    # -- callbacks -------------------------------------------------------------
    # The hot paths take _lock with acquire()/release() in try/finally: a
    # ``with`` costs about twice as much, and every load passes here.
    def add_done_callback(self, fn: Callable[[Any], object]) -> None:
        if self._state is PENDING or self._state is RUNNING:
            lock = self._lock
            lock.acquire()
            if lock is not self._lock:  # it detached meanwhile (see _future_lock)
                lock.release()
                lock = self._acquire()
            try:
                stored = self._state is PENDING or self._state is RUNNING
                if stored:
                    # One callback (the common case) is kept as it is; a list only from the second.
                    callbacks = self._done_callbacks
                    if callbacks is None:
                        self._done_callbacks = fn
                    elif type(callbacks) is list:
                        callbacks.append(fn)
                    else:
                        self._done_callbacks = [callbacks, fn]
            finally:
                lock.release()
            if stored:
                if type(fn) is _FUNCTION and fn.__name__ == CHAIN_CALLBACK_NAME:  # asyncio.wrap_future's, maybe
                    _asyncio_bridge.wrapped(self, fn)
                return
        try:
            fn(self)
        except Exception:
            _LOGGER.exception("exception calling callback for %r", self)

    def _invoke_callbacks(self) -> None:
        # A callback raising a BaseException that is not an Exception (a
        # KeyboardInterrupt, a gevent Timeout) does not stop the others: they
        # all run, then the first such exception propagates.
        callbacks, self._done_callbacks = self._done_callbacks, None
        if callbacks is not None:
            escaped: Optional[BaseException] = None
            for fn in callbacks if type(callbacks) is list else (callbacks,):
                try:
                    # a then() future waiting on this one (see _add_chain); type(): __class__ is a property (above)
                    if type(fn) is _Chain:
                        fn._step(self)
                    else:
                        fn(self)
                except Exception:
                    _LOGGER.exception("exception calling callback for %r", self)
                except BaseException as exc:
                    if escaped is None:
                        escaped = exc
            if escaped is not None:
                raise escaped

    # -- completing ------------------------------------------------------------
    def _finish_locked(self, state: str) -> None:
        self._state = state
        if self._cond is not None:
            self._cond.notify_all()
        if self._waiter_list:
            for waiter in self._waiter_list:
                if state == FINISHED:
                    if self._exception is None:
                        waiter.add_result(self)
                    else:
                        waiter.add_exception(self)
                else:
                    waiter.add_cancelled(self)

    def cancel(self) -> bool:
        """Cancel unless running or done; True if it is cancelled.

        Unlike the standard ``Future``, whose executor notifies waiters when
        it comes to the cancelled task, this future is done at once for every
        waiter (``concurrent.futures.wait``/``as_completed`` included): a
        loader's future has no executor that would ever notify them.  A loader
        future's key leaves its loader's queue (if still queued) and cache
        first, so a later ``load`` loads it again (see ``DataLoader``).
        """
        lock = self._acquire()
        try:
            if self._state in (RUNNING, FINISHED):
                return False
            if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED):
                return True
            self._state = CANCELLED_AND_NOTIFIED
            self._follow = self._drivers = None
            if self._cond is not None:
                self._cond.notify_all()
            if self._waiter_list:  # concurrent.futures' waiters, and Blockers (threads blocked in result())
                for waiter in self._waiter_list:
                    waiter.add_cancelled(self)
        finally:
            lock.release()
        ticket = self._ticket
        if ticket is not None:  # a loader's future: its key is forgotten before any callback runs
            loader = ticket.loader()
            if loader is not None:
                loader._forget_cancelled(self, ticket)  # the loader's seam for a cancelled load (DataLoader)
        self._invoke_callbacks()
        return True

    def set_running_or_notify_cancel(self) -> bool:
        lock = self._acquire()
        try:
            if self._state == CANCELLED_AND_NOTIFIED:  # cancel() notified the waiters already
                return False
            if self._state == CANCELLED:
                self._state = CANCELLED_AND_NOTIFIED
                if self._waiter_list:
                    for waiter in self._waiter_list:
                        waiter.add_cancelled(self)
                return False
            if self._state == PENDING:
                self._state = RUNNING
                return True
            raise RuntimeError(f"Future in unexpected state: {self._state}")
        finally:
            lock.release()

    def set_result(self, result: T) -> None:
        lock = self._acquire()
        try:
            if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED):
                raise cf.InvalidStateError(f"{self._state}: {self!r}")
            self._result = result
            self._finish_locked(FINISHED)
        finally:
            lock.release()
        self._invoke_callbacks()

    def set_exception(self, exception: Optional[BaseException]) -> None:
        lock = self._acquire()
        try:
            if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED):
                raise cf.InvalidStateError(f"{self._state}: {self!r}")
            self._exception = exception
            self._finish_locked(FINISHED)
        finally:
            lock.release()
        self._invoke_callbacks()

    def _settle(self, result: Any, exception: Optional[BaseException]) -> bool:
        """Complete unless already done (e.g. cancelled by a user); True if it did.

        A future that followed another (then, gather, prime) lets go of it: a
        done future drives nothing, and dropping ``_follow`` keeps a finished
        chain from holding its earlier futures (and a gather from a cycle).
        """
        # The hot path of a chain (_future_lock.settle_many has these steps inline, for a
        # batch): no method call unless someone waits or a callback is registered.
        lock = self._lock
        lock.acquire()
        if lock is not self._lock:  # it detached meanwhile (see _future_lock)
            lock.release()
            lock = self._acquire()
        try:
            state = self._state
            if state is not PENDING and state is not RUNNING:
                return False
            self._result = result
            self._exception = exception
            if self._follow is not None:
                self._follow = self._drivers = None
            if self._cond is None and not self._waiter_list:
                self._state = FINISHED
            else:
                self._finish_locked(FINISHED)
        finally:
            lock.release()
        if self._done_callbacks is not None:
            self._invoke_callbacks()
        return True

    # -- fork --------------------------------------------------------------------
    def _abandon_in_child(self) -> bool:
        """In a forked child: cancel this future, whose work does not exist there, running nothing.

        For the future of an executor's task that was queued or running at
        the fork (its loader futures' locks are their loader's business: see
        ``DataLoader._after_fork_in_child``).  Its lock may have been held by
        a parent thread at the fork, and the waiters of the parent's threads
        do not exist here: both are rebuilt.  The done-callbacks do not run
        here (they are user code, or a loader's, which takes the loader's
        lock): the caller hands them to ``_fork.soon``.

        Returns:
            True if done-callbacks wait to be run (``_invoke_callbacks``).
        """
        renew_lock_in_child(self)  # a loader's future is repaired by its loader: asserted there
        if self._state not in (PENDING, RUNNING):
            return False
        self._state = CANCELLED_AND_NOTIFIED
        self._follow = self._drivers = None
        return self._done_callbacks is not None

    # -- chaining --------------------------------------------------------------
    # Three overloads, so that a lambda returning a future types as well as a
    # named function does.  mypy first types a lambda argument without
    # context (its parameters Any) and, when several overloads then match
    # with different parameter and return types, gives up (Any).  So every
    # overload that a lambda returning this library's Future[U] matches has
    # the same parameter type once inferred: Callable[[T], Future[U]] for
    # the first, the future type itself (_FutureT) for the second, which
    # covers any other concurrent.futures.Future (its result() is typed; the
    # chain is one of ours at run time), and U for the last, plain values.
    @overload
    def then(self, fn: Callable[[T], Future[U]]) -> Future[U]: ...

    @overload
    def then(self, fn: Callable[[T], _FutureT]) -> _FutureT: ...  # type: ignore[overload-overlap]

    @overload
    def then(self, fn: Callable[[T], U]) -> Future[U]: ...

    def then(self, fn: Callable[[T], Any]) -> Any:
        """Return a future of ``fn(value)``; an error or cancellation propagates.

        ``fn`` may return a value or another ``concurrent.futures.Future``
        (flattened).  It runs on the thread that completes this future, in a
        copy of the ``contextvars`` context that was current when ``then`` was
        called (as ``loop.call_later`` does): the execution's dispatch scope,
        OpenTelemetry context and request-scoped variables follow the chain to
        whichever thread completes it, and what ``fn`` sets stays in that copy.

        Raises:
            TypeError: ``fn`` is not callable.
        """
        if not callable(fn):
            raise TypeError("fn must be callable")
        # Future.__init__'s stores, but the lock is the loader's lock this
        # future shares (or shared), if any: see _future_lock.  Never
        # a lock of this future's own: its Condition may be held (by
        # concurrent.futures.wait) while the chain detaches through it.
        shared = self._shared
        out = _Chain()  # runs no __init__: the stores follow
        out._lock = _Lock() if shared is None else shared
        out._state = PENDING
        out._result = None
        out._exception = None
        out._done_callbacks = None
        out._cond = None
        out._waiter_list = None
        out._follow = self
        out._shared = shared
        # A copy per then(): one context cannot be entered twice at once, and
        # fn runs once.  The completing thread may be inside another
        # execution's scope; the copy holds the then()-time scope (even None).
        out._fn = fn
        out._context = copy_context()
        self._add_chain(out)
        return out

    def _add_chain(self, chain: _Chain) -> None:
        """``add_done_callback(chain._step)``, with the chain itself stored as the callback.

        ``_invoke_callbacks`` runs a ``_Chain`` entry as ``chain._step(self)``:
        no bound method per ``then()`` (one object less for the cyclic GC to
        walk while the chain waits); the chain itself stays not callable.
        """
        if self._state is PENDING or self._state is RUNNING:
            lock = self._acquire()
            try:
                if self._state is PENDING or self._state is RUNNING:
                    callbacks = self._done_callbacks
                    if callbacks is None:
                        self._done_callbacks = chain
                    elif type(callbacks) is list:
                        callbacks.append(chain)
                    else:
                        self._done_callbacks = [callbacks, chain]
                    return
            finally:
                lock.release()
        try:
            chain._step(self)
        except Exception:
            _LOGGER.exception("exception calling callback for %r", self)

    def _move_to(self, inner: cf.Future[Any]) -> None:
        """The chain moved on: this future now waits on *inner*; wake its blocked drivers."""
        lock = self._acquire()
        try:
            if self._state is not PENDING and self._state is not RUNNING:
                return
            self._follow = inner
            demand = self._drivers
            if demand:
                demand = list(demand)
        finally:
            lock.release()
        if demand:
            for blocker in demand:
                blocker.moved()


class _Chain(Future[Any]):
    """The future ``then(fn)`` returns.

    The chain itself is the done-callback of its source, and then of the
    future ``fn`` returned, if any, run as ``_step(src)`` (``Future._add_chain``:
    no closure nor bound method per call, a chained load is on the hot path of
    every nested GraphQL field); of a plain ``concurrent.futures.Future`` it is
    the bound method ``_step``.  The future itself is
    not callable: frameworks call a callable resolver result (strawberry-django's
    ``django_resolver`` does), and must get the chain's value.

    ``_fn`` and ``_context`` (``fn`` and the copy of the ``then()`` caller's
    context) are set by ``then`` and let go when ``fn`` runs: ``_fn`` None
    means the second stage, where the outcome is copied.  The chain may have
    been cancelled by its holder meanwhile: ``_settle`` (not ``set_result``)
    so that is not an error logged by the source's callback.
    """

    _fn: Any = None
    _context: Any = None

    if TYPE_CHECKING:
        def __init__(self) -> None: ...
    else:
        __init__ = object.__init__  # the class call allocates (cheaper than object.__new__), and runs nothing

    def _step(self, src: cf.Future[Any]) -> None:
        try:
            value = src.result()
        except BaseException as exc:  # includes CancelledError
            self._settle(None, exc)
            return
        fn = self._fn
        if fn is None:  # src is what fn returned: its outcome is ours
            self._settle(value, None)
            return
        context = self._context
        self._fn = self._context = None
        try:
            value = context.run(fn, value)
        except BaseException as exc:
            self._settle(None, exc)
            if not isinstance(exc, Exception):
                raise
            return
        if isinstance(value, cf.Future):
            self._move_to(value)
            if isinstance(value, Future):
                value._add_chain(self)
            else:  # a plain concurrent.futures.Future calls its callbacks
                value.add_done_callback(self._step)
        else:
            self._settle(value, None)



#: ``settle(fut, result, exception)``: complete *fut* unless it is done already
#: (``Future._settle``); what the other modules of the package call to complete
#: a future of theirs.  The method itself, not a wrapper: the same cost.
settle: Callable[[Future[Any], Any, Optional[BaseException]], bool] = Future._settle


def abandon_in_child(fut: Future[Any]) -> None:
    """Fork repair of a task's future, in a forked child, inside ``os.fork()``: see ``Future._abandon_in_child``.

    The future is cancelled at once, running nothing; its done-callbacks run
    after the at-fork hooks, on the repair thread (``_fork.soon``).
    """
    if fut._abandon_in_child():
        _fork.soon(fut._invoke_callbacks)
