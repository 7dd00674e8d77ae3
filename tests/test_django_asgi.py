"""Hand-written ORM batch functions under Django's ASGI handler (``django.test.AsyncClient``).

An async Django view runs graphql-core's async execution (``graphql()``)
with ``request.loaders`` from ``DataLoaderMiddleware``; every level is a
loader whose batch function is the user's own ORM code (no
``dataloader_sync.django`` loader, no ``batch_connection``).  The bridge runs
those batch functions on the loop's default executor: after 50 requests no
connection they used is open on those threads (each batch function records
its thread's connection object; ``connection.connection is None`` after),
and on PostgreSQL no backend is left beside the test's own
(``pg_stat_activity``).  The checks run inside the serving loop, while its
executor threads are alive, as in a server that keeps running.

Runs on a file SQLite database (the in-memory one is per thread) and on PostgreSQL.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

pytest.importorskip("django")
pytest.importorskip("graphql")

from orm_fixtures import committed_library  # noqa: F401
from postgres_server import use_for_django

from dataloader_sync import DataLoader, DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project", "asgiref_thread")
SQLITE_ALIAS = "asgi_sqlite"
TIMEOUT = 60.0
REQUESTS = 50
QUERY = "{ authors { name books { title reviews { rating } } } }"
AUTHORS, BOOKS, REVIEWS = 3, 2, 2


@pytest.fixture(scope="module")
def asgiref_thread(django_example_project):
    """Start asgiref's process-wide thread for ``sync_to_async`` (thread-sensitive: Django runs the sync
    middleware there) before the tests count threads: it lives as long as the process, no test leaks it."""
    from asgiref.sync import sync_to_async

    asyncio.run(sync_to_async(lambda: None)())


@pytest.fixture(params=["sqlite", "postgresql"])
def alias(request, django_example_project, tmp_path_factory):
    """A file SQLite database (every thread sees the committed rows), or PostgreSQL."""
    if request.param == "postgresql":
        return use_for_django(request.getfixturevalue("postgres_server"))
    from django.core.management import call_command
    from django.db import connections

    if SQLITE_ALIAS not in connections.settings:
        name = str(tmp_path_factory.mktemp("asgi-sqlite") / "db.sqlite3")
        configured = connections.configure_settings(
            {"default": dict(connections.settings["default"]),
             SQLITE_ALIAS: {"ENGINE": "django.db.backends.sqlite3", "NAME": name}})
        connections.settings[SQLITE_ALIAS] = configured[SQLITE_ALIAS]
        call_command("migrate", database=SQLITE_ALIAS, verbosity=0)
    return SQLITE_ALIAS


class Used:
    """What the batch functions saw: each call's thread and that thread's connection object to the alias."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.lock = threading.Lock()
        self.calls: list[tuple[threading.Thread, Any]] = []
        self.connections: dict[int, Any] = {}  # id -> the connection object (kept alive)

    def record(self) -> None:
        from django.db import connections

        connection = connections[self.alias]
        with self.lock:
            self.calls.append((threading.current_thread(), connection))
            self.connections[id(connection)] = connection

    def open(self) -> list[str]:
        """The recorded connections that are still connected to the database."""
        return [f"{connection.alias} of a thread" for connection in self.connections.values()
                if connection.connection is not None]


def make_registry_factory(used: Used) -> Any:
    """A ``DATALOADER_SYNC_REGISTRY_FACTORY``: a registry of hand-written ORM batch functions."""
    from orm_library.models import Author, Book, Review

    alias = used.alias

    def author_ids(keys: list[str]) -> list[list[int]]:
        used.record()
        ids = list(Author.objects.using(alias).order_by("id").values_list("id", flat=True))
        return [ids for _ in keys]

    def authors(ids: list[int]) -> list[Any]:
        used.record()
        rows = Author.objects.using(alias).in_bulk(ids)
        return [rows[i] for i in ids]

    def books_of(author_ids: list[int]) -> list[list[Any]]:
        used.record()
        by_author: dict[int, list[Any]] = {i: [] for i in author_ids}
        for book in Book.objects.using(alias).filter(author_id__in=author_ids).order_by("id"):
            by_author[book.author_id].append(book)
        return [by_author[i] for i in author_ids]

    def reviews_of(book_ids: list[int]) -> list[list[Any]]:
        used.record()
        by_book: dict[int, list[Any]] = {i: [] for i in book_ids}
        for review in Review.objects.using(alias).filter(book_id__in=book_ids).order_by("id"):
            by_book[review.book_id].append(review)
        return [by_book[i] for i in book_ids]

    def make_registry(request: Any) -> DataLoaderRegistry:
        registry = DataLoaderRegistry()
        for name, fn in (("author_ids", author_ids), ("authors", authors), ("books", books_of),
                         ("reviews", reviews_of)):
            registry.register(name, DataLoader(fn))
        return registry

    return make_registry


def make_schema() -> Any:
    from graphql import build_schema

    schema = build_schema("""
        type Query { authors: [Author!]! }
        type Author { name: String! books: [Book!]! }
        type Book { title: String! reviews: [Review!]! }
        type Review { rating: Int! }
    """)

    async def resolve_authors(root: Any, info: Any) -> Any:  # async: awaits the root loader
        ids = await info.context.loaders["author_ids"].load("all")
        return await info.context.loaders["authors"].load_many(ids)

    def resolve_books(author: Any, info: Any) -> Any:  # sync: returns the future
        return info.context.loaders["books"].load(author.pk)

    async def resolve_reviews(book: Any, info: Any) -> Any:
        return await info.context.loaders["reviews"].load(book.pk)

    schema.query_type.fields["authors"].resolve = resolve_authors
    schema.get_type("Author").fields["books"].resolve = resolve_books
    schema.get_type("Book").fields["reviews"].resolve = resolve_reviews
    return schema


def make_view() -> Any:
    from django.http import JsonResponse
    from graphql import graphql

    schema = make_schema()

    async def view(request: Any) -> Any:
        result = await graphql(schema, json.loads(request.body)["query"], context_value=request)
        errors = [str(e) for e in result.errors or ()]
        return JsonResponse({"data": result.data, **({"errors": errors} if errors else {})})

    return view


def expected(lib: Any) -> dict[str, Any]:
    return {"authors": [
        {"name": a.name, "books": [
            {"title": b.title, "reviews": [{"rating": r.rating} for r in lib.reviews if r.book_id == b.pk]}
            for b in lib.books if b.author_id == a.pk]}
        for a in lib.authors]}


def serve(used: Used, n: int, after: Any) -> tuple[list[Any], Any]:
    """*n* POSTs of QUERY through django.test.AsyncClient on one loop, one after another; then
    ``after()`` on that loop's default executor, while its threads (and their connections) are alive."""
    from django.test import AsyncClient, override_settings
    from django.urls import path

    urls = type("urls", (), {"urlpatterns": [path("graphql", make_view())]})

    async def main() -> tuple[list[Any], Any]:
        client = AsyncClient()
        responses = [await client.post("/graphql", {"query": QUERY}, content_type="application/json")
                     for _ in range(n)]
        return responses, await asyncio.get_running_loop().run_in_executor(None, after)

    with override_settings(ROOT_URLCONF=urls, MIDDLEWARE=["dataloader_sync.django.DataLoaderMiddleware"],
                           DATALOADER_SYNC_REGISTRY_FACTORY=make_registry_factory(used)):
        return asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def other_backends(postgres_server: Any, dbname: str, own_pid: int, within: float = 10.0) -> list[int]:
    """Backends on *dbname* but the test thread's (*own_pid*) and the asking one (asked again until none,
    or *within* s: a backend ends a moment after its client closed the connection)."""
    deadline = time.monotonic() + within
    with postgres_server.connect() as conn:
        while True:
            rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s"
                                " AND pid <> pg_backend_pid()", [dbname, own_pid]).fetchall()
            if not rows or time.monotonic() > deadline:
                return [pid for pid, in rows]
            conn.execute("SELECT pg_sleep(0.02)")  # the server waits, not this test: then ask again


def test_hand_written_batch_functions_leave_no_connection_open_after_50_asgi_requests(alias, committed_library,
                                                                                    request):
    lib = committed_library(alias, authors=AUTHORS, books=BOOKS, reviews=REVIEWS)
    from django.db import connections

    used = Used(alias)
    postgres = request.getfixturevalue("postgres_server") if alias == "postgres" else None
    own = connections[alias]  # the test thread's, which committed the rows
    own_pid = own.connection.info.backend_pid if postgres is not None and own.connection is not None else 0

    def after() -> Any:  # on a thread of the serving loop's default executor
        backends = [] if postgres is None else other_backends(postgres, own.settings_dict["NAME"], own_pid)
        return used.open(), backends

    responses, (left_open, backends) = serve(used, REQUESTS, after)
    want = {"data": expected(lib)}
    for response in responses:
        assert response.status_code == 200 and json.loads(response.content) == want
    assert len(used.calls) == REQUESTS * 4  # one batch per loader per request (a level each)
    threads = {thread for thread, _ in used.calls}
    assert threading.main_thread() not in threads  # off the loop's thread: the executor's
    # Every connection a batch used on the executor's threads is closed, and (PostgreSQL) no backend is left.
    assert (left_open, backends) == ([], [])


# -- DataLoaderMiddleware under ASGI: async-capable, no thread hop -----------------------------------------
class Factory:
    """A registry factory recording the thread it ran on and the registries it made."""

    def __init__(self, query_alias: Any = None) -> None:
        self.threads: list[threading.Thread] = []
        self.registries: list[DataLoaderRegistry] = []
        self.query_alias = query_alias

    def __call__(self, request: Any) -> DataLoaderRegistry:
        self.threads.append(threading.current_thread())
        if self.query_alias is not None:  # as a factory reading request.user.is_staff would
            from orm_library.models import Author

            Author.objects.using(self.query_alias).exists()
        registry = DataLoaderRegistry()
        registry.register("double", DataLoader(lambda keys: [2 * k for k in keys]))
        self.registries.append(registry)
        return registry


def get_all(factory: Factory, view: Any, n: int) -> list[Any]:
    """*n* GETs of *view* through django.test.AsyncClient, DataLoaderMiddleware making *factory*'s registries."""
    from django.test import AsyncClient, override_settings
    from django.urls import path

    urls = type("urls", (), {"urlpatterns": [path("v", view)]})

    async def main() -> list[Any]:
        client = AsyncClient()
        return [await client.get("/v", {"k": str(i)}) for i in range(n)]

    with override_settings(ROOT_URLCONF=urls, MIDDLEWARE=["dataloader_sync.django.DataLoaderMiddleware"],
                           DATALOADER_SYNC_REGISTRY_FACTORY=factory):
        return asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_DataLoaderMiddleware_runs_on_the_event_loop_above_an_async_view_and_closes_each_registry():
    from django.http import JsonResponse

    factory = Factory()
    seen: list[tuple[threading.Thread, Any]] = []

    async def view(request: Any) -> Any:
        seen.append((threading.current_thread(), request.loaders))
        return JsonResponse({"double": await request.loaders["double"].load(int(request.GET["k"]))})

    responses = get_all(factory, view, 3)
    assert [json.loads(r.content) for r in responses] == [{"double": 0}, {"double": 2}, {"double": 4}]
    # No hop to a thread: the factory ran on the loop's thread (the test's: asyncio.run), as the view did.
    assert factory.threads == [threading.main_thread()] * 3
    assert [loaders for _, loaders in seen] == factory.registries
    assert all(registry.closed for registry in factory.registries)  # closed with each response


def test_DataLoaderMiddleware_under_asgi_serves_a_sync_view_too():
    from django.http import JsonResponse

    factory = Factory()

    def view(request: Any) -> Any:  # Django runs it on a thread (sync_to_async)
        registry = request.loaders
        future = registry["double"].load(int(request.GET["k"]))
        registry.dispatch_all()
        return JsonResponse({"double": future.result(timeout=TIMEOUT),
                             "thread": threading.current_thread() is threading.main_thread()})

    responses = get_all(factory, view, 2)
    assert [json.loads(r.content) for r in responses] == [{"double": 0, "thread": False},
                                                          {"double": 2, "thread": False}]
    assert factory.threads == [threading.main_thread()] * 2  # the middleware on the loop, for a sync view too
    assert all(registry.closed for registry in factory.registries)


def test_a_registry_factory_that_queries_the_database_under_asgi_is_named_with_the_fix():
    from django.core.exceptions import SynchronousOnlyOperation
    from django.http import HttpResponse

    from dataloader_sync.django._middleware import FACTORY_ON_THE_LOOP

    async def view(request: Any) -> Any:
        return HttpResponse(b"never")

    with pytest.raises(SynchronousOnlyOperation) as caught:
        get_all(Factory(query_alias="default"), view, 1)  # refused before it connects
    assert str(caught.value) == FACTORY_ON_THE_LOOP
    assert "DATALOADER_SYNC_REGISTRY_FACTORY queried the database" in FACTORY_ON_THE_LOOP
