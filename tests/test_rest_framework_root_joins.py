"""dataloader_sync.rest_framework's planned root querysets (``_joins``): an unevaluated root queryset joins the
to-one hops its serializer reads (dotted sources, nested to-one serializers, ``depth``, relational fields), so
they cost no statement of their own; the JSON is byte for byte REST framework's; what cannot be joined safely
(``only()``, ``values()``, a slice in an order that is not total, the view's own choices) is left as it is.
SQLite and PostgreSQL."""
from __future__ import annotations

import importlib.util
import json
import warnings

import pytest

pytest.importorskip("django")
if importlib.util.find_spec("rest_framework") is None:  # importing it needs configured settings
    pytest.skip("djangorestframework is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")


def both(orm_db, make):
    """``(plain JSON, its statements, batched JSON, its statements' SQL)`` of the serializer *make()* returns."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.rest_framework import batched_data

    with CaptureQueriesContext(connections[orm_db]) as plain_queries:
        plain = json.dumps(make().data)
    with CaptureQueriesContext(connections[orm_db]) as batched_queries:
        batched = json.dumps(batched_data(make()))
    assert batched == plain
    return len(plain_queries), [q["sql"] for q in batched_queries]


def serializers():
    from orm_library import models
    from rest_framework import serializers as s

    class ReviewSource(s.ModelSerializer):
        book_title = s.CharField(source="book.title")
        author_name = s.CharField(source="book.author.name")
        publisher_name = s.CharField(source="book.author.publisher.name", default=None)  # None for a third

        class Meta:
            model = models.Review
            fields = ["id", "rating", "book_title", "author_name", "publisher_name"]

    class Publisher(s.ModelSerializer):
        class Meta:
            model = models.Publisher
            fields = ["id", "name"]

    class Profile(s.ModelSerializer):
        class Meta:
            model = models.AuthorProfile
            fields = ["bio"]

    class Author(s.ModelSerializer):
        publisher = Publisher(read_only=True)  # a nullable foreign key: None for every third author
        profile = Profile(read_only=True)  # a reverse one-to-one: missing for odd authors
        publisher_name = s.CharField(source="publisher.name", default=None)

        class Meta:
            model = models.Author
            fields = ["id", "name", "publisher", "profile", "publisher_name"]

    class BookDepth(s.ModelSerializer):
        class Meta:
            model = models.Book
            fields = ["id", "title", "author"]
            depth = 2  # author { publisher }

    class BookFields(s.ModelSerializer):
        author_pk = s.PrimaryKeyRelatedField(source="author", read_only=True)  # the key column: no join
        author_str = s.StringRelatedField(source="author")  # the relation; __str__ runs as written

        class Meta:
            model = models.Book
            fields = ["id", "author_pk", "author_str"]

    class AuthorValues(s.Serializer):
        id = s.IntegerField()
        name = s.CharField()

    return models, ReviewSource, Author, BookDepth, BookFields, AuthorValues


def test_a_dotted_source_path_of_to_one_hops_is_one_statement(orm_db, library):
    models, ReviewSource, *_ = serializers()
    library(orm_db, authors=6, books=2, reviews=2)
    plain, batched = both(orm_db, lambda: ReviewSource(models.Review.objects.using(orm_db).order_by("id"),
                                                       many=True))
    assert plain == 1 + 24 + 24 + 16  # per review: its book, its author; the publisher of 16 of 24
    assert len(batched) == 1  # the reviews, joined to book, book__author and book__author__publisher
    assert batched[0].count("JOIN") == 3 and "LEFT OUTER JOIN" in batched[0]  # the nullable publisher


def test_a_nested_to_one_serializer_a_reverse_one_to_one_and_null_keys_are_joined(orm_db, library):
    models, _, Author, *_ = serializers()
    library(orm_db, authors=6)
    plain, batched = both(orm_db, lambda: Author(models.Author.objects.using(orm_db).order_by("id"), many=True))
    assert plain == 1 + 4 + 6 and len(batched) == 1  # publisher (4 of 6 authors), profile: joined
    data = json.loads(json.dumps(Author(models.Author.objects.using(orm_db).order_by("id"), many=True).data))
    assert [a["publisher"] for a in data].count(None) == 2 and [a["profile"] for a in data].count(None) == 3


def test_depth_two_joins_each_to_one_level(orm_db, library):
    models, _, _, BookDepth, *_ = serializers()
    library(orm_db, authors=4, books=2)
    plain, batched = both(orm_db, lambda: BookDepth(models.Book.objects.using(orm_db).order_by("id"), many=True))
    assert plain == 1 + 8 + 8 * 2 // 3 + 1 and len(batched) == 1  # author, author__publisher joined


def test_a_primary_key_field_joins_nothing_and_a_string_field_only_its_relation(orm_db, library):
    models, *_, BookFields, _ = serializers()
    library(orm_db, authors=3, books=2)
    plain, batched = both(orm_db, lambda: BookFields(models.Book.objects.using(orm_db).order_by("id"), many=True))
    assert plain == 1 + 6 and len(batched) == 1
    assert batched[0].count("JOIN") == 1 and "orm_library_publisher" not in batched[0]  # nor Author.__str__'s reads


def test_the_view_s_own_select_related_is_kept_and_added_to(orm_db, library):
    models, _, Author, *_ = serializers()
    library(orm_db, authors=6)
    root = models.Author.objects.using(orm_db).order_by("id").select_related("publisher")
    plain, batched = both(orm_db, lambda: Author(root.all(), many=True))
    assert plain == 1 + 6 and len(batched) == 1  # the view's publisher join, the profile added to it
    assert root.query.select_related == {"publisher": {}}  # the queryset given is not changed
    # select_related() with no names (the non-null foreign keys: here none): kept as it is, the walk loads
    with warnings.catch_warnings():  # deprecated from Django 6.1, still honoured
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        everything = models.Author.objects.using(orm_db).order_by("id").select_related()
    plain, batched = both(orm_db, lambda: Author(everything.all(), many=True))
    assert plain == 1 + 4 + 6 and len(batched) == 1 + 2


def test_only_defer_and_values_are_left_as_they_are(orm_db, library):
    models, _, Author, *_, AuthorValues = serializers()
    library(orm_db, authors=6)
    authors = models.Author.objects.using(orm_db).order_by("id")
    # a join next to only()/defer() could defer what it traverses (Django raises): no join, the walk's loads
    plain, batched = both(orm_db, lambda: Author(authors.only("id", "name", "publisher"), many=True))
    assert plain == 1 + 4 + 6 and len(batched) == 1 + 2 and "JOIN" not in batched[0]
    plain, batched = both(orm_db, lambda: Author(authors.defer("name"), many=True))
    # the deferred name is read as without the switch (row by row; a level at a time on Django >= 6.1)
    assert "JOIN" not in batched[0] and 1 + 2 <= len(batched) < plain
    plain, batched = both(orm_db, lambda: AuthorValues(authors.values("id", "name"), many=True))
    assert plain == 1 and len(batched) == 1


def test_a_slice_is_joined_only_in_a_total_order(orm_db, library):
    models, _, Author, *_ = serializers()
    library(orm_db, authors=6)
    authors = models.Author.objects.using(orm_db)
    plain, batched = both(orm_db, lambda: Author(authors.order_by("-id")[1:4], many=True))
    assert plain == 1 + 2 + 3 and len(batched) == 1
    # ties of an order that is not total could be broken otherwise by a join: which rows a slice holds
    plain, batched = both(orm_db, lambda: Author(authors.order_by("publisher")[1:4], many=True))
    assert len(batched) == 1 + 2 and "JOIN" not in batched[0]


def test_the_queryset_given_is_evaluated_with_the_rows_serialized(orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.rest_framework import batched_data

    models, _, Author, *_ = serializers()
    library(orm_db, authors=3)
    root = models.Author.objects.using(orm_db).order_by("id")
    data = batched_data(Author(root, many=True))
    with CaptureQueriesContext(connections[orm_db]) as queries:
        assert [author.name for author in root] == [row["name"] for row in data]
        assert [author.publisher_id for author in root] == [(row["publisher"] or {}).get("id") for row in data]
    assert len(queries) == 0 and root.query.select_related is False


def test_a_related_manager_s_rows_know_their_parent_and_are_not_joined_to_it(orm_db, library):
    from rest_framework import serializers as s

    models, *_ = serializers()

    class BookAuthor(s.ModelSerializer):
        author_name = s.CharField(source="author.name")
        publisher_name = s.CharField(source="author.publisher.name", default=None)

        class Meta:
            model = models.Book
            fields = ["title", "author_name", "publisher_name"]

    lib = library(orm_db, authors=2, books=3)
    authors = models.Author.objects.using(orm_db)
    plain, batched = both(orm_db, lambda: BookAuthor(authors.get(pk=lib.authors[0].pk).books.order_by("id"),
                                                     many=True))
    # the author; its books, which know it (the manager's instance, its publisher read once for all of them):
    # nothing to join
    assert plain == 1 + 1 + 1 and len(batched) == 1 + 1 + 1 and "JOIN" not in batched[1]


def test_a_page_cut_in_an_order_that_is_not_total_or_by_a_serializer_needing_rows_is_not_joined(orm_db, library):
    from django.db import connections
    from django.test import override_settings
    from django.test.utils import CaptureQueriesContext
    from rest_framework import generics, pagination
    from rest_framework.test import APIRequestFactory

    from dataloader_sync.rest_framework import AutoRelationsMixin

    models, _, Author, *_ = serializers()

    class Route:
        def db_for_read(self, model, **hints):
            return orm_db

    class Page(pagination.PageNumberPagination):
        page_size = 2

    class ByPublisher(generics.ListAPIView):
        queryset = models.Author.objects.order_by("publisher", "id")
        serializer_class = Author
        pagination_class = Page

    class ByPublisherOnly(ByPublisher):
        queryset = models.Author.objects.order_by("publisher")  # ties: a join may cut another page

    class NeedsRows(Author):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.sized = len(self.instance)  # made without rows, it raises: the page is not planned

    class NeedsRowsView(ByPublisher):
        serializer_class = NeedsRows

    library(orm_db, authors=6)
    factory = APIRequestFactory()
    with override_settings(DATABASE_ROUTERS=[Route()]):
        for view, joined in ((ByPublisher, True), (ByPublisherOnly, False), (NeedsRowsView, False)):
            plain = view.as_view()(factory.get("/?page=2")).render().content
            with CaptureQueriesContext(connections[orm_db]) as queries:
                batched = type("Batched", (AutoRelationsMixin, view), {}).as_view()(
                    factory.get("/?page=2")).render().content
            assert batched == plain
            # the count; the page (joined to publisher and profile, or not); else their loads
            assert len(queries) == (1 + 1 if joined else 1 + 1 + 2), view.__name__
