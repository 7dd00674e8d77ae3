"""dataloader_sync.django's DjangoConnectionField and DjangoFilterConnectionField over related loaders.

Every relation is a connection twice on the same node type: resolved from a
``related_loader`` future (``books``, ``reviews``) and from a plain queryset
(``booksQs``, ``reviewsQs``), the reference.  The tests assert the same
pages and cursors for both, and the SQL statements the loader side costs.
"""
from __future__ import annotations

import importlib.util
from typing import Any

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
pytest.importorskip("django_filters")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

pytestmark = pytest.mark.usefixtures("django_example_project")

AUTHORS = 5  # each has BOOKS books, each book REVIEWS reviews and two of TAGS tags
BOOKS = 4
REVIEWS = 3
TAGS = 3


REVIEW_QUERYSETS: list[Any] = []  # the paths where ReviewNode.get_queryset was called


@pytest.fixture
def data(library, orm_db):
    library(orm_db, authors=AUTHORS, books=BOOKS, reviews=REVIEWS, tags=TAGS)
    return orm_db


# -- the schema ------------------------------------------------------------------------
def make_schema():
    import django_filters
    import graphene
    from graphene import relay
    from graphene_django import DjangoObjectType
    from orm_library.models import Author, Book, Review, Tag

    from dataloader_sync.django import DjangoConnectionField, DjangoFilterConnectionField, related_loader

    class CountedConnection(graphene.Connection):
        class Meta:
            abstract = True

        total_count = graphene.Int()

        def resolve_total_count(root, info):
            return root.length

    class BookFilter(django_filters.FilterSet):
        order_by = django_filters.OrderingFilter(fields=("title", "year", "id"))

        class Meta:
            model = Book
            fields = {"title": ["exact", "icontains"], "year": ["gte"], "tags__name": ["exact"]}

    class ReviewFilter(django_filters.FilterSet):
        class Meta:
            model = Review
            fields = {"rating": ["exact", "gte"]}

    class TagFilter(django_filters.FilterSet):
        class Meta:
            model = Tag
            fields = {"name": ["exact", "icontains"]}

    class ReviewNode(DjangoObjectType):
        class Meta:
            model = Review
            fields = ("id", "rating")
            interfaces = (relay.Node,)
            connection_class = CountedConnection

        @classmethod
        def get_queryset(cls, queryset, info):  # applied in the batch too; it defers book_id
            REVIEW_QUERYSETS.append(info.path)
            return queryset.only("id", "rating")

    class TagNode(DjangoObjectType):
        class Meta:
            model = Tag
            fields = ("id", "name")
            interfaces = (relay.Node,)
            connection_class = CountedConnection

        books = DjangoFilterConnectionField(lambda: BookNode, filterset_class=BookFilter)
        books_qs = DjangoFilterConnectionField(lambda: BookNode, filterset_class=BookFilter)

        def resolve_books(tag, info, **kwargs):
            return related_loader(info.context.loaders, Tag.books).load(tag)

        def resolve_books_qs(tag, info, **kwargs):
            return tag.books.all()

    class BookNode(DjangoObjectType):
        class Meta:
            model = Book
            fields = ("id", "title", "year")
            interfaces = (relay.Node,)
            connection_class = CountedConnection

        reviews = DjangoFilterConnectionField(ReviewNode, filterset_class=ReviewFilter)
        reviews_qs = DjangoFilterConnectionField(ReviewNode, filterset_class=ReviewFilter)
        all_reviews = DjangoConnectionField(ReviewNode)
        tags = DjangoFilterConnectionField(TagNode, filterset_class=TagFilter)
        tags_qs = DjangoFilterConnectionField(TagNode, filterset_class=TagFilter)

        def resolve_reviews(book, info, **kwargs):
            return related_loader(info.context.loaders, Book.reviews).load(book)

        def resolve_reviews_qs(book, info, **kwargs):
            return book.reviews.all()

        def resolve_all_reviews(book, info, **kwargs):
            return related_loader(info.context.loaders, Book.reviews).load(book)

        def resolve_tags(book, info, **kwargs):
            return related_loader(info.context.loaders, Book.tags).load(book)

        def resolve_tags_qs(book, info, **kwargs):
            return book.tags.all()

    def load_authors(ids, alias):
        return Author.objects.using(alias).in_bulk(ids)

    class AuthorNode(DjangoObjectType):
        class Meta:
            model = Author
            fields = ("id", "name")
            interfaces = (relay.Node,)
            connection_class = CountedConnection

        books = DjangoFilterConnectionField(BookNode, filterset_class=BookFilter)
        books_qs = DjangoFilterConnectionField(BookNode, filterset_class=BookFilter)
        books_chained = DjangoFilterConnectionField(BookNode, filterset_class=BookFilter)

        def resolve_books_chained(author, info, **kwargs):  # related_loader asked in a then() callback
            loaders = info.context.loaders
            return loaders.loader_for(load_authors, author._state.db).load(author.pk).then(
                lambda same: related_loader(loaders, Author.books).load(same))

        def resolve_books(author, info, **kwargs):
            return related_loader(info.context.loaders, Author.books).load(author)

        def resolve_books_qs(author, info, **kwargs):
            return author.books.all()

    class Query(graphene.ObjectType):
        authors = DjangoConnectionField(AuthorNode)
        tags = DjangoConnectionField(TagNode)

        def resolve_authors(root, info, **kwargs):
            return Author.objects.using(info.context.alias).order_by("id")

        def resolve_tags(root, info, **kwargs):
            return Tag.objects.using(info.context.alias)

    return graphene.Schema(query=Query)


@pytest.fixture(scope="module")
def schema(django_example_project):
    return make_schema()


class Request:
    """What graphene-django's view passes as context: here only the registry and the database alias."""

    def __init__(self, alias: str) -> None:
        from dataloader_sync import DataLoaderRegistry

        self.loaders = DataLoaderRegistry()
        self.alias = alias


def run(schema, alias: str, query: str):
    """(data, SQL statements) of *query*, executed with a fresh registry on database *alias*."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import DataLoaderExecutionContext

    with CaptureQueriesContext(connections[alias]) as queries:
        result = schema.execute(query, context_value=Request(alias), execution_context_class=DataLoaderExecutionContext)
    assert result.errors is None, result.errors
    return result.data, [q["sql"] for q in queries.captured_queries]


def twin(data: Any) -> Any:
    """*data* of the queryset fields with the loader fields' names (``booksQs`` -> ``books``)."""
    if isinstance(data, list):
        return [twin(item) for item in data]
    if isinstance(data, dict):
        return {(k[:-2] if k.endswith("Qs") else k): twin(v) for k, v in data.items()}
    return data


PAGE = "totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor node { title } }"


def books_query(field: str, args: str) -> str:
    arguments = f"({args})" if args else ""
    return "{ authors { edges { node { name " + f"{field}{arguments} {{ {PAGE} }}" + " } } } }"


@pytest.mark.parametrize("args", [
    "",
    "first: 2",
    "first: 2, orderBy: \"-title\"",
    "first: 1, after: \"YXJyYXljb25uZWN0aW9uOjA=\"",  # after offset 0
    "first: 2, offset: 1",
    "first: 3, title_Icontains: \".1\"",
    "first: 1, year_Gte: 2002, orderBy: \"-year\"",
    "title_Icontains: \"book 2\"",
    "last: 2",
    "last: 1, before: \"YXJyYXljb25uZWN0aW9uOjM=\"",  # before offset 3
    "first: 10",
    "first: 0",
])
def test_filter_connection_from_a_related_loader_gives_the_pages_of_a_queryset_in_one_query_per_level(
        data, schema, args):
    loaded, sql = run(schema, data, books_query("books", args))
    expected, _ = run(schema, data, books_query("booksQs", args))
    assert loaded == twin(expected)
    pages = [edge["node"]["books"] for edge in loaded["authors"]["edges"]]
    assert len(pages) == AUTHORS and pages[1]["totalCount"] == (BOOKS if "_" not in args else pages[1]["totalCount"])
    limited = "last" not in args  # first, or graphene-django's max_limit (100) when no first is given
    # authors (count + rows: the root is a queryset), the books with their count when limited
    assert len(sql) == 2 + 1, sql
    assert ("ROW_NUMBER" in sql[2]) == limited, sql[2]  # the page's rows only, in the same statement
    assert ("COUNT(*) OVER" in sql[2]) == limited, sql[2]  # and the count of all of them


NESTED = """{ authors { edges { node { name
  booksQs(first: 2, orderBy: "-title") { totalCount pageInfo { hasNextPage endCursor } edges { cursor node { title
    reviewsQs(first: 1, rating_Gte: 2) { totalCount pageInfo { hasNextPage } edges { cursor node { rating } } }
    tagsQs(first: 1) { pageInfo { hasNextPage } edges { node { name } } }
  } } }
} } } }"""


@pytest.mark.parametrize("authors", [2, 6])
def test_nested_filter_connections_cost_the_same_queries_whatever_the_number_of_parents(library, orm_db, schema,
                                                                                        authors):
    library(orm_db, authors=authors, books=BOOKS, reviews=REVIEWS, tags=TAGS)
    REVIEW_QUERYSETS.clear()
    loaded, sql = run(schema, orm_db, NESTED.replace("Qs(", "("))
    assert len(REVIEW_QUERYSETS) == 1  # the field's queryset: built once for all its parents (same arguments)
    expected, _ = run(schema, orm_db, NESTED)
    assert loaded == twin(expected)
    pages = [e["node"]["books"] for e in loaded["authors"]["edges"]]
    assert len(pages) == authors and pages[0]["totalCount"] == BOOKS
    assert pages[0]["edges"][0]["node"]["title"] == "book 0.3"
    assert pages[0]["edges"][0]["node"]["tags"]["edges"] == [{"node": {"name": "tag 00"}}]
    # authors: count + rows; books, reviews, tags: rows (the counts in the rows' statements)
    assert len(sql) == 5, sql
    # the node type's get_queryset applies in the batch (no body); book_id is loaded to group the rows
    reviews = next(q for q in sql if "books_review" in q or "orm_library_review" in q)
    assert "_review\".\"body\"" not in reviews and "_review\".\"book_id\"" in reviews, reviews


def test_many_to_many_connections_both_ways_from_related_loaders(data, schema):
    query = """{ tags { edges { node { name
      booksQs(first: 2, orderBy: "title") { totalCount pageInfo { hasNextPage } edges { cursor node { title
        tagsQs(name_Icontains: "0") { totalCount edges { node { name } } } } } }
    } } } }"""
    loaded, sql = run(schema, data, query.replace("Qs(", "("))
    expected, _ = run(schema, data, query)
    assert loaded == twin(expected)
    first_tag = loaded["tags"]["edges"][0]["node"]
    assert first_tag["name"] == "tag 00" and first_tag["books"]["pageInfo"]["hasNextPage"] is True
    # tags: count + rows; their books, those books' tags: rows, with their counts (max_limit limits them)
    assert len(sql) == 4, sql


def test_plain_connection_field_from_a_related_loader_pages_in_the_batch(data, schema):
    query = "{ authors { edges { node { books(first: 1) { edges { node { allReviews(first: 2) { totalCount "
    query += "pageInfo { hasNextPage } edges { node { rating } } } } } } } } } }"
    loaded, sql = run(schema, data, query)
    first_book = loaded["authors"]["edges"][0]["node"]["books"]["edges"][0]["node"]
    assert first_book["allReviews"] == {"totalCount": REVIEWS, "pageInfo": {"hasNextPage": True},
                                        "edges": [{"node": {"rating": 1}}, {"node": {"rating": 2}}]}
    assert len(sql) == 2 + 1 + 1, sql  # authors: count + rows; books: rows; reviews: rows with their count


def test_a_connection_without_totalCount_runs_no_count_query(data, schema):
    query = "{ authors { edges { node { books(first: 1) { edges { node { title } } } } } } }"
    loaded, sql = run(schema, data, query)
    assert [e["node"]["books"]["edges"][0]["node"]["title"] for e in loaded["authors"]["edges"]] == [
        f"book {a}.0" for a in range(AUTHORS)]
    assert len(sql) == 3, sql  # authors (count + rows), books
    assert "COUNT" not in sql[2]


def test_a_filter_connection_resolved_to_another_future_fails_with_a_clear_error(django_example_project):
    import graphene
    from graphene import relay
    from graphene_django import DjangoObjectType
    from orm_library.models import Publisher

    from dataloader_sync import DataLoader
    from dataloader_sync.django import DjangoFilterConnectionField
    from dataloader_sync.graphql import DataLoaderExecutionContext

    class PublisherNode(DjangoObjectType):
        class Meta:
            model = Publisher
            fields = ("id", "name")
            interfaces = (relay.Node,)
            filter_fields = ["name"]
            skip_registry = True

    class Query(graphene.ObjectType):
        publishers = DjangoFilterConnectionField(PublisherNode)

        def resolve_publishers(root, info, **kwargs):
            return DataLoader(lambda keys: [[] for _ in keys]).load(1)

    result = graphene.Schema(query=Query).execute("{ publishers { edges { node { name } } } }",
                                                  execution_context_class=DataLoaderExecutionContext)
    assert result.data == {"publishers": None}
    assert "related_loader(registry, Model.relation).load(instance)" in str(result.errors[0]), result.errors


def test_a_then_chain_that_asks_the_related_loader_in_its_callback_is_served_too(data, schema):
    args = 'first: 2, orderBy: "-title"'
    loaded, sql = run(schema, data, books_query("booksChained", args))
    expected, _ = run(schema, data, books_query("booksQs", args))
    assert [e["node"]["booksChained"] for e in loaded["authors"]["edges"]] == [
        e["node"]["booksQs"] for e in expected["authors"]["edges"]]
    assert len(sql) == 2 + 1 + 1, sql  # authors: count + rows; the authors again (in_bulk); books with count


def test_a_related_loader_for_another_relation_inside_a_connection_resolver_is_the_plain_one(data):
    from orm_library.models import Author, Book

    from dataloader_sync import DataLoaderRegistry
    from dataloader_sync.django import related_loader
    from dataloader_sync.django._connection_scope import requesting
    from dataloader_sync.django._pages import PageRequest

    registry = DataLoaderRegistry()
    made = []
    request = PageRequest(Book, lambda base: made.append(base) or Book.objects.all(), 3, False)
    with requesting(request):
        other = related_loader(registry, Author.publisher)  # forward: not a page of books
        limited = related_loader(registry, Author.books, first=1)  # the caller's own first=
    assert other is related_loader(registry, Author.publisher)
    assert limited is related_loader(registry, Author.books, first=1)
    assert not request.served and made == []
    with requesting(request):
        page = related_loader(registry, Author.books)
    assert request.served and made == [None]
    assert [name for name in registry.keys() if name.startswith("load_page(")] == [
        'load_page(Author.books, queryset=Book all, first=3)']
    assert page is not related_loader(registry, Author.books)  # outside the request: the plain loader


def test_through_graphene_djangos_view_with_the_requests_registry(data, schema):
    import json

    from django.db import connections
    from django.test import RequestFactory
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.django import GraphQLView

    view = GraphQLView.as_view(schema=schema)
    query = NESTED.replace("Qs(", "(")
    request = RequestFactory().post("/graphql", json.dumps({"query": query}), content_type="application/json")
    request.alias = data  # what the test schema's root resolvers read
    with CaptureQueriesContext(connections[data]) as queries:
        response = view(request)
    assert response.status_code == 200, response.content
    body = json.loads(response.content)
    assert "errors" not in body, body
    expected, _ = run(schema, data, NESTED)
    assert body["data"] == twin(expected)
    assert len(queries.captured_queries) == 5, [q["sql"] for q in queries.captured_queries]


def test_a_many_to_many_page_filtered_across_the_relation_itself_keeps_the_filter_apart_from_the_link(data, schema):
    # the books of each tag that are (also) tagged "tag 01": rows and counts as from tag.books.filter(...)
    query = """{ tags { edges { node { name
      booksQs(first: 2, tags_Name: "tag 01", orderBy: "title") { totalCount edges { node { title } } }
    } } } }"""
    loaded, sql = run(schema, data, query.replace("Qs(", "("))
    expected, _ = run(schema, data, query)
    assert loaded == twin(expected)
    counts = [e["node"]["books"]["totalCount"] for e in loaded["tags"]["edges"]]
    assert counts == [7, 14, 7], counts  # tag 01 has 14 books; 7 of each other tag's are tagged 01 too
    assert len(sql) == 3, sql  # tags: count + rows; their books: rows with their counts
