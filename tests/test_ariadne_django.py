"""ariadne-django's ``GraphQLView`` with dataloaders: the recipe of docs/ariadne.rst.

ariadne-django passes no execution context to ``graphql_sync``; the recipe
overrides ``get_kwargs_graphql`` to add one, and puts the registry that
``DataLoaderMiddleware`` made (``request.loaders``) in the context.  Real
Django, its test client and the example project's models over SQLite.
"""
from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("django")
pytest.importorskip("ariadne")
pytest.importorskip("ariadne_django")

pytestmark = pytest.mark.usefixtures("django_example_project")

N = 5

TYPE_DEFS = """
    type Query { authors: [Author!]! }
    type Author { name: String!  books: [Book!]! }
    type Book { title: String!  reviews: [Review!]! }
    type Review { rating: Int! }
"""


def make_view() -> Any:
    from ariadne import ObjectType, QueryType, make_executable_schema
    from ariadne_django.views import GraphQLView as AriadneGraphQLView
    from books.models import Author

    from dataloader_sync.graphql import DataLoaderExecutionContext

    # The recipe, as docs/ariadne.rst gives it.
    class GraphQLView(AriadneGraphQLView):
        def get_context_for_request(self, request):
            return {**super().get_context_for_request(request), "loaders": request.loaders}

        def get_kwargs_graphql(self, request):
            kwargs = super().get_kwargs_graphql(request)
            kwargs["execution_context_class"] = DataLoaderExecutionContext
            return kwargs

    query = QueryType()
    author = ObjectType("Author")
    book = ObjectType("Book")
    query.set_field("authors", lambda _obj, info: list(Author.objects.order_by("id")))
    author.set_field("books", lambda a, info: info.context["loaders"]["books_by_author"].load(a.id))
    book.set_field("reviews", lambda b, info: info.context["loaders"]["reviews_by_book"].load(b.id))
    schema = make_executable_schema(TYPE_DEFS, query, author, book)
    return GraphQLView, schema


def urls(view: Any) -> type:
    from django.urls import path

    return type("urls", (), {"urlpatterns": [path("graphql", view)]})


def test_the_ariadne_django_recipe_runs_one_sql_query_per_level(example_books: Any) -> None:
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext

    example_books(authors=N, books=2, reviews=3)
    view_class, schema = make_view()
    registries: list[Any] = []

    def factory(request: Any) -> Any:
        from books.loaders import make_registry

        registries.append(make_registry(request))
        return registries[-1]

    with override_settings(ROOT_URLCONF=urls(view_class.as_view(schema=schema)),
                           DATALOADER_SYNC_REGISTRY_FACTORY=factory):
        with CaptureQueriesContext(connection) as queries:
            response = Client().post("/graphql", {"query": "{ authors { name books { title reviews { rating } } } }"},
                                     content_type="application/json")
    assert response.status_code == 200, response.content
    authors = response.json()["data"]["authors"]
    assert len(authors) == N
    assert all(len(a["books"]) == 2 and all(len(b["reviews"]) == 3 for b in a["books"]) for a in authors)
    assert len(queries.captured_queries) == 3  # authors, their books, the books' reviews
    (registry,) = registries
    assert registry.closed


def test_without_the_execution_context_ariadne_django_cannot_resolve_futures(example_books: Any) -> None:
    from ariadne_django.views import GraphQLView as AriadneGraphQLView
    from django.test import Client, override_settings

    example_books(authors=2, books=1, reviews=1)
    view_class, schema = make_view()

    class Plain(AriadneGraphQLView):  # the recipe's context, not its execution context
        def get_context_for_request(self, request):
            return {**super().get_context_for_request(request), "loaders": request.loaders}

    with override_settings(ROOT_URLCONF=urls(Plain.as_view(schema=schema))):
        response = Client().post("/graphql", {"query": "{ authors { books { title } } }"},
                                 content_type="application/json")
    body = response.json()
    assert body["data"] is None
    assert "use DataLoaderExecutionContext" in body["errors"][0]["message"]  # the future names the fix
