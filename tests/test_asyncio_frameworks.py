"""Loader futures under the async executions of graphene, strawberry and Ariadne's ASGI app.

One schema shape per framework: ``authors { name books { title tags { name } } }``
where each level is loaded by a loader of the request's registry, from a
sync resolver returning ``loader.load(k)`` or an ``async def`` resolver
awaiting it.  Each test checks the answers, one batch per loader per level,
errors at their paths, and the loop's wake-ups from other threads (at most
one per batch).  Every execution is bounded by ``asyncio.wait_for``.
"""
from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, Optional

import pytest
from loop_runner import run_on

from dataloader_sync import DataLoader, DataLoaderRegistry

TIMEOUT = 10.0
QUERY = "{ authors { name books { title tags { name } } } }"
AUTHORS = {1: "Ann", 2: "Bob"}
BOOKS = {1: [10, 11], 2: [20]}
TAGS = {10: ["sf"], 11: ["sf", "old"], 20: []}
EXPECTED = {"authors": [
    {"name": "Ann", "books": [{"title": "T10", "tags": [{"name": "sf"}]},
                              {"title": "T11", "tags": [{"name": "sf"}, {"name": "old"}]}]},
    {"name": "Bob", "books": [{"title": "T20", "tags": []}]},
]}


class CountingLoop(asyncio.SelectorEventLoop):
    """A real selector loop that counts its wake-ups from other threads."""

    def __init__(self) -> None:
        super().__init__()
        self.wakeups = 0

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if threading.get_ident() != self._thread_id:  # type: ignore[attr-defined]
            self.wakeups += 1
        return super().call_soon_threadsafe(*args, **kwargs)


def run(coro: Any) -> tuple[Any, int]:
    """Run *coro* on a new CountingLoop, bounded; its result and the loop's wake-ups."""
    loop = CountingLoop()
    result = run_on(loop, asyncio.wait_for(coro, TIMEOUT))
    return result, loop.wakeups


class Loaders:
    """A request's registry of three recording loaders (authors, books of an author, tags of a book)."""

    def __init__(self, fail_book: Optional[int] = None) -> None:
        self.batches: dict[str, list[list[Any]]] = {}
        self.lock = threading.Lock()
        self.registry = DataLoaderRegistry()
        self.registry.register("authors", DataLoader(self._batch("authors", lambda k: {"id": k, "name": AUTHORS[k]})))
        self.registry.register("books", DataLoader(self._batch(
            "books", lambda k: [{"id": b, "title": f"T{b}"} for b in BOOKS[k]])))
        self.registry.register("tags", DataLoader(self._batch(
            "tags", lambda k: ValueError(f"no tags for {k}") if k == fail_book else [{"name": t} for t in TAGS[k]])))

    def _batch(self, name: str, fn: Any) -> Any:
        def batch(keys: list[Any]) -> list[Any]:
            with self.lock:
                self.batches.setdefault(name, []).append(list(keys))
            return [fn(k) for k in keys]
        return batch

    def __getitem__(self, name: str) -> Any:
        return self.registry[name]


def check(loaders: Loaders, data: Any, wakeups: int) -> None:
    assert data == EXPECTED
    assert loaders.batches == {"authors": [[1, 2]], "books": [[1, 2]], "tags": [[10, 11, 20]]}
    assert wakeups <= 3  # at most one per batch


# -- graphene execute_async ---------------------------------------------------------------------

def graphene_schema() -> Any:
    graphene = pytest.importorskip("graphene")

    class Tag(graphene.ObjectType):
        name = graphene.String()

    class Book(graphene.ObjectType):
        title = graphene.String()
        tags = graphene.List(graphene.NonNull(Tag))

        def resolve_tags(book: Any, info: Any) -> Any:  # a sync resolver returning the future
            return info.context["loaders"]["tags"].load(book["id"])

    class Author(graphene.ObjectType):
        name = graphene.String()
        books = graphene.List(graphene.NonNull(Book))

        async def resolve_books(author: Any, info: Any) -> Any:  # an async one awaiting it
            return await info.context["loaders"]["books"].load(author["id"])

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(Author))

        def resolve_authors(root: Any, info: Any) -> Any:
            return [info.context["loaders"]["authors"].load(k) for k in AUTHORS]

    return graphene.Schema(query=Query)


def test_graphene_execute_async_batches_each_level_once() -> None:
    schema, loaders = graphene_schema(), Loaders()
    result, wakeups = run(schema.execute_async(QUERY, context_value={"loaders": loaders}))
    assert result.errors is None
    check(loaders, result.data, wakeups)


def test_graphene_execute_async_keeps_errors_at_their_paths() -> None:
    schema, loaders = graphene_schema(), Loaders(fail_book=11)
    result, _ = run(schema.execute_async(QUERY, context_value={"loaders": loaders}))
    assert [(e.path, e.message) for e in result.errors] == [(["authors", 0, "books", 1, "tags"], "no tags for 11")]
    assert result.data["authors"][0]["books"][1]["tags"] is None
    assert result.data["authors"][1] == EXPECTED["authors"][1]


# -- strawberry await schema.execute --------------------------------------------------------------

try:
    import strawberry
except ImportError:  # pragma: no cover - the strawberry tests skip
    strawberry = None

if strawberry is not None:
    @strawberry.type
    class Tag:
        name: str

    @strawberry.type
    class Book:
        id: strawberry.Private[int]
        title: str

        @strawberry.field
        def tags(self, info: strawberry.Info) -> list[Tag]:  # a sync resolver returning the future
            return info.context["loaders"]["tags"].load(self.id).then(  # type: ignore[no-any-return]
                lambda rows: [Tag(**row) for row in rows])

    @strawberry.type
    class Author:
        id: strawberry.Private[int]
        name: str

        @strawberry.field
        async def books(self, info: strawberry.Info) -> list[Book]:  # an async one awaiting it
            rows = await info.context["loaders"]["books"].load(self.id)
            return [Book(**row) for row in rows]

    @strawberry.type
    class Query:
        @strawberry.field
        async def authors(self, info: strawberry.Info) -> list[Author]:
            loader = info.context["loaders"]["authors"]
            rows = await asyncio.gather(*(loader.load(k) for k in AUTHORS))
            return [Author(**row) for row in rows]


def strawberry_schema() -> Any:
    if strawberry is None:
        pytest.skip("strawberry is not installed")
    return strawberry.Schema(query=Query)


def test_strawberry_await_schema_execute_batches_each_level_once() -> None:
    schema, loaders = strawberry_schema(), Loaders()
    result, wakeups = run(schema.execute(QUERY, context_value={"loaders": loaders}))
    assert result.errors is None
    check(loaders, result.data, wakeups)


def test_strawberry_await_schema_execute_keeps_errors_at_their_paths() -> None:
    schema, loaders = strawberry_schema(), Loaders(fail_book=20)
    result, _ = run(schema.execute(QUERY, context_value={"loaders": loaders}))
    assert [(e.path, e.message) for e in result.errors] == [(["authors", 1, "books", 0, "tags"], "no tags for 20")]
    assert result.data is None  # tags is non-null up to the root in this schema


# -- Ariadne's ASGI app --------------------------------------------------------------------------------

def ariadne_app(made: list[Loaders]) -> Any:
    ariadne = pytest.importorskip("ariadne")
    from ariadne.asgi import GraphQL

    type_defs = """
        type Query { authors: [Author!]! }
        type Author { name: String! books: [Book!]! }
        type Book { title: String! tags: [Tag!] }
        type Tag { name: String! }
    """
    query, author, book = ariadne.QueryType(), ariadne.ObjectType("Author"), ariadne.ObjectType("Book")

    @query.field("authors")
    def resolve_authors(_: Any, info: Any) -> Any:
        return [info.context["loaders"]["authors"].load(k) for k in AUTHORS]

    @author.field("books")
    async def resolve_books(obj: Any, info: Any) -> Any:
        return await info.context["loaders"]["books"].load(obj["id"])

    @book.field("tags")
    def resolve_tags(obj: Any, info: Any) -> Any:
        return info.context["loaders"]["tags"].load(obj["id"])

    def context(request: Any, data: Any = None) -> dict[str, Any]:  # a registry per request
        loaders = Loaders(fail_book=10 if "fail" in str(data) else None)
        made.append(loaders)
        return {"request": request, "loaders": loaders}

    schema = ariadne.make_executable_schema(type_defs, query, author, book)
    return GraphQL(schema, context_value=context)


async def asgi_post(app: Any, payload: dict[str, Any]) -> tuple[int, Any]:
    """One HTTP POST through the ASGI interface, as an ASGI server makes it."""
    body = json.dumps(payload).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/", "raw_path": b"/", "root_path": "", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 1234), "server": ("testserver", 80)}
    received = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if received:
            return received.pop(0)
        await asyncio.Event().wait()  # the client stays connected; bounded by the caller's wait_for
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


def test_ariadne_asgi_app_batches_each_level_once() -> None:
    made: list[Loaders] = []
    app = ariadne_app(made)
    (status, body), wakeups = run(asgi_post(app, {"query": QUERY}))
    assert status == 200 and "errors" not in body
    check(made[0], body["data"], wakeups)


def test_ariadne_asgi_app_keeps_errors_at_their_paths_and_requests_apart() -> None:
    made: list[Loaders] = []
    app = ariadne_app(made)

    async def two() -> Any:
        return await asyncio.gather(asgi_post(app, {"query": QUERY, "variables": {}}),
                                    asgi_post(app, {"query": QUERY, "operationName": None, "extensions": "fail"}))

    (ok, failed), _ = run(two())
    assert ok[0] == 200 and ok[1]["data"] == EXPECTED
    assert failed[1]["data"]["authors"][0]["books"][0]["tags"] is None
    assert [(e["path"], e["message"]) for e in failed[1]["errors"]] == [(["authors", 0, "books", 0, "tags"],
                                                                        "no tags for 10")]
    assert all(m.batches["authors"] == [[1, 2]] for m in made)  # each request its own loaders, one batch each
