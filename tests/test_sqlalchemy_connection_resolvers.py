"""graphene-sqlalchemy's ``SQLAlchemyConnectionField`` with a resolver returning a dynamic relationship's query
(filtered, ordered), with auto relations on, SQLite and PostgreSQL: one statement per query shape per level
(against a count and a page per parent), the pages, cursors, ``pageInfo`` and the response byte-identical to the
switch off."""
from __future__ import annotations

import importlib.util
import json

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")
graphene = pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_sqlalchemy") is None:
    pytest.skip("graphene-sqlalchemy is not installed", allow_module_level=True)

from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402
from sqlalchemy_helpers import (  # noqa: E402
    Author,
    Book,
    catalogue,  # noqa: F401
    database_url,  # noqa: F401
    engine,  # noqa: F401
    postgres_url,  # noqa: F401
)

from dataloader_sync import DataLoaderRegistry  # noqa: E402
from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext  # noqa: E402


def make_schema():
    from graphene import relay
    from graphene_sqlalchemy import SQLAlchemyConnectionField, SQLAlchemyObjectType
    from graphene_sqlalchemy.registry import Registry

    types = Registry()

    class BookNode(SQLAlchemyObjectType):
        class Meta:
            model = Book
            registry = types
            name = "CrBook"
            interfaces = (relay.Node,)
            only_fields = ("title", "year")

    class CountedBooks(relay.Connection):
        class Meta:
            node = BookNode
            name = "CrCountedBooks"

        total_count = graphene.Int()

        def resolve_total_count(connection, info):  # what the query's count() was, from the rows
            return connection.iterable.count()

    class CustomField(SQLAlchemyConnectionField):  # a resolution of its own: runs as written
        @classmethod
        def resolve_connection(cls, connection_type, model, info, args, resolved):
            return super().resolve_connection(connection_type, model, info, args, resolved)

    class AuthorNode(SQLAlchemyObjectType):
        class Meta:
            model = Author
            registry = types
            name = "CrAuthor"
            only_fields = ("name",)

        published = SQLAlchemyConnectionField(BookNode.connection)
        by_title = SQLAlchemyConnectionField(CountedBooks)
        odd_or_even = SQLAlchemyConnectionField(BookNode.connection)
        limited = SQLAlchemyConnectionField(BookNode.connection)
        custom = CustomField(BookNode.connection)

        def resolve_published(author, info, **args):  # filter + order; the books of 2001 tie
            return author.book_query.filter(Book.year >= 2001).order_by(Book.year.desc())

        def resolve_by_title(author, info, **args):
            return author.book_query.order_by(Book.title.desc())

        def resolve_odd_or_even(author, info, **args):  # two shapes on one level
            return author.book_query.filter(Book.year >= 2000 + author.id % 2).order_by(Book.title)

        def resolve_limited(author, info, **args):  # a limit of its own: runs as written
            return author.book_query.order_by(Book.title).limit(2)

        def resolve_custom(author, info, **args):
            return author.book_query.order_by(Book.title)

    class Query(graphene.ObjectType):
        authors = graphene.List(AuthorNode)

        def resolve_authors(root, info):
            found = info.context["session"].scalars(select(Author).order_by(Author.id)).all()
            return [None if author.id == 3 else author for author in found]  # a None parent among them

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
    """``(off, on, registry, the response)``, the answers asserted the same JSON, with no error."""
    session, statements = shelf
    with Session(session.bind) as first, Session(session.bind) as second:
        plain, off, _ = execute(schema, first, statements, query, False)
        auto, on, registry = execute(schema, second, statements, query, True)
    assert auto == plain and '"errors"' not in auto, plain
    return off, on, registry, json.loads(auto)


PAGE = "edges { cursor node { title year } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor }"


@pytest.mark.parametrize("arguments", ["", "(first: 1)", "(first: 2, after: \"YXJyYXljb25uZWN0aW9uOjA=\")",
                                       "(last: 1)", "(first: 10)"])
def test_a_connection_over_a_resolver_s_query_is_one_statement_for_the_level(schema, shelf, arguments):
    query = "{ authors { name published" + arguments + " { " + PAGE + " } } }"
    off, on, registry, answer = compare(schema, shelf, query)
    parents = 4  # authors 1, 2, 4 and the one without books (3 is None)
    assert off == 1 + parents + (parents - 1)  # a count each, a page each but the empty one's
    assert on == 1 + 1
    stats = registry.statistics_by_loader()["Author.published"]
    assert stats.batch_invoke_count == 1 and stats.load_count == parents
    assert answer["data"]["authors"][2] is None and answer["data"]["authors"][-1]["published"]["edges"] == []
    windowed = "first" in arguments  # the rows up to the page's end, each parent's count in the same statement
    sql = shelf[1].sql[-1]
    assert ("row_number() OVER (PARTITION BY" in sql and "count(*) OVER (PARTITION BY" in sql) is windowed, sql


def test_the_count_is_the_rows_and_ties_keep_their_order(schema, shelf):
    off, on, _, answer = compare(schema, shelf, "{ authors { published { edges { node { title } } } "
                                                "byTitle(first: 2) { totalCount " + PAGE + " } } }")
    assert (off, on) == (1 + 7 + 7 + 4, 1 + 2)  # and without the switch totalCount's count() per parent
    first = answer["data"]["authors"][0]
    assert [e["node"]["title"] for e in first["published"]["edges"]] == ["book 1.2", "book 1.1"]  # by id
    assert first["byTitle"]["totalCount"] == 3 and first["byTitle"]["pageInfo"]["hasNextPage"] is True
    assert answer["data"]["authors"][-1]["byTitle"]["totalCount"] == 0


def test_two_shapes_on_one_level_are_two_statements(schema, shelf):
    off, on, registry, _ = compare(schema, shelf, "{ authors { oddOrEven(first: 1) { " + PAGE + " } } }")
    assert (off, on) == (1 + 4 + 3, 1 + 2)
    assert set(registry.keys()) == {"Author.odd_or_even", "Author.odd_or_even #2"}


@pytest.mark.parametrize("field", ["limited", "custom"])
def test_what_is_not_recognised_runs_as_written(schema, shelf, field):
    off, on, _, _ = compare(schema, shelf, "{ authors { " + field + "(first: 1) { " + PAGE + " } } }")
    assert off == on == 1 + 4 + 3
