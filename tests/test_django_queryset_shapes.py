"""dataloader_sync.django._queryset_shapes: which querysets split into a shape and a parent's key, and that the
shape's rows of every parent are that parent's queryset's rows, in its order (SQLite and PostgreSQL; the module
reads Django's private query structure, so this runs on every Django the package supports)."""
from __future__ import annotations

import pytest

pytest.importorskip("django")

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")


def querysets_of(models, db):
    """name -> (parents, fn(parent) -> the queryset a resolver would return)."""
    from django.db.models import Count, Q

    authors = list(models.Author.objects.using(db).order_by("pk"))
    books = list(models.Book.objects.using(db).order_by("pk"))
    tags = list(models.Tag.objects.using(db).order_by("pk"))
    return {
        "reverse fk filter order": (authors, lambda a: a.books.filter(year__gte=2001).order_by("-year")),
        "reverse fk exclude": (authors, lambda a: a.books.exclude(year=2001)),
        "reverse fk annotate having": (authors, lambda a: a.books.annotate(n=Count("reviews")).filter(n__gte=2)),
        "reverse fk OR inside": (authors, lambda a: a.books.filter(Q(year=2000) | Q(title__endswith=".2"))),
        "reverse fk slice": (authors, lambda a: a.books.order_by("-year")[:2]),
        "reverse fk offset slice": (authors, lambda a: a.books.order_by("year")[1:]),
        "filter(author=instance)": (authors, lambda a: models.Book.objects.using(db).filter(author=a)),
        "filter(author_id=...)": (authors, lambda a: models.Book.objects.using(db).filter(author_id=a.pk)),
        "m2m forward": (books, lambda b: b.tags.filter(name__gte="tag 01")),
        "m2m forward annotate": (books, lambda b: b.tags.annotate(n=Count("books")).order_by("-n", "name")),
        "m2m reverse sticky": (tags, lambda t: t.books.filter(year__gte=2001).order_by("title")),
        "m2m reverse distinct": (tags, lambda t: t.books.filter(reviews__rating__gte=2).distinct()),
        "generic relation": (authors, lambda a: a.notes.order_by("text")),
    }


NOT_SHAPED = {
    "values": lambda a: a.books.values("title"),
    "values_list": lambda a: a.books.values_list("title", flat=True),
    "union": lambda a: a.books.filter(year=2000).union(a.books.filter(year=2001)),
    "select_for_update": lambda a: a.books.select_for_update(),
    "none": lambda a: a.books.none(),
    "OR with the parent": lambda a: a.books.model.objects.filter(_q(author=a) | _q(year=2000)),
    "negated parent": lambda a: a.books.model.objects.exclude(author=a),
    "evaluated": lambda a: _evaluated(a.books.all()),
    "no relation condition": lambda a: a.books.model.objects.filter(title=a.name),
}


def _q(**kwargs):
    from django.db.models import Q

    return Q(**kwargs)


def _evaluated(queryset):
    list(queryset)
    return queryset


@pytest.fixture
def notes(orm_db, library):
    from django.contrib.contenttypes.models import ContentType
    from orm_library.models import Author, Note

    lib = library(orm_db, authors=5, books=3, reviews=2, tags=4)
    kind = ContentType.objects.db_manager(orm_db).get_for_model(Author)
    Note.objects.using(orm_db).bulk_create([Note(content_type=kind, object_id=a.pk, text=f"n{i}.{j}")
                                            for i, a in enumerate(lib.authors) for j in range(i % 3)])
    return lib


def test_every_parents_rows_are_its_querysets_rows_in_its_order(orm_db, notes):
    from orm_library import models

    from dataloader_sync.django._queryset_shapes import shape_of

    for name, (parents, make) in querysets_of(models, orm_db).items():
        shapes = [shape_of(make(parent), parent) for parent in parents]
        assert all(s is not None for s in shapes), name
        assert len({s.key for s in shapes}) == 1, name  # one shape for the whole level
        found = shapes[0].load([s.value for s in shapes], [s.known[1] for s in shapes if s.known])
        for parent, shape in zip(parents, shapes):
            expected = [row.pk for row in make(parent)]
            got = [row.pk for row in found.get(shape.value, [])]
            if not make(parent).ordered:  # no order asked for: the batch orders by primary key
                expected.sort()
            assert got == expected, (name, parent)


@pytest.mark.parametrize("name", list(NOT_SHAPED))
def test_querysets_it_does_not_understand_are_left_alone(orm_db, notes, name):
    from orm_library.models import Author

    from dataloader_sync.django._queryset_shapes import shape_of

    author = Author.objects.using(orm_db).order_by("pk")[1]
    queryset = NOT_SHAPED[name](author)
    before = str(queryset.query) if name not in ("none", "evaluated") else None
    assert shape_of(queryset, author) is None
    if before is not None:
        assert str(queryset.query) == before  # not changed


def test_a_parent_of_a_model_without_the_relation_is_left_alone(orm_db, notes):
    from orm_library.models import Book, Tag

    from dataloader_sync.django._queryset_shapes import shape_of

    tag = Tag.objects.using(orm_db).first()
    book = Book.objects.using(orm_db).first()
    assert shape_of(book.reviews.all(), tag) is None  # Tag has no relation to Review


def test_the_related_managers_instance_is_set_on_the_rows(orm_db, notes):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library.models import Author

    from dataloader_sync.django._queryset_shapes import shape_of

    authors = list(Author.objects.using(orm_db).order_by("pk"))
    shapes = [shape_of(a.books.all(), a) for a in authors]
    with CaptureQueriesContext(connections[orm_db]) as queries:
        found = shapes[0].load([s.value for s in shapes], [s.known[1] for s in shapes])
        assert all(book.author is a for a in authors for book in found[a.pk])
    assert len(queries) == 1


def test_the_given_queryset_is_not_changed_and_shapes_differ_by_filter_and_slice(orm_db, notes):
    from orm_library.models import Author

    from dataloader_sync.django._queryset_shapes import shape_of

    author = Author.objects.using(orm_db).first()
    queryset = author.books.filter(year=2001)[:2]
    sql = str(queryset.query)
    shape = shape_of(queryset, author)
    assert str(queryset.query) == sql and queryset.query.high_mark == 2
    assert (shape.low, shape.high, shape.value) == (0, 2, author.pk)
    keys = {shape.key, shape_of(author.books.filter(year=2001), author).key,
            shape_of(author.books.filter(year=2002)[:2], author).key}
    assert len(keys) == 3


def test_the_parents_condition_at_any_place_gives_one_shape_and_each_parent_its_rows(orm_db, notes):
    from orm_library.models import Author, Book

    from dataloader_sync.django._queryset_shapes import shape_of

    authors = list(Author.objects.using(orm_db).order_by("pk"))
    books = Book.objects.using(orm_db)
    makers = (lambda a: books.filter(year__gte=2001).filter(author=a).order_by("pk"),
              lambda a: books.filter(author=a).filter(year__gte=2001).order_by("pk"))
    shapes = [shape_of(make(a), a) for make in makers for a in authors]
    assert len({s.key for s in shapes}) == 1  # the same statement once the parent's condition is taken out
    found = shapes[0].load([a.pk for a in authors])
    for a in authors:
        assert [b.pk for b in found.get(a.pk, [])] == [b.pk for b in makers[0](a)]


def test_shapes_differ_by_fetch_mode(orm_db, notes):
    import django.db.models

    if not hasattr(django.db.models, "FETCH_PEERS"):
        pytest.skip(f"Django {django.get_version()} has no fetch modes (6.1 has)")
    from django.db.models import FETCH_PEERS
    from orm_library.models import Author

    from dataloader_sync.django._queryset_shapes import shape_of

    author = Author.objects.using(orm_db).first()
    plain, peers = shape_of(author.books.all(), author), shape_of(author.books.fetch_mode(FETCH_PEERS), author)
    assert plain.key != peers.key  # a load of one must not serve the other's rows in its mode
    assert peers.queryset._fetch_mode is FETCH_PEERS
