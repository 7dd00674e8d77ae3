"""Queries a user's resolver returns (a ``lazy="dynamic"`` relationship's query, ``with_parent``), with auto
relations on, on graphene-sqlalchemy types, plain graphene and Ariadne over the catalogue models, SQLite and
PostgreSQL: one statement per query shape per level, each parent its own rows in its own order, limits and offsets
per parent, the response byte-identical to the switch off."""
from __future__ import annotations

import importlib.util
import json

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")
graphene = pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_sqlalchemy") is None:
    pytest.skip("graphene-sqlalchemy is not installed", allow_module_level=True)

from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Query, Session, joinedload, with_parent  # noqa: E402
from sqlalchemy_helpers import (  # noqa: E402
    Author,
    Book,
    Tag,
    catalogue,  # noqa: F401
    database_url,  # noqa: F401
    engine,  # noqa: F401
    postgres_url,  # noqa: F401
)

from dataloader_sync import DataLoaderRegistry  # noqa: E402
from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext  # noqa: E402


class ReversedQuery(Query):
    """A Query class that runs its own way (its rows the other way round)."""

    def __iter__(self):
        return iter(list(super().__iter__())[::-1])


class AuthorResolvers:
    """The resolvers of the Author type's fields that return queries."""

    @staticmethod
    def resolve_published_books(author, info):  # filter + order; the books of 2001 tie
        return author.book_query.filter(Book.year >= 2001).order_by(Book.year.desc())

    @staticmethod
    def resolve_top_two(author, info):
        return author.book_query.order_by(Book.title.desc()).limit(2)

    @staticmethod
    def resolve_second_and_third(author, info):
        return author.book_query.order_by(Book.title).offset(1).limit(2)

    @staticmethod
    def resolve_all_but_first(author, info):  # an offset alone
        return author.book_query.order_by(Book.title).offset(1)

    @staticmethod
    def resolve_tied(author, info):  # the limit cuts through a tie: the primary key decides
        return author.book_query.order_by(Book.year.desc()).limit(1)

    @staticmethod
    def resolve_odd_or_even(author, info):  # two shapes on one level
        return author.book_query.filter(Book.year >= 2000 + author.id % 2).order_by(Book.title)

    @staticmethod
    def resolve_every_book(author, info):  # the dynamic query itself
        return author.book_query

    @staticmethod
    def resolve_with_parent(author, info):
        session = info.context["session"]
        return session.query(Book).filter(with_parent(author, Author.books)).order_by(Book.title.desc())

    @staticmethod
    def resolve_by_hand(author, info):
        return info.context["session"].query(Book).filter(Book.author_id == author.id, Book.year == 2000)

    @staticmethod
    def resolve_tags_joined(author, info):  # a joined eager load of a collection: rows made unique
        return author.book_query.options(joinedload(Book.tags)).order_by(Book.title)

    @staticmethod
    def resolve_no_autoflush(author, info):  # a load option: runs as written
        return author.book_query.autoflush(False).order_by(Book.title)

    @staticmethod
    def resolve_distinct_titles(author, info):  # distinct: not recognised, runs as written
        return author.book_query.distinct().order_by(Book.title)

    @staticmethod
    def resolve_neighbours(author, info):  # another author's books: not this parent's relation, runs as written
        return info.context["session"].query(Book).filter(Book.author_id == author.id % 5 + 1).order_by(Book.id)

    @staticmethod
    def resolve_reversed_by_its_class(author, info):  # a Query subclass with its own __iter__: runs as written
        return ReversedQuery(Book, info.context["session"]).filter(with_parent(author, Author.books))

    @staticmethod
    def resolve_as_select(author, info):  # a Select: no list without the switch, nor with it
        return select(Book).where(with_parent(author, Author.books))


def make_schema():
    """graphene-sqlalchemy types whose list fields are resolvers returning the parents' relation queries."""
    from graphene_sqlalchemy import SQLAlchemyObjectType
    from graphene_sqlalchemy.registry import Registry

    types = Registry()

    def meta(model, name):
        return type("Meta", (), {"model": model, "registry": types, "name": name})

    tag_type = type("RqTag", (SQLAlchemyObjectType,), {"Meta": meta(Tag, "Tag")})

    def resolve_tags_desc(book, info):  # many-to-many through the dynamic query's secondary
        return book.tag_query.order_by(Tag.name.desc())

    book_type = type("RqBook", (SQLAlchemyObjectType,), {
        "Meta": meta(Book, "Book"), "tags_desc": graphene.List(tag_type), "resolve_tags_desc": resolve_tags_desc})
    fields = {name[8:]: graphene.List(book_type) for name in vars(AuthorResolvers) if name.startswith("resolve_")}
    resolvers = {name: getattr(AuthorResolvers, name) for name in vars(AuthorResolvers) if name.startswith("resolve_")}
    author_type = type("RqAuthor", (SQLAlchemyObjectType,), {"Meta": meta(Author, "Author"), **fields, **resolvers})

    class Query(graphene.ObjectType):
        authors = graphene.List(author_type)

        def resolve_authors(root, info):
            return info.context["session"].scalars(select(Author).order_by(Author.id)).all()

    return graphene.Schema(query=Query)


@pytest.fixture(scope="module")
def schema():
    return make_schema()


@pytest.fixture
def shelf(catalogue):
    """The catalogue with one more author, who has no books; ``(session, statements)``."""
    session, statements = catalogue
    session.add(Author(id=50, name="author without books"))
    session.commit()
    return session, statements


def execute(schema, session, statements, query, auto):
    statements.reset()
    context = {"session": session, "loaders": DataLoaderRegistry()}
    cls = AutoRelationsExecutionContext if auto else DataLoaderExecutionContext
    result = schema.execute(query, context_value=context, execution_context_class=cls)
    return json.dumps(result.formatted), statements.count, context["loaders"]


def compare(schema, shelf, query):
    """``(off, on, registry)``: the statements of *query* without and with the switch (each in a session of
    its own, nothing loaded), after asserting their answers are the same JSON, with no error."""
    session, statements = shelf
    with Session(session.bind) as first, Session(session.bind) as second:
        plain, off, _ = execute(schema, first, statements, query, False)
        auto, on, registry = execute(schema, second, statements, query, True)
    assert auto == plain and '"errors"' not in auto
    return off, on, registry


def test_a_filtered_ordered_dynamic_query_is_one_statement_for_the_level(schema, shelf):
    off, on, registry = compare(schema, shelf, "{ authors { name publishedBooks { title year } } }")
    assert (off, on) == (1 + 5, 1 + 1)
    stats = registry.statistics_by_loader()["Author.published_books"]
    assert stats.batch_invoke_count == 1 and stats.load_count == 5


def test_the_answer_keeps_each_parent_s_rows_and_order(schema, shelf):
    session, statements = shelf
    auto, count, _ = execute(schema, session, statements, "{ authors { publishedBooks { title } } }", True)
    first = json.loads(auto)["data"]["authors"][0]["publishedBooks"]
    assert first == [{"title": "book 1.2"}, {"title": "book 1.1"}]  # year 2001 both: by id (1.2 was added first)
    assert json.loads(auto)["data"]["authors"][-1]["publishedBooks"] == []
    assert count == 2


@pytest.mark.parametrize("field", ["topTwo", "secondAndThird", "allButFirst", "tied"])
def test_limits_and_offsets_apply_per_parent(schema, shelf, field):
    session, statements = shelf
    off, on, _ = compare(schema, shelf, "{ authors { name " + field + " { title } } }")
    assert (off, on) == (1 + 5, 1 + 1)
    assert "row_number() OVER (PARTITION BY" in statements.sql[-1]


def test_two_shapes_on_one_level_are_two_statements(schema, shelf):
    off, on, registry = compare(schema, shelf, "{ authors { oddOrEven { title year } } }")
    assert (off, on) == (1 + 5, 1 + 2)
    assert set(registry.keys()) == {"Author.odd_or_even", "Author.odd_or_even #2"}  # two loaders of one field


@pytest.mark.parametrize("field", ["everyBook", "withParent", "byHand"])
def test_the_dynamic_query_itself_with_parent_and_a_criterion_by_hand(schema, shelf, field):
    off, on, _ = compare(schema, shelf, "{ authors { " + field + " { title } } }")
    assert (off, on) == (1 + 5, 1 + 1)


def test_loader_options_are_kept(schema, shelf):
    # (the tags' order is not asked for: Book.tags has no order_by, so a join gives them in any order)
    off, on, _ = compare(schema, shelf, "{ authors { tagsJoined { title } } }")
    assert (off, on) == (1 + 5, 1 + 1)  # a book per row of its tags joined, made unique


def test_a_many_to_many_dynamic_query_and_the_level_below(schema, shelf):
    off, on, _ = compare(schema, shelf, "{ authors { publishedBooks { title tagsDesc { name } } } }")
    assert (off, on) == (1 + 5 + 8, 1 + 1 + 1)  # 8 books of 2001 (two per author with books)


@pytest.mark.parametrize("field", ["distinctTitles", "neighbours", "noAutoflush", "reversedByItsClass"])
def test_a_query_not_recognised_runs_per_parent(schema, shelf, field):
    off, on, _ = compare(schema, shelf, "{ authors { " + field + " { title } publishedBooks { title } } }")
    assert (off, on) == (1 + 5 + 5, 1 + 5 + 1)


def test_graphene_sqlalchemy_s_own_field_of_a_dynamic_relationship(schema, shelf):
    off, on, _ = compare(schema, shelf, "{ authors { bookQuery { title tagQuery { name } } } }")
    assert (off, on) == (1 + 5 + 12, 1 + 1 + 1)  # auto relations load each dynamic relationship for the level


def test_a_select_returned_fails_alike(schema, shelf):
    session, statements = shelf
    query = "{ authors { asSelect { title } publishedBooks { title } } }"
    with Session(session.bind) as first, Session(session.bind) as second:
        plain, off, _ = execute(schema, first, statements, query, False)
        auto, on, _ = execute(schema, second, statements, query, True)
    assert auto == plain and "Expected Iterable" in auto
    assert (off, on) == (1 + 5, 1 + 1)


def test_ariadne_and_plain_graphql_resolvers(shelf):
    ariadne = pytest.importorskip("ariadne")
    from graphql import graphql_sync

    sdl = """type Query { authors: [Author!]! }
             type Author { name: String! latest: [Book!]! }
             type Book { title: String! year: Int }"""
    query, author = ariadne.QueryType(), ariadne.ObjectType("Author")
    query.set_field("authors", lambda root, info: info.context["session"].scalars(
        select(Author).order_by(Author.id)).all())
    author.set_field("latest", lambda a, info: a.book_query.order_by(Book.year.desc(), Book.title).limit(2))
    schema = ariadne.make_executable_schema(sdl, query, author)
    session, statements = shelf
    answers = []
    for cls in (DataLoaderExecutionContext, AutoRelationsExecutionContext):
        with Session(session.bind) as own:
            statements.reset()
            context = {"session": own, "loaders": DataLoaderRegistry()}
            result = graphql_sync(schema, "{ authors { name latest { title year } } }", context_value=context,
                                  execution_context_class=cls)
            answers.append((json.dumps(result.formatted), statements.count))
    assert answers[0][0] == answers[1][0] and '"errors"' not in answers[0][0]
    assert (answers[0][1], answers[1][1]) == (1 + 5, 1 + 1)


def test_with_django_s_integration_in_the_chain(schema, shelf):
    pytest.importorskip("django")
    import django.db.models  # noqa: F401  # Django's user_resolver wraps first, SQLAlchemy's wraps that

    from dataloader_sync.graphql._auto_relations import _integrations

    assert [m.__name__ for m in _integrations()] == ["dataloader_sync.django._auto", "dataloader_sync.sqlalchemy._auto"]
    off, on, registry = compare(schema, shelf, "{ authors { name publishedBooks { title year } } }")
    assert (off, on) == (1 + 5, 1 + 1)
    assert set(registry.keys()) == {"Author.published_books"}


def test_plain_graphene_types(shelf):
    class BookType(graphene.ObjectType):
        title = graphene.String()

    class AuthorType(graphene.ObjectType):
        name = graphene.String()
        top_two = graphene.List(BookType)
        resolve_top_two = AuthorResolvers.resolve_top_two

    class Root(graphene.ObjectType):
        authors = graphene.List(AuthorType)

        def resolve_authors(root, info):
            return info.context["session"].scalars(select(Author).order_by(Author.id)).all()

    off, on, registry = compare(graphene.Schema(query=Root), shelf, "{ authors { name topTwo { title } } }")
    assert (off, on) == (1 + 5, 1 + 1)
    assert set(registry.keys()) == {"Author.top_two"}  # the parent's class, as on Django
