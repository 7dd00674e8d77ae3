"""dataloader_sync.django's DjangoConnectionField and DjangoFilterConnectionField over related loaders.

Every relation is a connection twice on the same node type: resolved from a
``related_loader`` future (``books``, ``reviews``) and from a plain queryset
(``booksQs``, ``reviewsQs``), the reference.  The tests assert the same
pages and cursors for both, and the SQL statements the loader side costs.
"""
from __future__ import annotations

import importlib.util
from collections import defaultdict
from typing import Any

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
pytest.importorskip("django_filters")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

pytestmark = pytest.mark.usefixtures("django_example_project")

AUTHORS = 5  # each has BOOKS books, each book REVIEWS reviews
BOOKS = 4
REVIEWS = 3


@pytest.fixture
def data(example_books):
    example_books(authors=AUTHORS, books=BOOKS, reviews=REVIEWS)


# -- a stand-in for related_loader until the real one is merged -------------------------
def stand_in_load_related(instances, field, queryset=None, first=None):
    fk = field.field
    qs = fk.model._default_manager.all() if queryset is None else queryset
    groups: dict[Any, list[Any]] = defaultdict(list)
    for row in qs.filter(**{f"{fk.name}__in": list(instances)}):
        groups[getattr(row, fk.attname)].append(row)
    return [groups[i.pk][:first] if first is not None else groups[i.pk] for i in instances]


def _key(field, queryset=None, first=None):
    if queryset is None:
        return (field, None, first)
    sql, params = queryset.query.sql_with_params()
    return (field, queryset.model, sql, tuple(params), queryset.db, first)


stand_in_load_related.dataloader_key = _key  # type: ignore[attr-defined]


def related_loader(registry, field, queryset=None, first=None):
    from dataloader_sync.django._connection_scope import connection_loader

    if first is None:
        loader = connection_loader(registry, stand_in_load_related, field, queryset)
        if loader is not None:
            return loader
    return registry.loader_for(stand_in_load_related, field, queryset=queryset, first=first)


# -- the schema ------------------------------------------------------------------------
def make_schema():
    import django_filters
    import graphene
    from books.models import Author, Book, Review
    from graphene import relay
    from graphene_django import DjangoObjectType

    from dataloader_sync.django import DjangoConnectionField, DjangoFilterConnectionField

    class CountedConnection(graphene.Connection):
        class Meta:
            abstract = True

        total_count = graphene.Int()

        def resolve_total_count(root, info):
            return root.length

    class BookFilter(django_filters.FilterSet):
        order_by = django_filters.OrderingFilter(fields=("title", "id"))

        class Meta:
            model = Book
            fields = {"title": ["exact", "icontains"]}

    class ReviewFilter(django_filters.FilterSet):
        class Meta:
            model = Review
            fields = {"rating": ["exact", "gte"]}

    class ReviewNode(DjangoObjectType):
        class Meta:
            model = Review
            fields = ("id", "rating")
            interfaces = (relay.Node,)
            connection_class = CountedConnection

        @classmethod
        def get_queryset(cls, queryset, info):  # applied in the batch too; it defers book_id
            return queryset.only("id", "rating")

    class BookNode(DjangoObjectType):
        class Meta:
            model = Book
            fields = ("id", "title")
            interfaces = (relay.Node,)
            connection_class = CountedConnection

        reviews = DjangoFilterConnectionField(ReviewNode, filterset_class=ReviewFilter)
        reviews_qs = DjangoFilterConnectionField(ReviewNode, filterset_class=ReviewFilter)
        all_reviews = DjangoConnectionField(ReviewNode)

        def resolve_reviews(book, info, **kwargs):
            return related_loader(info.context.loaders, Book.reviews).load(book)

        def resolve_reviews_qs(book, info, **kwargs):
            return book.reviews.all()

        def resolve_all_reviews(book, info, **kwargs):
            return related_loader(info.context.loaders, Book.reviews).load(book)

    class AuthorNode(DjangoObjectType):
        class Meta:
            model = Author
            fields = ("id", "name")
            interfaces = (relay.Node,)
            connection_class = CountedConnection

        books = DjangoFilterConnectionField(BookNode, filterset_class=BookFilter)
        books_qs = DjangoFilterConnectionField(BookNode, filterset_class=BookFilter)

        def resolve_books(author, info, **kwargs):
            return related_loader(info.context.loaders, Author.books).load(author)

        def resolve_books_qs(author, info, **kwargs):
            return author.books.all()

    class Query(graphene.ObjectType):
        authors = DjangoConnectionField(AuthorNode)

        def resolve_authors(root, info, **kwargs):
            return Author.objects.order_by("id")

    return graphene.Schema(query=Query)


@pytest.fixture(scope="module")
def schema(django_example_project):
    return make_schema()


class Request:
    def __init__(self) -> None:
        from dataloader_sync import DataLoaderRegistry

        self.loaders = DataLoaderRegistry()


def run(schema, query: str, **variables: Any):
    """(data, SQL statements) of *query*, executed with a fresh registry."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import DataLoaderExecutionContext

    with CaptureQueriesContext(connection) as queries:
        result = schema.execute(query, variable_values=variables, context_value=Request(),
                                execution_context_class=DataLoaderExecutionContext)
    assert result.errors is None, result.errors
    return result.data, [q["sql"] for q in queries.captured_queries]


PAGE = """
  totalCount
  pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  edges { cursor node { title } }
"""


def books_query(field: str, args: str, page: str = PAGE) -> str:
    arguments = f"({args})" if args else ""
    return "query { authors { edges { node { name " + f"{field}{arguments} {{ {page} }}" + " } } } }"


@pytest.mark.parametrize("args", [
    "",
    "first: 2",
    "first: 2, orderBy: \"-title\"",
    "first: 1, after: \"YXJyYXljb25uZWN0aW9uOjA=\"",  # after offset 0
    "first: 2, offset: 1",
    "first: 3, title_Icontains: \".1\"",
    "title_Icontains: \"book 2\"",
    "last: 2",
    "first: 10",
    "first: 0",
])
def test_filter_connection_from_a_related_loader_gives_the_pages_of_a_queryset_in_one_query_per_level(
        data, schema, args):
    loaded, sql = run(schema, books_query("books", args))
    expected, _ = run(schema, books_query("booksQs", args))
    pages = [edge["node"]["books"] for edge in loaded["authors"]["edges"]]
    assert pages == [edge["node"]["booksQs"] for edge in expected["authors"]["edges"]]
    assert len(pages) == AUTHORS
    assert pages[0]["totalCount"] == (BOOKS if "title" not in args else pages[0]["totalCount"])
    limited = "last" not in args  # first, or graphene-django's max_limit (100) when no first is given
    # authors (count + rows: the root is a queryset), the books, their count when limited
    assert len(sql) == 2 + 1 + (1 if limited else 0), sql


NESTED = """query { authors { edges { node { name
  %(books)s(first: 2, orderBy: "-title") { totalCount pageInfo { hasNextPage endCursor } edges { cursor node { title
    %(reviews)s(first: 1, rating_Gte: 2) { totalCount pageInfo { hasNextPage } edges { cursor node { rating } } }
  } } }
} } } }"""


@pytest.mark.parametrize("authors", [2, 6])
def test_nested_filter_connections_cost_the_same_queries_whatever_the_number_of_parents(example_books, schema,
                                                                                        authors):
    example_books(authors=authors, books=BOOKS, reviews=REVIEWS)
    loaded, sql = run(schema, NESTED % {"books": "books", "reviews": "reviews"})
    expected, _ = run(schema, NESTED % {"books": "booksQs", "reviews": "reviewsQs"})
    rename = NESTED % {"books": "books", "reviews": "reviews"}
    assert rename  # the same shape: compare with the field names mapped
    pages = [e["node"]["books"] for e in loaded["authors"]["edges"]]
    reference = [e["node"]["booksQs"] for e in expected["authors"]["edges"]]
    for page in reference:
        for edge in page["edges"]:
            edge["node"]["reviews"] = edge["node"].pop("reviewsQs")
    assert pages == reference
    assert len(pages) == authors and pages[0]["totalCount"] == BOOKS
    assert pages[0]["edges"][0]["node"]["title"] == "book 0.3"
    # authors: count + rows; books: rows + count; reviews: rows + count
    assert len(sql) == 6, sql
    # the node type's get_queryset applies in the batch (no body); book_id is loaded to group the rows
    assert '"books_review"."body"' not in sql[4] and '"books_review"."book_id"' in sql[4], sql[4]


def test_plain_connection_field_from_a_related_loader_pages_in_the_batch(data, schema):
    query = "{ authors { edges { node { books(first: 1) { edges { node { allReviews(first: 2) { totalCount "
    query += "pageInfo { hasNextPage } edges { node { rating } } } } } } } } } }"
    loaded, sql = run(schema, query)
    first_book = loaded["authors"]["edges"][0]["node"]["books"]["edges"][0]["node"]
    assert first_book["allReviews"] == {"totalCount": REVIEWS, "pageInfo": {"hasNextPage": True},
                                        "edges": [{"node": {"rating": 1}}, {"node": {"rating": 2}}]}
    assert len(sql) == 2 + 1 + 2, sql  # authors: count + rows; books: rows; reviews: rows + count


def test_a_connection_without_totalCount_runs_no_count_query(data, schema):
    query = "{ authors { edges { node { books(first: 1) { edges { node { title } } } } } } }"
    loaded, sql = run(schema, query)
    assert [e["node"]["books"]["edges"][0]["node"]["title"] for e in loaded["authors"]["edges"]] == [
        f"book {a}.0" for a in range(AUTHORS)]
    assert len(sql) == 3, sql  # authors (count + rows), books
    assert not any("COUNT" in q and "books_book" in q for q in sql)


def test_a_filter_connection_resolved_to_another_future_fails_with_a_clear_error(data):
    import graphene
    from books.models import Author
    from graphene import relay
    from graphene_django import DjangoObjectType

    from dataloader_sync import DataLoader
    from dataloader_sync.django import DjangoFilterConnectionField
    from dataloader_sync.graphql import DataLoaderExecutionContext

    class AuthorOnlyNode(DjangoObjectType):
        class Meta:
            model = Author
            fields = ("id", "name")
            interfaces = (relay.Node,)
            filter_fields = ["name"]
            skip_registry = True

    class Query(graphene.ObjectType):
        authors = DjangoFilterConnectionField(AuthorOnlyNode)

        def resolve_authors(root, info, **kwargs):
            return DataLoader(lambda keys: [list(Author.objects.all()) for _ in keys]).load(1)

    result = graphene.Schema(query=Query).execute("{ authors { edges { node { name } } } }",
                                                  execution_context_class=DataLoaderExecutionContext)
    assert result.data == {"authors": None}
    assert "related_loader(registry, Model.relation).load(instance)" in str(result.errors[0]), result.errors
