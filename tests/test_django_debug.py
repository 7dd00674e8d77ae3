"""dataloader_sync.django.DjangoDebugExecutionContext: ``_debug { sql }`` lists every statement.

graphene-django's ``DjangoDebugMiddleware`` stops recording when ``_debug``
resolves; with loaders the root fields resolve before any batch runs, so
the stock execution lists only the root's statements.  These tests count
the statements of a request against Django's ``CaptureQueriesContext``,
through the real graphene-django view and the example project over SQLite.
"""
from __future__ import annotations

import importlib.util
import re
from typing import Any

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

pytestmark = pytest.mark.usefixtures("django_example_project")

N = 4  # authors, 2 books each, 2 reviews per book

NESTED = "authors { name books { title reviews { rating } } }"


def debug_schema() -> Any:
    import graphene
    from books.schema import Mutation, Query
    from graphene_django.debug import DjangoDebug

    class DebugQuery(Query, graphene.ObjectType):
        debug = graphene.Field(DjangoDebug, name="_debug")
        boom = graphene.String()

        @staticmethod
        def resolve_boom(root: Any, info: Any) -> str:
            raise ValueError("boom")

    class DebugMutation(Mutation, graphene.ObjectType):
        debug = graphene.Field(DjangoDebug, name="_debug")

    return graphene.Schema(query=DebugQuery, mutation=DebugMutation)


def run(query: str, **view_kwargs: Any) -> tuple[dict[str, Any], list[str]]:
    """POST *query* to a view made with *view_kwargs*; the response body and the SQL Django ran."""
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext
    from django.urls import path
    from graphene_django.debug import DjangoDebugMiddleware

    from dataloader_sync.django import GraphQLView

    view = GraphQLView.as_view(schema=debug_schema(), middleware=[DjangoDebugMiddleware()], **view_kwargs)
    urls = type("urls", (), {"urlpatterns": [path("graphql", view)]})
    with override_settings(ROOT_URLCONF=urls), CaptureQueriesContext(connection) as queries:
        response = Client().post("/graphql", {"query": query}, content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json(), [q["sql"] for q in queries.captured_queries]


def debug_sql(body: dict[str, Any]) -> list[str]:
    return [entry["rawSql"] for entry in body["data"]["_debug"]["sql"]]


def same_statements(listed: list[str], captured: list[str]) -> bool:
    """*listed* (``rawSql``: ``%s`` placeholders) are the *captured* statements (parameters filled in), in order."""
    def pattern(raw: str) -> str:
        return ".+?".join(re.escape(part) for part in raw.split("%s"))

    return len(listed) == len(captured) and all(
        re.fullmatch(pattern(raw), sql) for raw, sql in zip(listed, captured))


@pytest.mark.parametrize("where", ["last", "first"])
def test_debug_lists_every_statement_of_every_level(example_books: Any, where: str) -> None:
    example_books(authors=N, books=2, reviews=2)
    debug = "_debug { sql { rawSql } }"
    query = f"{{ {NESTED} {debug} }}" if where == "last" else f"{{ {debug} {NESTED} }}"
    body, captured = run(query)
    assert len(body["data"]["authors"]) == N
    assert list(body["data"]) == (["authors", "_debug"] if where == "last" else ["_debug", "authors"])
    assert len(captured) == 3  # authors, their books, the books' reviews: one statement per level
    assert same_statements(debug_sql(body), captured)


def test_the_stock_execution_context_lists_only_the_roots_statements(example_books: Any) -> None:
    """What DjangoDebugExecutionContext fixes: the plain context stops at the root."""
    from dataloader_sync.graphql import DataLoaderExecutionContext

    example_books(authors=N, books=2, reviews=2)
    body, captured = run(f"{{ {NESTED} _debug {{ sql {{ rawSql }} }} }}",
                         execution_context_class=DataLoaderExecutionContext)
    assert len(captured) == 3
    assert same_statements(debug_sql(body), captured[:1])


def test_debug_in_a_mutation_lists_the_mutation_and_its_payloads_statements(example_books: Any) -> None:
    from books.models import Book

    example_books(authors=1, books=1, reviews=1)
    book = Book.objects.get()
    body, captured = run(
        f'mutation {{ addReview(bookId: {book.id}, rating: 5, body: "ok") {{ review {{ rating book {{ title }} }} }}'
        " _debug { sql { rawSql } } }")
    assert body["data"]["addReview"]["review"] == {"rating": 5, "book": {"title": book.title}}
    assert len(captured) >= 2  # the insert, then the payload's book through a loader
    assert same_statements(debug_sql(body), captured)


def test_recording_stops_with_the_execution(example_books: Any) -> None:
    from django.db import connection

    example_books(authors=2, books=1, reviews=1)
    body, _ = run(f"{{ {NESTED} }}")  # no _debug: graphene-django's middleware alone would stay wrapped
    assert "errors" not in body
    assert not hasattr(connection, "_graphene_cursor")
    body, captured = run(f"{{ _debug {{ sql {{ rawSql }} }} {NESTED} }}")
    assert same_statements(debug_sql(body), captured)
    assert not hasattr(connection, "_graphene_cursor")


def test_debug_exceptions_are_listed_too(example_books: Any) -> None:
    example_books(authors=1, books=1, reviews=1)
    body, _ = run("{ _debug { exceptions { message } } boom authors { books { title } } }")
    assert body["data"]["_debug"] == {"exceptions": [{"message": "boom"}]}
    assert len(body["data"]["authors"]) == 1


def test_a_schema_without_django_debug_runs_as_before(example_books: Any) -> None:
    from books.schema import schema
    from django.test import Client, override_settings
    from django.urls import path

    from dataloader_sync.django import GraphQLView

    example_books(authors=N, books=2, reviews=2)
    urls = type("urls", (), {"urlpatterns": [path("graphql", GraphQLView.as_view(schema=schema))]})
    with override_settings(ROOT_URLCONF=urls):
        response = Client().post("/graphql", {"query": f"{{ {NESTED} }}"}, content_type="application/json")
    assert len(response.json()["data"]["authors"]) == N
