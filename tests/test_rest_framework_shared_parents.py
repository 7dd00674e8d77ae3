"""A nested serializer's level whose instances share a key (every book's ``author``, the books all one
author's, as a user's page of pins in tools/outside_check_rest.py): a manager's queryset naming the parent
by its key (``AuthorProfile.objects.filter(author=obj).first()``, on the instance's database) or a related
manager's (``author.books.count()``) answered for the level in one statement, as when the keys differ.
SQLite and PostgreSQL.

Found by the Pinry port (a user's pins: every pin's ``submitter`` the same user, ``Token.objects.filter(
user=user).first()`` in ``UserSerializer.get_token``, 30 statements for a page of 30, when the level was
counted by its distinct keys).  A level of one instance runs its statement as written; a to-one relation
read in place (``book.author`` in a method) whose instances share one target costs one statement, each
instance given its own copy."""
from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("django")
if importlib.util.find_spec("rest_framework") is None:  # importing it needs configured settings
    pytest.skip("djangorestframework is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")


def book_serializer(form):
    from orm_library import models
    from rest_framework import serializers as s

    class AuthorWithBio(s.ModelSerializer):
        bio = s.SerializerMethodField()

        class Meta:
            model = models.Author
            fields = ["id", "name", "bio"]

        def get_bio(self, author):
            if form == "related manager":
                return author.books.count()
            profile = models.AuthorProfile.objects.using(author._state.db).filter(author=author).first()
            return profile.bio if profile is not None else None

    class BookWithAuthor(s.ModelSerializer):
        author = AuthorWithBio(read_only=True)

        class Meta:
            model = models.Book
            fields = ["id", "title", "author"]

    return BookWithAuthor


def both(orm_db, queryset, form):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.rest_framework import batched_data

    serializer = book_serializer(form)
    with CaptureQueriesContext(connections[orm_db]) as plain_queries:
        plain = json.dumps(serializer(queryset.all(), many=True).data)
    with CaptureQueriesContext(connections[orm_db]) as batched_queries:
        batched = json.dumps(batched_data(serializer(queryset.all(), many=True)))
    return plain, len(plain_queries), batched, len(batched_queries)


FORMS = pytest.mark.parametrize("form", ["manager", "related manager"])


@FORMS
def test_parents_with_distinct_keys_cost_one_statement(orm_db, library, form):
    from orm_library import models

    library(orm_db, authors=6, books=1, reviews=0, tags=0)
    plain, plain_count, batched, batched_count = both(
        orm_db, models.Book.objects.using(orm_db).select_related("author").order_by("id"), form)
    assert batched == plain
    assert (plain_count, batched_count) == (7, 2)   # books; every author's profile (or books)


@FORMS
def test_parents_sharing_a_key_cost_one_statement(orm_db, library, form):
    from orm_library import models

    made = library(orm_db, authors=2, books=6, reviews=0, tags=0)
    books = models.Book.objects.using(orm_db).select_related("author").filter(author=made.authors[0]).order_by("id")
    plain, plain_count, batched, batched_count = both(orm_db, books, form)
    assert batched == plain
    assert (plain_count, batched_count) == (7, 2)   # books; the author's profile (or books), once


@FORMS
def test_a_level_of_one_instance_runs_its_statement_as_written(orm_db, library, form):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models

    from dataloader_sync.rest_framework import batched_data

    library(orm_db, authors=2, books=3, reviews=0, tags=0)
    book = models.Book.objects.using(orm_db).select_related("author").order_by("id")[0]
    serializer = book_serializer(form)
    with CaptureQueriesContext(connections[orm_db]) as plain_queries:
        plain = serializer(book).data
    with CaptureQueriesContext(connections[orm_db]) as batched_queries:
        batched = batched_data(serializer(book))
    assert batched == plain
    assert [q["sql"] for q in batched_queries] == [q["sql"] for q in plain_queries]  # the very statement
    assert len(plain_queries) == 1


def test_a_to_one_target_shared_by_the_level_is_one_statement_and_a_copy_each(orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models
    from rest_framework import serializers as s

    from dataloader_sync.rest_framework import batched_data

    seen = []

    class BookWithAuthorName(s.ModelSerializer):
        author_name = s.SerializerMethodField()

        class Meta:
            model = models.Book
            fields = ["id", "author_name"]

        def get_author_name(self, book):
            seen.append(book.author)   # not held: the to-one read in place
            return book.author.name

    made = library(orm_db, authors=2, books=6, reviews=0, tags=0)
    books = models.Book.objects.using(orm_db).filter(author=made.authors[0]).order_by("id")
    plain = BookWithAuthorName(books.all(), many=True).data
    seen.clear()
    with CaptureQueriesContext(connections[orm_db]) as queries:
        batched = batched_data(BookWithAuthorName(books.all(), many=True))
    assert batched == plain
    assert len(queries) == 2   # the books; their one author, once
    assert len(seen) == 6 and len({id(author) for author in seen}) == 6   # each book its own instance
    assert {author.pk for author in seen} == {made.authors[0].pk}
