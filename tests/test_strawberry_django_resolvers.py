"""dataloader_sync.strawberry_django.AutoRelationsExtension and fields whose value the user's code gives:
resolvers returning relation querysets loaded for the whole level (one statement per query shape per level),
strawberry-django's field hints honoured with the switch alone, and both extensions on never costing more than
the optimizer alone; the same response as without the switch, on SQLite and PostgreSQL.

No ``from __future__ import annotations``: the types are made inside a function and strawberry resolves their
annotations from the real objects.
"""
import json
from typing import Optional

import pytest

pytest.importorskip("django")
pytest.importorskip("strawberry_django", reason="strawberry-django needs graphql-core 3.3: .ci/strawberry-django")

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")


def _lists_fetched() -> bool:
    """strawberry-django < 0.92 evaluates a list field's queryset itself (``qs._fetch_all()``), per parent,
    before any extension sees it: such fields cost what they cost without the switch."""
    from importlib.metadata import version

    return tuple(int(part) for part in version("strawberry-graphql-django").split(".")[:2]) < (0, 92)


LISTS_FETCHED = _lists_fetched()

#: The four ways a schema runs: (switch, optimizer).
OFF, SWITCH, OPTIMIZER, BOTH = (False, False), (True, False), (False, True), (True, True)


def make_schema(auto: bool, optimizer: bool, optimizer_first: bool = True):
    import strawberry
    import strawberry_django
    from django.db.models import Count, Prefetch
    from orm_library import models
    from strawberry_django.optimizer import DjangoOptimizerExtension

    from dataloader_sync.strawberry_django import AutoRelationsExtension

    @strawberry_django.type(models.Tag)
    class TagType:
        name: strawberry.auto

    @strawberry_django.type(models.Review)
    class ReviewType:
        rating: strawberry.auto

    @strawberry_django.type(models.Publisher)
    class PublisherType:
        name: strawberry.auto

    @strawberry_django.type(models.Book)
    class BookType:
        title: strawberry.auto
        year: strawberry.auto
        tags: list[TagType]
        reviews: list[ReviewType]

        @strawberry_django.field(prefetch_related=["reviews"])
        def rating_sum(self) -> int:
            return sum(review.rating for review in self.reviews.all())

        @strawberry_django.field(only=["author__name"])
        def author_name(self) -> str:
            return self.author.name

        @strawberry_django.field
        def author_label(self) -> str:  # reads the book's parent, as a related manager's row knows it
            return self.author.name.upper()

        @strawberry.field
        def label(self) -> str:  # columns the optimizer cannot see are read (its only() leaves them out)
            return f"{self.title} ({self.year})"

        @strawberry_django.field
        def picked(self) -> list[int]:  # the reviews a resolver's queryset prefetched as ``picked``
            return [review.rating for review in getattr(self, "picked", [])]

    @strawberry_django.type(models.Author)
    class AuthorType:
        name: strawberry.auto

        @strawberry.field
        def shout(self) -> str:  # a column the optimizer cannot see
            return self.name.upper()
        publisher: Optional[PublisherType]
        books: list[BookType]
        books_annotated: int = strawberry_django.field(annotate=Count("books"))
        publisher_name: str = strawberry_django.field(select_related=["publisher"])
        year_total: int  # a model_property with prefetch_related=["books"] (the year_total fixture)

        @strawberry_django.field
        def recent_books(self) -> list[BookType]:
            return self.books.filter(year__gte=2001).order_by("-year")

        @strawberry_django.field
        def first_books(self) -> list[BookType]:
            return self.books.order_by("-title")[:2]

        @strawberry.field
        def plain_books(self) -> list[BookType]:
            return self.books.filter(year__lte=2001)

        @strawberry_django.field
        def books_of(self) -> list[BookType]:
            return models.Book.objects.using(self._state.db).filter(author=self).exclude(year=2001).order_by("title")

        @strawberry_django.field
        def latest_book(self) -> Optional[BookType]:  # strawberry-django evaluates it: first()
            return self.books.order_by("-year", "id")

        @strawberry_django.field(prefetch_related=["books"])
        def title_list(self) -> str:
            return ", ".join(book.title for book in self.books.all())

        # what only a hint's Prefetch(to_attr=...) gives: one level of its own beside title_list's "books"
        @strawberry_django.field(prefetch_related=[Prefetch(
            "books", queryset=models.Book.objects.filter(year__lt=2001).order_by("id"), to_attr="old_books")])
        def old_titles(self) -> str:
            return ", ".join(book.title for book in getattr(self, "old_books", ()))

    def rated(author, **condition):  # the author's books, their reviews of one kind prefetched as ``picked``
        reviews = models.Review.objects.filter(**condition).order_by("id")
        return author.books.order_by("id").prefetch_related(Prefetch("reviews", queryset=reviews, to_attr="picked"))

    @strawberry_django.type(models.Author)
    class RatedAuthor:
        @strawberry.field
        def well_rated(self) -> list[BookType]:
            return rated(self, rating__gte=3)

        @strawberry.field
        def poorly_rated(self) -> list[BookType]:
            return rated(self, rating__lt=3)

    @strawberry.type
    class Query:
        @strawberry_django.field
        def rated_authors(self, info: strawberry.Info) -> list[RatedAuthor]:
            return models.Author.objects.using(info.context.alias).order_by("id")

        @strawberry_django.field
        def authors(self, info: strawberry.Info) -> list[AuthorType]:
            return models.Author.objects.using(info.context.alias).order_by("id")

        @strawberry_django.field
        def author_list(self, info: strawberry.Info) -> list[AuthorType]:
            return list(models.Author.objects.using(info.context.alias).order_by("id"))

    extensions = [DjangoOptimizerExtension] if optimizer else []
    if auto:
        extensions = [*extensions, AutoRelationsExtension] if optimizer_first else [AutoRelationsExtension, *extensions]
    return strawberry.Schema(query=Query, extensions=extensions)


@pytest.fixture
def year_total(monkeypatch):
    """``Author.year_total``: a ``strawberry_django.model_property`` that reads ``self.books``, hinted."""
    from orm_library import models
    from strawberry_django.descriptors import model_property

    def year_total(self) -> int:
        return sum(book.year for book in self.books.all())

    prop = model_property(year_total, prefetch_related=["books"])
    prop.__set_name__(models.Author, "year_total")
    monkeypatch.setattr(models.Author, "year_total", prop, raising=False)


class Context:
    def __init__(self, alias: str) -> None:
        from dataloader_sync import DataLoaderRegistry

        self.loaders = DataLoaderRegistry()
        self.alias = alias


def run(schema, alias, query):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    context = Context(alias)
    with CaptureQueriesContext(connections[alias]) as queries:
        result = schema.execute_sync(query, context_value=context)
    context.loaders.close()
    return json.dumps({"data": result.data, "errors": [str(e) for e in result.errors or ()]}), len(queries), \
        sorted(context.loaders.keys())


def measure(alias, query, ways=(OFF, SWITCH, OPTIMIZER, BOTH)):
    """``{way: (response, statements, loader names)}``."""
    return {way: run(make_schema(*way), alias, query) for way in ways}


def assert_statements(found, counts):
    """The statements of the four ways are *counts*; before strawberry-django 0.92 (which fetches a list
    field's queryset itself) at least never more than without the switch, nor than the optimizer alone."""
    statements = tuple(statements for _, statements, _ in found.values())
    if LISTS_FETCHED:
        assert statements[1] <= statements[0] and statements[3] <= statements[2]
    else:
        assert statements == counts


RECENT = "{ authors { name recentBooks { title tags { name } } } }"
FIRST = "{ authorList { name firstBooks { title year reviews { rating } } } }"
PLAIN = "{ authors { plainBooks { title } } }"
BOOKS_OF = "{ authorList { booksOf { title tags { name } } } }"
TWO_SHAPES = "{ authors { recentBooks { title } firstBooks { title } again: recentBooks { year } } }"

# statements: (off, switch, optimizer, both); 6 authors of 3 books, 2 tags and 2 reviews each
RETURNED = [
    (RECENT, (1 + 6 + 12, 3, 1 + 6 * 2, 3)),  # authors; recent books; their tags
    (FIRST, (1 + 6 + 12, 3, 1 + 6 * 2, 3)),  # a slice: one window per parent
    (PLAIN, (1 + 6, 2, 1 + 6, 2)),  # a @strawberry.field
    (BOOKS_OF, (1 + 6 + 12, 3, 1 + 6 * 2, 3)),  # Book.objects.filter(author=self)
    # two shapes, one loader each, and an alias of one reuses its loader, with the optimizer too (the switch
    # loads every column of a resolver's queryset the optimizer would narrow with only(): one shape for both)
    (TWO_SHAPES, (1 + 6 * 3, 3, 1 + 6 * 3, 3)),
]


@pytest.mark.parametrize(("query", "counts"), RETURNED,
                         ids=["filtered", "sliced", "strawberry.field", "filter(author=self)", "two shapes"])
def test_relation_querysets_resolvers_return_are_loaded_for_the_level(orm_db, library, query, counts):
    library(orm_db, authors=6, books=3, reviews=2)
    found = measure(orm_db, query)
    off = found[OFF][0]
    assert '"errors": []' in off and all(response == off for response, _, _ in found.values())
    assert_statements(found, counts)


def test_a_strawberry_field_resolver_is_loaded_for_the_level_on_every_version(orm_db, library):
    # strawberry-django does not evaluate what a plain strawberry field returns (nor, with the switch, does
    # its optimizer): batched before strawberry-django 0.92 too
    library(orm_db, authors=6, books=3)
    found = measure(orm_db, PLAIN)
    assert all(response == found[OFF][0] for response, _, _ in found.values())
    assert [statements for _, statements, _ in found.values()] == [1 + 6, 2, 1 + 6, 2]


def test_the_level_loaders_are_named_after_the_field(orm_db, library):
    library(orm_db, authors=3, books=2)
    _, _, names = run(make_schema(True, False), orm_db, "{ authors { plainBooks { title } } " + TWO_SHAPES[1:])
    # the model and the resolver's name
    assert names == (["Author.plain_books"] if LISTS_FETCHED else
                     ["Author.first_books", "Author.plain_books", "Author.recent_books"])


@pytest.mark.parametrize("optimizer_first", [True, False], ids=["optimizer listed first", "switch listed first"])
def test_the_optimizer_does_not_evaluate_each_parent_queryset_first(orm_db, library, optimizer_first):
    library(orm_db, authors=6, books=3, reviews=2)
    plain, plain_statements, _ = run(make_schema(False, True), orm_db, RECENT)
    both, statements, _ = run(make_schema(True, True, optimizer_first), orm_db, RECENT)
    assert both == plain and '"errors": []' in both
    # before strawberry-django 0.92 it fetches each parent's queryset itself: the in-place seam answers those
    # evaluations for the level, so the count is the same on every version
    assert statements == 3 <= plain_statements


HINTED = "{ authors { name publisherName yearTotal titleList } }"
ANNOTATED = "{ authors { name booksAnnotated } }"
NESTED_HINT = "{ authorList { name books { title ratingSum } } }"
ONLY_HINT = "{ authorList { books { title authorName } } }"


@pytest.mark.usefixtures("year_total")
@pytest.mark.parametrize(("query", "counts"), [
    # select_related, a model_property's and a resolver's prefetch_related on a root's queryset: the authors
    # (their publishers joined), their books
    (HINTED, (1 + 4 + 6 + 6, 2, 2, 2)),
    (NESTED_HINT, (1 + 6 + 18, 3, 1 + 6 * 2, 3)),  # on a relation batch's rows: the authors, books, reviews
    (ONLY_HINT, (1 + 6, 2, 1 + 6, 2)),  # a batch's books know their author, as a related manager's do
], ids=["on a root's queryset", "on a relation batch", "only across a relation"])
def test_field_hints_are_honoured_with_the_switch_alone(orm_db, library, query, counts):
    library(orm_db, authors=6, books=3, reviews=2)
    found = measure(orm_db, query)
    off = found[OFF][0]
    assert '"errors": []' in off and all(response == off for response, _, _ in found.values())
    assert_statements(found, counts)


def test_a_to_attr_hint_and_a_plain_hint_of_one_relation_are_both_honoured_with_the_switch_alone(orm_db, library):
    # Prefetch("books", ..., to_attr="old_books") and "books" fill two attributes: Django takes the pair, and
    # the switch alone answers as the optimizer does (off, old_books is never there: every oldTitles is empty)
    library(orm_db, authors=6, books=3)
    found = measure(orm_db, "{ authors { name titleList oldTitles } }")
    optimized = found[OPTIMIZER][0]
    assert '"errors": []' in optimized and found[OFF][0] != optimized
    assert found[BOTH][0] == optimized
    # strawberry-django < 0.92 evaluates the root's queryset before the switch sees it: as without the switch
    assert found[SWITCH][0] == (found[OFF][0] if LISTS_FETCHED else optimized)
    if not LISTS_FETCHED:
        assert found[SWITCH][1] == found[OPTIMIZER][1] == 3  # the authors, their books, their old books

def test_an_annotate_hint_is_honoured_with_the_switch_alone(orm_db, library):
    # strawberry-django reads booksAnnotated off an annotation only its optimizer makes: off, the field fails;
    # the switch alone answers as the optimizer does
    library(orm_db, authors=6, books=3)
    found = measure(orm_db, ANNOTATED)
    assert "has no attribute 'books_annotated'" in found[OFF][0]
    optimized = found[OPTIMIZER][0]
    assert '"booksAnnotated": 3' in optimized and found[BOTH][0] == optimized
    # strawberry-django < 0.92 evaluates the root's queryset before the switch sees it: as without the switch
    assert found[SWITCH][0] == (found[OFF][0] if LISTS_FETCHED else optimized)
    assert [statements for _, statements, _ in found.values()][1 + LISTS_FETCHED:] == [1, 1, 1][LISTS_FETCHED:]


def test_querysets_that_prefetch_differently_are_two_shapes(orm_db, library):
    # the same SQL, two Prefetch querysets under one to_attr: one loader for both would give one field the
    # other's reviews
    library(orm_db, authors=4, books=2, reviews=3)
    query = "{ ratedAuthors { wellRated { title picked } poorlyRated { title picked } } }"
    found = measure(orm_db, query, ways=(OFF, SWITCH))
    assert found[SWITCH][0] == found[OFF][0] and '"errors": []' in found[OFF][0]
    assert found[SWITCH][1] == 1 + 2 * 2 < found[OFF][1]  # the authors; each field's books and their reviews


# (query, statements: off, switch, optimizer, both); 6 authors of 3 books, 2 tags and 2 reviews each
SHAPES = [
    ("{ authors { name books { title tags { name } reviews { rating } } publisher { name } } }", (47, 4, 4, 4)),
    ("{ authorList { name books { title tags { name } reviews { rating } } publisher { name } } }", (47, 5, 23, 5)),
    ("{ authors { recentBooks { title tags { name } reviews { rating } ratingSum } firstBooks { title } } }",
     (49, 5, 25, 5)),
    ("{ authorList { recentBooks { title tags { name } } books { title ratingSum picked } titleList yearTotal } }",
     (55, 6, 37, 6)),  # a list at the root: the properties reading self.books, answered for the level in place
    ("{ authors { booksOf { title reviews { rating } } plainBooks { title tags { name } } } }", (37, 5, 25, 5)),
    # a to-one resolver's queryset, evaluated by strawberry-django (first()) with the optimizer off: answered
    # for the level in place, and the switch batches the rows' relations across the level
    ("{ authors { latestBook { title reviews { rating } tags { name } ratingSum } } }", (25, 5, 19, 5)),
    # two hints prefetch the books the selection reads too: one prefetch, whose rows get the books' own hints
    ("{ authors { name publisherName yearTotal titleList books { ratingSum reviews { rating } } } }",
     (59, 3, 3, 3)),
]


@pytest.mark.usefixtures("year_total")
@pytest.mark.parametrize(("query", "counts"), SHAPES, ids=[
    "relations", "relations under a list", "returned querysets", "properties under a list", "two kinds of resolver",
    "a to-one resolver", "a hinted prefetch the selection reads"])
def test_with_the_switch_never_more_statements_than_the_optimizer_alone(orm_db, library, query, counts):
    library(orm_db, authors=6, books=3, reviews=2)
    found = measure(orm_db, query)
    off = found[OFF][0]
    assert '"errors": []' in off and all(response == off for response, _, _ in found.values())
    assert_statements(found, counts)
    statements = tuple(statements for _, statements, _ in found.values())
    assert statements[3] <= statements[2]


def test_the_rows_of_a_relation_batch_know_their_parent(orm_db, library):
    # without the switch each author's books come from its related manager, which sets book.author: with
    # it, the batch's rows must know it too, or each read of self.author would cost a statement
    library(orm_db, authors=6, books=3)
    found = measure(orm_db, "{ authorList { books { title authorLabel } } }")
    assert '"errors": []' in found[OFF][0] and all(response == found[OFF][0] for response, _, _ in found.values())
    assert [statements for _, statements, _ in found.values()] == [1 + 6, 2, 1 + 6, 2]


@pytest.mark.parametrize(("query", "counts"), [
    ("{ authors { shout } }", (1, 1, 1 + 6, 1)),  # a root's queryset: its only() would leave the name out
    ("{ authors { name recentBooks { label } } }", (1 + 6, 2, 1 + 6 + 12 * 2, 2)),  # a resolver's queryset
])
def test_with_both_a_column_only_a_resolver_reads_is_not_loaded_row_by_row(orm_db, library, query, counts):
    """The optimizer narrows a queryset to the columns of the fields it sees (``only()``); a resolver
    reading another then loads it per row.  With both on, the queryset the switch loads for the level
    keeps every column (the resolver deferred none): both cost what the switch alone costs."""
    library(orm_db, authors=6, books=3, tags=2, reviews=2)
    found = measure(orm_db, query)
    off = found[OFF][0]
    assert '"errors": []' in off and all(response == off for response, _, _ in found.values())
    assert_statements(found, counts)
