"""Relations evaluated in place (``self.books.count()``, ``.first()``, iteration...) in a user's resolver or in
a model property a default-resolved field reads, with auto relations on, on graphene-django and the orm_library
app, SQLite and PostgreSQL: one statement per query shape per level, the response byte-identical to the switch
off, and the same code outside an execution as before."""
from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

from dataloader_sync import DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project")


def make_schema():
    import graphene
    from django.db.models import Avg, Count, Max
    from graphene_django import DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    types = Registry()

    def books_of(author):  # the manager's form, on the author's database (the suite's PostgreSQL too)
        return models.Book.objects.using(author._state.db)

    class Book(DjangoObjectType):
        class Meta:
            model = models.Book
            fields = ("title", "year")
            name = "IpBook"
            registry = types

        review_count = graphene.Int()  # a property
        good_review_count = graphene.Int()
        best_rating = graphene.Int()

        def resolve_good_review_count(book, info):
            return book.reviews.filter(rating__gte=3).count()

        def resolve_best_rating(book, info):
            return book.reviews.aggregate(best=Max("rating"))["best"]

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name", "books")
            name = "IpAuthor"
            registry = types

        # properties of the model, read by default resolvers
        book_count = graphene.Int()
        has_early_books = graphene.Boolean()
        first_title = graphene.String()
        latest_title = graphene.String()
        newest_year = graphene.Int()
        recent_count = graphene.Int()
        joined_titles = graphene.String()
        book_list = graphene.List(graphene.NonNull(Book))
        # the same in resolvers
        r_count = graphene.Int()
        r_exists = graphene.Boolean()
        r_first = graphene.String()
        r_last = graphene.String()
        r_aggregate = graphene.String()
        r_len = graphene.Int()
        r_iteration = graphene.String()
        r_list = graphene.List(graphene.NonNull(Book))
        r_second = graphene.String()
        r_two_shapes = graphene.Int()
        r_twice = graphene.String()
        r_distinct_count = graphene.Int()
        r_tags = graphene.Int()
        r_annotated_count = graphene.Int()
        r_joined_count = graphene.Int()
        # a related manager's iterator(), and the manager's form: Book.objects.filter(author=self)
        r_iterator = graphene.String()
        r_iterator_prefetched = graphene.Int()
        early_book_count = graphene.Int()
        m_count = graphene.Int()
        m_exists = graphene.Boolean()
        m_first = graphene.String()
        m_aggregate = graphene.String()
        m_list = graphene.List(graphene.NonNull(Book))
        m_iteration = graphene.String()
        m_iterator = graphene.String()
        m_by_key = graphene.Int()
        m_two_shapes = graphene.Int()
        m_tags = graphene.Int()

        def resolve_r_iterator(author, info):
            return ",".join(b.title for b in author.books.order_by("-year").iterator())

        def resolve_r_iterator_prefetched(author, info):
            books = author.books.order_by("pk").prefetch_related("reviews").iterator(chunk_size=3)
            return sum(len(book.reviews.all()) for book in books)

        def resolve_m_count(author, info):
            return books_of(author).filter(author=author, year__gte=2001).count()

        def resolve_m_exists(author, info):
            return books_of(author).filter(year=2002, author=author).exists()

        def resolve_m_first(author, info):
            book = books_of(author).filter(author=author).order_by("-year").first()
            return None if book is None else f"{book.title} {book.author_id == author.pk}"

        def resolve_m_aggregate(author, info):
            found = books_of(author).filter(author=author).aggregate(Max("year"), n=Count("id"))
            return json.dumps(found, sort_keys=True)

        def resolve_m_list(author, info):
            return list(books_of(author).filter(author=author).order_by("-title"))

        def resolve_m_iteration(author, info):
            return ",".join(b.title for b in books_of(author).filter(author=author).order_by("year")[1:3])

        def resolve_m_iterator(author, info):
            books = books_of(author).filter(author=author).order_by("title").iterator()
            return ",".join(b.title for b in books)

        def resolve_m_by_key(author, info):  # the key compared, not the instance
            return books_of(author).filter(author_id=author.pk).exclude(year=2000).count()

        def resolve_m_two_shapes(author, info):  # two shapes on one level
            return books_of(author).filter(author=author, year__gte=2000 + author.pk % 2).count()

        def resolve_m_tags(author, info):  # many-to-many, through the books, from the tag's side
            return sum(models.Tag.objects.using(book._state.db).filter(books=book).count()
                       for book in author.books.order_by("pk"))

        def resolve_r_count(author, info):
            return author.books.filter(year__gte=2001).count()

        def resolve_r_exists(author, info):
            return author.books.filter(year=2003).exists()

        def resolve_r_first(author, info):
            book = author.books.order_by("-title").first()
            return None if book is None else f"{book.title} by {book.author.name}"

        def resolve_r_last(author, info):
            book = author.books.order_by("title").reverse().last()
            return None if book is None else book.title

        def resolve_r_aggregate(author, info):
            found = author.books.aggregate(Avg("year"), n=Count("id"), top=Max("title"))
            return json.dumps(found, sort_keys=True, default=str)

        def resolve_r_len(author, info):
            return len(author.books.exclude(year=2001))

        def resolve_r_iteration(author, info):
            return ",".join(b.title for b in author.books.order_by("year")[1:3])

        def resolve_r_list(author, info):
            return list(author.books.order_by("title"))

        def resolve_r_second(author, info):
            books = author.books.order_by("year")
            return books[1].title if books.count() > 1 else None

        def resolve_r_two_shapes(author, info):  # two shapes on one level
            return author.books.filter(year__gte=2000 + author.pk % 2).count()

        def resolve_r_twice(author, info):  # the same rows asked twice: fresh rows the second time
            first, second = list(author.books.all()), list(author.books.all())
            return f"{len(first)} {len(second)} {all(a is not b for a, b in zip(first, second))}"

        def resolve_r_distinct_count(author, info):  # not grouped: as written
            return author.books.filter(tags__name__gte="tag 00").distinct().count()

        def resolve_r_annotated_count(author, info):  # a condition on an annotation: in the WHERE
            from django.db.models import F

            return author.books.annotate(next_year=F("year") + 1).filter(next_year__gt=2002).count()

        def resolve_r_joined_count(author, info):  # a multi-valued join: its rows counted, duplicates too
            return author.books.filter(tags__name__gte="tag 01").count()

        def resolve_r_tags(author, info):  # many-to-many, through the books
            return sum(book.tags.count() for book in author.books.order_by("pk"))

    class Publisher(DjangoObjectType):
        class Meta:
            model = models.Publisher
            fields = ("name",)
            name = "IpPublisher"
            registry = types

        author_count = graphene.Int()

        def resolve_author_count(publisher, info):
            return publisher.authors.count()

    class AuthorWithPublisher(Author):
        class Meta:
            model = models.Author
            fields = ("name", "publisher")
            name = "IpAuthorP"
            registry = types

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(Author), required=True)
        some_authors = graphene.List(Author, required=True)
        publishers = graphene.List(graphene.NonNull(Publisher), required=True)
        one_author = graphene.Field(Author)

        def resolve_authors(root, info):
            return models.Author.objects.using(info.context.db).order_by("pk")

        def resolve_some_authors(root, info):  # None parents among them
            found = list(models.Author.objects.using(info.context.db).order_by("pk"))
            return [a if i % 3 else None for i, a in enumerate(found)]

        def resolve_publishers(root, info):
            return models.Publisher.objects.using(info.context.db).order_by("pk")

        def resolve_one_author(root, info):
            return models.Author.objects.using(info.context.db).order_by("pk").first()

        prefetched_authors = graphene.List(graphene.NonNull(Author), required=True)

        def resolve_prefetched_authors(root, info):  # a Prefetch queryset: Django shares its hints dict
            from django.db.models import Prefetch

            books = Prefetch("books", queryset=models.Book.objects.order_by("title"))
            return models.Author.objects.using(info.context.db).order_by("pk").prefetch_related(books)

        add_book = graphene.Boolean()

        def resolve_add_book(root, info):  # a write in a query: what was learned before it is dropped
            author = models.Author.objects.using(info.context.db).order_by("pk").first()
            models.Book.objects.using(info.context.db).create(title="book 0.9", year=2009, author=author)
            return True

        add_book_in_bulk = graphene.Boolean()

        def resolve_add_book_in_bulk(root, info):  # a write that sends no signal
            author = models.Author.objects.using(info.context.db).order_by("pk").first()
            models.Book.objects.using(info.context.db).bulk_create([models.Book(title="book 0.9", year=2009,
                                                                                author=author)])
            return True

    return graphene.Schema(query=Query, types=[AuthorWithPublisher])


@pytest.fixture(scope="module")
def schema(django_example_project):
    return make_schema()


class Context:
    def __init__(self, db):
        self.db = db
        self.loaders = DataLoaderRegistry()


def execute(schema, orm_db, query, auto=True):
    """(the response as JSON, the statements it ran)."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    cls = AutoRelationsExecutionContext if auto else DataLoaderExecutionContext
    with CaptureQueriesContext(connections[orm_db]) as queries:
        result = schema.execute(query, context_value=Context(orm_db), execution_context_class=cls)
    return json.dumps(result.formatted), len(queries)


def shelf(library, orm_db):
    """The shelf: 50 authors x 4 books x 3 reviews, 5 publishers, and one author with no book."""
    from orm_library.models import Author

    made = library(orm_db, authors=50, books=4, reviews=3, publishers=5)
    Author.objects.using(orm_db).create(name="author without books")
    return made


def compare(schema, orm_db, query):
    """(switch off statements, switch on statements), the answers checked equal."""
    plain, off = execute(schema, orm_db, query, auto=False)
    auto, on = execute(schema, orm_db, query)
    assert '"errors"' not in plain, plain
    assert auto == plain
    return off, on


FIELDS = {  # field -> what it evaluates in place
    "bookCount": "property: count()",
    "hasEarlyBooks": "property: exists()",
    "firstTitle": "property: first()",
    "latestTitle": "property: last()",
    "newestYear": "property: aggregate()",
    "recentCount": "property: len()",
    "joinedTitles": "property: iteration",
    "bookList { title }": "property: list()",
    "rCount": "resolver: count()",
    "rExists": "resolver: exists()",
    "rFirst": "resolver: first(), the related manager's instance on the row",
    "rLast": "resolver: last() of a reverse()",
    "rAggregate": "resolver: aggregate() of three",
    "rLen": "resolver: len()",
    "rIteration": "resolver: iteration of a slice",
    "rList { title }": "resolver: list()",
    "rAnnotatedCount": "resolver: count() of an annotated queryset",
    "rJoinedCount": "resolver: count() through a many-to-many join",
}

MANAGER_FIELDS = {  # field -> what it evaluates in place: iterator(), and the manager's form
    "rIterator": "resolver: a related manager's iterator()",
    "rIteratorPrefetched": "resolver: iterator(chunk_size=...) of a prefetching queryset",
    "earlyBookCount": "property: Book.objects.filter(author=self, ...).count()",
    "mCount": "resolver: Book.objects.filter(author=self, ...).count()",
    "mExists": "resolver: exists()",
    "mFirst": "resolver: first()",
    "mAggregate": "resolver: aggregate()",
    "mList { title }": "resolver: list()",
    "mIteration": "resolver: iteration of a slice",
    "mIterator": "resolver: iterator()",
    "mByKey": "resolver: filter(author_id=self.pk).count()",
}


@pytest.mark.parametrize("field", list(FIELDS))
def test_a_relation_evaluated_in_place_costs_one_statement_per_level(schema, orm_db, library, field):
    shelf(library, orm_db)
    off, on = compare(schema, orm_db, "{ authors { name " + field + " } }")
    empty = "aggregate" in FIELDS[field]  # the empty set's answer: the author without books runs its own
    assert (off, on) == (1 + 51, 2 + empty)


@pytest.mark.parametrize("field", list(MANAGER_FIELDS))
def test_iterator_and_the_manager_s_form_cost_one_statement_per_level(schema, orm_db, library, field):
    shelf(library, orm_db)
    off, on = compare(schema, orm_db, "{ authors { name " + field + " } }")
    empty = "aggregate" in MANAGER_FIELDS[field]
    prefetched = "prefetching" in MANAGER_FIELDS[field]  # its reviews: one statement per chunk as written,
    # one for the level's books with the switch
    assert off == 1 + 51 + 50 * prefetched * 2  # 4 books in chunks of 3: two chunks per author with books
    assert on == 2 + empty + prefetched


def test_the_manager_s_form_with_empty_relations_mixed_shapes_and_none_parents(schema, orm_db, library):
    shelf(library, orm_db)
    query = "{ authors { " + " ".join(MANAGER_FIELDS) + " mTwoShapes } }"
    off, on = compare(schema, orm_db, query)
    last = json.loads(execute(schema, orm_db, query)[0])["data"]["authors"][-1]
    assert last["mCount"] == 0 and last["mList"] == [] and last["mFirst"] is None and last["mIterator"] == ""
    assert off == 1 + 51 * (len(MANAGER_FIELDS) + 1) + 50 * 2
    # one statement per field's shape; mTwoShapes's two shapes, one of them mCount's (year >= 2001 for odd
    # keys); the reviews rIteratorPrefetched prefetches; mAggregate's empty set
    assert on == 1 + len(MANAGER_FIELDS) + 1 + 1 + 1
    off, on = compare(schema, orm_db, "{ someAuthors { mCount mList { title } } }")
    assert (off, on) == (1 + 2 * 34, 3)


def test_the_manager_s_form_through_a_many_to_many(schema, orm_db, library):
    shelf(library, orm_db)
    off, on = compare(schema, orm_db, "{ authors { mTags } }")
    assert (off, on) == (1 + 51 + 200, 1 + 1 + 1)  # authors, their books (in place), the books' tags


def test_the_manager_s_form_with_no_parent_at_a_level_runs_as_written(schema, orm_db, library):
    shelf(library, orm_db)
    assert compare(schema, orm_db, "{ oneAuthor { mCount mList { title } earlyBookCount } }") == (4, 4)


def test_empty_relations_answer_as_without_the_switch(schema, orm_db, library):
    shelf(library, orm_db)
    query = "{ authors { " + " ".join(FIELDS) + " } }"
    auto, _ = execute(schema, orm_db, query)
    last = json.loads(auto)["data"]["authors"][-1]
    assert last["bookCount"] == 0 and last["rList"] == [] and last["newestYear"] is None
    off, on = compare(schema, orm_db, query)
    assert off == 1 + 51 * len(FIELDS)
    # one statement per shape (firstTitle's first() and rLast's reverse().last() are one: order_by("title")[:1]),
    # + each aggregate's empty set, computed once by the author without books
    assert on == 1 + (len(FIELDS) - 1) + 2


def test_count_and_exists_of_one_shape_share_a_statement(schema, orm_db, library):
    shelf(library, orm_db)
    off, on = compare(schema, orm_db, "{ authors { rSecond } }")  # count() then [1] of one ordering
    assert (off, on) == (1 + 51 + 50, 3)


def test_two_shapes_on_one_level_are_two_statements(schema, orm_db, library):
    shelf(library, orm_db)
    off, on = compare(schema, orm_db, "{ authors { rTwoShapes } }")
    assert (off, on) == (1 + 51, 3)


def test_none_parents(schema, orm_db, library):
    shelf(library, orm_db)
    auto, _ = execute(schema, orm_db, "{ someAuthors { bookCount rFirst } }")
    assert json.loads(auto)["data"]["someAuthors"][0] is None
    off, on = compare(schema, orm_db, "{ someAuthors { bookCount rFirst } }")
    assert (off, on) == (1 + 2 * 34, 3)


def test_nested_levels(schema, orm_db, library):
    shelf(library, orm_db)
    query = "{ authors { bookCount books { title reviewCount goodReviewCount bestRating } } }"
    off, on = compare(schema, orm_db, query)
    assert off == 1 + 51 + 51 + 3 * 200
    assert on == 1 + 1 + 1 + 3  # authors, their counts, their books (auto), the books' three shapes


def test_many_to_many_and_the_parents_of_a_to_one(schema, orm_db, library):
    shelf(library, orm_db)
    off, on = compare(schema, orm_db, "{ authors { rTags } publishers { authorCount } }")
    assert off == 1 + 51 + 200 + 1 + 5
    assert on == 1 + 1 + 1 + 1 + 1  # authors, their books, the books' tags (the books loaded in place are
    # a level), publishers, their authors


def test_rows_asked_twice_are_fresh_instances_of_one_load(schema, orm_db, library):
    shelf(library, orm_db)
    off, on = compare(schema, orm_db, "{ authors { rTwice } }")
    assert (off, on) == (1 + 2 * 51, 1 + 1)


def test_what_is_not_understood_runs_as_written(schema, orm_db, library):
    shelf(library, orm_db)
    assert compare(schema, orm_db, "{ authors { rDistinctCount } }") == (1 + 51, 1 + 51)
    assert compare(schema, orm_db, "{ oneAuthor { bookCount rList { title } } }") == (3, 3)  # no level


def test_outside_an_execution_the_same_code_costs_as_before(orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library.models import Author, Book

    import dataloader_sync.graphql  # noqa: F401  # the seam is installed
    from dataloader_sync.django import _inplace

    _inplace.install()
    shelf(library, orm_db)
    authors = list(Author.objects.using(orm_db).order_by("pk"))
    with CaptureQueriesContext(connections[orm_db]) as queries:
        found = [(a.book_count, a.first_title, a.newest_year, a.recent_count, len(a.book_list),
                  a.early_book_count, len(list(a.books.iterator())),
                  len(list(Book.objects.using(orm_db).filter(author=a).iterator()))) for a in authors]
    assert len(queries) == 8 * 51
    assert found[0] == (4, "book 0.0", 2003, 3, 4, 2, 4, 4) and found[-1] == (0, "", None, 0, 0, 0, 0, 0)


def test_relations_prefetched_with_a_prefetch_queryset(schema, orm_db, library):
    shelf(library, orm_db)
    off, on = compare(schema, orm_db, "{ prefetchedAuthors { bookCount rFirst rAggregate rList { title } } }")
    assert off == 2 + 51 * 3  # the authors, their books (prefetched: bookCount reads them), three shapes each
    assert on == 2 + 3 + 1  # + the empty set's aggregate


@pytest.mark.parametrize("write", ["addBook", "addBookInBulk"])
def test_a_write_during_the_execution_drops_what_was_learned(schema, orm_db, library, write):
    from django.db import transaction

    shelf(library, orm_db)
    read = "authors { bookCount rList { title } }"
    query = "{ before: " + read + " " + write + " after: " + read + " }"
    answers = []
    for auto in (False, True):
        with transaction.atomic(using=orm_db):
            answers.append(execute(schema, orm_db, query, auto=auto))
            transaction.set_rollback(True, using=orm_db)
    (plain, off), (auto, on) = answers
    assert auto == plain and '"errors"' not in plain
    assert '"bookCount": 5' in plain
    assert off == 1 + 2 * 51 + 2 + 1 + 2 * 51  # authors, theirs; the write (its author, the book); again
    assert on == 1 + 2 + 2 + 1 + 2 * 51  # after the write: as written


def test_a_mutation_runs_as_written(orm_db, library):
    import graphene
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from graphene_django import DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    from dataloader_sync.graphql import AutoRelationsExecutionContext

    class Author(DjangoObjectType):
        class Meta:
            model = models.Author
            fields = ("name",)
            name = "IpMAuthor"
            registry = Registry()

        book_count = graphene.Int()

    class Add(graphene.Mutation):
        before = graphene.List(Author)
        grow = graphene.Boolean()
        after = graphene.List(Author)

        def mutate(root, info):
            authors = list(models.Author.objects.using(orm_db).order_by("pk"))
            return Add(before=authors, after=authors)

        def resolve_grow(payload, info):  # a write no signal tells of
            models.Book.objects.using(orm_db).bulk_create([models.Book(title="new", author=payload.before[0])])
            return True

    class Mutation(graphene.ObjectType):
        add = Add.Field()

    class Query(graphene.ObjectType):
        ok = graphene.Boolean()

    library(orm_db, authors=3, books=2)
    schema = graphene.Schema(query=Query, mutation=Mutation)
    with CaptureQueriesContext(connections[orm_db]) as queries:
        result = schema.execute("mutation { add { before { bookCount } grow after { bookCount } } }",
                                execution_context_class=AutoRelationsExecutionContext)
    assert result.errors is None, result.errors
    counts = [[a["bookCount"] for a in result.data["add"][k]] for k in ("before", "after")]
    assert counts == [[2, 2, 2], [3, 2, 2]]
    assert len(queries) == 1 + 3 + 1 + 3


def test_nothing_outlives_the_execution(schema, orm_db, library):
    import gc

    from dataloader_sync.django import _inplace

    library(orm_db, authors=5, books=2)
    auto, _ = execute(schema, orm_db, "{ authors { bookCount rList { title } } }")
    assert '"errors"' not in auto
    assert _inplace._current.get() is None  # the context variable is reset
    gc.collect()
    assert not [o for o in gc.get_objects() if type(o) is _inplace.InPlace]  # type(): lazy objects stay lazy


def test_django_s_fast_paths_outside_an_execution_are_kept(orm_db, library):
    """The seam listens to no signal of Django's: a listener of ``m2m_changed`` makes every
    many-to-many ``add()`` read the rows it would add first, one of ``post_delete`` turns every fast
    ``QuerySet.delete()`` into a select of the rows, then their delete.  With the switch's modules
    imported, outside an execution, both stay one statement."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library.models import Book, Review, Tag

    import dataloader_sync.django._auto  # noqa: F401  (installs the seam)

    lib = library(orm_db, authors=2, books=2, reviews=2, tags=2)
    book = Book.objects.using(orm_db).get(pk=lib.books[0].pk)
    extra = Tag.objects.using(orm_db).create(name="a tag of its own")
    with CaptureQueriesContext(connections[orm_db]) as added:
        book.tags.add(extra)
    with CaptureQueriesContext(connections[orm_db]) as deleted:
        Review.objects.using(orm_db).filter(book=book).delete()
    assert len(added) == 1, [q["sql"] for q in added.captured_queries]
    assert len(deleted) == 1, [q["sql"] for q in deleted.captured_queries]
