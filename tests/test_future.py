"""Tests for dataloader_sync._core._future: the lean Future, then, gather.

The lean ``Future`` must behave like ``concurrent.futures.Future``: the shared
contract below runs over both classes.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextvars
import logging
import queue
import threading
import time
from typing import Any

import pytest

from dataloader_sync import Future, completed_future, failed_future, gather
from dataloader_sync._core._dispatch_scope import current_scope, using_scope

TIMEOUT = 10.0


@pytest.fixture(params=[cf.Future, Future], ids=["stdlib", "lean"])
def make(request):
    """Makes a new future of the class under test."""
    return request.param


def _condition(fut: cf.Future):
    return fut._cond if isinstance(fut, Future) else fut._condition


def wait_until_a_thread_waits_on(fut: cf.Future) -> None:
    """Block until some thread is inside fut.result()/exception() waiting (CPython internals)."""
    deadline = time.monotonic() + TIMEOUT
    pause = threading.Event()
    while time.monotonic() < deadline:
        cond = _condition(fut)
        if cond is not None and len(cond._waiters) > 0:
            return
        pause.wait(0.001)
    raise AssertionError("no thread started waiting")


# -- the shared contract ---------------------------------------------------------------


def test_Future_is_a_concurrent_futures_Future():
    assert isinstance(Future(), cf.Future)
    assert issubclass(Future, cf.Future)


def test_Future_result_after_set_result(make):
    fut = make()
    assert not fut.done() and not fut.running() and not fut.cancelled()
    fut.set_result(42)
    assert fut.done() and not fut.cancelled()
    assert fut.result() == 42
    assert fut.result(timeout=0) == 42
    assert fut.exception() is None


def test_Future_result_raises_after_set_exception(make):
    fut = make()
    error = ValueError("bad")
    fut.set_exception(error)
    assert fut.done()
    with pytest.raises(ValueError, match="bad") as info:
        fut.result()
    assert info.value is error
    assert fut.exception() is error


def test_Future_result_and_exception_time_out_when_pending(make):
    fut = make()
    with pytest.raises(cf.TimeoutError):
        fut.result(timeout=0)
    with pytest.raises(cf.TimeoutError):
        fut.exception(timeout=0.01)
    assert not fut.done()


def test_Future_cancel_a_pending_future(make):
    fut = make()
    assert fut.cancel() is True
    assert fut.cancelled() and fut.done() and not fut.running()
    assert fut.cancel() is True  # again: still cancelled
    with pytest.raises(cf.CancelledError):
        fut.result(timeout=0)
    with pytest.raises(cf.CancelledError):
        fut.exception(timeout=0)


def test_Future_cancel_a_finished_future_fails(make):
    fut = make()
    fut.set_result(1)
    assert fut.cancel() is False
    assert not fut.cancelled() and fut.result() == 1


def test_Future_set_running_or_notify_cancel_on_pending(make):
    fut = make()
    assert fut.set_running_or_notify_cancel() is True
    assert fut.running() and not fut.done()
    assert fut.cancel() is False  # a running future cannot be cancelled
    fut.set_result(3)
    assert fut.result() == 3 and not fut.running()


def test_Future_set_running_or_notify_cancel_on_cancelled(make):
    fut = make()
    fut.cancel()
    assert fut.set_running_or_notify_cancel() is False
    assert fut.cancelled()
    done, not_done = cf.wait([fut], timeout=0)
    assert done == {fut} and not not_done


def test_Future_set_running_or_notify_cancel_twice_is_an_error(make, caplog):
    fut = make()
    fut.set_running_or_notify_cancel()
    with caplog.at_level(logging.CRITICAL, logger="concurrent.futures"):
        with pytest.raises(RuntimeError):
            fut.set_running_or_notify_cancel()


@pytest.mark.parametrize("first", ["result", "exception", "cancel"])
@pytest.mark.parametrize("second", ["result", "exception"])
def test_Future_setting_a_done_future_raises_InvalidStateError(make, first, second):
    fut = make()
    if first == "result":
        fut.set_result(1)
    elif first == "exception":
        fut.set_exception(KeyError(1))
    else:
        fut.cancel()
    with pytest.raises(cf.InvalidStateError):
        if second == "result":
            fut.set_result(2)
        else:
            fut.set_exception(KeyError(2))


def test_Future_done_callback_added_before_completion_runs_on_completion(make):
    fut = make()
    seen: list[Any] = []
    fut.add_done_callback(lambda f: seen.append(("first", f)))
    fut.add_done_callback(lambda f: seen.append(("second", f)))
    assert seen == []
    fut.set_result(1)
    assert seen == [("first", fut), ("second", fut)]


def test_Future_done_callback_added_after_completion_runs_at_once(make):
    fut = make()
    fut.set_result(1)
    seen: list[Any] = []
    fut.add_done_callback(seen.append)
    assert seen == [fut]


def test_Future_done_callbacks_run_on_cancel(make):
    fut = make()
    seen: list[Any] = []
    fut.add_done_callback(seen.append)
    fut.cancel()
    assert seen == [fut]


def test_Future_done_callbacks_run_on_the_completing_thread(make):
    fut = make()
    threads: list[threading.Thread] = []
    fut.add_done_callback(lambda f: threads.append(threading.current_thread()))
    t = threading.Thread(target=fut.set_result, args=(1,))
    t.start()
    t.join(TIMEOUT)
    assert threads == [t]


def test_Future_callback_exceptions_are_logged_and_the_rest_still_run(make, caplog):
    fut = make()
    seen: list[str] = []

    def boom(f: cf.Future) -> None:
        raise ZeroDivisionError("in callback")

    fut.add_done_callback(boom)
    fut.add_done_callback(lambda f: seen.append("after"))
    # The stdlib logs on its own logger; ours on the package's, like every
    # other failure of the package's machinery.
    logger = "concurrent.futures" if make is cf.Future else "dataloader_sync"
    with caplog.at_level(logging.ERROR, logger=logger):
        fut.set_result(1)
        fut.add_done_callback(boom)  # at once, on a done future: logged too
    assert seen == ["after"]
    records = [r for r in caplog.records if r.name == logger]
    assert len(records) == 2
    assert all(r.exc_info and r.exc_info[0] is ZeroDivisionError for r in records)


def test_Future_result_wakes_a_waiting_thread(make):
    fut = make()
    got: list[Any] = []

    def waiter() -> None:
        t0 = time.monotonic()
        got.append(fut.result(timeout=10))
        got.append(time.monotonic() - t0)

    t = threading.Thread(target=waiter)
    t.start()
    wait_until_a_thread_waits_on(fut)
    fut.set_result("value")
    t.join(TIMEOUT)
    assert got[0] == "value"
    assert got[1] < 5, "the waiting thread was not woken by set_result"


def test_Future_exception_wakes_a_waiting_thread(make):
    fut = make()
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(fut.exception(timeout=10)))
    t.start()
    wait_until_a_thread_waits_on(fut)
    error = KeyError("x")
    t0 = time.monotonic()
    fut.set_exception(error)
    t.join(TIMEOUT)
    assert got == [error] and time.monotonic() - t0 < 5


def test_Future_cancel_wakes_a_waiting_thread(make):
    fut = make()
    got: list[Any] = []

    def waiter() -> None:
        try:
            fut.result(timeout=10)
        except cf.CancelledError as exc:
            got.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    wait_until_a_thread_waits_on(fut)
    t0 = time.monotonic()
    fut.cancel()
    t.join(TIMEOUT)
    assert len(got) == 1 and time.monotonic() - t0 < 5


def test_Future_repr_shows_the_state(make):
    fut = make()
    assert "pending" in repr(fut)
    fut.set_result(1)
    assert "finished" in repr(fut) and "int" in repr(fut)
    failed = make()
    failed.set_exception(KeyError())
    assert "finished" in repr(failed) and "KeyError" in repr(failed)


# -- concurrent.futures.wait / as_completed ----------------------------------------------


def test_Future_wait_ALL_COMPLETED(make):
    futures = [make() for _ in range(3)]
    done_event = threading.Event()
    result: list[Any] = []

    def waiter() -> None:
        result.append(cf.wait(futures, timeout=TIMEOUT, return_when=cf.ALL_COMPLETED))
        done_event.set()

    t = threading.Thread(target=waiter)
    t.start()
    futures[0].set_result(0)
    futures[1].set_exception(KeyError(1))
    assert not done_event.wait(0.05)  # one still pending
    futures[2].set_result(2)
    t.join(TIMEOUT)
    done, not_done = result[0]
    assert done == set(futures) and not not_done


def test_Future_wait_FIRST_COMPLETED(make):
    futures = [make() for _ in range(3)]
    result: list[Any] = []
    t = threading.Thread(
        target=lambda: result.append(cf.wait(futures, timeout=TIMEOUT, return_when=cf.FIRST_COMPLETED))
    )
    t.start()
    futures[1].set_result(1)
    t.join(TIMEOUT)
    done, not_done = result[0]
    assert done == {futures[1]} and not_done == {futures[0], futures[2]}


def test_Future_wait_FIRST_EXCEPTION(make):
    futures = [make() for _ in range(3)]
    futures[0].set_result(0)
    result: list[Any] = []
    t = threading.Thread(
        target=lambda: result.append(cf.wait(futures, timeout=TIMEOUT, return_when=cf.FIRST_EXCEPTION))
    )
    t.start()
    futures[2].set_exception(KeyError(2))
    t.join(TIMEOUT)
    done, not_done = result[0]
    assert done == {futures[0], futures[2]} and not_done == {futures[1]}


def test_Future_wait_times_out(make):
    futures = [make(), make()]
    futures[0].set_result(0)
    done, not_done = cf.wait(futures, timeout=0.01)
    assert done == {futures[0]} and not_done == {futures[1]}
    done, not_done = cf.wait(futures, timeout=0.01, return_when=cf.FIRST_COMPLETED)
    assert done == {futures[0]}


def test_Future_wait_leaves_no_waiter_installed(make):
    fut = make()
    cf.wait([fut], timeout=0.01)
    fut.set_result(1)  # must not try to notify a stale waiter
    assert fut._waiters == []


def test_Future_as_completed_yields_in_completion_order(make):
    futures = [make() for _ in range(3)]
    yielded: queue.Queue[cf.Future] = queue.Queue()

    def consume() -> None:
        for f in cf.as_completed(futures, timeout=TIMEOUT):
            yielded.put(f)

    t = threading.Thread(target=consume)
    t.start()
    for i in (2, 0, 1):
        futures[i].set_result(i)
        assert yielded.get(timeout=TIMEOUT) is futures[i]
    t.join(TIMEOUT)


def test_Future_as_completed_yields_done_futures_first(make):
    futures = [make() for _ in range(2)]
    futures[1].set_result(1)
    it = cf.as_completed(futures, timeout=TIMEOUT)
    assert next(it) is futures[1]
    futures[0].set_exception(KeyError(0))
    assert next(it) is futures[0]


def test_Future_as_completed_times_out(make):
    futures = [make(), make()]
    futures[0].set_result(0)
    seen: list[cf.Future] = []
    with pytest.raises(cf.TimeoutError):
        for f in cf.as_completed(futures, timeout=0.05):
            seen.append(f)
    assert seen == [futures[0]]


# -- then -------------------------------------------------------------------------------


def test_Future_then_maps_the_value():
    src: Future = Future()
    out = src.then(lambda v: v + 1)
    assert isinstance(out, Future) and not out.done()
    src.set_result(1)
    assert out.result(TIMEOUT) == 2


def test_Future_then_chains():
    src: Future = Future()
    out = src.then(lambda v: v * 2).then(lambda v: v + 1).then(str)
    src.set_result(5)
    assert out.result(TIMEOUT) == "11"


def test_Future_then_returns_a_future_that_is_not_callable():
    # Frameworks call a callable resolver result (strawberry-django's
    # django_resolver does): a then() future must be a plain value to them.
    src: Future = Future()
    out = src.then(lambda v: v + 1)
    flat = src.then(lambda v: completed_future(v))
    assert not callable(out) and not callable(flat)
    src.set_result(1)
    assert not callable(out) and out.result(TIMEOUT) == 2 and flat.result(TIMEOUT) == 1


def test_Future_then_keeps_no_callback_object_of_its_own_and_keeps_the_callbacks_order():
    # The chain itself waits in its source's done-callbacks (no bound method
    # per then(), one object less for the cyclic GC), and in those of the
    # future its function returned; callbacks still run in registration order.
    src: Future = Future()
    inner: Future = Future()
    order: list[str] = []
    src.add_done_callback(lambda f: order.append("before"))
    out = src.then(lambda v: (order.append("chain"), inner)[1])
    src.add_done_callback(lambda f: order.append("after"))
    assert out in src._done_callbacks
    src.set_result(1)
    assert order == ["before", "chain", "after"]
    assert inner._done_callbacks is out and not callable(out)
    inner.set_result(2)
    assert out.result(TIMEOUT) == 2


def test_Future_then_of_a_then_future_chains_both_stages():
    src: Future = Future()
    inner: Future = Future()
    out = src.then(lambda v: inner).then(lambda v: v * 2).then(lambda v: completed_future(v + 1))
    src.set_result(0)
    assert not out.done()
    inner.set_result(5)
    assert out.result(TIMEOUT) == 11


def test_Future_then_flattens_a_returned_future():
    src: Future = Future()
    inner: Future = Future()
    out = src.then(lambda v: inner)
    src.set_result(1)
    assert not out.done()
    inner.set_result("inner")
    assert out.result(TIMEOUT) == "inner"


def test_Future_then_flattens_a_returned_stdlib_future():
    with cf.ThreadPoolExecutor(1) as pool:
        out = completed_future(3).then(lambda v: pool.submit(lambda: v * 3))
        assert out.result(TIMEOUT) == 9


def test_Future_then_propagates_a_failed_returned_future():
    out = completed_future(1).then(lambda v: failed_future(KeyError("inner")))
    with pytest.raises(KeyError, match="inner"):
        out.result(TIMEOUT)


def test_Future_then_propagates_the_source_error_without_calling_fn():
    called: list[Any] = []
    src: Future = Future()
    out = src.then(called.append).then(called.append)
    error = ValueError("src")
    src.set_exception(error)
    assert out.exception(TIMEOUT) is error
    assert called == []


def test_Future_then_fn_that_raises_fails_the_result():
    out = completed_future(1).then(lambda v: 1 / 0)
    assert isinstance(out.exception(TIMEOUT), ZeroDivisionError)


def test_Future_then_on_a_done_future_runs_at_once_on_the_caller_thread():
    threads: list[threading.Thread] = []
    out = completed_future(1).then(lambda v: threads.append(threading.current_thread()) or v)
    assert out.done() and out.result() == 1
    assert threads == [threading.current_thread()]
    failed = failed_future(KeyError("f")).then(lambda v: v)
    assert isinstance(failed.exception(0), KeyError)


def test_Future_then_runs_on_the_completing_thread():
    src: Future = Future()
    threads: list[threading.Thread] = []
    out = src.then(lambda v: threads.append(threading.current_thread()))
    t = threading.Thread(target=src.set_result, args=(1,))
    t.start()
    t.join(TIMEOUT)
    out.result(TIMEOUT)
    assert threads == [t]


def test_Future_then_of_a_cancelled_source_fails_with_CancelledError():
    src: Future = Future()
    out = src.then(lambda v: v)
    src.cancel()
    assert isinstance(out.exception(TIMEOUT), cf.CancelledError)


def test_Future_then_whose_result_was_cancelled_logs_nothing(caplog):
    src: Future = Future()
    out = src.then(lambda v: v)
    inner: Future = Future()
    out2 = src.then(lambda v: inner)
    assert out.cancel() and out2.cancel()
    with caplog.at_level(logging.DEBUG):
        src.set_result(1)
        inner.set_result(2)
    assert caplog.records == []
    assert out.cancelled() and out2.cancelled()


def test_Future_then_rejects_a_non_callable():
    with pytest.raises(TypeError, match="fn"):
        Future().then(42)  # type: ignore[arg-type]


def test_Future_then_runs_fn_with_the_scope_of_the_then_call():
    scope, other = object(), object()
    seen: list[Any] = []
    src: Future = Future()
    with using_scope(scope):
        out = src.then(lambda v: seen.append(current_scope()))
    unscoped = src.then(lambda v: seen.append(current_scope()))

    def complete_in_other_scope() -> None:
        with using_scope(other):
            src.set_result(1)
            seen.append(("after", current_scope()))

    t = threading.Thread(target=complete_in_other_scope)
    t.start()
    t.join(TIMEOUT)
    out.result(TIMEOUT)
    unscoped.result(TIMEOUT)
    assert seen == [scope, None, ("after", other)]


# -- gather, completed_future, failed_future ------------------------------------------


def test_gather_keeps_order():
    futures = [Future() for _ in range(3)]
    out = gather(futures)
    for i in (2, 0, 1):
        assert not out.done()
        futures[i].set_result(i * 10)
    assert out.result(TIMEOUT) == [0, 10, 20]


def test_gather_of_nothing_is_an_empty_list():
    assert gather([]).result(0) == []


def test_gather_accepts_stdlib_futures_and_duplicates():
    a: cf.Future = cf.Future()
    b = completed_future("b")
    out = gather([a, b, a])
    a.set_result("a")
    assert out.result(TIMEOUT) == ["a", "b", "a"]


def test_gather_fails_with_the_first_error():
    futures = [Future() for _ in range(3)]
    out = gather(futures)
    first = KeyError("first")
    futures[1].set_exception(first)
    assert out.exception(TIMEOUT) is first
    futures[0].set_exception(KeyError("second"))
    futures[2].set_result(2)
    assert out.exception(TIMEOUT) is first


def test_gather_return_exceptions_puts_errors_in_the_list():
    futures = [Future() for _ in range(3)]
    out = gather(futures, return_exceptions=True)
    error = KeyError("x")
    futures[0].set_result(0)
    futures[1].set_exception(error)
    futures[2].cancel()
    values = out.result(TIMEOUT)
    assert values[0] == 0 and values[1] is error and isinstance(values[2], cf.CancelledError)


def test_gather_of_a_cancelled_future_fails_with_CancelledError():
    fut: Future = Future()
    out = gather([fut])
    fut.cancel()
    assert isinstance(out.exception(TIMEOUT), cf.CancelledError)


def test_gather_completes_from_many_threads():
    futures = [Future() for _ in range(200)]
    out = gather(futures)
    start = threading.Barrier(4, timeout=TIMEOUT)

    def complete(part: list[Future], base: int) -> None:
        start.wait()
        for i, f in enumerate(part):
            f.set_result(base + i)

    threads = [threading.Thread(target=complete, args=(futures[i::4], i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert len(out.result(TIMEOUT)) == 200


def test_completed_future_is_done_with_the_value():
    fut = completed_future("v")
    assert isinstance(fut, Future) and fut.done() and not fut.cancelled()
    assert fut.result(0) == "v" and fut.exception(0) is None
    assert fut.cancel() is False
    with pytest.raises(cf.InvalidStateError):
        fut.set_result("w")


def test_failed_future_is_done_with_the_exception():
    error = OSError("nope")
    fut = failed_future(error)
    assert isinstance(fut, Future) and fut.done()
    assert fut.exception(0) is error
    with pytest.raises(OSError):
        fut.result(0)
    done, _ = cf.wait([fut], timeout=0)
    assert done == {fut}


# -- sync on demand: what a chain follows ------------------------------------------------


def test_Future_then_follows_its_source_then_the_inner_future_and_lets_go_once_done():
    source: Future[int] = Future()
    inner: Future[int] = Future()
    out = source.then(lambda v: inner)
    assert out._follow is source
    source.set_result(1)
    assert out._follow is inner  # the chain moved on
    inner.set_result(2)
    assert out.result(0) == 2 and out._follow is None  # no cycle kept through a done future


def test_Future_gather_lets_go_of_its_futures_once_done():
    a: Future[int] = Future()
    out = gather([a, completed_future(2)])
    assert out._follow is not None and out._follow.futures is not None
    a.set_result(1)
    assert out.result(0) == [1, 2] and out._follow is None


def test_Future_blocking_on_a_chain_of_plain_futures_waits_for_another_thread():
    source: Future[int] = Future()
    inner: Future[int] = Future()
    out = source.then(lambda v: inner).then(lambda v: v + 1)
    t = threading.Thread(target=lambda: (source.set_result(1), inner.set_result(41)), name="test-chain-completer")
    with pytest.raises(cf.TimeoutError):
        out.result(timeout=0)  # nothing to dispatch: a plain timeout
    t.start()
    assert out.result(TIMEOUT) == 42
    t.join(TIMEOUT)
    done, _ = cf.wait([out, source.then(lambda v: v)], timeout=TIMEOUT)
    assert len(done) == 2


def test_Future_as_completed_over_chains_of_plain_futures_yields_each_once():
    sources = [Future() for _ in range(3)]
    chains = [s.then(lambda v: v * 2) for s in sources]
    t = threading.Thread(target=lambda: [s.set_result(i) for i, s in enumerate(sources)], name="test-as-completed")
    t.start()
    assert sorted(f.result(0) for f in cf.as_completed(chains, timeout=TIMEOUT)) == [0, 2, 4]
    t.join(TIMEOUT)


_request_id: contextvars.ContextVar[Any] = contextvars.ContextVar("request_id", default=None)


def test_Future_then_runs_fn_in_the_context_of_the_caller_of_then_on_any_thread():
    src: Future[int] = Future()
    seen = []
    token = _request_id.set("request-1")
    try:
        out = src.then(lambda v: (seen.append(_request_id.get()), v + 1)[-1])
    finally:
        _request_id.reset(token)
    completer = threading.Thread(target=src.set_result, args=(1,), name="completer")  # no request id there
    completer.start()
    completer.join(TIMEOUT)
    assert out.result(timeout=TIMEOUT) == 2
    assert seen == ["request-1"]


def test_Future_then_fn_setting_a_context_variable_does_not_leak_into_the_completing_thread():
    src: Future[int] = Future()
    out = src.then(lambda v: _request_id.set("set by fn") and v)
    src.set_result(1)  # completes here: fn runs on this thread, in its own copy
    assert out.result(timeout=TIMEOUT) == 1
    assert _request_id.get() is None
