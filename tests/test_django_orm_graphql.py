"""The ORM loaders behind a graphene-django schema on the orm_library app, on SQLite and on PostgreSQL:
the values, and one SQL statement per level per field, whatever the number of parents."""
from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

from dataloader_sync import DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project")


@pytest.fixture(scope="module")
def schema(django_example_project):
    import graphene
    from graphene_django import DjangoObjectType
    from orm_library import models

    from dataloader_sync.django import model_loader, related_loader

    class Tag(DjangoObjectType):
        class Meta:
            model = models.Tag
            fields = ("name",)
            name = "OrmTag"

    class Profile(DjangoObjectType):
        class Meta:
            model = models.AuthorProfile
            fields = ("bio",)
            name = "OrmProfile"

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title", "year")
            name = "OrmBook"

        tags = graphene.List(graphene.NonNull(Tag), required=True)
        author = graphene.Field(lambda: Author, required=True)

        def resolve_tags(book, info):
            return related_loader(info.context.loaders, models.Book.tags).load(book)

        def resolve_author(book, info):
            return related_loader(info.context.loaders, models.Book.author).load(book)

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name",)
            name = "OrmAuthor"

        books = graphene.List(graphene.NonNull(Book), required=True, first=graphene.Int(),
                              min_year=graphene.Int())
        profile = graphene.Field(Profile)

        def resolve_books(author, info, first=None, min_year=None):
            books = models.Book.objects.order_by("-year")
            if min_year is not None:
                books = books.filter(year__gte=min_year)
            return related_loader(info.context.loaders, models.Author.books, books, first).load(author)

        def resolve_profile(author, info):
            return related_loader(info.context.loaders, models.Author.profile).load(author)

    class Publisher(DjangoObjectType):
        class Meta:
            model = models.Publisher
            fields = ("name",)
            name = "OrmPublisher"

        authors = graphene.List(graphene.NonNull(Author), required=True)

        def resolve_authors(publisher, info):
            return related_loader(info.context.loaders, models.Publisher.authors).load(publisher)

    class Query(graphene.ObjectType):
        publishers = graphene.List(graphene.NonNull(Publisher), required=True, db=graphene.String(required=True))
        author = graphene.Field(Author, pk=graphene.ID(required=True), db=graphene.String(required=True))

        def resolve_publishers(root, info, db):
            return models.Publisher.objects.using(db).order_by("pk")

        def resolve_author(root, info, pk, db):
            return model_loader(info.context.loaders, models.Author.objects.using(db)).load(pk)

    return graphene.Schema(query=Query)


class Context:
    def __init__(self):
        self.loaders = DataLoaderRegistry()


def execute(schema, orm_db, query, **variables):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import DataLoaderExecutionContext

    with CaptureQueriesContext(connections[orm_db]) as queries:
        result = schema.execute(query, variable_values={"db": orm_db, **variables}, context_value=Context(),
                                execution_context_class=DataLoaderExecutionContext)
    assert result.errors is None, result.errors
    return result.data, len(queries)


THREE_LEVELS = """query ($db: String!) { publishers(db: $db) { name authors { name profile { bio }
    books(first: 2, minYear: 2001) { title year tags { name } author { name } } } } }"""


@pytest.mark.parametrize("authors", [3, 12])
def test_a_three_level_query_costs_one_statement_per_level_per_field(schema, orm_db, library, authors):
    library(orm_db, authors=authors, books=4, tags=3, publishers=2)
    data, statements = execute(schema, orm_db, THREE_LEVELS)
    # publishers; their authors; the authors' profiles; their books; the books' tags; the books' authors
    assert statements == 6
    publishers = data["publishers"]
    assert [p["name"] for p in publishers] == ["publisher 0", "publisher 1"]
    published = sorted(a for a in range(authors) if a % 3 != 2)
    assert [a["name"] for p in publishers for a in p["authors"]] == (
        [f"author {a}" for a in published if a % 2 == 0] + [f"author {a}" for a in published if a % 2 == 1])
    first = publishers[0]["authors"][0]
    assert first == {
        "name": "author 0", "profile": {"bio": "bio 0"},
        "books": [{"title": "book 0.3", "year": 2003, "tags": [{"name": "tag 00"}, {"name": "tag 01"}],
                   "author": {"name": "author 0"}},
                  {"title": "book 0.2", "year": 2002, "tags": [{"name": "tag 00"}, {"name": "tag 02"}],
                   "author": {"name": "author 0"}}]}
    assert publishers[1]["authors"][0]["profile"] is None  # author 1: no profile


def test_model_loader_by_a_graphql_id(schema, orm_db, library):
    lib = library(orm_db, authors=2, books=1)
    data, statements = execute(schema, orm_db, """query ($db: String!, $pk: ID!) {
        author(pk: $pk, db: $db) { name books { title } } }""", pk=str(lib.authors[1].pk))
    assert data == {"author": {"name": "author 1", "books": [{"title": "book 1.0"}]}}
    assert statements == 2
    data, statements = execute(schema, orm_db, """query ($db: String!) { author(pk: "0", db: $db) { name } }""")
    assert data == {"author": None} and statements == 1
