"""dataloader_sync.django._recorded_querysets: inside an execution with the switch, a reverse foreign key's related
manager's queryset is recorded, not built, and served from the level's rows; anything else it is asked builds
Django's own queryset in its place (REST framework's ``batched_data`` and graphene-django, SQLite and PostgreSQL;
the module reads Django's private queryset state, so this runs on every Django the package supports)."""
from __future__ import annotations

import copy
import importlib.util
import json
import pickle

import pytest

pytest.importorskip("django")
if importlib.util.find_spec("rest_framework") is None:  # importing it needs configured settings
    pytest.skip("djangorestframework is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")


class Builds:
    """Counts the ``Query.add_q`` calls Django makes (what building a filter costs) while it is entered."""

    def __enter__(self):
        from django.db.models.sql.query import Query

        self.count = 0
        self.original = Query.__dict__["add_q"]

        def add_q(query, *args, **kwargs):
            self.count += 1
            return self.original(query, *args, **kwargs)

        Query.add_q = add_q
        return self

    def __exit__(self, *exc):
        from django.db.models.sql.query import Query

        Query.add_q = self.original


def method_serializer(method, name="value"):
    """An author serializer with one ``SerializerMethodField`` computing *method(author)*."""
    from orm_library import models
    from rest_framework import serializers as s

    attrs = {
        name: s.SerializerMethodField(),
        "Meta": type("Meta", (), {"model": models.Author, "fields": ["name", name]}),
        f"get_{name}": lambda self, author: method(author),
    }
    return type("MethodAuthor", (s.ModelSerializer,), attrs)


def both(orm_db, serializer, builds=None):
    """(the data without the switch, its statements, the data with it, its statements); data checked equal.
    *builds*: a ``Builds`` entered around the run with the switch only."""
    import contextlib

    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models

    from dataloader_sync.rest_framework import batched_data

    authors = models.Author.objects.using(orm_db).order_by("id")
    with CaptureQueriesContext(connections[orm_db]) as plain:
        expected = json.dumps(serializer(authors.all(), many=True).data)
    with CaptureQueriesContext(connections[orm_db]) as switched, builds or contextlib.nullcontext():
        got = json.dumps(batched_data(serializer(authors.all(), many=True)))
    assert got == expected
    return expected, len(plain), got, len(switched)


def test_a_method_s_related_queryset_is_recorded_and_served_from_the_level(orm_db, library):
    from django.db.models import QuerySet

    from dataloader_sync.django._recorded_querysets import is_recorded

    seen = []

    def later(author):
        queryset = author.books.exclude(year=2001).order_by("-title")
        titles = [book.title for book in queryset]
        seen.append((isinstance(queryset, QuerySet), is_recorded(queryset)))
        return titles

    library(orm_db, authors=8, books=3)
    both(orm_db, method_serializer(later))  # the steps seen built once (each step is built the first time)
    seen.clear()
    builds = Builds()
    _, plain, data, switched = both(orm_db, method_serializer(later), builds)
    assert (plain, switched) == (1 + 8, 1 + 1)
    assert all(is_queryset for is_queryset, _ in seen)
    # the first parent's queryset is built (and the level loaded), the other parents' are served as recorded
    assert sum(recorded for _, recorded in seen[8:]) == 7
    assert builds.count <= 3  # the first parent's two filters, the level's; not two filters per parent
    assert "book 0.2" in data and "book 0.1" not in data.split("book 0.2")[0]


def test_any_other_access_builds_djangos_queryset_in_its_place(orm_db, library):
    from django.db.models import QuerySet
    from orm_library import models

    library(orm_db, authors=4, books=3)
    expected = {a.pk: str(a.books.filter(year__gte=2001).order_by("-year").query)
                for a in models.Author.objects.using(orm_db).all()}
    kinds = []

    def read(author):
        queryset = author.books.filter(year__gte=2001).order_by("-year")
        sql = str(queryset.query)  # an attribute not recorded: built as Django builds it
        kinds.append(type(queryset))
        assert sql == expected[author.pk]
        return [b.title for b in queryset]

    def count_then_rows(author):
        queryset = author.books.filter(year__gte=2001)
        return [queryset.count(), queryset.db, list(queryset.values_list("title", flat=True))]

    def pickled(author):
        queryset = author.books.order_by("title")
        again = pickle.loads(pickle.dumps(queryset))
        copied = copy.deepcopy(author.books.order_by("-title"))
        return [[b.title for b in again], [b.title for b in copied], repr(author.books.order_by("pk"))[:9]]

    def unknown(author):
        queryset = author.books.order_by("title")
        with pytest.raises(AttributeError):
            queryset.no_such_method()
        assert type(queryset) is QuerySet
        return [b.title for b in queryset]

    for method in (read, count_then_rows, pickled, unknown):
        both(orm_db, method_serializer(method))
    assert kinds and all(kind is QuerySet for kind in kinds)


def test_arguments_that_are_not_plain_values_are_built_as_written(orm_db, library):
    from django.db.models import F, OuterRef, Q, QuerySet, Subquery
    from orm_library import models

    kinds = []

    def subquery(author):
        queryset = author.books.filter(pk__in=models.Book.objects.using(orm_db).filter(year=2001).values("pk"))
        kinds.append(type(queryset))
        return [b.title for b in queryset.order_by("pk")]

    def annotated(author):
        best = models.Review.objects.filter(book=OuterRef("pk")).order_by("-rating").values("rating")[:1]
        queryset = author.books.annotate(best=Subquery(best)).filter(Q(best__gte=1) | Q(year=F("year")))
        return [(b.title, b.best) for b in queryset.order_by("title")]

    def typed(author):  # 2001 and 2001.0 are two keys: each built once, each answered as Django answers it
        return [[b.title for b in author.books.filter(year=2001)],
                [b.title for b in author.books.filter(year=2001.0)],
                [b.title for b in author.books.filter(title__in=("book 0.1", "book 1.1"))],
                [b.title for b in author.books.filter(year__in=frozenset({2000, 2002})).order_by("pk")]]

    def changed_after_the_call(author):  # Django reads a list and a Q at the call: so are they read
        years, either = [2000], Q(year=2000)
        by_list, by_q = author.books.filter(year__in=years), author.books.filter(either)
        kinds.append(type(by_list))
        years.append(2001)
        either.children.append(("year", 2001))
        either.connector = Q.OR
        assert str(by_q.query) == str(models.Book.objects.filter(author=author, year=2000).query)
        return [[b.title for b in by_list], [b.title for b in author.books.filter(Q(year=2000)).order_by("pk")]]

    library(orm_db, authors=4, books=3, reviews=2)
    for method in (subquery, annotated, typed, changed_after_the_call):
        both(orm_db, method_serializer(method))
    assert kinds and all(kind is QuerySet for kind in kinds)


def test_the_same_queryset_for_two_parents_and_a_queryset_evaluated_twice(orm_db, library):
    kept = {}

    def shared(author):  # the first parent's queryset, evaluated again for every parent
        queryset = kept.setdefault("first", author.books.order_by("title"))
        return [b.title for b in queryset]

    def twice(author):
        queryset = author.books.order_by("-year")
        first = list(queryset)
        second = list(queryset)  # its result cache: the same rows
        assert all(a is b for a, b in zip(first, second))
        chained = [b.title for b in queryset.filter(year__gte=2001)]  # a chain of an evaluated one
        again = list(author.books.order_by("-year"))  # a new evaluation: fresh rows, equal
        assert again == first and all(a is not b for a, b in zip(again, first))
        return [[b.title for b in first], chained, [b.author.name for b in again]]

    library(orm_db, authors=5, books=3)
    for method in (shared, twice):
        kept.clear()
        both(orm_db, method_serializer(method))


def test_slices_and_errors_where_django_raises_them(orm_db, library):
    from dataloader_sync.django._recorded_querysets import is_recorded

    recorded = []

    def sliced(author):
        queryset = author.books.order_by("-year", "pk")[:2]
        titles = [b.title for b in queryset]
        recorded.append(is_recorded(queryset))
        with pytest.raises(TypeError):  # Django: "Cannot filter a query once a slice has been taken."
            queryset.filter(year=2000)
        with pytest.raises(ValueError):  # negative indexing: refused at once, as Django refuses it
            author.books.order_by("pk")[-1:]
        return [titles, [b.title for b in author.books.order_by("year")[1:3]]]

    library(orm_db, authors=6, books=4)
    for _ in range(2):
        recorded.clear()
        both(orm_db, method_serializer(sliced))
    assert sum(recorded) >= 5


def test_outside_an_execution_the_manager_gives_djangos_queryset(orm_db, library):
    from django.db.models import QuerySet
    from orm_library import models

    lib = library(orm_db, authors=2, books=2)
    both(orm_db, method_serializer(lambda a: [b.title for b in a.books.filter(year__gte=2001)]))  # watched
    author = models.Author.objects.using(orm_db).get(pk=lib.authors[0].pk)
    queryset = author.books.filter(year__gte=2001)
    assert type(queryset) is QuerySet and type(author.books.all()) is QuerySet


def test_a_resolver_s_returned_queryset_is_recorded_for_the_field_s_level(orm_db, library):
    pytest.importorskip("graphene")
    if importlib.util.find_spec("graphene_django") is None:
        pytest.skip("graphene_django is not installed")
    import graphene
    from django.db import connections
    from django.db.models import Prefetch
    from django.test.utils import CaptureQueriesContext
    from graphene_django import DjangoListField, DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    from dataloader_sync import DataLoaderRegistry
    from dataloader_sync.django._recorded_querysets import is_recorded
    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    types = Registry()
    returned = []

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title", "year")
            name = "RecBook"
            registry = types

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name",)
            name = "RecAuthor"
            registry = types

        later = graphene.List(graphene.NonNull(Book))
        not_2001 = DjangoListField(Book)
        top_two = graphene.List(graphene.NonNull(Book))

        def resolve_later(author, info):
            queryset = author.books.filter(year__gte=2001).order_by("-year")
            returned.append(queryset)
            return queryset

        def resolve_not_2001(author, info):
            return author.books.exclude(year=2001).order_by("pk")

        every = graphene.List(graphene.NonNull(Book))

        def resolve_every(author, info):
            return author.books.all()

        def resolve_top_two(author, info):
            return author.books.order_by("-year", "pk")[:2]

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(Author), required=True)

        prefetched = graphene.List(graphene.NonNull(Author), required=True)

        def resolve_authors(root, info):
            return models.Author.objects.using(orm_db).order_by("pk")

        def resolve_prefetched(root, info):  # the relation prefetched for some: Django's prefetched rows
            authors = models.Author.objects.using(orm_db).order_by("pk")
            return list(authors[:2]) + list(authors[2:4].prefetch_related("books")) + list(authors[4:].prefetch_related(
                Prefetch("books", queryset=models.Book.objects.using(orm_db).filter(year__gte=2002))))

    schema = graphene.Schema(query=Query)
    query = "{ authors { name later { title } not2001 { title } topTwo { title year } } }"
    library(orm_db, authors=6, books=4)

    class Context:
        def __init__(self):
            self.loaders = DataLoaderRegistry()

    def execute(cls):
        with CaptureQueriesContext(connections[orm_db]) as queries:
            result = schema.execute(query, context_value=Context(), execution_context_class=cls)
        return json.dumps(result.formatted), len(queries)

    plain, off = execute(DataLoaderExecutionContext)
    execute(AutoRelationsExecutionContext)  # the steps seen built once
    returned.clear()
    with Builds() as builds:
        switched, on = execute(AutoRelationsExecutionContext)
    assert '"errors"' not in plain and switched == plain
    assert (off, on) == (1 + 3 * 6, 1 + 3)
    assert sum(is_recorded(q) for q in returned) == 5  # the first parent's built, the next ones recorded
    assert builds.count < 6 * 3
    query = "{ authors { every { title } } prefetched { every { title } later { title } } }"
    plain, off = execute(DataLoaderExecutionContext)
    switched, on = execute(AutoRelationsExecutionContext)
    assert '"errors"' not in plain and switched == plain and on <= off


def test_a_served_row_is_the_copy_django_s_copy_makes(orm_db, library):
    """``_inplace._copied`` (the rows served in place: fresh copies, as a new evaluation gives fresh rows) makes
    what ``copy.copy`` makes, without the pickle protocol's calls."""
    from orm_library import models

    from dataloader_sync.django._inplace import _copied

    lib = library(orm_db, authors=2, books=2)
    book = models.Book.objects.using(orm_db).select_related("author").get(pk=lib.authors[0].books.all()[0].pk)

    def parts(row):
        values = dict(row.__dict__)
        state = values.pop("_state").__dict__
        return values, {k: v for k, v in state.items() if k != "fields_cache"}, dict(row._state.fields_cache)

    made, expected = _copied(book), copy.copy(book)
    assert type(made) is type(expected) and parts(made) == parts(expected)
    assert made._state is not book._state and made._state.fields_cache is not book._state.fields_cache
    assert made._state.fields_cache["author"] is book._state.fields_cache["author"]  # (_fresh copies it)
    made.title = "changed"
    assert book.title != "changed"


def test_counts_and_exists_of_recorded_querysets_are_read_from_the_level_s_count(orm_db, library):
    from dataloader_sync.django._recorded_querysets import is_recorded

    recorded = []

    def counted(author):
        every, later, sliced = author.books.all(), author.books.filter(year__gte=2001), author.books.all()[1:]
        answer = [every.count(), later.count(), later.exists(), sliced.count(), author.books.filter(year=1).exists()]
        recorded.append(is_recorded(every))
        listed = author.books.order_by("pk")
        titles = [b.title for b in listed]
        return answer + [listed.count(), titles]  # the count of an evaluated one: its rows, as Django counts

    library(orm_db, authors=6, books=3)
    both(orm_db, method_serializer(counted))
    recorded.clear()
    _, plain, _, switched = both(orm_db, method_serializer(counted))
    assert plain == 1 + 6 * 6 and switched == 1 + 4
    assert sum(recorded) == 5


def test_a_relation_the_root_queryset_prefetched_is_djangos_prefetched_queryset(orm_db, library):
    """Django's prefetch asks the related manager's ``get_queryset`` and keeps it with its rows: what it keeps
    answers as Django's does (its rows, a count of them, a new statement for a filter of it)."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models

    from dataloader_sync.rest_framework import batched_data

    def read(author):
        every = author.books.all()
        return [every.count(), every.exists(), [b.title for b in every], len(author.books.all()),
                author.books.count(), [b.title for b in author.books.filter(year__gte=2001)], str(every.query)[:6]]

    from dataloader_sync.django._manager_querysets import watch

    watch(models.Book._meta.get_field("author"))  # (as a level's load of Author.books has, in another test)
    serializer = method_serializer(read)
    library(orm_db, authors=5, books=3)
    authors = models.Author.objects.using(orm_db).order_by("id").prefetch_related("books")
    with CaptureQueriesContext(connections[orm_db]) as plain:
        expected = json.dumps(serializer(authors.all(), many=True).data)
    for _ in range(2):
        with CaptureQueriesContext(connections[orm_db]) as switched:
            assert json.dumps(batched_data(serializer(authors.all(), many=True))) == expected
        assert len(switched) <= len(plain)


def test_a_prefetch_inside_an_execution_keeps_a_queryset_that_answers_as_djangos(orm_db, library):
    from orm_library import models

    from dataloader_sync.django import _inplace
    from dataloader_sync.django._manager_querysets import watch

    watch(models.Book._meta.get_field("author"))
    library(orm_db, authors=3, books=3)

    def read():
        authors = list(models.Author.objects.using(orm_db).order_by("id").prefetch_related("books"))
        return [(a.books.count(), a.books.exists(), [b.title for b in a.books.all()], str(a.books.all().query),
                 [b.title for b in a.books.filter(year__gte=2001)], len(a.books.all())) for a in authors]

    expected = read()
    end = _inplace.start(Owner())
    try:
        assert read() == expected
    finally:
        end()


class Owner:
    """What an execution context is to ``_inplace.start``: something the state lives on."""


def test_what_django_sets_on_the_queryset_before_building_it_is_kept(library, postgres_server):
    """``get_or_create`` on a related manager's queryset marks it for writing before it reads ``.query``:
    its ``get`` then reads the database the router gives writes, as Django's does (a replica may lag)."""
    from django.db import connections
    from django.test import override_settings
    from django.test.utils import CaptureQueriesContext
    from orm_library import models
    from postgres_server import use_for_django
    from rest_framework import serializers as s

    from dataloader_sync.rest_framework import batched_data

    replica = use_for_django(postgres_server)  # migrated, empty: reads routed there find nothing

    class Router:
        def db_for_read(self, model, **hints):
            return replica

        def db_for_write(self, model, **hints):
            return "default"

    class Found(s.ModelSerializer):
        found = s.SerializerMethodField()

        class Meta:
            model = models.Author
            fields = ["name", "found"]

        def get_found(self, author):
            book, created = author.books.all().get_or_create(title=author.books_title, defaults={"year": 2000})
            return [book.title, created]

    library("default", authors=4, books=2)
    authors = list(models.Author.objects.using("default").order_by("id"))
    for author in authors:
        author.books_title = f"book {author.name.split()[1]}.0"
    with override_settings(DATABASE_ROUTERS=[Router()]):
        expected = Found(authors, many=True).data
        with CaptureQueriesContext(connections[replica]) as on_replica:
            got = batched_data(Found(authors, many=True))
    assert [row["found"] for row in expected] == [[f"book {a}.0", False] for a in range(4)]
    assert got == expected
    assert not on_replica.captured_queries
    assert models.Book.objects.using("default").count() == 4 * 2
