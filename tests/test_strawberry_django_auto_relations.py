"""dataloader_sync.strawberry_django.AutoRelationsExtension: strawberry-django types with no relation resolver,
one statement per relation per level, the same response as without the extension, with DjangoOptimizerExtension
on and off, on SQLite and PostgreSQL.  strawberry-django needs graphql-core 3.3: these tests run in
``.ci/strawberry-django`` and skip in the main environment.

No ``from __future__ import annotations``: the types are made inside a function and strawberry resolves their
annotations from the real objects.
"""
from typing import Optional

import pytest

pytest.importorskip("django")
pytest.importorskip("strawberry_django", reason="strawberry-django needs graphql-core 3.3: .ci/strawberry-django")

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")


def _root_statements() -> int:
    """QUERY's statements with the switch alone: the root's queryset has its to-one hops joined in, but on
    strawberry-django < 0.92, which evaluates a list field's queryset itself before the switch sees it."""
    from importlib.metadata import version

    fetched = tuple(int(part) for part in version("strawberry-graphql-django").split(".")[:2]) < (0, 92)
    return 6 if fetched else 4


def make_schema(auto: bool, optimizer: bool, opt_out: bool = False, context_class=None):
    """With *auto*, the extension alone (no ``execution_context_class`` unless *context_class*)."""
    import strawberry
    import strawberry_django
    from orm_library import models
    from strawberry_django.optimizer import DjangoOptimizerExtension

    from dataloader_sync import no_auto_relations
    from dataloader_sync.strawberry_django import AutoRelationsExtension

    @strawberry_django.filter_type(models.Book, lookups=True)
    class BookFilter:
        title: strawberry.auto
        year: strawberry.auto

    @strawberry_django.order_type(models.Book)
    class BookOrder:
        title: strawberry.auto

    @strawberry_django.type(models.Tag)
    class TagType:
        name: strawberry.auto

    @strawberry_django.type(models.Publisher)
    class PublisherType:
        name: strawberry.auto

    @strawberry_django.type(models.Review)
    class ReviewType:
        rating: strawberry.auto

        @classmethod
        def get_queryset(cls, queryset, info, **kwargs):
            return queryset.filter(rating__gt=1)

    @strawberry_django.type(models.AuthorProfile)
    class ProfileType:
        bio: strawberry.auto

    @strawberry_django.type(models.Author)
    class AuthorName:
        name: strawberry.auto
        publisher: Optional[PublisherType]

    @strawberry_django.type(models.Book)
    class BookType:
        title: strawberry.auto
        year: strawberry.auto
        author: AuthorName
        tags: list[TagType] = (no_auto_relations(strawberry_django.field()) if opt_out
                               else strawberry_django.field())
        reviews: list[ReviewType]

    @strawberry_django.type(models.Author)
    class AuthorType:
        name: strawberry.auto
        publisher: Optional[PublisherType]
        profile: Optional[ProfileType]
        books: list[BookType] = strawberry_django.field(filters=BookFilter, ordering=BookOrder)

    @strawberry.type
    class Query:
        @strawberry_django.field
        def authors(self, info: strawberry.Info) -> list[AuthorType]:
            return models.Author.objects.using(info.context.alias).order_by("id")

        @strawberry_django.field
        def author_list(self, info: strawberry.Info) -> list[AuthorType]:  # a list: nothing to optimize
            return list(models.Author.objects.using(info.context.alias).order_by("id"))

    extensions = ([DjangoOptimizerExtension] if optimizer else []) + ([AutoRelationsExtension] if auto else [])
    return strawberry.Schema(query=Query, extensions=extensions, execution_context_class=context_class)


class Context:
    def __init__(self, alias: str) -> None:
        from dataloader_sync import DataLoaderRegistry

        self.loaders = DataLoaderRegistry()
        self.alias = alias


def run(schema, alias, query):
    import json

    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    context = Context(alias)
    with CaptureQueriesContext(connections[alias]) as queries:
        result = schema.execute_sync(query, context_value=context)
    context.loaders.close()
    return json.dumps({"data": result.data, "errors": [str(e) for e in result.errors or ()]}), len(queries), \
        context.loaders


QUERY = """{ authors { name publisher { name } profile { bio } books { title tags { name } reviews { rating } } } }"""
FILTERED = """{ authors { name books(filters: {year: {gte: 2001}}, ordering: [{title: DESC}]) {
    title tags { name } } } }"""


@pytest.mark.parametrize("optimizer", [False, True], ids=["optimizer off", "optimizer on"])
@pytest.mark.parametrize("query", [QUERY, FILTERED], ids=["plain", "filtered and ordered"])
def test_relation_fields_without_resolvers_are_batched(orm_db, library, optimizer, query):
    library(orm_db, authors=6, books=3, reviews=2)
    auto, statements, registry = run(make_schema(True, optimizer), orm_db, query)
    plain, plain_statements, _ = run(make_schema(False, optimizer), orm_db, query)
    assert auto == plain and '"errors": []' in auto
    if not optimizer:  # one statement per relation per level; the root's to-one hops joined into its statement
        assert statements == (_root_statements() if query is QUERY else 3) < plain_statements
        assert "Author.books" in "".join(registry.keys())
    else:  # the optimizer prefetches them all: used as they are
        assert statements == plain_statements


def test_under_a_resolver_the_optimizer_cannot_see_into_relations_are_batched(orm_db, library):
    library(orm_db, authors=6, books=3, reviews=2)
    query = "{ authorList { books { title tags { name } reviews { rating } } } }"
    auto, statements, _ = run(make_schema(True, True), orm_db, query)
    plain, plain_statements, _ = run(make_schema(False, True), orm_db, query)
    assert auto == plain
    # the root resolver returns a list (no queryset to optimize): books, tags, reviews in one statement each
    assert statements == 4 < plain_statements


def test_to_one_hops_the_selection_reads_are_joined_into_the_batch(orm_db, library):
    library(orm_db, authors=6, books=2)
    query = "{ authorList { books { title author { name publisher { name } } } } }"
    auto, statements, registry = run(make_schema(True, False), orm_db, query)
    plain, plain_statements, _ = run(make_schema(False, False), orm_db, query)
    assert auto == plain and '"errors": []' in auto
    assert statements == 2 < plain_statements  # the authors; the books with their author and its publisher
    [name] = registry.keys()  # strawberry-django orders an unordered list by pk: the queryset says so
    assert name.startswith("Author.books, queryset=Book ORDER BY") and name.endswith(
        ", select_related=(author, author__publisher)")


def test_no_auto_relations_leaves_a_field_to_strawberry_django(orm_db, library):
    library(orm_db, authors=3, books=2)
    query = "{ authors { books { title tags { name } } } }"
    auto, statements, _ = run(make_schema(True, False, opt_out=True), orm_db, query)
    plain, _, _ = run(make_schema(False, False), orm_db, query)
    assert auto == plain
    assert statements == 2 + 6  # authors, books, then each book's tags


TYPENAMES = """{ __typename authors { ...Author } authorList { ...Author } }
fragment Author on AuthorType { __typename name publisher { __typename name } profile { __typename bio }
    books { __typename title author { __typename name } tags { __typename name } reviews { __typename rating } } }"""
INTROSPECTION = """{ __schema { queryType { name } } __type(name: "AuthorType") { name fields { name } }
    authorList { name books { title __type: __typename } } }"""


@pytest.mark.parametrize("optimizer", [False, True], ids=["optimizer off", "optimizer on"])
@pytest.mark.parametrize("query", [TYPENAMES, INTROSPECTION], ids=["__typename on every object", "__schema, __type"])
def test_meta_fields_answer_as_without_the_extension(orm_db, library, optimizer, query):
    # Apollo and Relay clients add __typename to every selection set: four levels of objects here
    library(orm_db, authors=4, books=2, reviews=2)
    auto, statements, _ = run(make_schema(True, optimizer), orm_db, query)
    plain, plain_statements, _ = run(make_schema(False, optimizer), orm_db, query)
    assert auto == plain and '"errors": []' in auto
    assert ('"__typename": "ReviewType"' if query is TYPENAMES else '"queryType": {"name": "Query"}') in auto
    assert statements < plain_statements  # the relations below authorList are still batched


def test_execution_context_class_stays_optional_and_a_subclass_of_ours_is_kept(orm_db, library):
    from dataloader_sync.graphql import DataLoaderExecutionContext

    class Patient(DataLoaderExecutionContext):
        stall_timeout = 60.0

    library(orm_db, authors=4, books=2, reviews=2)
    plain, plain_statements, _ = run(make_schema(False, False), orm_db, QUERY)
    for context_class in (None, DataLoaderExecutionContext, Patient):
        schema = make_schema(True, False, context_class=context_class)
        auto, statements, _ = run(schema, orm_db, QUERY)
        assert auto == plain and '"errors": []' in auto
        assert statements == _root_statements() < plain_statements
        if context_class is not None:
            assert schema.execution_context_class is context_class


def test_a_schema_with_an_execution_context_class_not_ours_fails_naming_the_fix(orm_db, library):
    from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

    class Logging(StrawberryGraphQLCoreExecutionContext):
        pass

    library(orm_db, authors=2)
    schema = make_schema(True, False, context_class=Logging)
    result = schema.execute_sync("{ authors { name } }", context_value=Context(orm_db))
    name = f"{__name__}.test_a_schema_with_an_execution_context_class_not_ours_fails_naming_the_fix.<locals>.Logging"
    assert result.data is None and [e.message for e in result.errors] == [(
        f"AutoRelationsExtension: the schema executes with {name}, which does not wait for loader futures in a"
        " synchronous execution: give strawberry.Schema no execution_context_class (the extension then runs it"
        " with dataloader_sync.graphql.DataLoaderExecutionContext), or a subclass of DataLoaderExecutionContext")]
    assert schema.execution_context_class is Logging


def make_connection_schema(auto: bool, optimizer: bool):
    import strawberry
    import strawberry_django
    from orm_library import models
    from strawberry import relay
    from strawberry_django.optimizer import DjangoOptimizerExtension
    from strawberry_django.relay import DjangoListConnection

    from dataloader_sync.strawberry_django import AutoRelationsExtension

    @strawberry_django.filter_type(models.Book, lookups=True)
    class PagedBookFilter:
        year: strawberry.auto

    @strawberry_django.type(models.Book)
    class PagedBook(relay.Node):
        title: strawberry.auto

    @strawberry_django.type(models.Book)
    class JoinedBook(relay.Node):
        title: strawberry.auto

        @classmethod
        def get_queryset(cls, queryset, info, **kwargs):  # a join (to-one): the counts are a query of their own
            return queryset.filter(author__name__startswith="author")

    @strawberry_django.type(models.Author)
    class PagedAuthor(relay.Node):
        name: strawberry.auto
        books: DjangoListConnection[PagedBook] = strawberry_django.connection(filters=PagedBookFilter)
        joined_books: DjangoListConnection[JoinedBook] = strawberry_django.connection(field_name="books")

    @strawberry.type
    class Query:
        @strawberry_django.field
        def authors(self, info: strawberry.Info) -> list[PagedAuthor]:
            return list(models.Author.objects.using(info.context.alias).order_by("id"))

    extensions = ([DjangoOptimizerExtension] if optimizer else []) + ([AutoRelationsExtension] if auto else [])
    return strawberry.Schema(query=Query, extensions=extensions)


@pytest.mark.parametrize("optimizer", [False, True], ids=["optimizer off", "optimizer on"])
def test_connection_fields_on_relations_page_in_the_batch(orm_db, library, optimizer):
    library(orm_db, authors=6, books=4)
    query = """{ authors { name books(first: 2, filters: {year: {gte: 2001}}) { totalCount
        pageInfo { hasNextPage } edges { node { title } } } } }"""
    auto, statements, registry = run(make_connection_schema(True, optimizer), orm_db, query)
    plain, plain_statements, _ = run(make_connection_schema(False, optimizer), orm_db, query)
    assert auto == plain and '"errors": []' in auto
    assert statements == 2 < plain_statements  # the authors; the pages with their counts (a window)


def test_the_counts_of_a_connection_whose_queryset_joins_a_table_are_read_in_its_page_statement(orm_db, library):
    library(orm_db, authors=6, books=4)
    query = "{ authors { name joinedBooks(first: 2) { totalCount edges { node { title } } } } }"
    auto, statements, registry = run(make_connection_schema(True, False), orm_db, query)
    plain, plain_statements, _ = run(make_connection_schema(False, False), orm_db, query)
    assert auto == plain and '"errors": []' in auto and '"totalCount": 4' in auto
    assert statements == 2 < plain_statements  # the authors; the pages with their counts (each parent's rows
    # counted as its queryset counts them, joined rows and all, as strawberry-django's count() without the switch)


def make_cursor_schema(auto: bool):
    import strawberry
    import strawberry_django
    from orm_library import models
    from strawberry import relay
    from strawberry_django.relay import DjangoCursorConnection

    from dataloader_sync.strawberry_django import AutoRelationsExtension

    @strawberry_django.order_type(models.Book)
    class CursorBookOrder:
        title: strawberry.auto

    @strawberry_django.type(models.Book)
    class CursorBook(relay.Node):
        title: strawberry.auto

    @strawberry_django.type(models.Author)
    class CursorAuthor(relay.Node):
        name: strawberry.auto
        books: DjangoCursorConnection[CursorBook] = strawberry_django.connection(order=CursorBookOrder)

    @strawberry.type
    class Query:
        @strawberry_django.field
        def authors(self, info: strawberry.Info) -> list[CursorAuthor]:
            return list(models.Author.objects.using(info.context.alias).order_by("id"))

    return strawberry.Schema(query=Query, extensions=[AutoRelationsExtension] if auto else [])


def test_a_cursor_connection_is_left_to_strawberry_django(orm_db, library):
    # DjangoCursorConnection pages a queryset (its cursors are the order's values), not a batch's list
    library(orm_db, authors=3, books=3)
    query = "{ authors { name books(first: 2, order: {title: DESC}) { edges { cursor node { title } } } } }"
    auto, statements, _ = run(make_cursor_schema(True), orm_db, query)
    plain, plain_statements, _ = run(make_cursor_schema(False), orm_db, query)
    assert auto == plain and '"errors": []' in auto
    assert statements == plain_statements


def _in_place_schema(auto: bool, optimizer: bool):
    import strawberry
    import strawberry_django
    from django.db.models import Max
    from orm_library import models
    from strawberry_django.optimizer import DjangoOptimizerExtension

    from dataloader_sync.strawberry_django import AutoRelationsExtension

    @strawberry_django.type(models.Book)
    class InPlaceBook:
        title: strawberry.auto
        review_count: int  # a plain @property of the model

    @strawberry_django.type(models.Author)
    class InPlaceAuthor:
        name: strawberry.auto
        book_count: int  # plain @properties of the model
        latest_title: str
        titles_by_year: str  # a strawberry_django.model_property (added to the model by the test)
        books: list[InPlaceBook]

        @strawberry_django.field
        def newest_year(self) -> Optional[int]:
            return self.books.aggregate(Max("year"))["year__max"]

    @strawberry.type
    class Query:
        @strawberry_django.field
        def authors(self, info: strawberry.Info) -> list[InPlaceAuthor]:
            return models.Author.objects.using(info.context.alias).order_by("id")

    extensions = ([DjangoOptimizerExtension] if optimizer else []) + ([AutoRelationsExtension] if auto else [])
    return strawberry.Schema(query=Query, extensions=extensions)


@pytest.fixture
def titles_by_year(monkeypatch):
    """``Author.titles_by_year``: a ``model_property`` that iterates a relation in place."""
    from orm_library.models import Author
    from strawberry_django.descriptors import model_property

    def titles_by_year(self) -> str:
        return ", ".join(book.title for book in self.books.order_by("year", "title"))

    prop = model_property(titles_by_year)
    monkeypatch.setattr(Author, "titles_by_year", prop, raising=False)
    prop.__set_name__(Author, "titles_by_year")


def _lists_fetched() -> bool:
    """strawberry-django < 0.92 evaluates a list field's queryset itself (``qs._fetch_all()``)."""
    from importlib.metadata import version

    return tuple(int(part) for part in version("strawberry-graphql-django").split(".")[:2]) < (0, 92)


@pytest.mark.parametrize("optimizer", [False, True], ids=["plain", "optimizer"])
def test_relations_evaluated_in_place_by_properties_and_resolvers_cost_one_statement_per_level(
        orm_db, library, titles_by_year, optimizer):
    library(orm_db, authors=20, books=3, reviews=2)
    query = "{ authors { name bookCount latestTitle titlesByYear newestYear books { title reviewCount } } }"
    plain, off, _ = run(_in_place_schema(auto=False, optimizer=optimizer), orm_db, query)
    auto, on, _ = run(_in_place_schema(auto=True, optimizer=optimizer), orm_db, query)
    assert auto == plain and '"errors": []' in plain
    # with the optimizer the books are prefetched with the authors (count() reads them: no statement), and each
    # author's books are a list of their own, completed after the previous author's: their reviews' count is
    # one statement per author
    expected = (1 + 1 + 20 * 3 + 60, 1 + 1 + 3 + 20) if optimizer else (1 + 20 * 4 + 20 + 60, 1 + 4 + 1 + 1)
    if optimizer and _lists_fetched():  # before 0.92 strawberry-django fetches each author's books itself,
        # optimized, per parent: the optimizer's statements there are not the level's; fewer than without us
        assert off == expected[0] and on < off
    else:
        assert (off, on) == expected


def _held_to_one_schema(auto: bool):
    """strawberry-django's ``test_pk_inserted_for_root_field_only`` on the orm_library models: a to-one field
    whose target type has filters, beside a method and a property that read the same relation."""
    import strawberry
    import strawberry_django
    from orm_library import models

    from dataloader_sync.strawberry_django import AutoRelationsExtension

    @strawberry_django.filter_type(models.Publisher)
    class PublisherFilter:
        name: str

    @strawberry_django.type(models.Publisher, filters=PublisherFilter)
    class HeldPublisher:
        name: strawberry.auto

    @strawberry_django.type(models.Author)
    class HeldAuthor:
        name: strawberry.auto
        publisher: Optional[HeldPublisher]

        @strawberry_django.field
        def get_publisher(self) -> Optional[HeldPublisher]:  # reads the relation before the field's batch runs
            return self.publisher

        publisher_name: str  # the model's property, reading self.publisher

    @strawberry.type
    class Query:
        author: HeldAuthor = strawberry_django.field()

        @strawberry_django.field
        def authors(self, info: strawberry.Info) -> list[HeldAuthor]:
            return list(models.Author.objects.using(info.context.alias).order_by("id"))

    return strawberry.Schema(query=Query, extensions=[AutoRelationsExtension] if auto else [])


# strawberry_django.field()'s pk root reads Django's default database: SQLite only
@pytest.mark.parametrize("orm_db", ["sqlite"], indirect=True)
def test_a_to_one_read_before_its_batch_is_taken_from_the_instance_with_filters_on_its_type(orm_db, library):
    made = library(orm_db, authors=4, books=1, publishers=2)
    pk = made.authors[0].pk
    one = "{ author(pk: " + str(pk) + ") { name publisher { name } getPublisher { name } publisherName } }"
    many = "{ authors { name publisher { name } getPublisher { name } publisherName } }"
    answers = {}
    for auto in (False, True):
        answers[auto] = [run(_held_to_one_schema(auto), orm_db, query)[:2] for query in (one, many)]
    (plain_one, off_one), (plain_many, off_many) = answers[False]
    (auto_one, on_one), (auto_many, on_many) = answers[True]
    assert auto_one == plain_one and auto_many == plain_many and '"errors": []' in plain_many, plain_many
    assert (off_one, on_one) == (2, 2)  # the author; its publisher, read by the method, then by the field
    # off: the authors; each one's publisher, read by the method (the third author has none).  On: the first
    # author's read loads the level's publishers in place, and the field's batch then has nothing left to load
    assert (off_many, on_many) == (1 + 3, 2)
