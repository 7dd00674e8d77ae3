"""dataloader_sync.django._manager_querysets: inside an execution with the switch, a reverse foreign key's related
manager gives every parent the very query Django builds (every attribute of it, its SQL, its rows), its own
condition copied from a template; outside one, and where it does not apply, Django's own path runs (SQLite and
PostgreSQL; the module reads Django's private query structure, so this runs on every Django the package
supports)."""
from __future__ import annotations

import threading

import pytest

pytest.importorskip("django")

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")


class Owner:
    """What an execution context is to ``_inplace.start``: something the state lives on."""


def builders():
    from django.db.models import Count, Q

    return {
        "all": lambda a: a.books.all(),
        "filter order": lambda a: a.books.filter(year__gte=2001).order_by("-year", "pk"),
        "slice": lambda a: a.books.order_by("-year", "pk")[:2],
        "exclude": lambda a: a.books.exclude(year=2001),
        "annotate having": lambda a: a.books.annotate(n=Count("reviews")).filter(n__gte=2).order_by("title"),
        "OR": lambda a: a.books.filter(Q(year=2000) | Q(title__endswith=".1")),
        "join": lambda a: a.books.filter(reviews__rating__gte=2).distinct(),
        "select_related": lambda a: a.books.select_related("author__publisher").order_by("pk"),
        "count": lambda a: a.books.filter(year__gte=2001),
    }


def state(queryset):
    from django.utils.hashable import make_hashable

    # every attribute, whatever the order they were set in (make_hashable sorts); base_table: a cached property
    # Query.clone() drops, computed alike when read; an attribute set to its class's default (a cache
    # Query.clone() resets to None) reads as the default does
    query = queryset.query
    missing = object()
    return make_hashable({name: value for name, value in query.__dict__.items()
                          if name != "base_table" and getattr(type(query), name, missing) is not value})


def test_every_parent_gets_djangos_query_and_rows(orm_db, library):
    from orm_library.models import Book

    from dataloader_sync.django import _inplace
    from dataloader_sync.django._manager_querysets import watch

    lib = library(orm_db, authors=5, books=3, reviews=2, tags=3)
    watch(Book._meta.get_field("author"))
    authors = lib.authors
    for name, build in builders().items():
        expected = [(state(build(a)), str(build(a).query), [b.pk for b in build(a)]) for a in authors]
        owner = Owner()
        end = _inplace.start(owner)
        try:
            built = [build(a) for a in authors]
            templated = [q for q in built if q._deferred_filter is None]  # "all": the manager's filter copied
            got = [(state(q), str(q.query), [b.pk for b in q.all()]) for q in built]
        finally:
            end()
        assert got == expected, name
        if name == "all":  # the manager's own queryset as it is: all but the first parent's from the template
            assert len(templated) >= len(authors) - 1


def test_it_is_inert_outside_an_execution_and_on_another_thread(orm_db, library):
    from orm_library.models import Book

    from dataloader_sync.django import _inplace
    from dataloader_sync.django._manager_querysets import watch

    lib = library(orm_db, authors=3, books=2, reviews=1, tags=2)
    watch(Book._meta.get_field("author"))
    a, b = lib.authors[:2]
    # the related manager's own queryset (``all()`` returns it as it is): Django defers its filter to the
    # first read of ``.query``; the template applies it at once
    a.books.all().query  # noqa: B018  (a structure seen)
    assert b.books.all()._deferred_filter is not None  # outside an execution: Django's own
    owner = Owner()
    end = _inplace.start(owner)
    try:
        a.books.all().query  # noqa: B018
        found = {}
        worker = threading.Thread(target=lambda: found.setdefault("q", b.books.all()))
        worker.start()
        worker.join(timeout=30)
        assert found["q"]._deferred_filter is not None  # another thread: Django's own path
        assert b.books.all()._deferred_filter is None  # the execution's thread: the template
    finally:
        end()
    assert b.books.all()._deferred_filter is not None  # after the execution: Django's own


def test_a_parent_without_a_key_and_a_filter_of_the_users_run_as_django_runs_them(orm_db, library):
    from orm_library.models import Author, Book

    from dataloader_sync.django import _inplace
    from dataloader_sync.django._manager_querysets import watch

    lib = library(orm_db, authors=3, books=2, reviews=1, tags=2)
    watch(Book._meta.get_field("author"))
    owner = Owner()
    end = _inplace.start(owner)
    try:
        for a in lib.authors:
            a.books.all().query  # noqa: B018
        with pytest.raises(ValueError):  # Django's own refusal of an unsaved instance, unchanged
            list(Author(name="unsaved").books.all())
        a = lib.authors[0]
        users = Book.objects.using(orm_db).filter(author=a)  # not a related manager's: Django's path
        assert users._deferred_filter is None and str(users.query) == str(Book.objects.filter(author=a).query)
    finally:
        end()
