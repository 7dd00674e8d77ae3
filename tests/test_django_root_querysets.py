"""Querysets a user's resolver returns that are no relation of a parent (a root's ``Author.objects.order_by("id")``),
with auto relations on, on graphene-django and the orm_library app, SQLite and PostgreSQL: the to-one hops the child
selection reads are joined in, and on Django >= 6.1 the queryset carries FETCH_LEVEL; the response byte-identical to
the switch off, what the user chose kept."""
from __future__ import annotations

import importlib.util
import json
import os

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

from dataloader_sync import DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project")

HAS_FETCH_MODES = importlib.util.find_spec("django.db.models.fetch_modes") is not None
# .ci/django-matrix sets it on Django 6.1 and later: there these tests must run, not skip
REQUIRED = os.environ.get("DATALOADER_SYNC_REQUIRE_FETCH_MODES") == "1"
needs_fetch_modes = pytest.mark.skipif(
    not HAS_FETCH_MODES and not REQUIRED, reason="Django < 6.1 has no fetch modes: FETCH_LEVEL needs Django >= 6.1")


def make_schema():
    """Root fields whose resolvers return querysets (and one a list) of the shelf's models."""
    import graphene
    from django.db.models import Prefetch
    from graphene_django import DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    types = Registry()

    class Publisher(DjangoObjectType):
        class Meta:
            model = models.Publisher
            fields = ("name",)
            name = "RootPublisher"
            registry = types

    class Profile(DjangoObjectType):
        class Meta:
            model = models.AuthorProfile
            fields = ("bio",)
            name = "RootProfile"
            registry = types

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title", "year", "author")
            name = "RootBook"
            registry = types

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("id", "name", "publisher", "profile", "books")
            name = "RootAuthor"
            registry = types

        publisher_name = graphene.String()  # the model's @property, read by the default resolver

    def db(info):
        return getattr(info.context, "db", "default")

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(Author), required=True)
        books = graphene.List(graphene.NonNull(Book), required=True)
        author_list = graphene.List(graphene.NonNull(Author), required=True)
        first_ten = graphene.List(graphene.NonNull(Author), required=True)
        ten_by_name = graphene.List(graphene.NonNull(Author), required=True)
        books_with_authors = graphene.List(graphene.NonNull(Book), required=True)
        some_publishers = graphene.List(graphene.NonNull(Author), required=True)
        names_only = graphene.List(graphene.NonNull(Author), required=True)

        def resolve_authors(root, info):
            return models.Author.objects.using(db(info)).order_by("id")

        def resolve_books(root, info):
            return models.Book.objects.using(db(info)).order_by("id")

        def resolve_author_list(root, info):  # a list, not a queryset: runs as it is
            return list(models.Author.objects.using(db(info)).order_by("id"))

        def resolve_first_ten(root, info):  # a slice in a total order: joined
            return models.Author.objects.using(db(info)).order_by("-id")[:10]

        def resolve_ten_by_name(root, info):  # a slice among ties a join could reorder: not joined
            return models.Author.objects.using(db(info)).order_by("name")[:10]

        def resolve_books_with_authors(root, info):  # the user's select_related kept, the rest joined
            return models.Book.objects.using(db(info)).select_related("author").order_by("id")

        def resolve_some_publishers(root, info):  # the user's Prefetch of a to-one: never joined over
            publishers = models.Publisher.objects.using(db(info)).filter(name__endswith="1")
            return models.Author.objects.using(db(info)).prefetch_related(
                Prefetch("publisher", queryset=publishers)).order_by("id")

        def resolve_names_only(root, info):  # only(): its foreign key deferred, not joined
            return models.Author.objects.using(db(info)).only("name").order_by("id")

    return graphene.Schema(query=Query)


@pytest.fixture(scope="module")
def schema(django_example_project):
    return make_schema()


class Context:
    def __init__(self, db):
        self.db = db
        self.loaders = DataLoaderRegistry()


def execute(schema, orm_db, query, auto=True):
    """(the response as JSON, the SQL of the statements it ran)."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    cls = AutoRelationsExecutionContext if auto else DataLoaderExecutionContext
    with CaptureQueriesContext(connections[orm_db]) as queries:
        result = schema.execute(query, context_value=Context(orm_db), execution_context_class=cls)
    return json.dumps(result.formatted), [q["sql"] for q in queries.captured_queries]


def shelf(library, orm_db):
    """The shelf: 50 authors x 4 books x 3 reviews, 5 publishers, and one author with no book."""
    from orm_library.models import Author

    made = library(orm_db, authors=50, books=4, reviews=3, publishers=5)
    Author.objects.using(orm_db).create(name="author without books")
    return made


def compare(schema, orm_db, query):
    """(switch off statements, switch on statements), answers checked equal."""
    plain, off = execute(schema, orm_db, query, auto=False)
    auto, on = execute(schema, orm_db, query)
    assert '"errors"' not in plain, plain
    assert auto == plain
    return len(off), len(on)


WITH_PUBLISHER = 34  # of the shelf's 50 authors, every third has no publisher (no statement to read it)

#: query -> (statements with the switch off, with it on)
PLANNED = {
    # the root's queryset joins the publisher: one statement (without the plan: + a batch of publishers)
    "{ authors { name publisher { name } } }": (1 + WITH_PUBLISHER, 1),
    # a two-hop chain of to-one hops, both joined into the root's statement
    "{ books { title author { name publisher { name } } } }": (1 + 200 + 4 * WITH_PUBLISHER, 1),
    # a to-one beside a to-many under the root: the to-one joined, the books one batch
    "{ authors { books { title } publisher { name } } }": (1 + 51 + WITH_PUBLISHER, 2),
    # and the to-many's own to-one joined into its batch, as before
    "{ authors { name books { title author { name publisher { name } } } publisher { name } } }":
        (1 + 51 + WITH_PUBLISHER, 2),  # the books' author is the related manager's: no statement
    # a reverse one-to-one
    "{ authors { name profile { bio } } }": (1 + 51, 1),
    # a slice whose order is total
    "{ firstTen { name publisher { name } } }": (1 + 6, 1),
    # the user's select_related("author") kept, its author's publisher joined on top
    "{ booksWithAuthors { title author { name publisher { name } } } }": (1 + 4 * WITH_PUBLISHER, 1),
}


@pytest.mark.parametrize("query", list(PLANNED))
def test_a_root_queryset_joins_the_to_one_hops_its_selection_reads(schema, orm_db, library, query):
    shelf(library, orm_db)
    assert compare(schema, orm_db, query) == PLANNED[query]


def test_the_users_select_related_is_kept_as_it_is(schema, orm_db, library):
    shelf(library, orm_db)
    _, sql = execute(schema, orm_db, "{ booksWithAuthors { title author { name publisher { name } } } }")
    assert len(sql) == 1 and "orm_library_author" in sql[0] and "orm_library_publisher" in sql[0]


def test_what_a_join_could_change_is_not_joined(schema, orm_db, library):
    shelf(library, orm_db)
    # a slice ordered by a column with ties, only(): as without the plan, the publishers one batch
    assert compare(schema, orm_db, "{ tenByName { name publisher { name } } }") == (1 + 7, 2)
    assert compare(schema, orm_db, "{ namesOnly { name publisher { name } } }") == (1 + 51 + WITH_PUBLISHER, 2)
    # the user's Prefetch of the publisher holds (most authors' publisher null); the profile is joined
    query = "{ somePublishers { name publisher { name } profile { bio } } }"
    auto, _ = execute(schema, orm_db, query)
    assert '"publisher": null' in auto and '"publisher": {"name": "publisher 1"}' in auto
    assert compare(schema, orm_db, query) == (1 + 1 + 51, 2)


def test_a_resolver_returning_a_list_runs_as_it_is(schema, orm_db, library):
    shelf(library, orm_db)
    # the same rows as a queryset are one statement; as a list, the publishers are their own batch
    assert compare(schema, orm_db, "{ authorList { name publisher { name } } }") == (1 + WITH_PUBLISHER, 2)
    assert compare(schema, orm_db, "{ authors { name publisher { name } } }") == (1 + WITH_PUBLISHER, 1)


def test_a_property_reading_a_to_one_costs_one_statement_for_the_level(schema, orm_db, library):
    # Django >= 6.1: the queryset carries FETCH_LEVEL; before: the in-place seam's to-one reads (_inplace)
    shelf(library, orm_db)
    assert compare(schema, orm_db, "{ authors { name publisherName } }") == (1 + WITH_PUBLISHER, 2)
    # under a batch of the switch's own and beside a join
    assert compare(schema, orm_db, "{ authors { publisher { name } publisherName } }") == (1 + WITH_PUBLISHER, 1)


def test_only_an_execution_with_the_switch_plans_the_queryset(schema, orm_db, library):
    shelf(library, orm_db)
    query = "{ authors { name publisher { name } } }"
    plain, off = execute(schema, orm_db, query, auto=False)
    assert len(off) == 1 + WITH_PUBLISHER and "orm_library_publisher" not in off[0]  # as the resolver wrote it
    auto, on = execute(schema, orm_db, query)
    assert auto == plain and len(on) == 1 and "orm_library_publisher" in on[0]
    plain_again, off_again = execute(schema, orm_db, query, auto=False)  # the schema is left as it was
    assert plain_again == plain and off_again == off


def test_the_setting_plans_the_views_root_querysets(schema, library):
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext
    from django.urls import path

    from dataloader_sync.django import GraphQLView

    shelf(library, "default")
    urls = type("urls", (), {"urlpatterns": [path("graphql", GraphQLView.as_view(schema=schema))]})
    query = "{ authors { name publisher { name } books { title } } }"
    bodies, counts = [], []
    for on in (False, True):
        with override_settings(ROOT_URLCONF=urls, DATALOADER_SYNC_AUTO_RELATIONS=on), \
                CaptureQueriesContext(connection) as queries:
            response = Client().post("/graphql", {"query": query}, content_type="application/json")
        assert response.status_code == 200, response.content
        bodies.append(response.content)
        counts.append(len(queries))
    assert bodies[0] == bodies[1] and b'"errors"' not in bodies[0]
    assert counts == [1 + WITH_PUBLISHER + 51, 2]
