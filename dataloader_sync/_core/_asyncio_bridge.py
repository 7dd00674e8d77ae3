"""Awaiting a loader's future on an asyncio loop: batched at the loop's batching point, woken once per batch.

``await loader.load(k)`` (``Future.__await__``) hands the future to this
module.  The loop thread never runs a batch function and never blocks:

1. *Ask.*  The await (``wait``) makes an ``asyncio.Future`` of the loop, the
   *signal* the awaiting task waits on, and hands a ``_Waiter`` for it to the
   loop's ``_Inbox``, which remembers that its loaders are to be dispatched.  The first ask of a
   round schedules the inbox's flush with ``loop.call_soon(loop.call_soon,
   flush)``: the flush runs once the loop has run every callback that was
   ready when the first key was queued, and every callback those scheduled
   in turn once — aiodataloader's batching point (DataLoader.js's
   ``process.nextTick`` after a resolved promise).  Every resolver of a level
   of graphql-core's async execution (tasks of one ``gather``) has queued its
   keys by then.
2. *Dispatch.*  The flush submits one job per loader whose keys are still
   queued to the loop's default executor (``loop.run_in_executor(None, ...)``);
   the job dispatches that loader on the worker thread: its batch function
   runs there (or on the loader's own ``executor=``), as ``dispatch()`` would
   run it.  A waiter on a queued load of such a loader is *direct*: nothing
   is registered on its future.  Any other waiter (a ``then`` chain, a
   ``gather``, a load in flight elsewhere) sits in its future's waiter list
   (it speaks the protocol of ``concurrent.futures``' waiters, as
   ``_sync_on_demand.Blocker`` does) and the flush follows the future down to the
   loader futures it waits on (``_sync_on_demand``'s walk, without dispatching).
3. *Deliver.*  Delivering a waiter gives its signal the future's outcome
   (value or error), so the task resumes with it and no frame of ours runs.
   A job's end delivers its direct waiters whose futures it settled (the
   others register then).  When a registered waiter's future
   settles, the waiter posts itself to the inbox (on whatever thread settled
   it).  The inbox wakes the loop at most
   once until the loop has taken what was posted: a wake-up
   (``call_soon_threadsafe``) is scheduled by the first post only, and the
   loop takes every post at once.  Within one batch the wake-up is deferred
   to the batch's end: ``_future_lock.settle_many`` (every batch of keys
   settles there) holds the posts of its thread (``hold``/``release``), and a
   dispatch job holds them for the whole dispatch, its own inbox then woken
   by the job's completion — so one batch costs the loop one wake-up, not one
   per future (``asyncio.wrap_future`` costs one per future).
5. *Wrapped.*  ``asyncio.wrap_future(fut)`` on a running loop puts asyncio's
   own callback on *fut*; ``Future.add_done_callback`` recognises it (by its
   code) and asks the inbox as an await would (``wrapped``), so the key is
   dispatched; the value arrives through asyncio's callback.
4. *Move.*  A ``then`` chain whose function made a load of another loader
   tells its waiters (``moved``, as it tells a blocked thread); the waiter
   posts itself, and the loop asks again at the next batching point.

Guarantees:
- No timer, no ``dispatch_all()``: a key awaited on a running loop is
  dispatched at the loop's next batching point.
- The loop thread runs no batch function and no ``then`` function of a
  dispatched batch; those run on the worker thread that settled the batch,
  the batch in a copy of the context of the first task that awaited one of
  its keys (as ``asyncio.to_thread`` carries its caller's).
- Never hangs: awaiting with no running loop, or on a closed loop, is a
  ``RuntimeError`` at once (``NO_LOOP``); a load whose loader was
  garbage-collected fails (``_sync_on_demand.orphaned_error``); a loop whose default
  executor is shut down fails the awaits of that flush (``NO_EXECUTOR``).
- A cancelled awaiting task leaves the load alone (a registered waiter leaves
  the future's waiter list when its signal is cancelled): the key stays
  queued or in flight, and cached, for every other caller.
- One loader may be awaited from several loops, one after another or at
  once: each loop has its own inbox; a future's waiters may belong to any.
- A process that never awaits pays one global read per settled batch.
- Each dispatch job runs inside the job hooks (``_job_hooks``) on its worker
  thread: an integration lets go there of what the batch took on that thread
  (``dataloader_sync.django``: the database connections it opened).

Locks: ``_Inbox._lock`` guards ``_posted`` and ``_woken`` only; it is taken
under a future's lock (a waiter posts from ``Future._finish_locked``) and
never takes another lock inside, and no user code runs under it.
``_INBOXES_LOCK`` guards ``_INBOXES``.  Everything else of an inbox
(``_asked``, ``_flush_due``) belongs to its loop's thread.
"""
from __future__ import annotations

import concurrent.futures as cf
import functools
import threading
import weakref
from collections.abc import Generator
from contextvars import copy_context
from typing import Any, Optional

from . import _fork, _job_hooks
from ._compat import chain_callback_code, running_loop
from ._sync_on_demand import orphaned_error, unwatch, watch

__all__ = ["NO_EXECUTOR", "NO_LOOP", "InboxStatistics", "awaited", "driving", "hold", "release", "running_loop",
           "start_driving", "statistics", "stop_driving", "wait", "wrapped"]

NO_LOOP = (
    "awaiting a dataloader_sync future needs a running asyncio event loop (await it inside a coroutine that"
    " asyncio.run() or an ASGI server runs); in synchronous code call .result() instead"
)
NO_EXECUTOR = (
    "the event loop's default executor is shut down, so the batch function of this load cannot run off the loop;"
    " await loads before asyncio.run() returns"
)

#: True once any future was awaited in this process: until then a batch settles with no hold (one read).
awaited = False

# .held: the inboxes whose wake-up this thread defers (a list), or None;
# .driving: > 0 while a synchronous driver steps a coroutine on this thread (see start_driving).
_local = threading.local()

# loop -> its inbox.  _INBOXES_LOCK guards it (loops of several threads ask at once).
_INBOXES: weakref.WeakKeyDictionary[Any, _Inbox] = weakref.WeakKeyDictionary()
_INBOXES_LOCK = threading.Lock()
# The last (loop, inbox) looked up, for the next await on the same loop without the lock (read and
# replaced whole: a race at worst looks the loop up again).  It keeps that loop alive until another
# loop awaits (the loop's own inbox does not: see _Inbox).
_last: tuple[Any, Any] = (None, None)


def wait(fut: Any) -> Generator[Any, None, Any]:
    """The iterator of ``await fut`` for a pending *fut*: its value (or error) once done, the loop never blocked.

    On a running loop it is the iterator of an ``asyncio.Future`` that gets
    *fut*'s outcome (``_resolve``).  With no loop, under a synchronous driver
    (``start_driving``), a generator that yields *fut* itself to the driver,
    which resumes it once *fut* is done.

    Raises:
        RuntimeError: no asyncio loop runs in this thread, or it is closed (``NO_LOOP``).
    """
    global awaited
    loop = running_loop()
    if loop is None or loop.is_closed():
        if loop is None and driving():
            return _driven(fut)
        raise RuntimeError(NO_LOOP)
    awaited = True
    last = _last
    inbox = last[1] if last[0] is loop else _inbox_of(loop)
    signal = loop.create_future()
    inbox.ask(_Waiter(inbox, fut, signal), loop)  # registered on fut only if its batch's job does not settle it
    return signal.__await__()  # type: ignore[no-any-return]


def wrapped(fut: Any, fn: Any) -> None:
    """``asyncio.wrap_future(fut)`` on this thread's running loop just put *fn* on the pending *fut*:
    have the loop's inbox dispatch *fut*'s loads at its next batching point, as ``await fut`` does.

    *fn* is asyncio's (``_chain_future``'s ``_call_set_state``, checked by its code): the asyncio
    future ``wrap_future`` returns gets *fut*'s outcome through it (a wake-up per future, asyncio's),
    so the waiter asked here only dispatches.  A flush that cannot dispatch (``NO_EXECUTOR``) fails
    that asyncio future instead of leaving it waiting.  Anything else calling a callback of that
    name, or no loop running: nothing.
    """
    code = getattr(fn, "__code__", None)
    if code is None or code is not chain_callback_code():
        return
    loop = running_loop()
    if loop is None or loop.is_closed():
        return
    cells = dict(zip(code.co_freevars, (cell.cell_contents for cell in fn.__closure__ or ())))
    inbox = _inbox_of(loop)
    signal = loop.create_future()  # nobody awaits it: its outcome is read by _wrapped_failed
    signal.add_done_callback(functools.partial(_wrapped_failed, fut, fn, cells.get("destination")))
    inbox.ask(_Waiter(inbox, fut, signal), loop)


def _wrapped_failed(fut: Any, fn: Any, destination: Any, signal: Any) -> None:
    """The waiter of ``wrapped`` was delivered: if its flush could not dispatch *fut* (an error while *fut*
    is pending), fail *destination* (the asyncio future of ``wrap_future``) and take *fn* off *fut*."""
    if signal.cancelled():
        return
    exc = signal.exception()  # (read: an asyncio future's error nobody reads is logged)
    if exc is None or fut.done() or destination is None or destination.done():
        return
    lock = fut._acquire()
    try:
        callbacks = fut._done_callbacks
        if callbacks is fn:
            fut._done_callbacks = None
        elif type(callbacks) is list and fn in callbacks:
            callbacks.remove(fn)
    finally:
        lock.release()
    destination.set_exception(exc)


def _driven(fut: Any) -> Generator[Any, None, Any]:
    yield fut
    return fut._outcome()


def _resolve(signal: Any, fut: Any) -> None:
    """Give the awaiting task's *signal* the outcome of *fut* (done)."""
    if fut.cancelled():
        signal.set_exception(cf.CancelledError())
    elif fut._exception is not None:
        signal.set_exception(fut._exception)
    else:
        signal.set_result(fut._result)


def start_driving() -> int:
    """This thread steps a coroutine synchronously (no loop): an awaited pending future is yielded to it.

    A synchronous execution (``DataLoaderExecutionContext``) that completes a
    framework's coroutine wrapping a loader future (``graphql._awaitables.drive``)
    turns this on around each step: ``await fut`` then yields *fut* itself, and
    the execution resumes the coroutine once *fut* is done.  Returns the token
    for ``stop_driving``.
    """
    depth: int = getattr(_local, "driving", 0)
    _local.driving = depth + 1
    return depth


def stop_driving(token: int) -> None:
    """End what ``start_driving`` (which returned *token*) began."""
    _local.driving = token


def driving() -> bool:
    """True while a synchronous driver steps a coroutine on this thread."""
    return bool(getattr(_local, "driving", 0))


def hold() -> Optional[list[_Inbox]]:
    """Defer this thread's wake-ups until ``release`` (nested holds: the outer one decides); a token."""
    if getattr(_local, "held", None) is not None:
        return None
    held: list[_Inbox] = []
    _local.held = held
    return held


def release(token: Optional[list[_Inbox]], skip: Optional[_Inbox] = None) -> None:
    """End the hold *token* (from ``hold``): wake each inbox posted to meanwhile (but *skip*)."""
    if token is None:
        return
    _local.held = None
    for inbox in token:
        if inbox is not skip:
            inbox.wake()


class InboxStatistics:
    """What one loop's inbox did (a frozen snapshot; for tests and benches).

    Attributes:
        flushes: batching points reached (each dispatches what was asked since the last).
        jobs: dispatch jobs submitted to the loop's default executor (one per loader per flush).
        wakeups: wake-ups of the loop from another thread: this inbox's
            ``call_soon_threadsafe`` calls, plus its dispatch jobs' completions
            (``run_in_executor``'s own).
        delivered: awaits woken.
    """

    __slots__ = ("flushes", "jobs", "wakeups", "delivered")

    def __init__(self, flushes: int, jobs: int, wakeups: int, delivered: int) -> None:
        self.flushes = flushes
        self.jobs = jobs
        self.wakeups = wakeups
        self.delivered = delivered

    def __repr__(self) -> str:
        return (f"InboxStatistics(flushes={self.flushes}, jobs={self.jobs}, wakeups={self.wakeups},"
                f" delivered={self.delivered})")


def statistics(loop: Any) -> InboxStatistics:
    """The counts of *loop*'s inbox (zeros if nothing was awaited on it)."""
    with _INBOXES_LOCK:
        inbox = _INBOXES.get(loop)
    if inbox is None:
        return InboxStatistics(0, 0, 0, 0)
    return InboxStatistics(inbox.flushes, inbox.jobs, inbox.wakeups, inbox.delivered)


def _inbox_of(loop: Any) -> _Inbox:
    global _last
    with _INBOXES_LOCK:
        inbox = _INBOXES.get(loop)
        if inbox is None:
            inbox = _INBOXES[loop] = _Inbox(loop)
    _last = (loop, inbox)
    return inbox


class _Waiter:
    """One await of one pending future on one loop.

    In the future's waiter list it speaks ``concurrent.futures``' waiter
    protocol (called under the future's lock: it only posts); in the
    ``_drivers`` of the chain futures it passed, ``moved`` (no lock held).
    """

    __slots__ = ("inbox", "fut", "signal", "stages")

    def __init__(self, inbox: _Inbox, fut: Any, signal: Any) -> None:
        self.inbox = inbox
        self.fut = fut
        self.signal = signal  # the asyncio future the awaiting task waits on
        self.stages: list[Any] = []  # chain futures this waiter watches for moves (see _sync_on_demand)

    def post(self, _future: Any = None) -> None:
        self.inbox.post(self)

    add_result = add_exception = add_cancelled = moved = post

    def register(self) -> bool:
        """Sit in the future's waiter list, to be posted when it is done; True if it is done already."""
        fut = self.fut
        lock = fut._acquire()  # the future's current lock (see _future_lock)
        try:
            if fut.done():
                return True
            # list.append: not a driving waiter list's (see _sync_on_demand.waiters_for)
            list.append(fut._waiters, self)
        finally:
            lock.release()
        self.signal.add_done_callback(self._signal_done)
        return False

    def _signal_done(self, signal: Any) -> None:
        if signal.cancelled():  # the awaiting task was cancelled: leave the load to others
            self.leave()

    def leave(self) -> None:
        """On the loop: the await ended without the future (its task was cancelled): forget it."""
        fut = self.fut
        lock = fut._acquire()
        try:
            waiters = fut._waiter_list
            if waiters is not None and self in waiters:
                waiters.remove(self)
        finally:
            lock.release()
        if self.stages:
            unwatch(self.stages, self)
            self.stages = []


class _Inbox:
    """One loop's side of the bridge (see the module notes): what to dispatch, what to deliver."""

    def __init__(self, loop: Any) -> None:
        self._loop_ref = weakref.ref(loop)  # the loops dict's value must not keep its key alive
        # _lock guards _posted (waiters whose future is done or moved, for the loop) and _woken
        # (a wake-up is on its way to the loop, or deferred by a hold, or a job's completion).
        self._lock = threading.Lock()
        self._posted: list[_Waiter] = []
        self._woken = False
        # The loop thread's own: waiters to dispatch for at the next batching point.
        self._asked: list[_Waiter] = []
        self._flush_due = False
        self.flushes = self.jobs = self.wakeups = self.delivered = 0

    # -- the loop thread --------------------------------------------------------------
    def ask(self, waiter: _Waiter, loop: Any) -> None:
        self._asked.append(waiter)
        if not self._flush_due:
            self._flush_due = True
            loop.call_soon(loop.call_soon, self._flush)  # aiodataloader's batching point (module notes)

    def _flush(self) -> None:
        # A waiter on a plain queued load (the common case) is *direct*: the job that dispatches
        # its loader delivers it when it ends (_job_done), nothing registered on the future.
        # Any other (a chain, a gather, a load in flight elsewhere) registers on its future and
        # watches its chain, and is posted when it is done or moves.
        self._flush_due = False
        self.flushes += 1
        asked, self._asked = self._asked, []
        found: dict[int, tuple[Any, Any, list[_Waiter]]] = {}  # id(ticket) -> (loader, ticket, direct waiters)
        for waiter in asked:
            signal, fut = waiter.signal, waiter.fut
            if signal.done():
                continue
            if fut.done():
                self.delivered += 1
                _resolve(signal, fut)
                continue
            ticket = fut._ticket
            if ticket is not None and ticket.taken_in is None:
                loader = ticket.loader()
                if loader is not None:
                    entry = found.get(id(ticket))
                    if entry is None:
                        found[id(ticket)] = (loader, ticket, [waiter])
                    else:
                        entry[2].append(waiter)
                    continue
            if waiter.register():
                self.delivered += 1
                _resolve(signal, fut)
                continue
            for loader, ticket in _leaves(fut, waiter):
                if id(ticket) not in found:
                    found[id(ticket)] = (loader, ticket, [])
            if fut.done() and not signal.done():  # settled by the walk (an orphan)
                self.delivered += 1
                _resolve(signal, fut)
        loop = self._loop_ref()
        if loop is None:
            return
        for loader, ticket, direct in found.values():
            try:
                # In a copy of this flush's context, which is the first asking task's (call_soon
                # copies the context it is called in): as asyncio.to_thread does, so the batch
                # sees that request's contextvars (OpenTelemetry's context, request settings).
                job = loop.run_in_executor(None, copy_context().run, _dispatch_job, self, loader, ticket)
            except RuntimeError:  # the default executor is shut down
                for waiter in direct:
                    if not waiter.signal.done():
                        waiter.signal.set_exception(RuntimeError(NO_EXECUTOR))
                continue
            self.jobs += 1
            job.add_done_callback(functools.partial(self._job_done, direct))

    def _job_done(self, direct: list[_Waiter], _job: Any) -> None:
        # A job's completion wakes the loop (run_in_executor's own call_soon_threadsafe): it is
        # the wake-up of what the job's batch settled, which deferred its own (module notes).
        self.wakeups += 1
        for waiter in direct:
            signal = waiter.signal
            if signal.done():
                continue
            if waiter.fut.done() or waiter.register():  # settled; else (an executor's batch) posted later
                self.delivered += 1
                _resolve(signal, waiter.fut)
        self._deliver()

    def _deliver(self) -> None:
        with self._lock:
            posted, self._posted = self._posted, []
            self._woken = False
        for waiter in posted:
            signal = waiter.signal
            if signal.done():
                continue
            if waiter.fut.done():
                self.delivered += 1
                _resolve(signal, waiter.fut)
            else:  # a chain it follows moved on to a new load: ask at the next batching point
                self.ask(waiter, signal.get_loop())

    # -- any thread ----------------------------------------------------------------------
    def post(self, waiter: _Waiter) -> None:
        """*waiter*'s future is done or moved: have the loop look, waking it once for all posts."""
        with self._lock:
            self._posted.append(waiter)
            if self._woken:
                return
            self._woken = True
        held = getattr(_local, "held", None)
        if held is not None:
            held.append(self)
            return
        self.wake()

    def wake(self) -> None:
        loop = self._loop_ref()
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody waits there any more
            return
        self.wakeups += 1  # (a race on the count is harmless: statistics)


def _dispatch_job(inbox: _Inbox, loader: Any, ticket: Any) -> None:
    """On a worker thread: dispatch *loader* if *ticket*'s keys are still queued, posts held.

    What the batch posts to *inbox* waits for the job's completion, which wakes
    the loop anyway (``_Inbox._job_done``); other inboxes are woken here.  The
    job hooks (``_job_hooks``: Django's connections) run around the dispatch,
    so what they let go is let go before any await is woken.
    """
    token = hold()
    afters = _job_hooks.begin() if _job_hooks.hooks else None
    try:
        loader._dispatch_for(ticket)
    finally:
        if afters:
            _job_hooks.end(afters)
        release(token, skip=inbox)


def _leaves(fut: Any, waiter: _Waiter) -> list[tuple[Any, Any]]:
    """The (loader, ticket) pairs of the queued loads *fut* waits on; *waiter* watches the chain futures passed.

    ``_sync_on_demand._drive``'s walk, collecting instead of dispatching (the loop
    thread must not run a batch).
    """
    found: list[tuple[Any, Any]] = []
    todo = [fut]
    while todo:
        node = todo.pop()
        while not node.done():
            ticket = getattr(node, "_ticket", None)
            if ticket is not None:  # a loader future: the leaf
                loader = ticket.loader()
                if loader is None:  # nothing is left to dispatch the key: fail it, do not hang
                    node._settle(None, orphaned_error())
                elif ticket.taken_in is None:  # still queued
                    found.append((loader, ticket))
                elif ticket.taken_in != _fork.generation:  # a batch of a parent process
                    loader._abandoned_at_fork(node)
                break  # otherwise in flight: its batch settles it
            if getattr(node, "_follow", None) is None:
                break  # a future nothing can drive (an executor's): just wait
            follow = watch(node, waiter, waiter.stages)
            if follow is None:
                break
            if isinstance(follow, cf.Future):
                node = follow
                continue
            todo.extend(follow.futures or ())  # a gather's
            break
    return found
