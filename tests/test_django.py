"""dataloader_sync.django: the middleware, the GraphQLView mixin, the example project.

Django is configured by the module fixture ``django_example_project``
(tests/conftest.py) from tests/django_settings.py; the app is the example
project's ``books`` app over an in-memory SQLite database, queried through the
ORM by the example's loaders, with requests made by Django's test client on the
test's thread.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from django.conf import settings

N = 6  # authors; each has 2 books, each book 2 reviews

pytestmark = pytest.mark.usefixtures("django_example_project")


@pytest.fixture
def data(example_books):
    """N authors with 2 books each and 2 reviews per book; rolled back after the test."""
    example_books(authors=N, books=2, reviews=2)


class Recorder:
    """A registry factory that wraps the example's and remembers what it made."""

    def __init__(self) -> None:
        self.registries: list[Any] = []
        self.requests: list[Any] = []

    def __call__(self, request):
        from books.loaders import make_registry

        registry = make_registry(request)
        self.registries.append(registry)
        self.requests.append(request)
        return registry


def graphql(client, query: str, path: str = "/graphql", **variables: Any):
    return client.post(path, {"query": query, "variables": variables}, content_type="application/json")


NESTED = "{ authors { name books { title reviews { rating } } } }"


# -- the example project, through the middleware ----------------------------------------
def test_GraphQLView_three_levels_over_N_authors_run_one_sql_query_per_level(data):
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = graphql(Client(), NESTED)
    assert response.status_code == 200, response.content
    authors = response.json()["data"]["authors"]
    assert len(authors) == N
    assert authors[1] == {"name": "author 1", "books": [
        {"title": "book 1.0", "reviews": [{"rating": 2}, {"rating": 3}]},
        {"title": "book 1.1", "reviews": [{"rating": 3}, {"rating": 4}]},
    ]}
    sql = [q["sql"] for q in queries.captured_queries]
    assert len(sql) == 3, sql  # authors, then all their books, then all those books' reviews (not N+1)
    assert '"books_author"' in sql[0]
    assert '"books_book"' in sql[1] and '"author_id" IN' in sql[1]
    assert '"books_review"' in sql[2] and '"book_id" IN' in sql[2]


def test_GraphQLView_loads_reached_from_several_levels_share_one_batch_per_loader(data):
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    query = "{ books { title author { name } reviews { book { author { name } } } } }"
    with CaptureQueriesContext(connection) as queries:
        response = graphql(Client(), query)
    assert response.status_code == 200, response.content
    books = response.json()["data"]["books"]
    assert len(books) == 2 * N
    assert books[3]["reviews"][1] == {"book": {"author": {"name": "author 1"}}}
    # books; authors (level 2) + reviews; books of reviews; authors again (cached: no query)
    assert len(queries.captured_queries) == 4, [q["sql"] for q in queries.captured_queries]


def test_DataLoaderMiddleware_gives_each_request_fresh_caches(data):
    from books.models import Author
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    author = Author.objects.get(name="author 2")
    query = "query Q($id: ID!) { a: author(id: $id) { name } b: author(id: $id) { name } }"
    client = Client()
    with CaptureQueriesContext(connection) as queries:
        first = graphql(client, query, id=author.id)
    assert first.json()["data"] == {"a": {"name": "author 2"}, "b": {"name": "author 2"}}
    assert len(queries.captured_queries) == 1  # the same key twice in a request: loaded once
    Author.objects.filter(id=author.id).update(name="renamed")
    with CaptureQueriesContext(connection) as queries:
        second = graphql(client, query, id=author.id)
    assert second.json()["data"] == {"a": {"name": "renamed"}, "b": {"name": "renamed"}}
    assert len(queries.captured_queries) == 1  # loaded again: the first request's cache is gone


def test_DataLoaderMiddleware_closes_the_registry_with_the_response(data):
    from django.test import Client, override_settings

    recorder = Recorder()
    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY=recorder):
        client = Client()
        assert graphql(client, NESTED).status_code == 200
        assert graphql(client, NESTED).status_code == 200
    assert len(recorder.registries) == 2
    assert recorder.registries[0] is not recorder.registries[1]
    assert all(registry.closed for registry in recorder.registries)


def test_DataLoaderMiddleware_closes_the_registry_when_a_resolver_raises(data):
    from django.test import Client, override_settings

    recorder = Recorder()
    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY=recorder):
        response = graphql(Client(), "mutation { addReview(bookId: 1, rating: 9) { review { id } } }")
    assert response.status_code == 200
    assert response.json()["errors"][0]["message"] == "rating must be between 1 and 5"
    (registry,) = recorder.registries
    assert registry.closed


def test_example_mutation_clears_the_cached_reviews_of_its_book(data):
    from books.models import Book
    from django.test import Client

    book = Book.objects.order_by("id").first()
    query = """mutation M($id: ID!) {
        addReview(bookId: $id, rating: 5, body: "yes") { review { rating book { title reviews { rating } } } }
    }"""
    response = graphql(Client(), query, id=book.id)
    assert response.status_code == 200, response.content
    review = response.json()["data"]["addReview"]["review"]
    assert review["book"]["title"] == book.title
    assert [r["rating"] for r in review["book"]["reviews"]] == [1, 2, 5]


# -- streaming: the registry lives until the body has been sent ---------------------------------
def stream_view(request):
    from django.http import StreamingHttpResponse

    registry = request.loaders

    def body():
        for author_id in request.GET.getlist("id"):
            future = registry["author"].load(int(author_id))
            registry.dispatch_all()
            yield f"{future.result(timeout=5).name}\n"
        yield f"closed while streaming: {registry.closed}\n"

    return StreamingHttpResponse(body(), content_type="text/plain")


def test_DataLoaderMiddleware_closes_a_streaming_responses_registry_on_close(data):
    from books.models import Author
    from django.test import Client, override_settings
    from django.urls import path

    ids = [str(a.id) for a in Author.objects.order_by("id")[:2]]
    recorder = Recorder()
    urls = type("urls", (), {"urlpatterns": [path("stream", stream_view)]})
    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY=recorder, ROOT_URLCONF=urls):
        response = Client().get("/stream", {"id": ids})
        (registry,) = recorder.registries
        assert response.streaming
        assert not registry.closed  # the body has not been produced yet
        body = b"".join(response.streaming_content).decode()
    assert body == "author 0\nauthor 1\nclosed while streaming: False\n"
    assert registry.closed  # the test client closes the response once the body is consumed


# -- the mixin ------------------------------------------------------------------------------------------
def make_urls(**view_kwargs: Any) -> type:
    from books.schema import schema
    from django.urls import path

    from dataloader_sync.django import GraphQLView

    return type("urls", (), {"urlpatterns": [path("graphql", GraphQLView.as_view(schema=schema, **view_kwargs))]})


def test_GraphQLView_without_the_middleware_makes_and_closes_its_own_registry(data):
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext

    recorder = Recorder()
    with override_settings(MIDDLEWARE=[], ROOT_URLCONF=make_urls(registry_factory=recorder)):
        with CaptureQueriesContext(connection) as queries:
            response = graphql(Client(), NESTED)
    assert response.status_code == 200, response.content
    assert len(response.json()["data"]["authors"]) == N
    assert len(queries.captured_queries) == 3
    (registry,) = recorder.registries
    assert registry.closed
    assert not hasattr(recorder.requests[0], "loaders")  # dropped with the view's registry


def test_GraphQLView_uses_the_registry_the_middleware_made(data):
    from django.test import Client, override_settings

    middleware_recorder, view_recorder = Recorder(), Recorder()
    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY=middleware_recorder,
                           ROOT_URLCONF=make_urls(registry_factory=view_recorder)):
        assert graphql(Client(), NESTED).status_code == 200
    assert len(middleware_recorder.registries) == 1
    assert view_recorder.registries == []


def test_GraphQLView_mixin_sets_the_execution_context_class_unless_given_one():
    from books.schema import schema
    from graphene_django.views import GraphQLView as Base

    from dataloader_sync.django import DataLoaderGraphQLViewMixin, DjangoDebugExecutionContext, GraphQLView
    from dataloader_sync.graphql import DataLoaderExecutionContext

    assert issubclass(GraphQLView, DataLoaderGraphQLViewMixin) and issubclass(GraphQLView, Base)
    assert GraphQLView(schema=schema).execution_context_class is DjangoDebugExecutionContext
    assert issubclass(DjangoDebugExecutionContext, DataLoaderExecutionContext)

    class Custom(DataLoaderExecutionContext):
        pass

    assert GraphQLView(schema=schema, execution_context_class=Custom).execution_context_class is Custom

    class Mine(DataLoaderGraphQLViewMixin, Base):
        execution_context_class = Custom

    assert Mine(schema=schema).execution_context_class is Custom


# -- configuration errors -------------------------------------------------------------------------------
def test_DataLoaderMiddleware_without_the_setting_is_improperly_configured():
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from dataloader_sync.django import DataLoaderMiddleware

    with override_settings():
        del settings.DATALOADER_SYNC_REGISTRY_FACTORY
        with pytest.raises(ImproperlyConfigured, match="DATALOADER_SYNC_REGISTRY_FACTORY is not set"):
            DataLoaderMiddleware(lambda request: None)
    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY="books.loaders.no_such_thing"):
        with pytest.raises(ImproperlyConfigured, match="cannot import"):
            DataLoaderMiddleware(lambda request: None)
    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY=42):
        with pytest.raises(ImproperlyConfigured, match="callable"):
            DataLoaderMiddleware(lambda request: None)
    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY="dataloader_sync.DataLoader"):  # a loader, not a registry
        with pytest.raises(ImproperlyConfigured, match=r"^DATALOADER_SYNC_REGISTRY_FACTORY must make a "
                                                       r"DataLoaderRegistry, got the class DataLoader: a registry "
                                                       r"factory is a registry class"):
            DataLoaderMiddleware(lambda request: None)


def test_DataLoaderMiddleware_rejects_a_factory_that_makes_no_registry():
    from django.test import RequestFactory, override_settings

    from dataloader_sync.django import DataLoaderMiddleware

    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY=lambda request: {}):
        middleware = DataLoaderMiddleware(lambda request: None)
    with pytest.raises(TypeError, match="must return a DataLoaderRegistry"):
        middleware(RequestFactory().get("/"))


def test_dataloader_sync_django_does_not_import_graphene_django_until_GraphQLView_is_used():
    code = (
        "import sys, dataloader_sync.django as d\n"
        "assert 'graphene_django' not in sys.modules, 'imported too early'\n"
        "assert 'GraphQLView' in dir(d) and 'GraphQLView' not in d.__all__\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_dataloader_sync_django_without_django_says_which_extra_to_install():
    code = (
        "import sys; sys.modules['django'] = None\n"
        "try:\n"
        "    import dataloader_sync.django\n"
        "except ImportError as exc:\n"
        "    assert 'pip install \"dataloader_sync[django]\"' in str(exc), exc\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- graphene-django relay connections resolved from a loader future ----------------------------
def book_node() -> type:
    """A relay node type of the example's ``Book``, outside graphene-django's model registry (so the
    example project's own types stay the models' types)."""
    from books import models
    from graphene import relay
    from graphene_django import DjangoObjectType

    class BookNode(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("id", "title")
            interfaces = (relay.Node,)
            skip_registry = True

    return BookNode


def relay_schema():
    """Authors with two ``DjangoConnectionField``s of books, both resolved from the same loader.

    graphene-django wraps the loader's future in a ``promise.Promise`` and
    slices the page in its ``then``.  The node types skip graphene-django's
    model registry, so the example project's own types stay the models' types.
    """
    import graphene
    from books import models
    from graphene import relay
    from graphene_django import DjangoConnectionField, DjangoObjectType

    BookNode = book_node()

    class AuthorNode(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("id", "name")
            interfaces = (relay.Node,)
            skip_registry = True

        books = DjangoConnectionField(BookNode)
        also_books = DjangoConnectionField(BookNode)

        @staticmethod
        def resolve_books(author, info, **_page):
            return info.context.loaders["books_by_author"].load(author.id)

        @staticmethod
        def resolve_also_books(author, info, **_page):
            return info.context.loaders["books_by_author"].load(author.id)

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(AuthorNode), required=True)

        @staticmethod
        def resolve_authors(root, info):
            return models.Author.objects.order_by("id")

    return graphene.Schema(query=Query)


def test_DjangoConnectionField_from_a_loader_future_returns_the_page_batched_with_its_level(data):
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext

    query = """{ authors { name
        books(first: 1) { edges { node { title } } pageInfo { hasNextPage } }
        alsoBooks { edges { cursor node { title } } pageInfo { hasNextPage } }
    } }"""
    recorder = Recorder()
    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY=recorder,
                           ROOT_URLCONF=type("urls", (), {"urlpatterns": _relay_urls()})):
        with CaptureQueriesContext(connection) as queries:
            response = graphql(Client(), query)
    assert response.status_code == 200, response.content
    body = response.json()
    assert "errors" not in body, body
    authors = body["data"]["authors"]
    assert len(authors) == N
    assert authors[2]["books"] == {"edges": [{"node": {"title": "book 2.0"}}], "pageInfo": {"hasNextPage": True}}
    assert [e["node"]["title"] for e in authors[2]["alsoBooks"]["edges"]] == ["book 2.0", "book 2.1"]
    assert authors[2]["alsoBooks"]["pageInfo"] == {"hasNextPage": False}
    sql = [q["sql"] for q in queries.captured_queries]
    # the authors, then ONE query for both connection fields of all authors
    assert len(sql) == 2, sql
    assert '"books_book"' in sql[1] and '"author_id" IN' in sql[1]
    stats = recorder.registries[0]["books_by_author"].statistics()
    assert stats.batch_invoke_count == 1 and stats.batch_load_count == N


def test_DjangoConnectionField_from_a_failing_loader_gives_field_errors_at_its_path(data):
    import graphene
    from graphene_django import DjangoConnectionField

    from dataloader_sync import DataLoader
    from dataloader_sync.graphql import DataLoaderExecutionContext

    BookNode = book_node()

    def fail(keys):
        raise RuntimeError("books are unavailable")

    class Query(graphene.ObjectType):
        books = DjangoConnectionField(BookNode)

        @staticmethod
        def resolve_books(root, info, **_page):
            return info.context["books"].load("all")

    result = graphene.Schema(query=Query).execute(
        "{ books(first: 2) { edges { node { title } } } }",
        context_value={"books": DataLoader(fail)}, execution_context_class=DataLoaderExecutionContext)
    assert result.data == {"books": None}
    assert [(e.message, e.path) for e in result.errors] == [("books are unavailable", ["books"])]


def _relay_urls():
    from django.urls import path

    from dataloader_sync.django import GraphQLView

    return [path("graphql", GraphQLView.as_view(schema=relay_schema()))]


# -- the factory convention: the request or nothing ------------------------------------------------
@pytest.mark.parametrize("factory", ["dataloader_sync.DataLoaderRegistry",
                                     "dataloader_sync.ScheduledDataLoaderRegistry"])
def test_DataLoaderMiddleware_takes_a_registry_class_as_the_factory(factory):
    from django.test import RequestFactory, override_settings

    from dataloader_sync import DataLoaderRegistry
    from dataloader_sync.django import DataLoaderMiddleware

    seen: list[Any] = []
    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY=factory):
        middleware = DataLoaderMiddleware(lambda request: seen.append(request.loaders))
    middleware(RequestFactory().get("/"))
    (registry,) = seen
    assert type(registry).__name__ == factory.rsplit(".", 1)[1]
    assert isinstance(registry, DataLoaderRegistry) and registry.closed


def test_GraphQLView_takes_a_registry_class_or_a_factory_of_nothing(data):
    from django.test import Client, override_settings

    from dataloader_sync import DataLoaderRegistry, ScheduledDataLoaderRegistry

    made: list[DataLoaderRegistry] = []

    def make_registry() -> DataLoaderRegistry:
        from books.loaders import make_registry as example

        made.append(example(None))
        return made[-1]

    for factory in (DataLoaderRegistry, ScheduledDataLoaderRegistry, make_registry):
        with override_settings(MIDDLEWARE=[], ROOT_URLCONF=make_urls(registry_factory=factory)):
            response = graphql(Client(), "{ authors { name } }")
        assert response.status_code == 200, response.content
        assert len(response.json()["data"]["authors"]) == N
    assert len(made) == 1 and made[0].closed


def test_a_registry_factory_of_two_arguments_is_improperly_configured():
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from dataloader_sync.django import DataLoaderMiddleware

    def make_registry(request, user):
        raise AssertionError("never called")

    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY=make_registry):
        with pytest.raises(ImproperlyConfigured, match=r"^DATALOADER_SYNC_REGISTRY_FACTORY must take the request "
                                                       r"or nothing, e\.g\. def make_registry\(request\)"):
            DataLoaderMiddleware(lambda request: None)
