"""Awaiting loader futures on asyncio loops (dataloader_sync/_core/_asyncio_bridge.py), plain asyncio and graphql-core.

Every await is bounded (``asyncio.wait_for`` or ``bounded``); the loop's
wake-ups from other threads are counted on a real selector loop whose
``call_soon_threadsafe`` counts its calls (``CountingLoop``).
"""
from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Awaitable
from typing import Any, Callable, TypeVar

import pytest
from graphql import build_schema, graphql
from loop_runner import run_on

from dataloader_sync import DataLoader, DataLoaderRegistry, gather
from dataloader_sync._core import _asyncio_bridge as bridge

T = TypeVar("T")
TIMEOUT = 10.0


class CountingLoop(asyncio.SelectorEventLoop):
    """A real selector loop that counts its wake-ups from other threads."""

    def __init__(self) -> None:
        super().__init__()
        self.wakeups = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if threading.get_ident() != self._thread_id:  # type: ignore[attr-defined]
            self.wakeups += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def run(main: Callable[[], Awaitable[T]]) -> T:
    """Run *main()* on a new CountingLoop, bounded."""
    return run_on(CountingLoop(), asyncio.wait_for(main(), TIMEOUT))


class Recorder:
    """A batch function recording its batches and the threads they ran on."""

    def __init__(self, fn: Callable[[Any], Any] = lambda k: k * 10) -> None:
        self.fn = fn
        self.batches: list[list[Any]] = []
        self.threads: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, keys: list[Any]) -> list[Any]:
        with self.lock:
            self.batches.append(list(keys))
            self.threads.append(threading.current_thread().name)
        return [self.fn(k) for k in keys]


# -- plain asyncio ------------------------------------------------------------------------------

def test_awaits_of_one_tick_make_one_batch_off_the_loop_and_one_wakeup() -> None:
    batch = Recorder()
    loader = DataLoader(batch)

    async def main() -> Any:
        loop: Any = asyncio.get_running_loop()

        async def one(k: int) -> int:
            return await loader.load(k)

        values = await asyncio.gather(*(one(k) for k in range(50)))
        return values, loop.wakeups, bridge.statistics(loop), threading.current_thread().name

    values, wakeups, stats, loop_thread = run(main)
    assert values == [k * 10 for k in range(50)]
    assert batch.batches == [list(range(50))]
    assert batch.threads[0] != loop_thread  # the batch function ran off the loop
    assert stats.jobs == 1 and stats.delivered == 50
    # At most one wake-up for the batch (none when the job ended before the loop slept), not one
    # per future (asyncio.wrap_future per future: 50).
    assert wakeups <= 1


def test_each_level_is_one_batch_per_loader_and_one_wakeup_per_batch() -> None:
    users, posts = Recorder(lambda k: {"id": k, "posts": [k * 100, k * 100 + 1]}), Recorder(lambda k: f"post {k}")
    user_loader, post_loader = DataLoader(users), DataLoader(posts)

    async def user_with_posts(k: int) -> Any:
        user = await user_loader.load(k)
        return [await p for p in [post_loader.load(pid) for pid in user["posts"]]]

    async def main() -> Any:
        loop: Any = asyncio.get_running_loop()
        values = await asyncio.gather(*(user_with_posts(k) for k in range(5)))
        return values, loop.wakeups

    values, wakeups = run(main)
    assert values[2] == ["post 200", "post 201"]
    assert users.batches == [[0, 1, 2, 3, 4]]
    assert posts.batches == [[k * 100 + i for k in range(5) for i in (0, 1)]]
    assert wakeups <= 2  # two batches


def test_then_chains_and_gather_are_awaitable_and_batched() -> None:
    numbers, names = Recorder(), Recorder(lambda k: f"n{k}")
    a, b = DataLoader(numbers), DataLoader(names)

    async def main() -> Any:
        chained = [a.load(k).then(lambda v: b.load(v + 1)) for k in range(3)]
        together = gather([a.load(7), a.load(8)])
        return await asyncio.gather(*chained), await together

    chained, together = run(main)
    assert chained == ["n1", "n11", "n21"]
    assert together == [70, 80]
    assert numbers.batches == [[0, 1, 2, 7, 8]]  # one batch for the chains' sources and the gather's
    assert names.batches == [[1, 11, 21]]  # the chains moved on: one batch of the next loader


def test_errors_reach_their_own_awaits() -> None:
    def fn(k: int) -> Any:
        return ValueError(f"bad {k}") if k == 2 else k

    loader = DataLoader(Recorder(fn))

    def fails(keys: list[int]) -> list[int]:
        raise RuntimeError("batch down")

    broken = DataLoader(fails)

    async def main() -> Any:
        got = await asyncio.gather(*(loader.load(k) for k in range(4)), return_exceptions=True)
        whole = await asyncio.gather(broken.load(1), broken.load(2), return_exceptions=True)
        return got, whole

    got, whole = run(main)
    assert got[:2] == [0, 1] and got[3] == 3
    assert isinstance(got[2], ValueError) and str(got[2]) == "bad 2"
    assert [str(e) for e in whole] == ["batch down", "batch down"]


def test_one_cache_serves_sync_and_async_callers() -> None:
    batch = Recorder()
    loader = DataLoader(batch)
    assert loader.load(1).result(timeout=TIMEOUT) == 10  # a sync caller

    async def main() -> Any:
        hit = loader.load(1)
        assert hit.done()
        return await hit, await loader.load(2)

    assert run(main) == (10, 20)
    assert loader.load(2).done() and loader.load(2).result(timeout=0) == 20  # the awaited key, a sync hit
    assert batch.batches == [[1], [2]]


def test_a_sync_resolver_blocking_inside_the_loop_and_an_await_share_one_future() -> None:
    batch = Recorder()
    loader = DataLoader(batch)

    async def main() -> Any:
        first = loader.load(3)
        value = await first
        return value, loader.load(3) is first

    assert run(main) == (30, True)
    assert batch.batches == [[3]]


# -- never hangs ---------------------------------------------------------------------------------

def test_awaiting_with_no_running_loop_fails_at_once_naming_the_loop() -> None:
    loader = DataLoader(Recorder())

    async def waits() -> Any:
        return await loader.load(1)

    coro = waits()
    with pytest.raises(RuntimeError, match="needs a running asyncio event loop"):
        coro.send(None)  # driven by hand: no loop runs


def test_awaiting_on_a_closed_loop_fails_at_once() -> None:
    loader = DataLoader(Recorder())
    loop = asyncio.new_event_loop()
    loop.close()

    async def waits() -> Any:
        return await loader.load(1)

    coro = waits()
    asyncio.events._set_running_loop(loop)  # a closed loop believed running: the check is ours
    try:
        with pytest.raises(RuntimeError, match="needs a running asyncio event loop"):
            coro.send(None)
    finally:
        asyncio.events._set_running_loop(None)


def test_a_cancelled_awaiting_task_leaves_the_loader_usable() -> None:
    release = threading.Event()

    def slow(keys: list[int]) -> list[int]:
        assert release.wait(TIMEOUT)
        return [k * 10 for k in keys]

    loader = DataLoader(slow)

    async def main() -> Any:
        task = asyncio.ensure_future(loader.load(1))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, TIMEOUT)
        fut = loader.load(1)
        assert not fut.cancelled() and not fut._waiter_list  # the load is untouched, no waiter left on it
        release.set()
        return await fut, await loader.load(2)

    assert run(main) == (10, 20)


def test_a_task_cancelled_while_its_batch_runs_leaves_the_future_to_others() -> None:
    started, release = threading.Event(), threading.Event()

    def slow(keys: list[int]) -> list[int]:
        started.set()
        assert release.wait(TIMEOUT)
        return [k * 10 for k in keys]

    loader = DataLoader(slow)

    async def main() -> Any:
        one = asyncio.ensure_future(loader.load(1))
        other = asyncio.ensure_future(loader.load(1))
        assert await asyncio.to_thread(started.wait, TIMEOUT)
        one.cancel()
        release.set()
        return await asyncio.wait_for(other, TIMEOUT), one.cancelled()

    assert run(main) == (10, True)


def test_one_loader_serves_two_asyncio_runs() -> None:
    batch = Recorder()
    loader = DataLoader(batch)

    async def first() -> Any:
        return await asyncio.gather(loader.load(1), loader.load(2))

    async def second() -> Any:
        return await asyncio.gather(loader.load(2), loader.load(3))

    assert run(first) == [10, 20]
    assert run(second) == [20, 30]
    assert batch.batches == [[1, 2], [3]]


def test_two_loops_at_once_await_one_future() -> None:
    release = threading.Event()

    def slow(keys: list[int]) -> list[int]:
        assert release.wait(TIMEOUT)
        return [k * 10 for k in keys]

    loader = DataLoader(slow)
    fut = loader.load(5)
    results: list[Any] = []

    async def waits() -> Any:
        return await fut

    threads = [threading.Thread(target=lambda: results.append(run(waits))) for _ in range(2)]
    for t in threads:
        t.start()
    release.set()
    for t in threads:
        t.join(TIMEOUT)
    assert results == [50, 50]


def test_a_loader_whose_registry_was_closed_loads_as_after_close() -> None:
    batch = Recorder()
    registry = DataLoaderRegistry()
    loader: DataLoader[int, int] = DataLoader(batch)
    registry.register("numbers", loader)
    registry.close()

    async def main() -> Any:
        return await loader.load(4)

    assert run(main) == 40
    assert loader.load(4).result(timeout=0) == 40  # as a sync load after close() does


def test_a_load_whose_loader_was_collected_fails_instead_of_hanging() -> None:
    async def main() -> Any:
        loader = DataLoader(Recorder())
        fut = loader.load(1)
        del loader
        gc.collect()
        return await fut

    with pytest.raises(RuntimeError, match="garbage-collected"):
        run(main)


def test_a_shut_down_default_executor_fails_the_await_clearly() -> None:
    loader = DataLoader(Recorder())

    async def main() -> Any:
        await asyncio.get_running_loop().shutdown_default_executor()
        return await loader.load(1)

    with pytest.raises(RuntimeError, match="default executor is shut down"):
        run(main)
    assert loader.load(1).result(timeout=TIMEOUT) == 10  # the key is still queued: a sync caller loads it


def test_asyncio_wrap_future_of_loads_dispatches_them_in_one_batch() -> None:
    """``asyncio.wrap_future(loader.load(k))`` waits for a dispatch it asks for (it used to wait forever)."""
    batch = Recorder()
    loader = DataLoader(batch)

    async def main() -> Any:
        loop: Any = asyncio.get_running_loop()
        values = await asyncio.gather(*(asyncio.wrap_future(loader.load(k)) for k in range(20)))
        chained = await asyncio.wrap_future(loader.load(30).then(lambda v: v + 1))
        return values, chained, bridge.statistics(loop)

    values, chained, stats = run(main)
    assert values == [k * 10 for k in range(20)]
    assert chained == 301
    assert batch.batches == [list(range(20)), [30]]
    assert stats.jobs == 2


def test_asyncio_wrap_future_of_a_failed_load_raises_its_error() -> None:
    loader = DataLoader(Recorder(lambda k: ValueError(f"no {k}")))

    async def main() -> Any:
        return await asyncio.wrap_future(loader.load(1))

    with pytest.raises(ValueError, match="no 1"):
        run(main)


def test_asyncio_wrap_future_with_a_shut_down_default_executor_fails_instead_of_waiting() -> None:
    loader = DataLoader(Recorder())

    async def main() -> Any:
        await asyncio.get_running_loop().shutdown_default_executor()
        return await asyncio.wrap_future(loader.load(1))

    with pytest.raises(RuntimeError, match="default executor is shut down"):
        run(main)
    fut = loader.load(1)
    assert fut.result(timeout=TIMEOUT) == 10  # the key was still queued: a sync caller loads it
    assert fut._done_callbacks is None  # wrap_future's callback was taken off the load


def test_a_done_callback_named_like_asyncios_does_not_dispatch() -> None:
    """Only asyncio's own ``_call_set_state`` (its code object) asks for a dispatch."""
    batch = Recorder()
    loader = DataLoader(batch)

    async def main() -> Any:
        seen: list[Any] = []

        def _call_set_state(fut: Any) -> None:
            seen.append(fut.result())

        fut = loader.load(1)
        fut.add_done_callback(_call_set_state)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return batch.batches == [], fut, seen

    nothing_sent, fut, seen = run(main)
    assert nothing_sent
    loader.dispatch()
    assert fut.result(timeout=TIMEOUT) == 10 and seen == [10]


def test_a_synchronous_blocking_wait_is_unchanged_by_the_await_support() -> None:
    batch = Recorder()
    loader = DataLoader(batch)
    assert loader.load(1).result(timeout=TIMEOUT) == 10
    assert batch.threads == [threading.current_thread().name]  # sync on demand: the caller's thread


# -- graphql-core graphql() --------------------------------------------------------------------------

SDL = """
type Query { authors: [Author!]! author(id: Int!): Author }
type Author { id: Int! name: String! books: [Book!]! }
type Book { id: Int! title: String! author: Author! }
"""
AUTHORS = {1: "Ann", 2: "Bob", 3: "Cy"}
BOOKS = {1: [10, 11], 2: [20], 3: []}


def author_schema(batches: dict[str, list[list[Any]]], async_books: bool = True) -> Any:
    schema = build_schema(SDL)

    def record(name: str, fn: Callable[[Any], Any]) -> Callable[[list[Any]], list[Any]]:
        def batch(keys: list[Any]) -> list[Any]:
            batches.setdefault(name, []).append(list(keys))
            return [fn(k) for k in keys]
        return batch

    authors = DataLoader(record("authors", lambda k: {"id": k, "name": AUTHORS[k]} if k in AUTHORS
                                else KeyError(f"no author {k}")))
    books_of = DataLoader(record("books_of", lambda k: [{"id": b, "title": f"T{b}", "author_id": k}
                                                         for b in BOOKS[k]]))

    async def resolve_books(author: Any, info: Any) -> Any:
        return await books_of.load(author["id"])

    schema.query_type.fields["authors"].resolve = lambda root, info: [authors.load(k) for k in AUTHORS]
    schema.query_type.fields["author"].resolve = lambda root, info, id: authors.load(id)
    schema.get_type("Author").fields["books"].resolve = (
        resolve_books if async_books else lambda author, info: books_of.load(author["id"]))
    schema.get_type("Book").fields["author"].resolve = lambda book, info: authors.load(book["author_id"])
    return schema


@pytest.mark.parametrize("async_books", [True, False], ids=["async-resolver", "sync-resolver"])
def test_graphql_async_execution_takes_loader_futures_one_batch_per_level(async_books: bool) -> None:
    batches: dict[str, list[list[Any]]] = {}
    schema = author_schema(batches, async_books)

    async def main() -> Any:
        loop: Any = asyncio.get_running_loop()
        result = await graphql(schema, "{ authors { name books { title author { name } } } }")
        return result, loop.wakeups

    result, wakeups = run(main)
    assert result.errors is None
    assert result.data["authors"][0] == {"name": "Ann", "books": [{"title": "T10", "author": {"name": "Ann"}},
                                                                  {"title": "T11", "author": {"name": "Ann"}}]}
    assert batches["authors"] == [[1, 2, 3]]  # the book authors are cache hits
    assert batches["books_of"] == [[1, 2, 3]]
    assert wakeups <= 2  # at most one per batch


def test_graphql_async_execution_errors_stay_at_their_paths() -> None:
    batches: dict[str, list[list[Any]]] = {}
    schema = author_schema(batches)

    async def main() -> Any:
        return await graphql(schema, "{ a: author(id: 1) { name } b: author(id: 9) { name } }")

    result = run(main)
    assert result.data == {"a": {"name": "Ann"}, "b": None}
    assert [(e.path, e.message) for e in result.errors] == [(["b"], "'no author 9'")]
    assert batches["authors"] == [[1, 9]]


def test_graphql_async_execution_shares_the_cache_with_sync_resolvers_of_the_request() -> None:
    batches: dict[str, list[list[Any]]] = {}
    schema = author_schema(batches)

    async def main() -> Any:
        first = await graphql(schema, "{ author(id: 2) { name books { title } } }")
        second = await graphql(schema, "{ author(id: 2) { name books { title } } }")
        return first, second

    first, second = run(main)
    assert first.data == second.data == {"author": {"name": "Bob", "books": [{"title": "T20"}]}}
    assert batches == {"authors": [[2]], "books_of": [[2]]}  # the second request: all hits


def test_a_loader_with_its_own_executor_runs_its_batch_there_and_wakes_the_loop_once_for_it() -> None:
    import concurrent.futures as cf

    batch = Recorder()
    with cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="own-pool") as pool:
        loader = DataLoader(batch, executor=pool)

        async def main() -> Any:
            loop: Any = asyncio.get_running_loop()
            values = await asyncio.gather(*(loader.load(k) for k in range(20)))
            return values, loop.wakeups

        values, wakeups = run(main)
    assert values == [k * 10 for k in range(20)]
    assert batch.batches == [list(range(20))] and batch.threads[0].startswith("own-pool")
    assert wakeups <= 2  # the dispatch job's end, and the batch's settling on the pool: not one per future


class HandoffLoop(CountingLoop):
    """A CountingLoop whose wake-ups from another thread wait until the loop has run them.

    The loop then takes what was posted before the waking thread goes on, so
    a second post of the same batch would need a wake-up of its own: only a
    batch that defers its wake-up to its end (``settle_many``'s hold) wakes the
    loop once.
    """

    def call_soon_threadsafe(self, callback: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if threading.get_ident() == self._thread_id:  # type: ignore[attr-defined]
            return super().call_soon_threadsafe(callback, *args, **kwargs)
        ran = threading.Event()

        def run_then_tell(*a: Any) -> None:
            try:
                callback(*a)
            finally:
                ran.set()

        handle = super().call_soon_threadsafe(run_then_tell, *args, **kwargs)
        ran.wait(TIMEOUT)
        return handle


def test_a_batch_settled_on_another_thread_wakes_the_loop_once_even_when_the_loop_is_quick() -> None:
    import concurrent.futures as cf

    started, release = threading.Event(), threading.Event()

    def slow(keys: list[int]) -> list[int]:
        started.set()
        assert release.wait(TIMEOUT)
        return [k * 10 for k in keys]

    with cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="own-pool") as pool:
        loader = DataLoader(slow, executor=pool)

        async def main() -> Any:
            loop: Any = asyncio.get_running_loop()
            futures = [loader.load(k) for k in range(20)]
            waiting = asyncio.ensure_future(asyncio.gather(*futures))
            while not all(f._waiter_list for f in futures):  # the dispatch job ended: each await registered
                await asyncio.sleep(0.001)
            assert started.is_set()
            before = loop.wakeups
            release.set()
            values = await waiting
            return values, loop.wakeups - before

        values, wakeups = run_on(HandoffLoop(), asyncio.wait_for(main(), TIMEOUT))
    assert values == [k * 10 for k in range(20)]
    assert wakeups == 1  # the batch's twenty settles, one wake-up (one per future without the hold)


def test_the_batch_runs_in_the_context_of_the_task_that_awaited_first() -> None:
    import contextvars

    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")
    seen: list[str] = []

    def batch(keys: list[int]) -> list[int]:
        seen.append(request_id.get())
        return keys

    loader = DataLoader(batch)

    async def request(name: str, key: int) -> int:
        request_id.set(name)
        return await loader.load(key)

    async def main() -> Any:
        first = await request("first", 1)
        second = await request("second", 2)
        return first, second

    assert run(main) == (1, 2)
    assert seen == ["first", "second"]  # each batch saw its request's contextvars (without the copy: "none")
