"""A ``SerializerMethodField`` reading a to-one relation in place (``obj.publisher.name``) under
``dataloader_sync.rest_framework``, on every Django (4.2, 5.2, 6.1): one statement for the level
(``dataloader_sync.django._inplace``), the JSON byte for byte REST framework's; ``None`` foreign keys,
instances holding the relation already, a one-to-one, two hops, writes during the serialization, and the
same code outside a batched serialization as before.  SQLite and PostgreSQL."""
from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("django")
if importlib.util.find_spec("rest_framework") is None:  # importing it needs configured settings
    pytest.skip("djangorestframework is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")

AUTHORS = 20
WITH_PUBLISHER = 14  # every third author (a % 3 == 2) has none: 20 - 6


def author_serializer():
    from orm_library import models
    from rest_framework import serializers as s

    class AuthorWithPublisher(s.ModelSerializer):
        publisher_name = s.SerializerMethodField()

        class Meta:
            model = models.Author
            fields = ["id", "name", "publisher_name"]

        def get_publisher_name(self, author):
            return author.publisher.name if author.publisher is not None else None

    return AuthorWithPublisher


def both(orm_db, make):
    """``(plain JSON, its statements, batched JSON, its statements)`` of the serializer *make()* returns."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.rest_framework import batched_data

    with CaptureQueriesContext(connections[orm_db]) as plain_queries:
        plain = json.dumps(make().data)
    with CaptureQueriesContext(connections[orm_db]) as batched_queries:
        batched = json.dumps(batched_data(make()))
    return plain, len(plain_queries), batched, len(batched_queries)


def test_a_method_reading_a_to_one_costs_one_statement_for_the_level(orm_db, library):
    from orm_library import models

    library(orm_db, authors=AUTHORS, books=0, publishers=4)
    serializer = author_serializer()
    authors = models.Author.objects.using(orm_db).order_by("id")
    plain, plain_count, batched, count = both(orm_db, lambda: serializer(authors.all(), many=True))
    assert batched == plain
    assert '"publisher_name": null' in plain and '"publisher_name": "publisher 3"' in plain
    assert plain_count == 1 + WITH_PUBLISHER  # a None foreign key costs Django nothing
    assert count == 1 + 1


def test_one_publisher_for_the_whole_level_is_one_statement(orm_db, library):
    from orm_library import models

    library(orm_db, authors=AUTHORS, books=0, publishers=1)
    serializer = author_serializer()
    authors = models.Author.objects.using(orm_db).order_by("id")
    plain, plain_count, batched, count = both(orm_db, lambda: serializer(authors.all(), many=True))
    assert batched == plain and plain_count == 1 + WITH_PUBLISHER and count == 2


def test_instances_holding_the_relation_are_not_loaded_again(orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models

    from dataloader_sync.rest_framework import batched_data

    made = library(orm_db, authors=AUTHORS, books=0, publishers=AUTHORS)  # author a: publisher a, or none
    serializer = author_serializer()
    ids = [author.pk for author in made.authors]
    authors = models.Author.objects.using(orm_db).order_by("id")

    def mixed():  # the first half with their publisher joined, the second half without
        return list(authors.filter(pk__in=ids[:10]).select_related("publisher")) + \
            list(authors.filter(pk__in=ids[10:]))

    expected = json.dumps(serializer(mixed(), many=True).data)
    rows = mixed()
    held = [row.publisher for row in rows[:10]]
    keys: list = []

    def keys_of(execute, sql, params, many, context):
        if "orm_library_publisher" in sql:
            keys.extend(params)
        return execute(sql, params, many, context)

    with CaptureQueriesContext(connections[orm_db]) as queries, connections[orm_db].execute_wrapper(keys_of):
        assert json.dumps(batched_data(serializer(rows, many=True))) == expected
    assert len(queries) == 1  # the second half's publishers, in one statement
    flat = set()
    for key in keys:
        flat.update(key if isinstance(key, (list, tuple)) else [key])
    second = {a.publisher_id for a in made.authors[10:]} - {None}
    assert flat == second  # none of the first half's
    assert all(row.publisher is publisher for row, publisher in zip(rows, held))  # left as they were


def test_two_hops_and_a_one_to_one(orm_db, library):
    from orm_library import models
    from rest_framework import serializers as s

    class BookWithPublisher(s.ModelSerializer):
        publisher = s.SerializerMethodField()

        class Meta:
            model = models.Book
            fields = ["title", "publisher"]

        def get_publisher(self, book):  # Book.author, then Author.publisher, both read in place
            publisher = book.author.publisher
            return None if publisher is None else publisher.name

    class ProfileWithAuthor(s.ModelSerializer):
        author = s.SerializerMethodField()

        class Meta:
            model = models.AuthorProfile
            fields = ["bio", "author"]

        def get_author(self, profile):  # a forward one-to-one; its reverse cache set as Django sets it
            assert profile.author.profile is profile
            return profile.author.name

    library(orm_db, authors=AUTHORS, books=2, publishers=3)
    books = models.Book.objects.using(orm_db).order_by("id")
    plain, plain_count, batched, count = both(orm_db, lambda: BookWithPublisher(books.all(), many=True))
    assert batched == plain and plain_count == 1 + 2 * AUTHORS + 2 * WITH_PUBLISHER and count == 3
    profiles = models.AuthorProfile.objects.using(orm_db).order_by("id")
    plain, plain_count, batched, count = both(orm_db, lambda: ProfileWithAuthor(profiles.all(), many=True))
    assert batched == plain and plain_count == 1 + AUTHORS // 2 and count == 2


def test_a_write_during_the_serialization_is_seen_as_without_the_switch(orm_db, library):
    from orm_library import models
    from rest_framework import serializers as s

    made = library(orm_db, authors=AUTHORS, books=0, publishers=3)
    renamed = made.publishers[1].pk

    class Renaming(s.ModelSerializer):
        publisher_name = s.SerializerMethodField()

        class Meta:
            model = models.Author
            fields = ["name", "publisher_name"]

        def get_publisher_name(self, author):
            name = author.publisher.name if author.publisher is not None else None
            if author.name == "author 4":  # after the level's load: the later authors read the new name
                models.Publisher.objects.using(orm_db).filter(pk=renamed).update(name="renamed")
            return name

    def reset():
        models.Publisher.objects.using(orm_db).filter(pk=renamed).update(name="publisher 1")

    authors = models.Author.objects.using(orm_db).order_by("id")
    from dataloader_sync.rest_framework import batched_data

    reset()
    plain = json.dumps(Renaming(authors.all(), many=True).data)
    reset()
    batched = json.dumps(batched_data(Renaming(authors.all(), many=True)))
    assert batched == plain
    assert '"publisher_name": "renamed"' in plain and '"name": "author 1", "publisher_name": "publisher 1"' in plain


def test_outside_a_batched_serialization_each_read_is_its_own_statement(orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models

    library(orm_db, authors=AUTHORS, books=0, publishers=3)
    serializer = author_serializer()
    import dataloader_sync.rest_framework  # noqa: F401  (installs the seam)

    with CaptureQueriesContext(connections[orm_db]) as queries:
        data = serializer(models.Author.objects.using(orm_db).order_by("id"), many=True).data
        names = [a.publisher.name for a in models.Author.objects.using(orm_db).order_by("id") if a.publisher_id]
    assert len(data) == AUTHORS and len(names) == WITH_PUBLISHER and len(queries) == (1 + WITH_PUBLISHER) * 2
