"""Querysets a user's resolver returns (``self.books.filter(...)``, ``Book.objects.filter(author=self)``), with
auto relations on, on graphene-django and the orm_library app, SQLite and PostgreSQL: one statement per query shape
per level, each parent its own rows in its own order, the response byte-identical to the switch off."""
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


def make_schema():
    """Types whose list fields are resolvers returning querysets of the parent's relations."""
    import graphene
    from django.db.models import Count
    from graphene_django import DjangoListField, DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    types = Registry()

    class Note(DjangoObjectType):
        class Meta:
            model = models.Note
            fields = ("text",)
            name = "RqNote"
            registry = types

    class Review(DjangoObjectType):
        class Meta:
            model = models.Review
            fields = ("rating", "body")
            name = "RqReview"
            registry = types

        @classmethod
        def get_queryset(cls, queryset, info):
            return queryset.filter(rating__gt=1)

    class Tag(DjangoObjectType):
        class Meta:
            model = models.Tag
            fields = ("name",)
            name = "RqTag"
            registry = types

        recent_books = graphene.List(graphene.NonNull(lambda: Book))

        def resolve_recent_books(tag, info):  # many-to-many, reverse side
            return tag.books.filter(year__gte=2002).order_by("-year", "title")

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("id", "title", "year", "author", "reviews")
            name = "RqBook"
            registry = types

        late_tags = graphene.List(graphene.NonNull(Tag))
        last_tag = graphene.List(graphene.NonNull(Tag))
        good_reviews = DjangoListField(Review)
        notes = graphene.List(graphene.NonNull(Note))

        def resolve_late_tags(book, info):  # many-to-many, forward side
            return book.tags.filter(name__gte="tag 01")

        def resolve_last_tag(book, info):  # reverse() of Tag's Meta.ordering, sliced
            return book.tags.all().reverse()[:1]

        def resolve_good_reviews(book, info):  # Review.get_queryset applies (DjangoListField)
            return book.reviews.order_by("-rating")

        def resolve_notes(book, info):
            return book.notes.order_by("text")

    class Publisher(DjangoObjectType):
        class Meta:
            model = models.Publisher
            fields = ("name",)
            name = "RqPublisher"
            registry = types

        authors_named_1 = graphene.List(graphene.NonNull(lambda: Author))

        def resolve_authors_named_1(publisher, info):
            return publisher.authors.filter(name__contains="1").order_by("name")

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("id", "name", "publisher")
            name = "RqAuthor"
            registry = types

        published_books = graphene.List(graphene.NonNull(Book))
        top_two = graphene.List(graphene.NonNull(Book))
        top_ten = graphene.List(graphene.NonNull(Book))
        second_and_third = graphene.List(graphene.NonNull(Book))
        last_two = graphene.List(graphene.NonNull(Book))
        reviewed = graphene.List(graphene.NonNull(Book))
        not_2001 = DjangoListField(Book)
        by_author = graphene.List(graphene.NonNull(Book))
        odd_or_even = graphene.List(graphene.NonNull(Book))
        tied = graphene.List(graphene.NonNull(Book))
        planned = graphene.List(graphene.NonNull(Book))
        distinct_tagged = graphene.List(graphene.NonNull(Book))
        shared = graphene.List(graphene.NonNull(Book))
        notes = graphene.List(graphene.NonNull(Note))
        titles = graphene.List(graphene.String)
        either_end = graphene.List(graphene.NonNull(Book))

        def resolve_published_books(author, info):
            return author.books.filter(year__gte=2001).order_by("-year")

        def resolve_top_two(author, info):
            return author.books.order_by("-year")[:2]

        def resolve_top_ten(author, info):  # a slice larger than every relation
            return author.books.order_by("-year")[:10]

        def resolve_second_and_third(author, info):
            return author.books.order_by("year")[1:3]

        def resolve_last_two(author, info):  # reverse() of a sliced ordering: the window is reversed too
            return author.books.order_by("year", "title").reverse()[:2]

        def resolve_reviewed(author, info):
            return author.books.annotate(n=Count("reviews")).filter(n__gte=3).order_by("title")

        def resolve_not_2001(author, info):
            return author.books.exclude(year=2001)

        def resolve_by_author(author, info):
            return models.Book.objects.using(author._state.db).filter(author=author).order_by("-title")

        def resolve_odd_or_even(author, info):  # two shapes on one level
            return author.books.filter(year__gte=2000 + author.pk % 2).order_by("year")

        def resolve_tied(author, info):  # every row of a parent ties
            return author.books.order_by("author__name")[:3]

        def resolve_planned(author, info):
            return author.books.select_related("author").prefetch_related("tags").only(
                "title", "author__name").order_by("title")

        def resolve_distinct_tagged(author, info):
            return author.books.filter(tags__name__gte="tag 00").distinct().order_by("title")

        def resolve_shared(author, info):  # one queryset object for every parent
            return info.context.shared

        def resolve_notes(author, info):
            return author.notes.all()

        def resolve_titles(author, info):  # values_list: runs as it is
            return author.books.order_by("title").values_list("title", flat=True)

        def resolve_either_end(author, info):  # union: runs as it is
            return author.books.filter(year=2000).union(author.books.filter(year=2003)).order_by("year")

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(Author), required=True)
        books = graphene.List(graphene.NonNull(Book), required=True)
        tags = graphene.List(graphene.NonNull(Tag), required=True)

        def resolve_authors(root, info):
            return models.Author.objects.using(getattr(info.context, "db", "default")).order_by("pk")

        def resolve_books(root, info):
            return models.Book.objects.using(getattr(info.context, "db", "default")).order_by("pk")

        def resolve_tags(root, info):
            return models.Tag.objects.using(getattr(info.context, "db", "default"))

    return graphene.Schema(query=Query, types=[Publisher])


@pytest.fixture(scope="module")
def schema(django_example_project):
    return make_schema()


class Context:
    def __init__(self, db):
        from orm_library.models import Author, Book

        self.db = db
        self.loaders = DataLoaderRegistry()
        first = Author.objects.using(db).order_by("pk").first()
        self.shared = Book.objects.using(db).filter(author=first).order_by("title")


def execute(schema, orm_db, query, auto=True, context=None):
    """(the response as JSON, the statements it ran, the context)."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    context = Context(orm_db) if context is None else context
    cls = AutoRelationsExecutionContext if auto else DataLoaderExecutionContext
    with CaptureQueriesContext(connections[orm_db]) as queries:
        result = schema.execute(query, context_value=context, execution_context_class=cls)
    return json.dumps(result.formatted), len(queries), context


def shelf(library, orm_db):
    """The shelf: 50 authors x 4 books x 3 reviews, 5 publishers, and one author with no book."""
    from orm_library.models import Author

    made = library(orm_db, authors=50, books=4, reviews=3, publishers=5)
    Author.objects.using(orm_db).create(name="author without books")
    return made


def compare(schema, orm_db, query):
    """(switch off statements, switch on statements, the context of the switch on), answers checked equal."""
    plain, off, _ = execute(schema, orm_db, query, auto=False)
    auto, on, context = execute(schema, orm_db, query)
    assert '"errors"' not in plain
    assert auto == plain
    return off, on, context


#: query -> statements with the switch on: authors, then one per shape (and per relation below it)
PER_LEVEL = {
    "{ authors { name publishedBooks { title year reviews { rating } } } }": 3,
    "{ authors { topTwo { title year } } }": 2,
    "{ authors { topTen { title } } }": 2,
    "{ authors { secondAndThird { title } } }": 2,
    "{ authors { lastTwo { title year } } }": 2,
    "{ books { lastTag { name } } }": 2,
    "{ authors { reviewed { title } } }": 2,
    "{ authors { not2001 { title } } }": 2,
    "{ authors { byAuthor { title } } }": 2,
    "{ authors { planned { title author { name } } } }": 3,  # + the prefetched tags... of the whole level
    "{ authors { distinctTagged { title } } }": 2,
    "{ authors { publishedBooks { title author { name } } } }": 2,  # the related manager's author: no statement
}


@pytest.mark.parametrize("query", list(PER_LEVEL))
def test_a_returned_relation_queryset_costs_one_statement_per_level(schema, orm_db, library, query):
    shelf(library, orm_db)
    off, on, _ = compare(schema, orm_db, query)
    assert on == PER_LEVEL[query]
    assert off >= 52


def test_prefetch_related_of_a_returned_queryset_runs_once_for_the_level(schema, orm_db, library):
    shelf(library, orm_db)
    query = "{ authors { planned { title } } }"
    off, on, _ = compare(schema, orm_db, query)
    assert on == 3 and off == 1 + 2 * 51 - 1  # the author without books prefetches nothing


def test_many_to_many_both_sides_and_generic_relations(schema, orm_db, library):
    from django.contrib.contenttypes.models import ContentType
    from orm_library.models import Author, Book, Note

    lib = library(orm_db, authors=6, books=3, reviews=2, tags=4)
    for model, rows in ((Author, lib.authors), (Book, lib.books)):
        kind = ContentType.objects.db_manager(orm_db).get_for_model(model)
        Note.objects.using(orm_db).bulk_create(
            [Note(content_type=kind, object_id=row.pk, text=f"note {i} of {row}") for i, row in enumerate(rows)
             for _ in range(i % 3)])
    query = """{ books { title lateTags { name recentBooks { title } } notes { text } }
        authors { notes { text } } }"""
    off, on, _ = compare(schema, orm_db, query)
    assert on == 2 + 1 + 1 + 1 + 1  # books, authors; late tags, their recent books, book notes, author notes
    assert off == 2 + 18 + 28 + 18 + 6  # one per parent without the switch (the 18 books have 28 late tags)


def test_get_queryset_of_the_target_type_still_applies(schema, orm_db, library):
    library(orm_db, authors=5, books=2, reviews=4)
    query = "{ books { title goodReviews { rating body } } }"
    off, on, _ = compare(schema, orm_db, query)
    plain, _, _ = execute(schema, orm_db, query, auto=False)
    assert '"rating": 1,' not in plain and '"rating": 5,' in plain  # Review.get_queryset: rating > 1
    assert (off, on) == (11, 2)


def test_two_shapes_on_one_level_are_two_statements(schema, orm_db, library):
    shelf(library, orm_db)
    off, on, context = compare(schema, orm_db, "{ authors { oddOrEven { year } } }")
    assert on == 3 and off == 52
    off, on, _ = compare(schema, orm_db, "{ authors { topTwo { title } publishedBooks { title } byAuthor { title } } }")
    assert on == 4 and off == 1 + 3 * 51


def test_empty_relations_and_none_parents(schema, orm_db, library):
    shelf(library, orm_db)
    query = "{ authors { name publisher { name authorsNamed1 { name } } publishedBooks { title } } }"
    off, on, _ = compare(schema, orm_db, query)
    auto, _, _ = execute(schema, orm_db, query)
    assert '"publisher": null' in auto and '"publishedBooks": []' in auto
    assert on == 3  # authors with their publishers (joined), the publishers' authors named 1, the books


def test_ordering_ties_answer_as_without_the_switch(schema, orm_db, library):
    shelf(library, orm_db)
    off, on, _ = compare(schema, orm_db, "{ authors { tied { title } } }")
    assert on == 2


def test_one_queryset_object_returned_for_every_parent(schema, orm_db, library):
    shelf(library, orm_db)
    off, on, context = compare(schema, orm_db, "{ authors { name shared { title } } }")
    assert on == off == 2  # without the switch the object's result cache serves the other parents
    assert context.loaders.statistics_by_loader()["Author.shared"].batch_invoke_count == 1


@pytest.mark.parametrize("field", ["titles", "eitherEnd { title }"])
def test_querysets_not_understood_run_as_they_are(schema, orm_db, library, field):
    library(orm_db, authors=5, books=4)
    off, on, _ = compare(schema, orm_db, "{ authors { " + field + " publishedBooks { title } } }")
    assert (off, on) == (1 + 5 + 5, 1 + 5 + 1)  # values_list and union: one statement per parent


def test_each_batched_field_is_named_after_its_type_and_field(schema, orm_db, library):
    library(orm_db, authors=4, books=2)
    _, _, context = execute(schema, orm_db, "{ authors { publishedBooks { title } oddOrEven { title } } }")
    stats = context.loaders.statistics_by_loader()
    assert {"Author.published_books", "Author.odd_or_even", "Author.odd_or_even #2"} <= set(stats)
    assert stats["Author.published_books"].batch_invoke_count == 1


def test_only_an_execution_with_the_switch_batches(schema, orm_db, library):
    library(orm_db, authors=5, books=4)
    query = "{ authors { publishedBooks { title } topTwo { title } } }"
    _, off, context = execute(schema, orm_db, query, auto=False)
    assert off == 1 + 2 * 5 and not context.loaders.keys()
    _, on, context = execute(schema, orm_db, query)
    assert on == 3 and len(context.loaders.keys()) == 2


def test_no_auto_relations_keeps_a_resolvers_queryset_per_parent(orm_db, library):
    import graphene
    from graphene_django import DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    from dataloader_sync import no_auto_relations

    types = Registry()

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title",)
            name = "RqOptBook"
            registry = types

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name",)
            name = "RqOptAuthor"
            registry = types

        kept = no_auto_relations(graphene.List(graphene.NonNull(Book)))
        batched = graphene.List(graphene.NonNull(Book))

        def resolve_kept(author, info):
            return author.books.filter(year__gte=2001)

        def resolve_batched(author, info):
            return author.books.filter(year__gte=2001)

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(Author), required=True)

        def resolve_authors(root, info):
            return models.Author.objects.using(getattr(info.context, "db", "default")).order_by("pk")

    schema = graphene.Schema(query=Query)
    library(orm_db, authors=5, books=3)
    off, on, _ = compare(schema, orm_db, "{ authors { kept { title } batched { title } } }")
    assert (off, on) == (1 + 5 + 5, 1 + 5 + 1)


def test_the_setting_batches_the_views_returned_querysets(schema, library):
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext
    from django.urls import path

    from dataloader_sync.django import GraphQLView

    shelf(library, "default")
    urls = type("urls", (), {"urlpatterns": [path("graphql", GraphQLView.as_view(schema=schema))]})
    query = "{ authors { name publishedBooks { title reviews { rating } } topTwo { title } } }"
    bodies, counts = [], []
    for on in (False, True):
        with override_settings(ROOT_URLCONF=urls, DATALOADER_SYNC_AUTO_RELATIONS=on), \
                CaptureQueriesContext(connection) as queries:
            response = Client().post("/graphql", {"query": query}, content_type="application/json")
        assert response.status_code == 200, response.content
        bodies.append(response.content)
        counts.append(len(queries))
    assert bodies[0] == bodies[1] and b'"errors"' not in bodies[0]
    assert counts == [1 + 51 + 150 + 51, 4]  # authors, published books, their reviews, top two


def test_a_batched_resolver_field_is_named_in_statistics_spans_metrics_and_the_panel(schema, library):
    """``Author.published_books`` (a resolver's queryset) and ``Author.top_two`` (a slice) under their
    readable names in every place a team looks: statistics, OpenTelemetry spans and metrics, and the
    debug-toolbar panel's batches, each batch its one statement."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from dataloader_sync import ChainedInstrumentation
    from dataloader_sync.django._batch_recorder import BatchRecorder
    from dataloader_sync.otel import OpenTelemetryInstrumentation, OpenTelemetryMetrics

    library("default", authors=4, books=3)
    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider, meter_provider = TracerProvider(), MeterProvider(metric_readers=[reader])
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    recorder = BatchRecorder()
    recorder.start()
    try:
        context = Context("default")  # its registry made while the recorder runs, as in a request
        context.loaders = DataLoaderRegistry(instrumentation=ChainedInstrumentation([
            OpenTelemetryInstrumentation(tracer_provider=tracer_provider),
            OpenTelemetryMetrics(meter_provider=meter_provider)]))
        execute(schema, "default", "{ authors { publishedBooks { title } topTwo { title } } }", context=context)
        stats = context.loaders.statistics_by_loader()
        context.loaders.close()
    finally:
        recorder.stop()
    wanted = {"Author.published_books", "Author.top_two"}
    assert wanted <= set(stats) and all(stats[name].batch_invoke_count == 1 for name in wanted)
    spans = {s.attributes["dataloader.name"] for s in exporter.get_finished_spans()
             if s.name.startswith("dataloader.batch")}
    assert wanted <= spans
    data = reader.get_metrics_data()
    measured = {dict(point.attributes).get("dataloader.name")
                for resource in data.resource_metrics for scope in resource.scope_metrics
                for metric in scope.metrics if metric.name == "dataloader.batch.size"
                for point in metric.data.data_points}
    assert wanted <= measured
    batches = {b["loader"]: b for b in recorder.stats()["batches"]}
    assert wanted <= set(batches) and all(len(batches[name]["sql"]) == 1 for name in wanted)
    tracer_provider.shutdown()
    meter_provider.shutdown()
