"""strawberry-django's ``AsyncGraphQLView`` under ASGI (django.test.AsyncClient), resolvers returning loader futures.

strawberry-django needs graphql-core 3.3: this module runs in the venv of
``.ci/strawberry-django`` and skips in the main one.  The query is the issue's
``{ authors { name publisher { name } books { title tags { name } reviews { rating } } } }``;
every relation is a sync resolver returning ``related_loader(...).load(self)``,
awaited by strawberry's async execution: the batch functions run on the
loop's default executor (one batch per relation per level), the ORM on those
threads, each connection closed after its batch (``batch_connection``).
Runs on SQLite and PostgreSQL (``orm_db``); on PostgreSQL no connection is
left open after 50 requests.

No ``from __future__ import annotations``: the types are made inside a
function (the models need Django configured) and strawberry resolves their
annotations from the real objects.
"""
import asyncio
import json
import time

import pytest

pytest.importorskip("django")
from asgiref.sync import sync_to_async

pytest.importorskip("strawberry_django", reason="strawberry-django needs graphql-core 3.3: .ci/strawberry-django")

from orm_fixtures import committed_library  # noqa: F401
from postgres_server import use_for_django

pytestmark = pytest.mark.usefixtures("django_example_project", "asgiref_thread")
SQLITE_ALIAS = "async_sqlite"


@pytest.fixture(scope="module")
def asgiref_thread(django_example_project):
    """Start asgiref's process-wide thread for sync_to_async (thread_sensitive) before the tests count threads.

    strawberry-django resolves a root queryset through ``sync_to_async``; asgiref
    runs it on one thread it keeps for the life of the process, not a thread a
    test leaks.
    """
    from asgiref.sync import sync_to_async

    asyncio.run(sync_to_async(lambda: None)())


@pytest.fixture(params=["sqlite", "postgresql"])
def orm_db(request, django_example_project, tmp_path_factory):
    """The alias a test runs on: a file SQLite database (the in-memory one is per thread), or PostgreSQL."""
    if request.param == "postgresql":
        return use_for_django(request.getfixturevalue("postgres_server"))
    from django.core.management import call_command
    from django.db import connections

    if SQLITE_ALIAS not in connections.settings:
        name = str(tmp_path_factory.mktemp("async-sqlite") / "db.sqlite3")
        configured = connections.configure_settings(
            {"default": dict(connections.settings["default"]),
             SQLITE_ALIAS: {"ENGINE": "django.db.backends.sqlite3", "NAME": name}})
        connections.settings[SQLITE_ALIAS] = configured[SQLITE_ALIAS]
        call_command("migrate", database=SQLITE_ALIAS, verbosity=0)
    return SQLITE_ALIAS

TIMEOUT = 30.0
QUERY = "{ authors { name publisher { name } books { title tags { name } reviews { rating } } } }"
AUTHORS, BOOKS, REVIEWS, TAGS = 4, 2, 2, 3


def make_view(alias, auto=False):
    """An ``AsyncGraphQLView`` whose context carries the request's registry (DataLoaderMiddleware's, docs/asgi.rst).

    *auto*: the relations are fields with no resolver, batched by ``AutoRelationsExtension`` alone.
    """
    if auto:
        return make_auto_view(alias)
    from typing import Optional

    import strawberry
    import strawberry_django
    from orm_library.models import Author, Book, Publisher, Review, Tag
    from strawberry.django.views import AsyncGraphQLView

    from dataloader_sync.django import related_loader

    @strawberry_django.type(Publisher)
    class PublisherType:
        name: strawberry.auto

    @strawberry_django.type(Tag)
    class TagType:
        name: strawberry.auto

    @strawberry_django.type(Review)
    class ReviewType:
        rating: strawberry.auto

    @strawberry_django.type(Book)
    class BookType:
        title: strawberry.auto

        @strawberry.field
        def tags(self, info: strawberry.Info) -> list[TagType]:
            return related_loader(info.context.loaders, Book.tags).load(self)

        @strawberry.field
        def reviews(self, info: strawberry.Info) -> list[ReviewType]:
            return related_loader(info.context.loaders, Book.reviews).load(self)

    @strawberry_django.type(Author)
    class AuthorType:
        name: strawberry.auto

        @strawberry.field
        def publisher(self, info: strawberry.Info) -> Optional[PublisherType]:
            return related_loader(info.context.loaders, Author.publisher).load(self)

        @strawberry.field
        def books(self, info: strawberry.Info) -> list[BookType]:
            return related_loader(info.context.loaders, Author.books).load(self)

    @strawberry.type
    class Query:
        @strawberry_django.field
        def authors(self) -> list[AuthorType]:
            return Author.objects.using(alias).order_by("id")

    class View(AsyncGraphQLView):
        async def get_context(self, request, response):
            context = await super().get_context(request, response)
            context.loaders = request.loaders  # one registry per request, closed with the response
            return context

    return View.as_view(schema=strawberry.Schema(query=Query))


def expected(lib):
    by_book = {}
    for book in lib.books:
        by_book[book.pk] = book
    out = []
    for author in lib.authors:
        books = [b for b in lib.books if b.author_id == author.pk]
        out.append({
            "name": author.name,
            "publisher": None if author.publisher_id is None else {
                "name": next(p.name for p in lib.publishers if p.pk == author.publisher_id)},
            "books": [{"title": b.title,
                       "tags": [{"name": t.name} for t in sorted(b.tags.using(b._state.db).all(), key=lambda t: t.pk)],
                       "reviews": [{"rating": r.rating} for r in lib.reviews if r.book_id == b.pk]}
                      for b in books],
        })
    return out


def batch_calls(registry):
    """Batch calls per loader name of one request's registry."""
    return {name: loader.statistics().batch_invoke_count for name, loader in registry.items()}


def make_auto_view(alias):
    from typing import Optional

    import strawberry
    import strawberry_django
    from orm_library.models import Author, Book, Publisher, Review, Tag
    from strawberry.django.views import AsyncGraphQLView

    from dataloader_sync.strawberry_django import AutoRelationsExtension

    @strawberry_django.type(Publisher)
    class PublisherType:
        name: strawberry.auto

    @strawberry_django.type(Tag)
    class TagType:
        name: strawberry.auto

    @strawberry_django.type(Review)
    class ReviewType:
        rating: strawberry.auto

    @strawberry_django.type(Book)
    class BookType:
        title: strawberry.auto
        tags: list[TagType]
        reviews: list[ReviewType]

    @strawberry_django.type(Author)
    class AuthorType:
        name: strawberry.auto
        publisher: Optional[PublisherType]
        books: list[BookType]

    @strawberry.type
    class Query:
        @strawberry_django.field
        def authors(self) -> list[AuthorType]:
            return Author.objects.using(alias).order_by("id")

    class View(AsyncGraphQLView):
        async def get_context(self, request, response):
            context = await super().get_context(request, response)
            context.loaders = request.loaders  # one registry per request, closed with the response
            return context

    return View.as_view(schema=strawberry.Schema(query=Query, extensions=[AutoRelationsExtension]))


def post_all(view, n, made):
    """*n* POSTs of QUERY through django.test.AsyncClient on one loop, one after another, bounded;
    DataLoaderMiddleware makes each request's registry (kept in *made*)."""
    from django.test import AsyncClient, override_settings
    from django.urls import path

    from dataloader_sync import DataLoaderRegistry

    def make_registry():
        made.append(DataLoaderRegistry())
        return made[-1]

    urls = type("urls", (), {"urlpatterns": [path("graphql", view)]})

    async def main():
        client = AsyncClient()
        responses = []
        for _ in range(n):
            responses.append(await client.post("/graphql", {"query": QUERY}, content_type="application/json"))
        return responses

    with override_settings(ROOT_URLCONF=urls, MIDDLEWARE=["dataloader_sync.django.DataLoaderMiddleware"],
                           DATALOADER_SYNC_REGISTRY_FACTORY=make_registry):
        return asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_async_view_answers_with_one_batch_per_relation_per_level(orm_db, committed_library):
    lib = committed_library(orm_db, authors=AUTHORS, books=BOOKS, reviews=REVIEWS, tags=TAGS)
    made = []
    (response,) = post_all(make_view(orm_db), 1, made)
    body = json.loads(response.content)
    assert response.status_code == 200 and "errors" not in body, body
    assert body["data"]["authors"] == expected(lib)
    calls = batch_calls(made[0])
    assert sorted(calls.values()) == [1, 1, 1, 1], calls  # publisher, books, tags, reviews: one batch each
    assert made[0].closed  # the middleware's registry, the only one: closed with the response


def other_connections(postgres_server, alias, within=10.0):
    """Backends on the alias's database other than this thread's own (asked again until none, or *within* s)."""
    from django.db import connections

    own = connections[alias]
    own.ensure_connection()
    own_pid = own.connection.info.backend_pid
    deadline = time.monotonic() + within
    with postgres_server.connect() as conn:
        while True:
            rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s AND pid <> "
                                "pg_backend_pid()", [own.settings_dict["NAME"], own_pid]).fetchall()
            if not rows or time.monotonic() > deadline:
                return [pid for pid, in rows]
            conn.execute("SELECT pg_sleep(0.02)")  # the server waits, not this test: then ask again


def close_request_connection(alias):
    """On asgiref's request thread: close its connection to *alias*; its backend pid, or None."""
    from django.db import connections

    connection = connections[alias]
    pid = connection.connection.info.backend_pid if connection.connection is not None else None
    connection.close()
    return pid


def test_async_view_leaves_no_connection_open_after_50_requests_on_postgresql(postgres_server, committed_library):
    orm_db = use_for_django(postgres_server)  # connections are counted on the server (pg_stat_activity)
    lib = committed_library(orm_db, authors=AUTHORS, books=BOOKS, reviews=REVIEWS, tags=TAGS)
    made = []
    responses = post_all(make_view(orm_db), 50, made)
    want = expected(lib)
    for response in responses:
        assert json.loads(response.content) == {"data": {"authors": want}}
    assert len(made) == 50 and all(sorted(batch_calls(r).values()) == [1, 1, 1, 1] and r.closed for r in made)
    # Django's test client keeps the request's own connection open across requests (it disconnects
    # close_old_connections from request_finished, so a test's transaction survives); a server
    # closes it at each request's end.  That connection is asgiref's request thread's, where
    # strawberry-django ran the root queryset: close it as the end of a served request would.
    request_thread_pid = asyncio.run(sync_to_async(close_request_connection)(orm_db))
    assert request_thread_pid is not None
    left = other_connections(postgres_server, orm_db)
    assert left == []  # the batches' connections, on the loop's default executor threads: none left


def test_bench_asgi_quick_runs_and_every_variant_answers_alike(tmp_path):
    """tools/bench_asgi.py --quick, in a fresh interpreter (it configures Django itself): no figure asserted."""
    import os
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = subprocess.run([sys.executable, str(root / "tools" / "bench_asgi.py"), "--quick", "--json",
                          str(tmp_path / "out.json")], capture_output=True, text=True, env=env, timeout=240,
                         check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    report = json.loads((tmp_path / "out.json").read_text())
    assert set(report["variants"]) == {"ours-async", "sd-dataloader", "optimizer", "ours-sync"}
    assert report["variants"]["ours-async"]["statements"] == 5.0  # statements = levels




def test_auto_relations_extension_alone_serves_the_async_view_and_the_same_schema_synchronously(
        orm_db, committed_library):
    from types import SimpleNamespace

    from dataloader_sync import DataLoaderRegistry

    lib = committed_library(orm_db, authors=AUTHORS, books=BOOKS, reviews=REVIEWS, tags=TAGS)
    made = []
    view = make_view(orm_db, auto=True)
    (response,) = post_all(view, 1, made)
    body = json.loads(response.content)
    assert body == {"data": {"authors": expected(lib)}}, body
    calls = batch_calls(made[0])
    assert sorted(name.split(",")[0] for name in calls) == ["Author.books", "Author.publisher", "Book.reviews",
                                                             "Book.tags"]
    assert sorted(calls.values()) == [1, 1, 1, 1]  # one batch per relation per level
    with DataLoaderRegistry() as registry:  # the same schema, executed synchronously
        result = view.view_initkwargs["schema"].execute_sync(QUERY, context_value=SimpleNamespace(loaders=registry))
        assert result.errors is None and result.data == {"authors": expected(lib)}
        # the root's queryset, returned synchronously, has the publishers joined in: one batch fewer (but on
        # strawberry-django < 0.92, which evaluates a list field's queryset itself)
        from importlib.metadata import version

        fetched = tuple(int(part) for part in version("strawberry-graphql-django").split(".")[:2]) < (0, 92)
        assert sorted(name.split(",")[0] for name in batch_calls(registry)) == [
            "Author.books", *(["Author.publisher"] if fetched else []), "Book.reviews", "Book.tags"]
        assert set(batch_calls(registry).values()) == {1}
