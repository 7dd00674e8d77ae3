"""dataloader_sync.strawberry_django: connections over related loaders, and the optimizer.

strawberry-django needs graphql-core 3.3 (graphene needs < 3.3): these tests
run in their own virtual environment (``.ci/strawberry-django``) and skip in
the main one.  Each relation is a connection twice on the same type: from a
``related_loader`` future (``books``, ``reviews``) and strawberry-django's
own from the relation's queryset (``booksQs``, ``reviewsQs``), the reference;
the tests assert the same pages and the SQL statements the loader side costs,
with strawberry-django's ``DjangoOptimizerExtension`` on and off.

No ``from __future__ import annotations`` here: the types are made inside a
function (the models need Django configured) and strawberry resolves their
annotations from the real objects, not from module-level names.
"""
from collections.abc import Iterable

import pytest

pytest.importorskip("django")
pytest.importorskip("strawberry_django", reason="strawberry-django needs graphql-core 3.3: .ci/strawberry-django")

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")

AUTHORS = 5  # each has BOOKS books, each book REVIEWS reviews and two of TAGS tags
BOOKS = 4
REVIEWS = 3
TAGS = 3


@pytest.fixture
def data(library, orm_db):
    library(orm_db, authors=AUTHORS, books=BOOKS, reviews=REVIEWS, tags=TAGS)
    return orm_db


def make_schema(optimizer: bool):
    import strawberry
    import strawberry_django
    from orm_library.models import Author, Book, Review
    from strawberry import relay
    from strawberry_django.optimizer import DjangoOptimizerExtension
    from strawberry_django.relay import DjangoListConnection

    from dataloader_sync.django import related_loader
    from dataloader_sync.graphql import DataLoaderExecutionContext
    from dataloader_sync.strawberry_django import connection

    @strawberry_django.filter_type(Review, lookups=True)
    class ReviewFilter:
        rating: strawberry.auto

    @strawberry_django.filter_type(Book, lookups=True)
    class BookFilter:
        title: strawberry.auto

    @strawberry_django.order_type(Book)
    class BookOrder:
        title: strawberry.auto

    @strawberry_django.type(Review)
    class ReviewType(relay.Node):
        rating: strawberry.auto

    @strawberry_django.type(Book)
    class BookType(relay.Node):
        title: strawberry.auto

        @connection(DjangoListConnection[ReviewType], filters=ReviewFilter)
        def reviews(self, info: strawberry.Info) -> Iterable[ReviewType]:
            return related_loader(info.context.loaders, Book.reviews).load(self)

        reviews_qs: DjangoListConnection[ReviewType] = strawberry_django.connection(
            field_name="reviews", filters=ReviewFilter)

    @strawberry_django.type(Author)
    class AuthorType(relay.Node):
        name: strawberry.auto

        @connection(DjangoListConnection[BookType], filters=BookFilter, order=BookOrder)
        def books(self, info: strawberry.Info) -> Iterable[BookType]:
            return related_loader(info.context.loaders, Author.books).load(self)

        books_qs: DjangoListConnection[BookType] = strawberry_django.connection(
            field_name="books", filters=BookFilter, order=BookOrder)

    @strawberry.type
    class Query:
        @strawberry_django.field
        def authors(self, info: strawberry.Info) -> list[AuthorType]:
            return Author.objects.using(info.context.alias).order_by("id")

    return strawberry.Schema(query=Query, extensions=[DjangoOptimizerExtension] if optimizer else [],
                             execution_context_class=DataLoaderExecutionContext)


@pytest.fixture(scope="module", params=[False, True], ids=["optimizer off", "optimizer on"])
def schema(request, django_example_project):
    return make_schema(request.param)


class Context:
    def __init__(self, alias: str) -> None:
        from dataloader_sync import DataLoaderRegistry

        self.loaders = DataLoaderRegistry()
        self.alias = alias


def run(schema, alias: str, query: str):
    """(data, SQL statements) of *query*, executed with a fresh registry on database *alias*."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connections[alias]) as queries:
        result = schema.execute_sync(query, context_value=Context(alias))
    assert result.errors is None, result.errors
    return result.data, [q["sql"] for q in queries.captured_queries]


PAGE = "totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor node { title } }"


def books_query(field: str, args: str) -> str:
    arguments = f"({args})" if args else ""
    return "{ authors { name " + f"{field}{arguments} {{ {PAGE} }}" + " } }"


@pytest.mark.parametrize("args", [
    "",
    "first: 2",
    "first: 2, order: {title: DESC}",
    "first: 1, after: \"YXJyYXljb25uZWN0aW9uOjA=\"",  # after offset 0
    "first: 3, filters: {title: {iContains: \".1\"}}",
    "filters: {title: {iContains: \"book 2\"}}",
    "last: 2",
    "last: 1, before: \"YXJyYXljb25uZWN0aW9uOjM=\"",  # before offset 3
    "first: 10",
])
def test_strawberry_django_connection_from_a_related_loader_gives_the_pages_of_a_queryset(data, schema, args):
    loaded, sql = run(schema, data, books_query("books", args))
    expected, _ = run(schema, data, books_query("booksQs", args))
    pages = [author["books"] for author in loaded["authors"]]
    assert pages == [author["booksQs"] for author in expected["authors"]]
    assert len(pages) == AUTHORS
    limited = "last" not in args or "before" in args  # first (or relay_max_results, 100); before
    # authors, the books (and, when limited, their counts in the same statement)
    assert len(sql) == 1 + 1, sql
    assert ("ROW_NUMBER" in sql[1]) == limited, sql[1]  # the page's rows only, in the same statement
    assert ("COUNT(" in sql[1]) == limited, sql[1]  # totalCount: a window over each parent's rows


NESTED = """{ authors { name
  %(books)s(first: 2, order: {title: DESC}) { totalCount pageInfo { hasNextPage } edges { cursor node { title
    %(reviews)s(first: 1, filters: {rating: {gte: 2}}) { totalCount pageInfo { hasNextPage } edges { node { rating } } }
  } } }
} }"""


@pytest.mark.parametrize("authors", [2, 6])
def test_nested_strawberry_django_connections_cost_the_same_queries_whatever_the_number_of_parents(
        library, orm_db, schema, authors):
    library(orm_db, authors=authors, books=BOOKS, reviews=REVIEWS, tags=TAGS)
    loaded, sql = run(schema, orm_db, NESTED % {"books": "books", "reviews": "reviews"})
    expected, _ = run(schema, orm_db, NESTED % {"books": "booksQs", "reviews": "reviewsQs"})
    reference = [author["booksQs"] for author in expected["authors"]]
    for page in reference:
        for edge in page["edges"]:
            edge["node"]["reviews"] = edge["node"].pop("reviewsQs")
    pages = [author["books"] for author in loaded["authors"]]
    assert pages == reference
    assert pages[0]["totalCount"] == BOOKS and pages[0]["edges"][0]["node"]["title"] == "book 0.3"
    assert len(sql) == 3, sql  # authors; books with their counts; reviews with theirs


def make_optimized_schema():
    """Books with their author's name from a loader keyed by ``author_id``, with and without the ``only`` hint."""
    import strawberry
    import strawberry_django
    from orm_library.models import Author, Book
    from strawberry import relay
    from strawberry_django.optimizer import DjangoOptimizerExtension
    from strawberry_django.relay import DjangoListConnection

    from dataloader_sync.django import related_loader
    from dataloader_sync.graphql import DataLoaderExecutionContext

    def load_names(author_ids, alias):
        return {author.id: author.name for author in Author.objects.using(alias).filter(id__in=author_ids)}

    @strawberry_django.type(Book)
    class HintedBook(relay.Node):
        title: strawberry.auto

        @strawberry_django.field(only=["author_id"])
        def author_name(self, info: strawberry.Info) -> str:
            return info.context.loaders.loader_for(load_names, self._state.db).load(self.author_id)

    @strawberry_django.type(Book)
    class UnhintedBook(relay.Node):
        title: strawberry.auto

        @strawberry_django.field
        def author_name(self, info: strawberry.Info) -> str:
            return info.context.loaders.loader_for(load_names, self._state.db).load(self.author_id)

    @strawberry_django.type(Author)
    class NamedAuthor:
        name: strawberry.auto

    @strawberry_django.type(Book)
    class RelatedBook(relay.Node):
        title: strawberry.auto

        @strawberry_django.field
        def author(self, info: strawberry.Info) -> NamedAuthor:  # related_loader fills the deferred key itself
            return related_loader(info.context.loaders, Book.author).load(self)

    @strawberry.type
    class Query:
        @strawberry_django.connection(DjangoListConnection[RelatedBook])
        def related(self, info: strawberry.Info) -> Iterable[RelatedBook]:
            return Book.objects.using(info.context.alias).order_by("id")

        @strawberry_django.connection(DjangoListConnection[HintedBook])
        def hinted(self, info: strawberry.Info) -> Iterable[HintedBook]:
            return Book.objects.using(info.context.alias).order_by("id")

        @strawberry_django.connection(DjangoListConnection[UnhintedBook])
        def unhinted(self, info: strawberry.Info) -> Iterable[UnhintedBook]:
            return Book.objects.using(info.context.alias).order_by("id")

    return strawberry.Schema(query=Query, extensions=[DjangoOptimizerExtension],
                             execution_context_class=DataLoaderExecutionContext)


@pytest.mark.parametrize("authors", [2, 5])
def test_the_optimizer_defers_a_foreign_key_a_loader_reads_unless_the_field_names_it_in_only(library, orm_db,
                                                                                             authors):
    library(orm_db, authors=authors, books=BOOKS, reviews=0, tags=0)
    schema = make_optimized_schema()
    query = "{ %s { edges { node { title authorName } } } }"
    hinted, hinted_sql = run(schema, orm_db, query % "hinted")
    unhinted, unhinted_sql = run(schema, orm_db, query % "unhinted")
    expected = [{"node": {"title": f"book {a}.{b}", "authorName": f"author {a}"}}
                for a in range(authors) for b in range(BOOKS)]
    assert hinted["hinted"]["edges"] == expected and unhinted["unhinted"]["edges"] == expected
    # the books (the optimizer's only(): id, title and the hinted author_id), the names (one batch)
    assert len(hinted_sql) == 2, hinted_sql
    assert '"orm_library_book"."author_id"' in hinted_sql[0]
    # without the hint the optimizer selects id and title only: reading author_id loads it row by row
    assert '"orm_library_book"."author_id"' not in unhinted_sql[0]
    assert len(unhinted_sql) == 2 + authors * BOOKS, unhinted_sql[:4]
    # related_loader(Book.author) matches the authors to the books' keys through the reverse join: the
    # deferred author_id costs no statement
    related, related_sql = run(schema, orm_db, "{ related { edges { node { title author { name } } } } }")
    assert related["related"]["edges"] == [
        {"node": {"title": e["node"]["title"], "author": {"name": e["node"]["authorName"]}}} for e in expected]
    assert len(related_sql) == 2, related_sql  # the books, the authors


def test_a_strawberry_django_field_may_return_a_then_chain(data):
    import strawberry
    import strawberry_django
    from orm_library.models import Author, Book

    from dataloader_sync.graphql import DataLoaderExecutionContext

    def load_names(author_ids, alias):
        return {author.id: author.name for author in Author.objects.using(alias).filter(id__in=author_ids)}

    @strawberry_django.type(Book)
    class ShoutedBook:
        title: strawberry.auto

        @strawberry_django.field
        def author_name(self, info: strawberry.Info) -> str:
            loader = info.context.loaders.loader_for(load_names, self._state.db)
            return loader.load(self.author_id).then(str.upper)

    @strawberry.type
    class Query:
        @strawberry_django.field
        def books(self, info: strawberry.Info) -> list[ShoutedBook]:
            return Book.objects.using(info.context.alias).order_by("id")

    schema = strawberry.Schema(query=Query, execution_context_class=DataLoaderExecutionContext)
    loaded, sql = run(schema, data, "{ books { title authorName } }")
    assert loaded["books"][0] == {"title": "book 0.0", "authorName": "AUTHOR 0"}
    assert len(sql) == 2


def test_strawberry_django_s_own_connection_awaits_a_loader_future_and_pages_the_loaded_rows(data):
    """docs/strawberry-django.rst: the stock connection awaits a resolver's loader future (it is awaitable),
    which the execution completes with the level's batch; its page is cut from the loaded rows, in Python."""
    import strawberry
    import strawberry_django
    from orm_library.models import Author, Book
    from strawberry import relay
    from strawberry_django.relay import DjangoListConnection

    from dataloader_sync.django import related_loader
    from dataloader_sync.graphql import DataLoaderExecutionContext

    @strawberry_django.type(Book)
    class StockBookType(relay.Node):
        title: strawberry.auto

    @strawberry_django.type(Author)
    class StockAuthorType(relay.Node):
        name: strawberry.auto

        @strawberry_django.connection(DjangoListConnection[StockBookType])
        def books(self, info: strawberry.Info) -> Iterable[StockBookType]:
            return related_loader(info.context.loaders, Author.books).load(self)

    @strawberry.type
    class Query:
        @strawberry_django.field
        def authors(self, info: strawberry.Info) -> list[StockAuthorType]:
            return Author.objects.using(info.context.alias).order_by("id")

    schema = strawberry.Schema(query=Query, execution_context_class=DataLoaderExecutionContext)
    result, statements = run(schema, data, "{ authors { books(first: 2) { edges { node { title } } } } }")
    authors = Author.objects.using(data).order_by("id")
    assert result == {"authors": [
        {"books": {"edges": [{"node": {"title": b.title}} for b in a.books.order_by("id")[:2]]}} for a in authors]}
    assert len(statements) == 2  # the authors, and every author's books in one batch
