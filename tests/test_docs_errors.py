"""docs/errors.rst quotes the real messages of the common mistakes.

Each mistake is made here for real and its message must appear, word for
word, on the page (the tests of each module assert the same texts).
"""
from __future__ import annotations

import logging
import pathlib
import re
import subprocess
import sys
from typing import Any

import pytest

from dataloader_sync import DataLoader, DataLoaderRegistry
from dataloader_sync._request_registry import RequestFactory

PAGE = " ".join((pathlib.Path(__file__).resolve().parent.parent / "docs" / "errors.rst")
                .read_text(encoding="utf-8").split())


def quoted(message: str) -> bool:
    return " ".join(message.split()) in PAGE


async def load_users(ids: list[int]) -> list[int]:
    return ids


def test_the_async_batch_function_messages_are_quoted() -> None:
    with pytest.raises(TypeError) as caught:
        DataLoader(load_users)
    assert quoted(str(caught.value))
    loader = DataLoader(lambda ids: load_users(ids), name="users")
    future = loader.load(1)
    loader.dispatch()
    assert quoted(str(future.exception(timeout=5)))


def test_the_missing_dependency_messages_are_quoted() -> None:
    for missing, code in (("graphene_django", "from dataloader_sync.django import DjangoFilterConnectionField"),
                          ("graphql", "from dataloader_sync.flask import graphql_view; graphql_view(None)")):
        source = (f"import os, sys; sys.modules[{missing!r}] = None\n"
                  "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'django_settings')\n"
                  f"try:\n    {code}\nexcept ImportError as exc:\n    print(exc)\n")
        out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=60,
                             cwd=pathlib.Path(__file__).parent, check=True)
        assert quoted(out.stdout.strip()), out.stdout


def test_the_unknown_loader_and_factory_messages_are_quoted() -> None:
    registry = DataLoaderRegistry().register("author", DataLoader(lambda k: k))
    registry.register("book", DataLoader(lambda k: k))
    with pytest.raises(KeyError) as caught:
        registry["authors"]
    assert quoted(str(caught.value))

    def make_registry(request: Any, user: Any) -> DataLoaderRegistry:
        raise AssertionError("never called")

    with pytest.raises(TypeError) as refused:
        RequestFactory(make_registry, "factory")
    assert quoted(re.sub(r"'test_[^']*make_registry'", "'make_registry'", str(refused.value)))
    with pytest.raises(TypeError) as refused:
        RequestFactory(DataLoader, "factory")
    assert quoted(str(refused.value))


def test_the_blocking_warning_and_the_awaitable_message_are_quoted(caplog: Any) -> None:
    from dataloader_sync.graphql._awaitables import MESSAGE
    from dataloader_sync.graphql._run import warn_of_early_dispatches

    owners = DataLoader(lambda keys: keys, name="owners")
    with caplog.at_level(logging.WARNING, logger="dataloader_sync"):
        warn_of_early_dispatches({owners: 3}, None)
    (record,) = caplog.records
    assert quoted(record.getMessage())
    assert quoted(MESSAGE)


def test_the_messages_of_a_loader_future_in_an_execution_that_is_not_ours_are_quoted() -> None:
    from graphql import build_schema, graphql_sync

    from dataloader_sync._core._future import NOT_OUR_EXECUTION

    schema = build_schema("type Query { items: [Item!]! } type Item { id: Int! }")
    loader = DataLoader(lambda keys: [{"id": k} for k in keys])
    schema.query_type.fields["items"].resolve = lambda root, info: loader.load(1)
    result = graphql_sync(schema, "{ items { id } }")
    assert result.errors and quoted(result.errors[0].message)
    assert quoted(NOT_OUR_EXECUTION)  # what graphene-django's own view shows (tests/test_foreign_execution.py)


def test_the_reused_loader_warning_is_quoted() -> None:
    from dataloader_sync.graphql._reuse import MESSAGE

    assert quoted(MESSAGE % "module_users")


def test_the_message_of_graphene_django_s_own_view_under_the_setting_is_quoted(django_example_project: None) -> None:
    pytest.importorskip("graphene_django")
    import graphene
    from django.test import Client, override_settings
    from django.urls import path
    from graphene_django.views import GraphQLView

    class Query(graphene.ObjectType):
        hello = graphene.String(default_value="hi")

    view = GraphQLView.as_view(schema=graphene.Schema(query=Query))
    urls = type("urls", (), {"urlpatterns": [path("graphql", view)]})
    with override_settings(ROOT_URLCONF=urls, DATALOADER_SYNC_AUTO_RELATIONS=True), \
            pytest.warns(RuntimeWarning) as record:
        Client().get("/graphql", {"query": "{ hello }"})
    (message,) = [str(w.message) for w in record]
    assert quoted(message)  # manage.py check says the same (tests/test_django_view_checks.py)


def test_the_message_of_a_registry_factory_that_queries_the_database_under_asgi_is_quoted() -> None:
    pytest.importorskip("django")
    from dataloader_sync.django._middleware import FACTORY_ON_THE_LOOP

    assert quoted(FACTORY_ON_THE_LOOP)  # raised for real in tests/test_django_asgi.py


def test_the_message_of_auto_relations_extension_beside_an_execution_context_class_not_ours_is_quoted() -> None:
    pytest.importorskip("strawberry_django", reason="strawberry-django needs graphql-core 3.3: .ci/strawberry-django")
    import strawberry
    from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

    from dataloader_sync.strawberry_django import AutoRelationsExtension

    @strawberry.type
    class Query:
        hello: str = "hello"

    logging_class = type("LoggingExecutionContext", (StrawberryGraphQLCoreExecutionContext,),
                         {"__module__": "myapp.schema"})
    schema = strawberry.Schema(query=Query, extensions=[AutoRelationsExtension], execution_context_class=logging_class)
    result = schema.execute_sync("{ hello }")
    assert result.errors and quoted(result.errors[0].message)


def test_the_rest_framework_set_up_messages_are_quoted(django_example_project: None) -> None:
    pytest.importorskip("rest_framework")
    from orm_library.models import Author
    from rest_framework import generics, serializers, views

    from dataloader_sync.rest_framework import AutoRelationsMixin, batched_data

    messages = []
    for bases in ((generics.ListAPIView, AutoRelationsMixin), (AutoRelationsMixin, views.APIView)):
        with pytest.raises(TypeError) as caught:
            type("AuthorList", bases, {})
        messages.append(str(caught.value))

    class AuthorSerializer(serializers.ModelSerializer):
        class Meta:
            model = Author
            fields = ["id", "name", "books"]
            no_auto_relations = ["bookz"]

    with pytest.raises(ValueError) as wrong_name:
        batched_data(AuthorSerializer(Author.objects.none(), many=True))
    AuthorSerializer.Meta.no_auto_relations = "books"  # type: ignore[assignment]
    with pytest.raises(TypeError) as not_a_list:
        batched_data(AuthorSerializer(Author.objects.none(), many=True))
    with pytest.raises(TypeError) as not_a_serializer:
        batched_data({"id": 1})  # type: ignore[arg-type]
    messages += [str(e.value) for e in (wrong_name, not_a_list, not_a_serializer)]
    assert [m for m in messages if not quoted(m)] == []


def test_the_rest_framework_test_mode_message_is_quoted(django_example_project: None) -> None:
    pytest.importorskip("rest_framework")
    from django.db import transaction
    from django.test import override_settings
    from orm_library.models import Author, Book
    from rest_framework import serializers

    from dataloader_sync.rest_framework import PerRowStatementError, batched_data

    class BookSerializer(serializers.ModelSerializer):
        class Meta:
            model = Book
            fields = ["title"]

    class AuthorSerializer(serializers.ModelSerializer):
        books = BookSerializer(many=True)

        class Meta:
            model = Author
            fields = ["name", "books"]
            no_auto_relations = ["books"]

    with transaction.atomic(), override_settings(DATALOADER_SYNC_REST_FRAMEWORK_STRICT=True):
        Author.objects.bulk_create([Author(name="a"), Author(name="b")])
        with pytest.raises(PerRowStatementError) as caught:
            batched_data(AuthorSerializer(Author.objects.all(), many=True))
        transaction.set_rollback(True)
    head, _, sql = str(caught.value).partition(": SELECT ")
    assert quoted(f"{head}: SELECT ... FROM {sql.partition(' FROM ')[2]}")
