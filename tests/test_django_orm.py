"""dataloader_sync.django's ORM loaders (load_related, related_loader, model_loader) on the orm_library app,
each test on SQLite and on PostgreSQL (``orm_db``), asserting the values and the SQL statements run."""
from __future__ import annotations

import math
import sys

import pytest

pytest.importorskip("django")

from orm_fixtures import library, orm_db  # noqa: F401

from dataloader_sync import DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project")


@pytest.fixture
def models():
    from orm_library import models

    return models


def run(orm_db, loader_and_keys):
    """Load every ``(loader, key)`` pair, dispatch once; return the values and the SQL statements run."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    registry = DataLoaderRegistry()
    futures = []
    with CaptureQueriesContext(connections[orm_db]) as queries:
        for make, key in loader_and_keys:
            futures.append(make(registry).load(key))
        registry.dispatch_all()
        values = [f.result(0) for f in futures]
    return values, [q["sql"] for q in queries.captured_queries]


def related(field, **options):
    from dataloader_sync.django import related_loader

    return lambda registry: related_loader(registry, field, **options)


def using(orm_db, manager):
    return manager.using(orm_db)


# -- every relation kind: one statement per batch ---------------------------------------------------


def test_related_loader_forward_foreign_key_gives_the_instance_or_None(orm_db, library, models):
    lib = library(orm_db, authors=4, books=2)
    books = list(using(orm_db, models.Book.objects).order_by("pk"))
    values, sql = run(orm_db, [(related(models.Book.author), b) for b in books])
    assert [a.name for a in values] == ["author 0", "author 0", "author 1", "author 1", "author 2", "author 2",
                                        "author 3", "author 3"]
    assert len(sql) == 1
    authors = list(using(orm_db, models.Author.objects).order_by("pk"))
    values, sql = run(orm_db, [(related(models.Author.publisher), a) for a in authors])
    assert [p and p.name for p in values] == ["publisher 0", "publisher 1", None, "publisher 1"]
    assert len(sql) == 1
    assert values[0]._state.db == orm_db and values[0] == lib.publishers[0]


def test_related_loader_None_foreign_keys_run_no_query(orm_db, library, models):
    library(orm_db, authors=3)
    orphan = using(orm_db, models.Author.objects).get(name="author 2")
    assert orphan.publisher_id is None
    values, sql = run(orm_db, [(related(models.Author.publisher), orphan)])
    assert values == [None] and sql == []


def test_related_loader_forward_foreign_key_to_a_missing_or_filtered_row_is_None(orm_db, library, models):
    library(orm_db, authors=2)
    authors = list(using(orm_db, models.Author.objects).order_by("pk"))
    only_0 = using(orm_db, models.Publisher.objects).filter(name="publisher 0")
    values, sql = run(orm_db, [(related(models.Author.publisher, queryset=only_0), a) for a in authors])
    assert [p and p.name for p in values] == ["publisher 0", None]
    assert len(sql) == 1
    ghost = models.Book(pk=10**9, author_id=10**9, title="ghost")  # a key that matches no row
    ghost._state.db = orm_db  # as if loaded from there (an unsaved instance reads from the router's database)
    values, sql = run(orm_db, [(related(models.Book.author), ghost)])
    assert values == [None] and len(sql) == 1


def test_related_loader_reverse_foreign_key_gives_lists_in_primary_key_order(orm_db, library, models):
    library(orm_db, authors=3, books=3)
    authors = list(using(orm_db, models.Author.objects).order_by("-pk"))
    lonely = using(orm_db, models.Author.objects).create(name="no books")
    values, sql = run(orm_db, [(related(models.Author.books), a) for a in [*authors, lonely]])
    assert [[b.title for b in books] for books in values] == [
        ["book 2.0", "book 2.1", "book 2.2"], ["book 1.0", "book 1.1", "book 1.2"],
        ["book 0.0", "book 0.1", "book 0.2"], []]
    assert len(sql) == 1
    assert "ORDER BY" in sql[0]


def test_related_loader_many_to_many_both_sides(orm_db, library, models):
    library(orm_db, authors=2, books=2, tags=3)
    books = list(using(orm_db, models.Book.objects).order_by("pk"))
    values, sql = run(orm_db, [(related(models.Book.tags), b) for b in books])
    # book a.b has tags (a + b) % 3 and (a + b + 1) % 3, in Tag's Meta.ordering (name)
    assert [[t.name for t in tags] for tags in values] == [
        ["tag 00", "tag 01"], ["tag 01", "tag 02"], ["tag 01", "tag 02"], ["tag 00", "tag 02"]]
    assert len(sql) == 1
    tags = list(using(orm_db, models.Tag.objects).all())
    values, sql = run(orm_db, [(related(models.Tag.books), t) for t in tags])
    assert [[b.title for b in books] for books in values] == [
        ["book 0.0", "book 1.1"], ["book 0.0", "book 0.1", "book 1.0"], ["book 0.1", "book 1.0", "book 1.1"]]
    assert len(sql) == 1


def test_related_loader_one_to_one_both_sides(orm_db, library, models):
    library(orm_db, authors=3)
    authors = list(using(orm_db, models.Author.objects).order_by("pk"))
    values, sql = run(orm_db, [(related(models.Author.profile), a) for a in authors])
    assert [p and p.bio for p in values] == ["bio 0", None, "bio 2"]
    assert len(sql) == 1
    profiles = list(using(orm_db, models.AuthorProfile.objects).order_by("pk"))
    values, sql = run(orm_db, [(related(models.AuthorProfile.author), p) for p in profiles])
    assert [a.name for a in values] == ["author 0", "author 2"]
    assert len(sql) == 1


# -- queryset=, first= ---------------------------------------------------------------------------


def test_related_loader_queryset_filters_orders_and_annotates_the_related_side(orm_db, library, models):
    from django.db.models import Count

    library(orm_db, authors=2, books=3, reviews=2)
    authors = list(using(orm_db, models.Author.objects).order_by("pk"))
    recent = models.Book.objects.filter(year__gte=2001).order_by("-title").annotate(n_reviews=Count("reviews"))
    values, sql = run(orm_db, [(related(models.Author.books, queryset=recent), a) for a in authors])
    assert [[(b.title, b.n_reviews) for b in books] for books in values] == [
        [("book 0.2", 2), ("book 0.1", 2)], [("book 1.2", 2), ("book 1.1", 2)]]
    assert len(sql) == 1


def test_related_loader_first_keeps_each_parents_first_rows_in_one_statement(orm_db, library, models):
    library(orm_db, authors=5, books=4)
    authors = list(using(orm_db, models.Author.objects).order_by("pk"))
    newest = models.Book.objects.order_by("-year")
    values, sql = run(orm_db, [(related(models.Author.books, queryset=newest, first=2), a) for a in authors])
    assert [[b.title for b in books] for books in values] == [[f"book {a}.3", f"book {a}.2"] for a in range(5)]
    assert len(sql) == 1
    assert "ROW_NUMBER" in sql[0].upper()
    books = list(using(orm_db, models.Book.objects).order_by("pk"))
    values, sql = run(orm_db, [(related(models.Book.tags, first=1), b) for b in books])
    assert [[t.name for t in tags] for tags in values] == [
        [f"tag {min((a + b) % 3, (a + b + 1) % 3):02}"] for a in range(5) for b in range(4)]
    assert len(sql) == 1


def test_related_loader_first_costs_one_statement_whatever_the_number_of_parents(orm_db, library, models):
    library(orm_db, authors=40, books=3)
    counts = []
    for n in (1, 10, 40):
        authors = list(using(orm_db, models.Author.objects).order_by("pk")[:n])
        values, sql = run(orm_db, [(related(models.Author.books, first=2), a) for a in authors])
        assert [len(v) for v in values] == [2] * n
        counts.append(len(sql))
    assert counts == [1, 1, 1]


def test_related_loader_first_reads_whole_rows_when_the_order_names_a_joined_column(orm_db, library, models):
    # strawberry-django's own suite orders a type's rows so (Milestone: order_by("project__name", "pk")):
    # the rows of the window's subquery came back one column short (IndexError)
    library(orm_db, authors=3, books=3)
    authors = list(using(orm_db, models.Author.objects).order_by("pk"))
    by_author_name = models.Book.objects.order_by("author__name", "-year")
    values, sql = run(orm_db, [(related(models.Author.books, queryset=by_author_name, first=2), a)
                               for a in authors])
    assert [[(b.title, b.author_id) for b in books] for books in values] == [
        [(f"book {a}.2", author.pk), (f"book {a}.1", author.pk)] for a, author in enumerate(authors)]
    assert len(sql) == 1


def test_related_loader_ties_are_broken_by_primary_key(orm_db, library, models):
    lib = library(orm_db, authors=2, books=4)
    author = lib.authors[0]
    # On PostgreSQL an update of an indexed column writes the row anew, at the
    # end of the table and of the index: without the primary key breaking
    # ties, "book 0.0" would come last (SQLite keeps rows in rowid order).
    moved = using(orm_db, models.Book.objects).filter(title="book 0.0")
    moved.update(author=lib.authors[1])
    moved.update(author=author)
    same = models.Book.objects.order_by("author")  # every row ties
    values, sql = run(orm_db, [(related(models.Author.books, queryset=same, first=3), author)])
    assert [b.title for b in values[0]] == ["book 0.0", "book 0.1", "book 0.2"]
    values, sql = run(orm_db, [(related(models.Author.books, queryset=same), author)])
    assert [b.title for b in values[0]] == ["book 0.0", "book 0.1", "book 0.2", "book 0.3"]
    assert len(sql) == 1


def test_related_loader_equal_querysets_share_one_loader(orm_db, library, models):
    from dataloader_sync.django import load_related, related_loader

    registry = DataLoaderRegistry()
    a = related_loader(registry, models.Author.books, models.Book.objects.filter(year=2001))
    b = related_loader(registry, models.Author.books, queryset=models.Book.objects.filter(year=2001))
    c = registry.loader_for(load_related, models.Author.books, queryset=models.Book.objects.filter(year=2001))
    assert a is b is c
    assert related_loader(registry, models.Author.books, models.Book.objects.filter(year=2002)) is not a
    # an explicit alias is part of the key (using("default") too: it overrides the instances' database)
    assert related_loader(registry, models.Author.books, models.Book.objects.using(orm_db).filter(year=2001)) is not a
    assert related_loader(registry, models.Author.books) is related_loader(registry, models.Author.books, None)
    assert related_loader(registry, models.Author.books, first=1) is not related_loader(registry, models.Author.books)
    assert related_loader(registry, models.Author.books).name == "load_related(Author.books)"
    assert a.name.startswith("load_related(Author.books, queryset=Book WHERE")
    assert len(registry) == 5  # loaders are registered, named apart


def test_related_loader_querysets_that_prefetch_differently_are_two_loaders(orm_db, library, models):
    from django.db.models import Prefetch

    from dataloader_sync.django import related_loader

    library(orm_db, authors=2, books=2, reviews=3)
    authors = list(using(orm_db, models.Author.objects).order_by("pk"))

    def rated(**condition):  # the same SQL; the reviews of one kind prefetched under one to_attr
        reviews = models.Review.objects.filter(**condition)
        return models.Book.objects.prefetch_related(Prefetch("reviews", queryset=reviews, to_attr="picked"))

    registry = DataLoaderRegistry()
    good, poor = related_loader(registry, models.Author.books, rated(rating__gte=3)), \
        related_loader(registry, models.Author.books, rated(rating__lt=3))
    assert good is not poor
    assert related_loader(registry, models.Author.books, rated(rating__gte=3)) is good
    futures = [loader.load(author) for loader in (good, poor) for author in authors]
    registry.dispatch_all()
    ratings = [sorted(r.rating for book in future.result() for r in book.picked) for future in futures]
    assert min(ratings[0] + ratings[1]) >= 3 and max(ratings[2] + ratings[3]) < 3
    registry.close()


def test_related_loader_queryset_that_matches_nothing_runs_no_query(orm_db, library, models):
    library(orm_db, authors=2)
    authors = list(using(orm_db, models.Author.objects).order_by("pk"))
    values, sql = run(orm_db, [(related(models.Author.books, queryset=models.Book.objects.none()), a)
                               for a in authors])
    assert values == [[], []] and sql == []


@pytest.mark.parametrize("args, error, message", [
    (lambda m: (m.Author.name,), TypeError, "field must be a relation descriptor of a model"),
    (lambda m: ("books",), TypeError, "field must be a relation descriptor of a model"),
    (lambda m: (m.Author.books, m.Tag.objects.all()), ValueError, "queryset must be a queryset of Book"),
    (lambda m: (m.Author.books, m.Book.objects.all()[:3]), ValueError, "queryset must not be sliced"),
    (lambda m: (m.Author.books, m.Book.objects.values("id")), ValueError, "queryset must give model instances"),
    (lambda m: (m.Author.books, [1]), TypeError, "queryset must be a QuerySet or None"),
    (lambda m: (m.Author.books, None, 0), ValueError, "first must be >= 1"),
    (lambda m: (m.Author.books, None, "2"), TypeError, "first must be an int or None"),
    (lambda m: (m.Book.author, None, 1), ValueError, "first applies to a to-many relation"),
    (lambda m: (m.Author.books, m.Book.objects.order_by("?")), ValueError, "must not be ordered at random"),
])
def test_related_loader_rejects_bad_arguments_at_once(models, args, error, message):
    from dataloader_sync.django import related_loader

    registry = DataLoaderRegistry()
    with pytest.raises(error, match=message.replace("(", r"\(")):
        related_loader(registry, *args(models))
    assert len(registry) == 0


# -- model_loader -----------------------------------------------------------------------------------


def test_model_loader_loads_by_primary_key_missing_as_None_in_one_statement(orm_db, library, models):
    from dataloader_sync.django import model_loader

    lib = library(orm_db, authors=3)
    pks = [a.pk for a in lib.authors]
    authors = models.Author.objects.using(orm_db)
    values, sql = run(orm_db, [(lambda r: model_loader(r, authors), k) for k in [pks[2], 10**9, pks[0], str(pks[1])]])
    assert [a and a.name for a in values] == ["author 2", None, "author 0", "author 1"]
    assert len(sql) == 1


def test_model_loader_a_value_the_field_refuses_fails_that_key_only(orm_db, library, models):
    from django.core.exceptions import ValidationError

    from dataloader_sync.django import model_loader

    lib = library(orm_db, authors=1)
    registry = DataLoaderRegistry()
    loader = model_loader(registry, models.Author.objects.using(orm_db))
    bad, good = loader.load("not a number"), loader.load(lib.authors[0].pk)
    registry.dispatch_all()
    assert isinstance(bad.exception(0), ValidationError)
    assert good.result(0).name == "author 0"


def test_model_loader_by_another_field_within_a_queryset(orm_db, library, models):
    from dataloader_sync.django import model_loader

    library(orm_db, authors=2, books=3)
    recent = models.Book.objects.using(orm_db).filter(year__gte=2001)
    values, sql = run(orm_db, [(lambda r: model_loader(r, recent, "title"), t)
                               for t in ["book 1.2", "book 0.0", "book 0.1"]])
    assert [b and b.title for b in values] == ["book 1.2", None, "book 0.1"]
    assert len(sql) == 1
    registry = DataLoaderRegistry()
    assert model_loader(registry, recent, "title") is model_loader(registry, models.Book.objects.using(orm_db)
                                                                   .filter(year__gte=2001), "title")
    assert model_loader(registry, models.Book).name == "load_model(Book.pk)"


@pytest.mark.parametrize("args, error, message", [
    (lambda m: ("Author",), TypeError, "model_or_queryset must be a model class or a QuerySet"),
    (lambda m: (m.Author, 1), TypeError, "field must be a str"),
    (lambda m: (m.Book, "tags"), ValueError, "field must name a concrete field of Book"),
    (lambda m: (m.Book.objects.all()[:1],), ValueError, "model_or_queryset must not be sliced"),
    (lambda m: (m.Book.objects.order_by("?"),), ValueError, "must not be ordered at random"),
])
def test_model_loader_rejects_bad_arguments_at_once(models, args, error, message):
    from dataloader_sync.django import model_loader

    with pytest.raises(error, match=message):
        model_loader(DataLoaderRegistry(), *args(models))


# -- big batches ------------------------------------------------------------------------------------

BIG = 70_000


def expected_statements(orm_db, keys):
    """One statement on PostgreSQL (one array parameter); on SQLite, chunks of its bound-parameter limit."""
    from django.db import connections

    connection = connections[orm_db]
    if connection.vendor == "postgresql":
        return 1
    import sqlite3

    connection.ensure_connection()
    limit = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if sys.version_info >= (3, 11) \
        else 32766
    return 1 if keys + 10 <= limit else math.ceil(keys / (limit - 10))


@pytest.mark.slow
def test_model_loader_a_70000_key_batch_works(orm_db, library, models):
    from dataloader_sync.django import model_loader

    lib = library(orm_db, authors=5)
    first_pk = lib.authors[0].pk
    keys = list(range(first_pk, first_pk + BIG))
    authors = models.Author.objects.using(orm_db)  # one queryset object: compiled once for its family key
    values, sql = run(orm_db, [(lambda r: model_loader(r, authors), k) for k in keys])
    assert [a.name for a in values[:5]] == [f"author {i}" for i in range(5)]
    assert values[5:] == [None] * (BIG - 5)
    assert len(sql) == expected_statements(orm_db, BIG)


@pytest.mark.slow
def test_related_loader_a_70000_parent_batch_works(orm_db, library, models):
    lib = library(orm_db, authors=3, books=2)
    first_pk = lib.authors[0].pk
    parents = [models.Author(pk=pk) for pk in range(first_pk, first_pk + BIG)]
    for parent in parents:
        parent._state.db = orm_db
    values, sql = run(orm_db, [(related(models.Author.books, first=1), a) for a in parents])
    assert [[b.title for b in v] for v in values[:4]] == [["book 0.0"], ["book 1.0"], ["book 2.0"], []]
    assert sum(map(len, values)) == 3
    assert len(sql) == expected_statements(orm_db, BIG)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="sqlite3.Connection.setlimit is new in Python 3.11")
def test_related_loader_chunks_by_sqlites_own_limit(library, models, django_example_project):
    import sqlite3

    from django.db import connections

    lib = library("default", authors=3, books=2)
    connection = connections["default"]
    connection.ensure_connection()
    old = connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 1000)
    try:
        first_pk = lib.authors[0].pk
        parents = [models.Author(pk=pk) for pk in range(first_pk, first_pk + 2500)]
        for parent in parents:
            parent._state.db = "default"
        values, sql = run("default", [(related(models.Author.books), a) for a in parents])
    finally:
        connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, old)
    assert [[b.title for b in v] for v in values[:4]] == [["book 0.0", "book 0.1"], ["book 1.0", "book 1.1"],
                                                          ["book 2.0", "book 2.1"], []]
    assert len(sql) == 3  # 2500 keys in chunks of 1000 - 10


def test_related_loader_many_to_many_queryset_filtering_across_the_relation_itself(orm_db, library, models):
    from django.db.models import Count

    library(orm_db, authors=2, books=2, tags=3)  # books tagged "tag 01": 0.0, 0.1, 1.0
    tags = list(using(orm_db, models.Tag.objects).all())
    also_01 = models.Book.objects.filter(tags__name="tag 01").order_by("-title")
    values, sql = run(orm_db, [(related(models.Tag.books, queryset=also_01), t) for t in tags])
    assert [[b.title for b in books] for books in values] == [["book 0.0"], ["book 1.0", "book 0.1", "book 0.0"],
                                                              ["book 1.0", "book 0.1"]]
    assert len(sql) == 1
    with pytest.raises(ValueError, match="cannot be annotated"):
        run(orm_db, [(related(models.Tag.books, queryset=also_01.annotate(n=Count("reviews"))), tags[0])])


def test_related_loader_parents_that_deferred_their_key_cost_no_statement_of_their_own(orm_db, library, models):
    library(orm_db, authors=3, books=2)
    books = list(using(orm_db, models.Book.objects).only("title").order_by("pk"))  # author_id deferred
    values, sql = run(orm_db, [(related(models.Book.author), b) for b in books])
    assert [a.name for a in values] == ["author 0", "author 0", "author 1", "author 1", "author 2", "author 2"]
    assert len(sql) == 1  # the authors matched through the reverse join by the books' primary keys
    assert all(b.author_id == a.pk for b, a in zip(books, values))  # stored, as Django loads a deferred column
    # a queryset that joins a table of its own: the deferred keys first, then the authors
    books = list(using(orm_db, models.Book.objects).only("title").order_by("pk"))
    published = models.Author.objects.filter(publisher__name__startswith="publisher")
    values, sql = run(orm_db, [(related(models.Book.author, queryset=published), b) for b in books])
    assert [a and a.name for a in values] == ["author 0", "author 0", "author 1", "author 1", None, None]
    assert len(sql) == 2
    authors = list(using(orm_db, models.Author.objects).only("name").order_by("pk"))  # the pk is never deferred
    values, sql = run(orm_db, [(related(models.Author.books), a) for a in authors])
    assert [len(v) for v in values] == [2, 2, 2] and len(sql) == 1


def test_related_loader_batches_are_spans_and_statistics_under_readable_names(orm_db, library, models):
    pytest.importorskip("opentelemetry.sdk")
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from dataloader_sync.django import model_loader, related_loader
    from dataloader_sync.otel import OpenTelemetryInstrumentation

    lib = library(orm_db, authors=2, books=2)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        registry = DataLoaderRegistry(instrumentation=OpenTelemetryInstrumentation(tracer_provider=provider))
        with CaptureQueriesContext(connections[orm_db]) as queries:
            books = [related_loader(registry, models.Author.books, first=1).load(a) for a in lib.authors]
            author = model_loader(registry, models.Author.objects.using(orm_db)).load(lib.authors[0].pk)
            registry.dispatch_all()
        assert [[b.title for b in v.result(0)] for v in books] == [["book 0.0"], ["book 1.0"]]
        assert author.result(0).name == "author 0"
        assert len(queries) == 2  # one per batch
        spans = sorted((s.name, dict(s.attributes)["dataloader.batch.size"]) for s in exporter.get_finished_spans())
        assert spans == [(f"dataloader.batch load_model(Author.pk, queryset=Author all using {orm_db})", 1),
                         ("dataloader.batch load_related(Author.books, first=1)", 2)]
        stats = registry.statistics_by_loader()
        assert {name: s.batch_load_count for name, s in stats.items()} == {
            "load_related(Author.books, first=1)": 2, f"load_model(Author.pk, queryset=Author all using {orm_db})": 1}
    finally:
        provider.shutdown()
