"""To-one relations read in place by a user's resolver or a model ``@property`` (``self.publisher.name``) under
GraphQL auto relations, on graphene-django and the orm_library app, on every Django (4.2, 5.2, 6.1), SQLite and
PostgreSQL: one statement for the level (``dataloader_sync.django._inplace``'s ``get_object`` seam), the
response byte-identical to the switch off; ``None`` foreign keys, two hops, a mutation (left as written) and
an execution without the switch (as before)."""
from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

from dataloader_sync import DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project")

AUTHORS = 20
WITH_PUBLISHER = 14  # every third author has none


def make_schema():
    import graphene
    from graphene_django import DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    types = Registry()

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name",)
            name = "ToOneAuthor"
            registry = types

        publisher_name = graphene.String()  # the model's @property, read by the default resolver
        r_publisher = graphene.String()

        def resolve_r_publisher(author, info):
            return None if author.publisher is None else author.publisher.name

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title",)
            name = "ToOneBook"
            registry = types

        publisher = graphene.String()

        def resolve_publisher(book, info):  # Book.author, then Author.publisher
            publisher = book.author.publisher
            return None if publisher is None else publisher.name

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(Author))
        books = graphene.List(graphene.NonNull(Book))

        def resolve_authors(root, info):
            return models.Author.objects.using(info.context.db).order_by("id")

        def resolve_books(root, info):
            return models.Book.objects.using(info.context.db).order_by("id")

    class Touch(graphene.Mutation):
        authors = graphene.List(graphene.NonNull(Author))

        def mutate(root, info):
            return Touch(authors=list(models.Author.objects.using(info.context.db).order_by("id")))

    class Mutation(graphene.ObjectType):
        touch = Touch.Field()

    return graphene.Schema(query=Query, mutation=Mutation)


@pytest.fixture(scope="module")
def schema(django_example_project):
    return make_schema()


class Context:
    def __init__(self, db):
        self.db = db
        self.loaders = DataLoaderRegistry()


def execute(schema, orm_db, query, auto=True):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    cls = AutoRelationsExecutionContext if auto else DataLoaderExecutionContext
    with CaptureQueriesContext(connections[orm_db]) as queries:
        result = schema.execute(query, context_value=Context(orm_db), execution_context_class=cls)
    assert not result.errors, result.errors
    return json.dumps(result.data), len(queries)


def compare(schema, orm_db, query):
    plain, off = execute(schema, orm_db, query, auto=False)
    auto, on = execute(schema, orm_db, query)
    assert auto == plain
    return plain, off, on


@pytest.mark.parametrize("query", ["{ authors { name publisherName } }", "{ authors { name rPublisher } }",
                                   "{ authors { rPublisher publisherName } }"])
def test_a_resolver_or_a_property_reading_a_to_one_costs_one_statement(schema, orm_db, library, query):
    library(orm_db, authors=AUTHORS, books=0, publishers=4)
    plain, off, on = compare(schema, orm_db, query)
    assert '"publisher 3"' in plain and ('null' in plain or '""' in plain)  # None foreign keys answered
    assert off == 1 + WITH_PUBLISHER  # (the two fields of one author: Django caches the first read)
    assert on == 2


def test_two_hops_cost_one_statement_each(schema, orm_db, library):
    library(orm_db, authors=AUTHORS, books=2, publishers=4)
    _, off, on = compare(schema, orm_db, "{ books { title publisher } }")
    assert off == 1 + 2 * AUTHORS + 2 * WITH_PUBLISHER  # every book its own author instance
    assert on == 3


def test_a_mutation_reads_as_written(schema, orm_db, library):
    library(orm_db, authors=AUTHORS, books=0, publishers=4)
    _, off, on = compare(schema, orm_db, "mutation { touch { authors { name rPublisher } } }")
    assert off == on == 1 + WITH_PUBLISHER
