"""Auto relations on graphene-django (DATALOADER_SYNC_AUTO_RELATIONS, AutoRelationsExecutionContext), on the
orm_library app, on SQLite and PostgreSQL: no relation resolver written, one statement per relation per level,
the same response as the same schema executed without the switch."""
from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

from dataloader_sync import DataLoaderRegistry, no_auto_relations

pytestmark = pytest.mark.usefixtures("django_example_project")


def make_schema(own_resolvers=False, opt_out=False, debug=False):
    """Types of every orm_library model with no relation resolver; reviews rated 1 are hidden by
    Review.get_queryset, publishers named "publisher 1" by Publisher.get_queryset."""
    import graphene
    from graphene_django import DjangoListField, DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    types = Registry()  # apart from other modules' types of these models

    class Named(graphene.Interface):
        name = graphene.String(required=True)

    class Publisher(DjangoObjectType):
        class Meta:
            model = models.Publisher
            fields = ("id", "name", "authors")
            interfaces = (Named,)
            name = "AutoPublisher"
            registry = types

        @classmethod
        def get_queryset(cls, queryset, info):
            return queryset.exclude(name="publisher 1")

    class Profile(DjangoObjectType):
        class Meta:
            model = models.AuthorProfile
            fields = ("bio", "author")
            interfaces = (graphene.relay.Node,)
            name = "AutoProfile"
            registry = types

    class Tag(DjangoObjectType):
        class Meta:
            model = models.Tag
            fields = ("name", "books")
            interfaces = (Named,)
            name = "AutoTag"
            registry = types

    class Review(DjangoObjectType):
        class Meta:
            model = models.Review
            fields = ("rating", "body", "book")
            name = "AutoReview"
            registry = types

        @classmethod
        def get_queryset(cls, queryset, info):
            return queryset.filter(rating__gt=1)

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("id", "title", "year", "author", "tags", "reviews")
            name = "AutoBook"
            registry = types

        if opt_out:
            tags = no_auto_relations(DjangoListField(Tag))

        if own_resolvers:
            def resolve_tags(book, info):
                return book.tags.filter(name__gte="tag 01")

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("id", "name", "publisher", "books", "profile")
            name = "AutoAuthor"
            registry = types

    class Found(graphene.Union):
        class Meta:
            types = (Author, Book)
            name = "AutoFound"

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(Author), required=True, db=graphene.String(required=True),
                                prefetch=graphene.Boolean())
        books = graphene.List(graphene.NonNull(Book), required=True, db=graphene.String(required=True))
        found = graphene.List(graphene.NonNull(Found), required=True, db=graphene.String(required=True))
        named = graphene.List(graphene.NonNull(Named), required=True, db=graphene.String(required=True))
        node = graphene.relay.Node.Field()
        if debug:
            from graphene_django.debug import DjangoDebug

            debug_field = graphene.Field(DjangoDebug, name="_debug")

        def resolve_authors(root, info, db, prefetch=False):
            authors = models.Author.objects.using(db).order_by("pk")
            if prefetch:
                authors = authors.select_related("publisher", "profile").prefetch_related("books", "books__tags")
            return authors

        def resolve_found(root, info, db):
            return [*models.Author.objects.using(db).order_by("pk")[:2], *models.Book.objects.using(db).order_by("pk")]

        def resolve_named(root, info, db):
            return [*models.Tag.objects.using(db), *models.Publisher.objects.using(db).order_by("pk")]

        def resolve_books(root, info, db):
            return models.Book.objects.using(db).order_by("pk")

    class Rename(graphene.Mutation):
        class Arguments:
            pk = graphene.ID(required=True)
            name = graphene.String(required=True)
            db = graphene.String(required=True)

        author = graphene.Field(Author)

        def mutate(root, info, pk, name, db):
            author = models.Author.objects.using(db).get(pk=pk)
            author.name = name
            author.save(using=db)
            return Rename(author=author)

    class Mutation(graphene.ObjectType):
        rename = Rename.Field()

    return graphene.Schema(query=Query, mutation=Mutation, types=[Profile, Tag, Review, Publisher])


@pytest.fixture(scope="module")
def schema(django_example_project):
    return make_schema()


class Context:
    def __init__(self):
        self.loaders = DataLoaderRegistry()


class ReadFrom:
    """A database router sending reads to one alias: graphene-django's ``get_node`` (``Model.objects``)
    reads the router's database, not the parent's, so that is where the rows must be."""

    def __init__(self, alias):
        self.alias = alias

    def db_for_read(self, model, **hints):
        return self.alias


def execute(schema, orm_db, query, auto=True, context=None, **variables):
    from django.db import connections
    from django.test import override_settings
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    cls = AutoRelationsExecutionContext if auto else DataLoaderExecutionContext
    with override_settings(DATABASE_ROUTERS=[ReadFrom(orm_db)]), CaptureQueriesContext(connections[orm_db]) as queries:
        result = schema.execute(query, variable_values={"db": orm_db, **variables} if "$db" in query else variables,
                                context_value=Context() if context is None else context,
                                execution_context_class=cls)
    return json.dumps(result.formatted, sort_keys=False), len(queries)


PLAIN = """query ($db: String!) { authors(db: $db) { name publisher { name } profile { bio }
    books { title tags { name } reviews { rating } } } }"""


@pytest.mark.parametrize("authors", [3, 10])
def test_zero_resolvers_one_statement_per_relation_per_level(schema, orm_db, library, authors):
    library(orm_db, authors=authors, books=3, reviews=2)
    auto, statements = execute(schema, orm_db, PLAIN)
    plain, plain_statements = execute(schema, orm_db, PLAIN, auto=False)
    assert auto == plain
    # authors with their profiles (the root's queryset joins them), publishers, books, tags, reviews
    assert statements == 5
    assert plain_statements > 6 * authors // 3


SHAPES = {
    "aliases and fragments": """query ($db: String!) { writers: authors(db: $db) { ...A first: books { title }
        again: books { year wrote: author { name } } } }
        fragment A on AutoAuthor { name house: publisher { name authors { name } }
            books { ... on AutoBook { tags { name books { title } } } } }""",
    "union": """query ($db: String!) { found(db: $db) { __typename
        ... on AutoAuthor { name books { title reviews { rating } } }
        ... on AutoBook { title author { name profile { bio } } tags { name } } } }""",
    "interface": """query ($db: String!) { named(db: $db) { __typename name ... on AutoTag { books { title } }
        ... on AutoPublisher { authors { name books { title } } } } }""",
    "reverse to-one and back": """query ($db: String!) { books(db: $db) { title
        author { profile { bio author { name } } } } }""",
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_answers_as_without_the_switch(schema, orm_db, library, shape):
    library(orm_db, authors=4, books=2, reviews=2)
    auto, statements = execute(schema, orm_db, SHAPES[shape])
    plain, plain_statements = execute(schema, orm_db, SHAPES[shape], auto=False)
    assert auto == plain
    assert '"errors"' not in auto
    assert statements < plain_statements


def test_node_by_id_answers_as_without_the_switch(schema, orm_db, library):
    from graphql_relay import to_global_id

    lib = library(orm_db, authors=3, books=2)
    query = """query ($id: ID!) { node(id: $id) { ... on AutoProfile { bio author { name
        publisher { name } books { title tags { name } } } } } }"""
    node = to_global_id("AutoProfile", lib.profiles[1].pk)
    auto, statements = execute(schema, orm_db, query, id=node)
    plain, _ = execute(schema, orm_db, query, auto=False, id=node)
    assert auto == plain and '"bio 2"' in auto
    assert statements == 4  # profile, author (author 2: no publisher), books, tags


def test_a_mutation_payload_is_batched(schema, orm_db, library):
    lib = library(orm_db, authors=2, books=3)
    query = """mutation ($db: String!, $pk: ID!) { rename(pk: $pk, name: "renamed", db: $db) { author { name
        books { title tags { name } reviews { rating } } } } }"""
    auto, statements = execute(schema, orm_db, query, pk=str(lib.authors[0].pk))
    plain, plain_statements = execute(schema, orm_db, query, auto=False, pk=str(lib.authors[0].pk))
    assert auto == plain and '"renamed"' in auto
    assert statements == 5  # the author, its update, books, tags, reviews
    assert plain_statements == 2 + 1 + 3 + 3


def test_get_queryset_applies_inside_the_batch(schema, orm_db, library):
    library(orm_db, authors=4, books=2, reviews=3)
    query = """query ($db: String!) { authors(db: $db) { name publisher { name } books { reviews { rating } } } }"""
    auto, statements = execute(schema, orm_db, query)
    plain, _ = execute(schema, orm_db, query, auto=False)
    assert auto == plain
    assert '"publisher 1"' not in auto and '"rating": 1}' not in auto  # hidden by the types' get_queryset
    assert '"publisher 0"' in auto and '"rating": 2}' in auto
    assert statements == 4


def test_prefetched_and_selected_rows_cost_no_statement(schema, orm_db, library):
    library(orm_db, authors=5, books=2)
    query = """query ($db: String!) { authors(db: $db, prefetch: true) { name profile { bio }
        books { title tags { name } } } }"""
    auto, statements = execute(schema, orm_db, query)
    plain, plain_statements = execute(schema, orm_db, query, auto=False)
    assert auto == plain
    assert statements == plain_statements == 3  # authors with profiles, their books, the books' tags


def test_loaders_are_named_after_their_relation(schema, orm_db, library):
    library(orm_db, authors=3, books=2)
    context = Context()
    execute(schema, orm_db, PLAIN, context=context)
    names = sorted(context.loaders.statistics_by_loader())
    assert {"Author.books", "Book.tags"} <= set(names)
    assert "Author.profile" not in names  # joined into the root's queryset: no batch
    assert any(n.startswith("Author.publisher, queryset=Publisher WHERE") for n in names)
    assert any(n.startswith("Book.reviews, queryset=Review WHERE") for n in names)
    assert all(context.loaders.statistics_by_loader()[n].batch_invoke_count == 1 for n in names)


def test_without_a_registry_in_the_context_the_execution_makes_and_closes_one(schema, orm_db, library):
    from dataloader_sync.graphql import AutoRelationsExecutionContext

    library(orm_db, authors=3, books=2)
    made = []

    class Watched(AutoRelationsExecutionContext):
        def auto_loaders(self):
            registry = super().auto_loaders()
            made.append(registry)
            return registry

    result = schema.execute(PLAIN, variable_values={"db": orm_db}, context_value={},
                            execution_context_class=Watched)
    plain, _ = execute(schema, orm_db, PLAIN, auto=False)
    assert json.dumps(result.formatted) == plain
    assert made and len({id(r) for r in made}) == 1 and made[0].closed


def test_a_context_registry_is_left_open(schema, orm_db, library):
    library(orm_db, authors=2, books=1)
    context = Context()
    execute(schema, orm_db, PLAIN, context=context)
    assert not context.loaders.closed and len(context.loaders.keys()) == 4  # the profiles joined: no loader
    context.loaders.close()


def test_no_auto_relations_opts_a_field_out(orm_db, library):
    schema = make_schema(opt_out=True)
    library(orm_db, authors=3, books=2)
    auto, statements = execute(schema, orm_db, PLAIN)
    plain, _ = execute(schema, orm_db, PLAIN, auto=False)
    assert auto == plain
    assert statements == 4 + 6  # the tags of each of the 6 books: one statement each (profiles joined)


def test_a_resolver_the_user_wrote_is_kept(orm_db, library):
    schema = make_schema(own_resolvers=True)
    library(orm_db, authors=3, books=2)
    auto, statements = execute(schema, orm_db, PLAIN)
    plain, _ = execute(schema, orm_db, PLAIN, auto=False)
    assert auto == plain and '"tag 00"' not in auto  # the resolver's filter
    assert statements == 5  # its queryset is loaded for the level (test_django_resolver_querysets)


def make_connection_schema(stock_fields=True):
    """Relay types: the relations to them are graphene-django's connection fields (a filter connection for
    books, which have filter fields), with no resolver written."""
    import graphene
    from graphene_django import DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    types = Registry()

    class Counted(graphene.Connection):
        class Meta:
            abstract = True

        total_count = graphene.Int()

        def resolve_total_count(root, info):
            return root.length

    class Review(DjangoObjectType):
        class Meta:
            model = models.Review
            fields = ("rating", "book")
            interfaces = (graphene.relay.Node,)
            name = "PagedReview"
            registry = types
            connection_class = Counted

        @classmethod
        def get_queryset(cls, queryset, info):
            return queryset.filter(rating__gt=1)

    class Tag(DjangoObjectType):
        class Meta:
            model = models.Tag
            fields = ("name",)
            name = "PagedTag"
            registry = types

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title", "year", "tags", "reviews", "author")
            interfaces = (graphene.relay.Node,)
            filter_fields = {"year": ["exact", "gte"], "title": ["icontains"]}
            name = "PagedBook"
            registry = types
            connection_class = Counted

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name", "books", "publisher")
            interfaces = (graphene.relay.Node,)
            name = "PagedAuthor"
            registry = types
            connection_class = Counted

    class Publisher(DjangoObjectType):
        class Meta:
            model = models.Publisher
            fields = ("name", "authors")
            name = "PagedPublisher"
            registry = types

    class Query(graphene.ObjectType):
        publishers = graphene.List(graphene.NonNull(Publisher), required=True, db=graphene.String(required=True))

        def resolve_publishers(root, info, db):
            return models.Publisher.objects.using(db).order_by("pk")

    return graphene.Schema(query=Query, types=[Tag, Review])


@pytest.fixture(scope="module")
def connection_schema(django_example_project):
    return make_connection_schema()


CONNECTIONS = {
    "pages and counts": ("""query ($db: String!) { publishers(db: $db) { name authors(first: 2) { totalCount
        pageInfo { hasNextPage endCursor } edges { cursor node { name books(first: 1, year_Gte: 2001) { totalCount
        edges { node { title year tags { name } reviews { totalCount edges { node { rating } } } } } } } } } } }""",
                         1 + 1 + 1 + 1 + 1),  # each page's totalCount from its rows' statement
    "all rows, no count": ("""query ($db: String!) { publishers(db: $db) { authors { edges { node { name
        books(title_Icontains: "1") { edges { node { title } } } } } } } }""", 1 + 1 + 1),
    "after a cursor": ("""query ($db: String!) { publishers(db: $db) {
        authors(first: 1, after: "YXJyYXljb25uZWN0aW9uOjA=") {
        edges { node { name books(last: 1) { edges { node { title } } } } } } } }""", 1 + 1 + 1),
}


@pytest.mark.parametrize("shape", list(CONNECTIONS))
def test_connection_fields_page_filter_and_count_in_the_batch(connection_schema, orm_db, library, shape):
    library(orm_db, authors=9, books=3, reviews=2, publishers=2)
    query, expected = CONNECTIONS[shape]
    auto, statements = execute(connection_schema, orm_db, query)
    plain, plain_statements = execute(connection_schema, orm_db, query, auto=False)
    assert auto == plain
    assert '"errors"' not in auto
    assert statements == expected < plain_statements


def post(schema, query, **settings):
    """POST *query* to ``dataloader_sync.django.GraphQLView`` with graphene-django's debug middleware,
    under *settings*: the response body and the number of statements Django ran."""
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext
    from django.urls import path
    from graphene_django.debug import DjangoDebugMiddleware

    from dataloader_sync.django import GraphQLView

    view = GraphQLView.as_view(schema=schema, middleware=[DjangoDebugMiddleware()])
    urls = type("urls", (), {"urlpatterns": [path("graphql", view)]})
    with override_settings(ROOT_URLCONF=urls, **settings), CaptureQueriesContext(connection) as queries:
        response = Client().post("/graphql", {"query": query, "variables": {"db": "default"}},
                                 content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json(), len(queries)


def test_the_setting_turns_the_view_s_execution_to_auto_relations(library):
    schema = make_schema(debug=True)
    library("default", authors=4, books=2)
    query = PLAIN.replace("} } }", "} } } _debug { sql { rawSql } }", 1)
    auto, statements = post(schema, query, DATALOADER_SYNC_AUTO_RELATIONS=True)
    plain, plain_statements = post(schema, query)
    # every level's batch, listed last (the profiles joined into the root's queryset)
    assert statements == len(auto["data"]["_debug"]["sql"]) == 5
    assert plain_statements == len(plain["data"]["_debug"]["sql"]) > 6
    assert auto["data"]["authors"] == plain["data"]["authors"]
    assert "errors" not in auto


def test_the_setting_must_be_a_bool():
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from dataloader_sync.django._view import default_execution_context_class

    with override_settings(DATALOADER_SYNC_AUTO_RELATIONS="yes"), pytest.raises(
            ImproperlyConfigured, match="DATALOADER_SYNC_AUTO_RELATIONS must be True or False"):
        default_execution_context_class()


def test_no_auto_relations_refuses_a_type():
    from graphene_django import DjangoListField

    with pytest.raises(TypeError, match="wrap the field"):
        no_auto_relations(DjangoListField)


JOINED = {
    # authors; their books with each book's author and that author's profile; the reviews with their book
    "lists": ("""query ($db: String!) { authors(db: $db) { name books { title author { name profile { bio } }
        reviews { rating book { title year } } } } }""", 3),
    # one statement per level: the to-one hops ride along with the list that holds them (the root's
    # queryset too: the books with their author and profile, then the authors' books)
    "under a to-one": ("""query ($db: String!) { books(db: $db) { title author { name profile { bio author { name } }
        books { title author { name } } } } }""", 2),
}


@pytest.mark.parametrize("shape", list(JOINED))
def test_to_one_hops_the_selection_reads_are_joined_into_the_batch(schema, orm_db, library, shape):
    library(orm_db, authors=6, books=2, reviews=2)
    query, expected = JOINED[shape]
    auto, statements = execute(schema, orm_db, query)
    plain, _ = execute(schema, orm_db, query, auto=False)
    assert auto == plain
    assert statements == expected


def test_the_joined_loader_says_what_it_joins(schema, orm_db, library):
    library(orm_db, authors=2, books=2)
    context = Context()
    execute(schema, orm_db, JOINED["lists"][0], context=context)
    names = set(context.loaders.keys())
    assert "Author.books, select_related=(author, author__profile)" in names


def test_connection_nodes_join_their_to_one_hops(connection_schema, orm_db, library):
    library(orm_db, authors=6, books=2)
    query = """query ($db: String!) { publishers(db: $db) { authors { edges { node { name publisher { name }
        books { edges { node { title author { name publisher { name } } } } } } } } } }"""
    auto, statements = execute(connection_schema, orm_db, query)
    plain, _ = execute(connection_schema, orm_db, query, auto=False)
    assert auto == plain and '"errors"' not in auto
    assert statements == 3  # publishers, their authors with their publisher, the books with author and publisher


def test_a_deferred_foreign_key_costs_no_statement_of_its_own(schema, orm_db, library):
    from orm_library import models

    from dataloader_sync.django import related_loader

    lib = library(orm_db, authors=4, books=2)
    books = list(models.Book.objects.using(orm_db).only("title").order_by("pk"))
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    registry = DataLoaderRegistry()
    with CaptureQueriesContext(connections[orm_db]) as queries:
        futures = [related_loader(registry, models.Book.author).load(book) for book in books]
        registry.dispatch_all()
        authors = [f.result(timeout=10) for f in futures]
        ids = [book.author_id for book in books]  # stored with the batch: no statement
    assert len(queries) == 1
    assert [a.name for a in authors] == [f"author {a}" for a in range(4) for _ in range(2)]
    assert ids == [book.author_id for book in lib.books]
    registry.close()


def make_generic_schema():
    """Notes on authors and books: a generic foreign key (a union of both) and the generic relations back."""
    import graphene
    from graphene_django import DjangoListField, DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    types = Registry()

    class Note(DjangoObjectType):
        class Meta:
            model = models.Note
            fields = ("text",)
            name = "Note"
            registry = types

        target = graphene.Field(lambda: Target)

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name",)
            name = "NotedAuthor"
            registry = types

        notes = DjangoListField(Note)

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title",)
            name = "NotedBook"
            registry = types

        notes = DjangoListField(Note)

    class Target(graphene.Union):
        class Meta:
            types = (Author, Book)
            name = "NoteTarget"

    class Query(graphene.ObjectType):
        notes = graphene.List(graphene.NonNull(Note), required=True, db=graphene.String(required=True))

        def resolve_notes(root, info, db):
            return models.Note.objects.using(db).order_by("pk")

    return graphene.Schema(query=Query)


def test_generic_foreign_keys_and_generic_relations(orm_db, library):
    from django.contrib.contenttypes.models import ContentType
    from orm_library import models

    lib = library(orm_db, authors=3, books=2)
    author_type = ContentType.objects.db_manager(orm_db).get_for_model(models.Author)
    book_type = ContentType.objects.db_manager(orm_db).get_for_model(models.Book)
    models.Note.objects.using(orm_db).bulk_create(
        [models.Note(content_type=author_type, object_id=a.pk, text=f"on {a.name}") for a in lib.authors]
        + [models.Note(content_type=book_type, object_id=b.pk, text=f"on {b.title}") for b in lib.books]
        + [models.Note(content_type=book_type, object_id=10 ** 9, text="on a book that is gone")])
    schema = make_generic_schema()
    # the notes; the authors they are on, the books they are on (one statement per target model)
    query = """query ($db: String!) { notes(db: $db) { text target { __typename
        ... on NotedAuthor { name notes { text } } ... on NotedBook { title notes { text } } } } }"""
    auto, statements = execute(schema, orm_db, query)
    plain, plain_statements = execute(schema, orm_db, query, auto=False)
    assert auto == plain and '"errors"' not in auto and '"target": null' in auto
    assert statements == 1 + 2 + 2  # the notes; their authors, their books; the authors' and the books' notes
    assert plain_statements > 3 + 6
    context = Context()
    execute(schema, orm_db, query, context=context)
    assert {"Note.target", "Author.notes", "Book.notes"} <= set(context.loaders.keys())


def test_spans_name_the_relations(schema, orm_db, library):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from dataloader_sync.otel import OpenTelemetryInstrumentation

    library(orm_db, authors=3, books=2)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    context = Context()
    context.loaders = DataLoaderRegistry(instrumentation=OpenTelemetryInstrumentation(tracer_provider=provider))
    try:
        execute(schema, orm_db, PLAIN, context=context)
    finally:
        context.loaders.close()
        provider.shutdown()
    names = {span.attributes["dataloader.name"] for span in exporter.get_finished_spans()
             if span.name.startswith("dataloader.batch")}
    assert {"Author.books", "Book.tags"} <= names  # Author.profile: joined into the root's queryset


def test_the_debug_toolbar_panel_names_the_relations(schema, library):
    from dataloader_sync.django._batch_recorder import BatchRecorder

    library("default", authors=3, books=2)
    recorder = BatchRecorder()
    recorder.start()
    try:
        context = Context()  # its registry made while the recorder runs, as in a request
        execute(schema, "default", PLAIN, context=context)
        context.loaders.close()
    finally:
        recorder.stop()
    batches = recorder.stats()["batches"]
    assert {"Author.books", "Book.tags"} <= {b["loader"] for b in batches}  # Author.profile: joined
    assert all(len(b["sql"]) == 1 for b in batches)  # each batch's one statement, attributed to it


def make_read_beside_schema():
    """A to-one relation the switch loads (``author``) beside a resolver of the user's reading the same
    relation on the same instance (``authorName``), on one root object and on a root list."""
    import graphene
    from graphene_django import DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    types = Registry()

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name",)
            name = "BesideAuthor"
            registry = types

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title", "author")
            name = "BesideBook"
            registry = types

        author_name = graphene.String()

        def resolve_author_name(book, info):
            return book.author.name

    class Query(graphene.ObjectType):
        book = graphene.Field(Book, db=graphene.String(required=True))
        books = graphene.List(graphene.NonNull(Book), db=graphene.String(required=True))

        def resolve_book(root, info, db):
            return models.Book.objects.using(db).order_by("pk").first()

        def resolve_books(root, info, db):
            return models.Book.objects.using(db).order_by("pk")

    return graphene.Schema(query=Query)


@pytest.mark.parametrize("query, statements", [
    ("query ($db: String!) { book(db: $db) { author { name } authorName } }", 2),  # the book; its author, once
    ("query ($db: String!) { book(db: $db) { authorName author { name } } }", 2),
])
def test_a_to_one_the_users_code_read_before_the_batch_is_not_loaded_again(orm_db, library, query, statements):
    library(orm_db, authors=3, books=2)
    schema = make_read_beside_schema()
    auto, on = execute(schema, orm_db, query)
    plain, off = execute(schema, orm_db, query, auto=False)
    assert auto == plain and '"errors"' not in auto
    assert on == off == statements
