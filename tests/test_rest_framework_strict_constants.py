"""The REST framework test mode (``DATALOADER_SYNC_REST_FRAMEWORK_STRICT``) where fields run the same query
with different constants: Pinry's ``Image.standard``, ``.thumbnail`` and ``.square`` properties
(``Thumbnail.objects.get(original=self, size=...)``, see tools/outside_check_rest.py), here an author's
books of two years.  On one object nothing is read row by row; on a list the in-place answers load each
year for the whole level (one statement per year, the second year's batch the first's SQL).  Neither
raises: a statement's runs count as rows when they read other rows (the instance or key the statement
reads, else the instance serialized), and the in-place seam's level loads are not counted.  What reads
row by row still raises: a statement whose runs differ by a row's key (the test mode's test in
tests/test_rest_framework.py), one naming no key run for each instance of a level (django-taggit's
``obj.tags.all()`` in Pinry's pins), at the top or in a nested serializer, and one key read as written
by each instance of a level that shares it; one row read by two serializers (a board's submitter's
token and its cover pin's) does not.
"""
from __future__ import annotations

import importlib.util

import pytest

pytest.importorskip("django")
if importlib.util.find_spec("rest_framework") is None:  # importing it needs configured settings
    pytest.skip("djangorestframework is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")


def years_serializer():
    from orm_library import models
    from rest_framework import serializers as s

    class AuthorYears(s.ModelSerializer):
        first_year = s.SerializerMethodField()
        second_year = s.SerializerMethodField()

        class Meta:
            model = models.Author
            fields = ["id", "first_year", "second_year"]

        def get_first_year(self, author):
            return models.Book.objects.using(author._state.db).filter(author=author, year=2000).count()

        def get_second_year(self, author):
            return models.Book.objects.using(author._state.db).filter(author=author, year=2001).count()

    return AuthorYears


@pytest.mark.parametrize("many", [False, True], ids=["one object", "a list"])
def test_fields_differing_by_a_constant_are_not_read_row_by_row(orm_db, library, many):
    from django.test import override_settings
    from orm_library import models

    from dataloader_sync.rest_framework import batched_data

    made = library(orm_db, authors=4, books=2, reviews=0, tags=0)
    serializer = years_serializer()

    def make():
        if many:   # the in-place answers load each year for the level: two batches, one SQL
            return serializer(models.Author.objects.using(orm_db).order_by("id"), many=True)
        return serializer(made.authors[0])

    expected = make().data
    with override_settings(DATALOADER_SYNC_REST_FRAMEWORK_STRICT=True):
        assert batched_data(make()) == expected


def title_serializers():
    from orm_library import models
    from rest_framework import serializers as s

    class AuthorTitled(s.ModelSerializer):
        titled = s.SerializerMethodField()

        class Meta:
            model = models.Author
            fields = ["id", "titled"]

        def get_titled(self, author):   # names no key: the row is the instance serialized
            return models.Book.objects.using(author._state.db).filter(title__startswith=author.name[:1]).exists()

    class BookWithTitledAuthor(s.ModelSerializer):
        author = AuthorTitled(read_only=True)

        class Meta:
            model = models.Book
            fields = ["id", "author"]

    return AuthorTitled, BookWithTitledAuthor


@pytest.mark.parametrize("where", ["top", "nested"])
def test_a_statement_naming_no_key_run_for_each_instance_raises(orm_db, library, where):
    from django.test import override_settings
    from orm_library import models

    from dataloader_sync.rest_framework import PerRowStatementError, batched_data

    library(orm_db, authors=3, books=1, reviews=0, tags=0)
    top, nested = title_serializers()
    if where == "top":
        serializer = top(models.Author.objects.using(orm_db).order_by("id"), many=True)
        name = "AuthorTitled"
    else:
        serializer = nested(models.Book.objects.using(orm_db).order_by("id"), many=True)
        name = "BookWithTitledAuthor"
    with override_settings(DATALOADER_SYNC_REST_FRAMEWORK_STRICT=True):
        with pytest.raises(PerRowStatementError, match=rf"^{name}\(many=True\) ran .*orm_library_book"):
            batched_data(serializer)
        assert batched_data(top(models.Author.objects.using(orm_db).order_by("id")[0])) is not None  # one: fine
    assert len(batched_data(serializer)) == 3   # the setting off: the serializers' own attributes restored
    assert "to_representation" not in serializer.child.__dict__


def profile_serializers(opted_out):
    from orm_library import models
    from rest_framework import serializers as s

    def profile(author):
        found = models.AuthorProfile.objects.using(author._state.db).filter(author=author).first()
        return found.bio if found is not None else None

    class AuthorWithBio(s.ModelSerializer):
        bio = s.SerializerMethodField()

        class Meta:
            model = models.Author
            fields = ["id", "bio"]
            no_auto_relations = ["bio"] if opted_out else []

        def get_bio(self, author):
            return profile(author)

    class BookWithBios(s.ModelSerializer):
        author = AuthorWithBio(read_only=True)
        author_bio = s.SerializerMethodField()

        class Meta:
            model = models.Book
            fields = ["id", "author", "author_bio"]

        def get_author_bio(self, book):   # the author's profile again, from the book's serializer
            return profile(book.author)

    return BookWithBios


@pytest.mark.parametrize("opted_out", [False, True], ids=["answered", "opted out"])
def test_one_row_read_from_two_serializers_is_not_per_row_but_per_instance_of_a_level_is(orm_db, library,
                                                                                          opted_out):
    from django.test import override_settings
    from orm_library import models

    from dataloader_sync.rest_framework import PerRowStatementError, batched_data

    made = library(orm_db, authors=2, books=3, reviews=0, tags=0)
    serializer = profile_serializers(opted_out)
    one = models.Book.objects.using(orm_db).filter(pk=made.authors[0].books.first().pk).select_related("author")
    shared = models.Book.objects.using(orm_db).filter(author=made.authors[0]).select_related("author")
    with override_settings(DATALOADER_SYNC_REST_FRAMEWORK_STRICT=True):
        assert len(batched_data(serializer(one, many=True))) == 1   # one key, read by two serializers
        if opted_out:   # the level's three authors, one key, each reading it as written
            with pytest.raises(PerRowStatementError, match=r"orm_library_authorprofile"):
                batched_data(serializer(shared.order_by("id"), many=True))
        else:   # the level's read answered for the level at once
            assert len(batched_data(serializer(shared.order_by("id"), many=True))) == 3
