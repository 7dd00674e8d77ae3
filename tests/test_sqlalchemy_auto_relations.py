"""Auto relations on SQLAlchemy (AutoRelationsExecutionContext): plain graphene, Ariadne and graphene-sqlalchemy
types over the catalogue models with no relation resolver, one statement per relationship per level, the same
response as without the switch, on SQLite and PostgreSQL.  graphene-sqlalchemy's tests run where it is installed
(its ``batching=True`` fields, asyncio-only on their own, resolve synchronously here)."""
from __future__ import annotations

import importlib.util
import json

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy")
graphene = pytest.importorskip("graphene")

from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import selectinload  # noqa: E402
from sqlalchemy_helpers import (  # noqa: E402
    Author,
    Book,
    catalogue,  # noqa: F401
    database_url,  # noqa: F401
    engine,  # noqa: F401
    postgres_url,  # noqa: F401
)

from dataloader_sync import DataLoaderRegistry, no_auto_relations  # noqa: E402
from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext  # noqa: E402

QUERY = """{ authors { name publisher { name } profile { bio } books { title tags { name } reviews { rating } } } }"""


def run(schema_execute, query, auto, statements, **context):
    statements.reset()
    context.setdefault("loaders", DataLoaderRegistry())
    result = schema_execute(query, context, AutoRelationsExecutionContext if auto else DataLoaderExecutionContext)
    return json.dumps(result.formatted), statements.count, context["loaders"]


def graphene_schema(opt_out=False):
    """Plain graphene types: no resolver but the root's."""

    class Tag(graphene.ObjectType):
        name = graphene.String()

    class Review(graphene.ObjectType):
        rating = graphene.Int()

    class Publisher(graphene.ObjectType):
        name = graphene.String()

    class Profile(graphene.ObjectType):
        bio = graphene.String()

    class BookType(graphene.ObjectType):
        class Meta:
            name = "Book"

        title = graphene.String()
        tags = graphene.List(Tag)
        reviews = graphene.List(Review)
        author = graphene.Field(lambda: AuthorType)
        if opt_out:
            tags = no_auto_relations(graphene.Field(graphene.List(Tag)))

    class AuthorType(graphene.ObjectType):
        class Meta:
            name = "Author"

        name = graphene.String()
        publisher = graphene.Field(Publisher)
        profile = graphene.Field(Profile)
        books = graphene.List(BookType)

    class Query(graphene.ObjectType):
        authors = graphene.List(AuthorType, eager=graphene.Boolean())
        books = graphene.List(BookType)

        def resolve_books(root, info):
            return info.context["session"].scalars(select(Book).order_by(Book.id)).all()

        def resolve_authors(root, info, eager=False):
            statement = select(Author).order_by(Author.id)
            if eager:
                statement = statement.options(selectinload(Author.books).selectinload(Book.tags))
            return info.context["session"].scalars(statement).all()

    schema = graphene.Schema(query=Query)

    def execute(query, context, cls):
        return schema.execute(query, context_value=context, execution_context_class=cls)

    return execute


@pytest.fixture
def fresh():
    """``fresh(session)``: another session on its engine (nothing loaded), closed after the test."""
    made = []

    def make(session):
        made.append(session.__class__(session.bind))
        return made[-1]

    yield make
    for session in made:
        session.close()


def test_graphene_types_without_resolvers_cost_one_statement_per_relationship_per_level(catalogue, fresh):
    session, statements = catalogue
    execute = graphene_schema()
    auto, count, registry = run(execute, QUERY, True, statements, session=session)
    plain, plain_count, _ = run(execute, QUERY, False, statements, session=fresh(session))
    assert auto == plain and '"errors"' not in auto
    assert count == 6  # authors, their publishers, profiles, books; the books' tags, reviews
    assert plain_count > 6 + 4
    assert {"Author.publisher", "Author.profile", "Author.books", "Book.tags", "Book.reviews"} <= set(registry.keys())


def test_to_one_hops_the_selection_reads_are_joined_into_the_batch(catalogue, fresh):
    session, statements = catalogue
    execute = graphene_schema()
    query = "{ books { title author { name publisher { name } profile { bio } } reviews { rating } } }"
    auto, count, registry = run(execute, query, True, statements, session=session)
    plain, _, _ = run(execute, query, False, statements, session=fresh(session))
    assert auto == plain and '"errors"' not in auto
    assert count == 3  # the books; their authors with publisher and profile joined; the reviews
    assert "Book.author, joinedload=(publisher, profile)" in registry.keys()


def test_loaded_relationships_cost_no_statement(catalogue, fresh):
    session, statements = catalogue
    execute = graphene_schema()
    query = "{ authors(eager: true) { name books { title tags { name } } } }"
    auto, count, _ = run(execute, query, True, statements, session=session)
    plain, plain_count, _ = run(execute, query, False, statements, session=fresh(session))
    assert auto == plain
    assert count == plain_count == 3  # the authors, and the two selectin loads


def test_no_auto_relations_and_own_resolvers_are_left_alone(catalogue, fresh):
    session, statements = catalogue
    execute = graphene_schema(opt_out=True)
    query = "{ authors { books { title tags { name } } } }"
    auto, count, _ = run(execute, query, True, statements, session=session)
    plain, _, _ = run(execute, query, False, statements, session=fresh(session))
    assert auto == plain
    assert count == 2 + 12  # the authors, their books, then the tags of each of their 12 books


ARIADNE_SDL = """
type Query { authors: [Author!]! }
type Author { name: String! publisher: Publisher profile: Profile books: [Book!]! }
type Publisher { name: String! authors: [Author!]! }
type Profile { bio: String! }
type Book { title: String! tags: [Tag!]! reviews: [Review!]! author: Author }
type Tag { name: String! }
type Review { rating: Int! }
"""


def test_ariadne_s_default_resolver(catalogue, fresh):
    ariadne = pytest.importorskip("ariadne")
    from graphql import graphql_sync

    session, statements = catalogue
    query = ariadne.QueryType()

    @query.field("authors")
    def resolve_authors(root, info):
        return info.context["session"].scalars(select(Author).order_by(Author.id)).all()

    schema = ariadne.make_executable_schema(ARIADNE_SDL, query)

    def execute(text, context, cls):
        return graphql_sync(schema, text, context_value=context, execution_context_class=cls)

    text = "{ authors { name publisher { name authors { name } } books { title author { name } tags { name } } } }"
    auto, count, _ = run(execute, text, True, statements, session=session)
    plain, _, _ = run(execute, text, False, statements, session=fresh(session))
    assert auto == plain and '"errors"' not in auto
    assert count == 5  # authors; publishers, their authors; books; tags (the books' authors are in the session)


def test_without_a_registry_the_execution_makes_one_and_closes_it(catalogue):
    session, statements = catalogue
    execute = graphene_schema()
    made = []

    class Watched(AutoRelationsExecutionContext):
        def auto_loaders(self):
            made.append(super().auto_loaders())
            return made[-1]

    result = execute(QUERY, {"session": session}, Watched)
    assert result.errors is None
    assert made and all(r is made[0] for r in made) and made[0].closed


def needs_graphene_sqlalchemy(test):
    # graphene-sqlalchemy's default connection field for a relationship warns that it is deprecated
    test = pytest.mark.filterwarnings("ignore:UnsortedSQLAlchemyConnectionField:DeprecationWarning")(test)
    return pytest.mark.skipif(importlib.util.find_spec("graphene_sqlalchemy") is None,
                              reason="graphene-sqlalchemy is not installed")(test)


def graphene_sqlalchemy_schema(batching, connections=True):
    from graphene import relay
    from graphene_sqlalchemy import SQLAlchemyObjectType
    from graphene_sqlalchemy.registry import Registry
    from sqlalchemy_helpers import Profile, Publisher, Review, Tag

    types = Registry()

    def meta(model, name, node=False):
        return type("Meta", (), {"model": model, "registry": types, "batching": batching, "name": name,
                                 **({"interfaces": (relay.Node,)} if node else {})})

    suffix = "B" if batching else "P"
    type(f"Tag{suffix}", (SQLAlchemyObjectType,), {"Meta": meta(Tag, "Tag")})
    type(f"Review{suffix}", (SQLAlchemyObjectType,), {"Meta": meta(Review, "Review", node=connections)})
    type(f"Publisher{suffix}", (SQLAlchemyObjectType,), {"Meta": meta(Publisher, "Publisher")})
    type(f"Profile{suffix}", (SQLAlchemyObjectType,), {"Meta": meta(Profile, "Profile")})
    type(f"Book{suffix}", (SQLAlchemyObjectType,), {"Meta": meta(Book, "Book")})
    author_type = type(f"Author{suffix}", (SQLAlchemyObjectType,), {"Meta": meta(Author, "Author")})

    class Query(graphene.ObjectType):
        authors = graphene.List(author_type)

        def resolve_authors(root, info):
            return info.context["session"].scalars(select(Author).order_by(Author.id)).all()

    schema = graphene.Schema(query=Query)

    def execute(query, context, cls):
        return schema.execute(query, context_value=context, execution_context_class=cls)

    return execute


GRAPHENE_SQLALCHEMY_QUERY = """{ authors { name publisher { name } profile { bio }
    books { title tags { name } reviews(first: 1) { pageInfo { hasNextPage } edges { node { rating } } } } } }"""


@needs_graphene_sqlalchemy
def test_graphene_sqlalchemy_relationship_fields(catalogue, fresh):
    session, statements = catalogue
    plain_execute = graphene_sqlalchemy_schema(batching=False)
    auto, count, registry = run(plain_execute, GRAPHENE_SQLALCHEMY_QUERY, True, statements, session=session)
    plain, plain_count, _ = run(plain_execute, GRAPHENE_SQLALCHEMY_QUERY, False, statements,
                                session=fresh(session))
    assert auto == plain and '"errors"' not in auto
    assert count == 6 < plain_count
    assert {"Author.books", "Book.tags", "Book.reviews"} <= set(registry.keys())


@needs_graphene_sqlalchemy
def test_graphene_sqlalchemy_batching_runs_synchronously(catalogue, fresh):
    session, statements = catalogue
    # (graphene-sqlalchemy 3.0.0rc2 cannot build a batching connection field's filters: lists here)
    batching = graphene_sqlalchemy_schema(batching=True, connections=False)
    plain = graphene_sqlalchemy_schema(batching=False, connections=False)
    auto, count, _ = run(batching, QUERY, True, statements, session=session)
    expected, _, _ = run(plain, QUERY, False, statements, session=fresh(session))
    assert auto == expected and '"errors"' not in auto
    assert count == 6
    from graphene_sqlalchemy.converter import is_selectin_available

    if is_selectin_available:  # graphene-sqlalchemy turns batching off by itself on SQLAlchemy 2.1
        # without the switch, a batching=True field is a coroutine this sync execution refuses
        refused, _, _ = run(batching, QUERY, False, statements, session=fresh(session))
        assert "not awaitables" in refused
