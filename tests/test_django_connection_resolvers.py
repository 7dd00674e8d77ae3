"""graphene-django connection fields whose resolver the user wrote (``return self.books.filter(...)``), with auto
relations on, on the orm_library app, SQLite and PostgreSQL: the relation queryset the resolver returns, with the
node type's ``get_queryset``, the filterset and the page applied, is loaded for the whole level in one statement
per query shape (``totalCount`` in it), each parent its own page, the response byte-identical to the switch off."""
from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
pytest.importorskip("django_filters")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

from dataloader_sync import DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project")


def make_schema():
    """Authors and tags whose book connections are resolvers returning querysets of the parent's relations:
    graphene-django's ``DjangoConnectionField`` and ``DjangoFilterConnectionField`` and ours."""
    import django_filters
    import graphene
    from django.db.models import Count
    from graphene_django import DjangoConnectionField, DjangoObjectType
    from graphene_django.filter import DjangoFilterConnectionField
    from graphene_django.registry import Registry
    from orm_library import models

    from dataloader_sync import django as ours

    types = Registry()

    class Counted(graphene.Connection):
        class Meta:
            abstract = True

        total_count = graphene.Int()
        size = graphene.Int()  # the length under another name
        counted = graphene.Int()  # the queryset's count(), as graphene-django's docs show

        def resolve_total_count(root, info):
            return root.length

        def resolve_size(root, info):
            return root.length

        def resolve_counted(root, info):
            return root.iterable.count()

    class BookFilter(django_filters.FilterSet):
        order_by = django_filters.OrderingFilter(fields=("title", "year", "id"))

        class Meta:
            model = models.Book
            fields = {"year": ["exact", "gte"], "title": ["icontains"]}

    class Review(DjangoObjectType):
        class Meta:
            model = models.Review
            fields = ("rating",)
            interfaces = (graphene.relay.Node,)
            name = "CrReview"
            registry = types
            connection_class = Counted

        @classmethod
        def get_queryset(cls, queryset, info):
            return queryset.filter(rating__gt=1)

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title", "year", "author", "reviews")
            interfaces = (graphene.relay.Node,)
            filterset_class = BookFilter
            name = "CrBook"
            registry = types
            connection_class = Counted

        good_reviews = DjangoConnectionField(Review)

        def resolve_good_reviews(book, info, **kwargs):  # Review.get_queryset applies too
            return book.reviews.order_by("-rating", "pk")

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name", "books")
            interfaces = (graphene.relay.Node,)
            name = "CrAuthor"
            registry = types
            connection_class = Counted

        recent = DjangoConnectionField(Book)
        newest = DjangoConnectionField(Book)
        filtered = DjangoFilterConnectionField(Book)
        own_recent = ours.DjangoConnectionField(Book)
        own_filtered = ours.DjangoFilterConnectionField(Book)
        own_loader = ours.DjangoFilterConnectionField(Book)
        by_author = DjangoConnectionField(Book)
        reviewed = DjangoConnectionField(Book)
        manager = DjangoConnectionField(Book)
        sliced = DjangoConnectionField(Book)
        distinct_tagged = DjangoConnectionField(Book)
        everything = DjangoConnectionField(Book)
        listed = DjangoConnectionField(Book)

        def resolve_recent(author, info, **kwargs):
            return author.books.filter(year__gte=2001)

        def resolve_newest(author, info, **kwargs):
            return author.books.filter(year__gte=2001).order_by("-year")

        def resolve_filtered(author, info, **kwargs):
            return author.books.filter(year__gte=2001)

        def resolve_own_recent(author, info, **kwargs):
            return author.books.filter(year__gte=2001).order_by("-year")

        def resolve_own_filtered(author, info, **kwargs):
            return author.books.order_by("-year")

        def resolve_own_loader(author, info, **kwargs):  # a related loader's future: our fields' own pages
            return ours.related_loader(info.context.loaders, models.Author.books).load(author)

        def resolve_by_author(author, info, **kwargs):
            return models.Book.objects.using(author._state.db).filter(author=author).order_by("-title")

        def resolve_reviewed(author, info, **kwargs):
            return author.books.annotate(n=Count("reviews")).filter(n__gte=2).order_by("title")

        def resolve_manager(author, info, **kwargs):  # a related manager: graphene-django takes its queryset
            return author.books

        def resolve_sliced(author, info, **kwargs):  # a slice of its own: runs as it is
            return author.books.order_by("year")[:3]

        def resolve_distinct_tagged(author, info, **kwargs):  # distinct(): every distinct row read
            return author.books.filter(tags__name__gte="tag 00").distinct().order_by("title")

        def resolve_everything(author, info, **kwargs):  # no relation of the parent: runs as it is
            return models.Book.objects.using(author._state.db).order_by("pk")

        def resolve_listed(author, info, **kwargs):  # a list: runs as it is
            return list(author.books.order_by("pk"))

    class Tag(DjangoObjectType):
        class Meta:
            model = models.Tag
            fields = ("name", "books")
            interfaces = (graphene.relay.Node,)
            name = "CrTag"
            registry = types
            connection_class = Counted

        late_books = DjangoConnectionField(Book)

        def resolve_late_books(tag, info, **kwargs):  # many-to-many, reverse side
            return tag.books.filter(year__gte=2002).order_by("-year", "title")

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(Author), required=True)
        tags = graphene.List(graphene.NonNull(Tag), required=True)

        def resolve_authors(root, info):
            return models.Author.objects.using(info.context.db).order_by("pk")

        def resolve_tags(root, info):
            return models.Tag.objects.using(info.context.db)

    return graphene.Schema(query=Query)


@pytest.fixture(scope="module")
def schema(django_example_project):
    return make_schema()


class Context:
    def __init__(self, db):
        self.db = db
        self.loaders = DataLoaderRegistry()


def execute(schema, orm_db, query, auto=True):
    """(the response as JSON, the statements it ran, the context)."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    context = Context(orm_db)
    cls = AutoRelationsExecutionContext if auto else DataLoaderExecutionContext
    with CaptureQueriesContext(connections[orm_db]) as queries:
        result = schema.execute(query, context_value=context, execution_context_class=cls)
    return json.dumps(result.formatted), len(queries), context


def shelf(library, orm_db):
    """The shelf: 20 authors x 4 books (years 2000-2003) x 3 reviews, 4 tags, and one author with no book."""
    from orm_library.models import Author

    made = library(orm_db, authors=20, books=4, reviews=3, tags=4, publishers=3)
    Author.objects.using(orm_db).create(name="author without books")
    return made


def compare(schema, orm_db, query):
    """(switch off statements, switch on statements, the context of the switch on), answers checked equal."""
    plain, off, _ = execute(schema, orm_db, query, auto=False)
    auto, on, context = execute(schema, orm_db, query)
    assert '"errors"' not in plain, plain
    assert auto == plain
    return off, on, context


PAGE = "totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor node { title year } }"
AFTER_1 = "YXJyYXljb25uZWN0aW9uOjE="  # arrayconnection:1
BEFORE_3 = "YXJyYXljb25uZWN0aW9uOjM="  # arrayconnection:3

#: query -> statements with the switch on: the authors, then one per shape (totalCount in the page's statement)
PER_LEVEL = {
    "{ authors { name recent(first: 2) { " + PAGE + " } } }": 2,
    "{ authors { recent(first: 1, after: \"" + AFTER_1 + "\") { " + PAGE + " } } }": 2,
    "{ authors { recent(first: 1, offset: 1) { " + PAGE + " } } }": 2,
    "{ authors { recent(last: 2) { " + PAGE + " } } }": 2,
    "{ authors { recent(last: 1, before: \"" + BEFORE_3 + "\") { " + PAGE + " } } }": 2,
    "{ authors { recent { " + PAGE + " } } }": 2,
    "{ authors { recent(first: 10) { edges { node { title } } } } }": 2,
    "{ authors { newest(first: 2) { " + PAGE + " } } }": 2,
    "{ authors { newest(first: 2) { edges { node { title author { name } } } } } }": 2,
    "{ authors { filtered(first: 2, year: 2002) { " + PAGE + " } } }": 2,
    "{ authors { filtered(first: 1, title_Icontains: \".3\", orderBy: \"-year\") { " + PAGE + " } } }": 2,
    "{ authors { filtered(last: 1, orderBy: \"-title\") { " + PAGE + " } } }": 2,
    "{ authors { ownRecent(first: 2) { " + PAGE + " } } }": 2,
    "{ authors { ownFiltered(first: 2, year_Gte: 2001) { " + PAGE + " } } }": 2,
    "{ authors { ownLoader(first: 2, year_Gte: 2001, orderBy: \"-year\") { " + PAGE + " } } }": 2,
    "{ authors { byAuthor(first: 3) { " + PAGE + " } } }": 2,
    "{ authors { reviewed(first: 2) { " + PAGE + " } } }": 2,
    "{ authors { manager(first: 2) { " + PAGE + " } } }": 2,
    "{ authors { distinctTagged(first: 2) { " + PAGE + " } } }": 2,
    "{ authors { distinctTagged(last: 1) { " + PAGE + " } } }": 2,
    "{ tags { lateBooks(first: 3) { " + PAGE + " } } }": 2,
    "{ authors { newest(first: 2) { edges { node { title goodReviews(first: 1) { totalCount "
    "edges { node { rating } } } } } } } }": 3,
    "{ authors { newest(first: 1) { size counted edges { node { title } } } } }": 2,
    "{ authors { ownFiltered(first: 1) { size counted edges { node { title } } } } }": 2,
}


@pytest.mark.parametrize("query", list(PER_LEVEL))
def test_a_connection_resolvers_relation_queryset_costs_one_statement_per_level(schema, orm_db, library, query):
    shelf(library, orm_db)
    off, on, _ = compare(schema, orm_db, query)
    assert on == PER_LEVEL[query]
    if "ownLoader" in query:  # a related loader's future: our field pages it in the batch, switch or not
        assert off == on
    else:
        assert off >= (1 + 4 * 2 if "tags" in query else 1 + 20 * 2 + 1)  # count and page per parent



@pytest.mark.parametrize("field", ["sliced", "everything", "listed"])
def test_querysets_not_understood_as_pages_run_as_they_are(schema, orm_db, library, field):
    """Not paged for the level; what graphene-django then evaluates in place (the sliced relation's
    count and page, the listed relation's rows) is answered for the level (``_inplace``), a queryset
    that is no relation of the parent runs per parent."""
    library(orm_db, authors=5, books=4, tags=3)
    query = "{ authors { " + field + "(first: 2) { " + PAGE + " } recent(first: 1) { totalCount } } }"
    off, on, _ = compare(schema, orm_db, query)
    per_parent = 1 if field == "listed" else 2  # a count and a page each (the list is read once)
    assert off == 1 + per_parent * 5 + 2 * 5
    if field == "everything":
        assert on == 1 + per_parent * 5 + 1
    else:  # the authors; the relation evaluated in place for the level (count and rows share it); recent
        assert on == 1 + per_parent + 1


def test_graphene_django_s_checks_fail_the_field_as_without_the_switch(schema, orm_db, library):
    library(orm_db, authors=3, books=2)
    for query in ("{ authors { recent(first: 101) { totalCount } } }",  # over RELAY_CONNECTION_MAX_LIMIT
                  "{ authors { recent(offset: 1, before: \"" + BEFORE_3 + "\") { totalCount } } }",
                  "{ authors { recent(first: -1) { edges { node { title } } } } }"):
        plain, _, _ = execute(schema, orm_db, query, auto=False)
        auto, _, _ = execute(schema, orm_db, query)
        assert auto == plain and '"errors"' in plain


def test_each_page_is_named_after_its_type_and_field_and_counted_only_when_read(schema, orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    shelf(library, orm_db)
    query = "{ authors { recent(first: 2) { edges { node { title } } } newest(first: 2) { totalCount } } }"
    compare(schema, orm_db, query)
    with CaptureQueriesContext(connections[orm_db]) as queries:
        _, on, context = execute(schema, orm_db, query)
    assert on == 3
    counted = [q["sql"] for q in queries.captured_queries if "COUNT(*) OVER" in q["sql"]]
    assert len(counted) == 1 and "2001" in counted[0] and "DESC" in counted[0]  # newest's, not recent's
    stats = context.loaders.statistics_by_loader()
    assert {"Author.recent", "Author.newest"} <= set(stats)
    assert stats["Author.recent"].batch_invoke_count == 1


def test_only_an_execution_with_the_switch_batches(schema, orm_db, library):
    library(orm_db, authors=5, books=4)
    query = "{ authors { recent(first: 2) { totalCount edges { node { title } } } } }"
    _, off, context = execute(schema, orm_db, query, auto=False)
    assert off == 1 + 2 * 5 and not context.loaders.keys()


#: connections with no resolver (graphene-django's own, of the fields Meta lists): the count is the page's statement
NO_RESOLVER = {
    "{ authors { books(first: 2) { totalCount edges { node { title } } } } }": 2,
    "{ authors { books(first: 2, year_Gte: 2001, orderBy: \"-year\") { " + PAGE + " } } }": 2,
    "{ authors { books(first: 1) { size counted edges { node { title } } } } }": 2,
    "{ tags { books(first: 1) { totalCount edges { node { title } } } } }": 2,  # many-to-many
    "{ authors { books(first: 2) { totalCount edges { node { title reviews(first: 1) { totalCount "
    "edges { node { rating } } } } } } } }": 3,
}


@pytest.mark.parametrize("query", list(NO_RESOLVER))
def test_a_paged_relation_s_total_count_comes_from_its_page_statement(schema, orm_db, library, query):
    shelf(library, orm_db)
    off, on, _ = compare(schema, orm_db, query)
    assert on == NO_RESOLVER[query] < off


@pytest.mark.parametrize("distinct", [False, True])
def test_load_page_counts_in_the_rows_statement_distinct_or_not(orm_db, library, distinct):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library.models import Author, Book

    from dataloader_sync.django import load_related
    from dataloader_sync.django._pages import load_page

    library(orm_db, authors=6, books=4, tags=3)
    authors = list(Author.objects.using(orm_db).order_by("pk"))
    queryset = Book.objects.filter(tags__name__gte="tag 01").order_by("-year")  # a row per matching tag
    if distinct:
        queryset = queryset.distinct()
    with CaptureQueriesContext(connections[orm_db]) as queries:
        pages = load_page(authors, load_related, Author.books, queryset=queryset, first=2, count=True)
    assert len(queries) == 1  # distinct(): every distinct row read (a window would number the duplicates)
    for author, page in zip(authors, pages):
        own = queryset.using(orm_db).filter(author=author)
        assert page.total_count == own.count() and [b.pk for b in page] == [b.pk for b in own[:2]]
