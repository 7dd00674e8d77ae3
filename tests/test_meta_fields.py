"""Meta fields under every switch but strawberry-django's (tests/test_strawberry_django_auto_relations.py has it):
``__typename`` on every object of a five-level query (aliased, in a fragment, on connection edges and page infos),
``__schema`` and ``__type`` answer exactly as with the switch off.  Apollo and Relay clients add ``__typename`` to
every selection set, so a switch that broke it would break every such client.

Stacks: graphene-django (``AutoRelationsExecutionContext``, and the ``DATALOADER_SYNC_AUTO_RELATIONS`` setting with
``dataloader_sync.django.GraphQLView`` through Django's test client), graphene-sqlalchemy, Ariadne and plain
graphql-core (``graphql_sync``) over Django models and over SQLAlchemy models, on SQLite."""
from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("graphql")

from orm_fixtures import library  # noqa: F401

from dataloader_sync import DataLoaderRegistry

SDL = """
type Query { authors: [Author!]! }
type Author { name: String! publisher: Publisher books: [Book!]! }
type Publisher { name: String! authors: [Author!]! }
type Book { title: String! author: Author tags: [Tag!]! reviews: [Review!]! }
type Tag { name: String! books: [Book!]! }
type Review { rating: Int! book: Book! }
"""
#: The relations of SDL, by type: to-many ones need a resolver without the switch on Django models.
TO_MANY = {"Author": ["books"], "Publisher": ["authors"], "Book": ["tags", "reviews"], "Tag": ["books"]}

META = """__schema { queryType { name } mutationType { name } types { name } }
    __type(name: "Book") { __typename name kind fields { name type { name kind ofType { name } } } }"""
QUERY = """{ __typename kind: __typename
    authors { __typename name publisher { __typename name authors { __typename name } }
        books { ...B tags { __typename name books { __typename title author { __typename name } } }
            reviews { __typename rating book { __typename title } } } }
    META }
fragment B on Book { __typename title }""".replace("META", META)


def same_answers(on, off):
    """*on* and *off* are the same response, with no error, and every object in it names its type."""
    assert on == off
    body = json.loads(on)
    assert "errors" not in body, body["errors"]
    assert body["data"]["__typename"] == body["data"]["kind"] == "Query"
    assert body["data"]["__schema"]["queryType"] == {"name": "Query"}
    assert {f["name"] for f in body["data"]["__type"]["fields"]} >= {"title", "author", "tags", "reviews"}
    typenames = set()

    def walk(value):
        if isinstance(value, dict):
            if "__typename" in value:
                typenames.add(value["__typename"])
            elif "name" not in value or "kind" not in value:  # an introspection type has no __typename asked
                assert "title" not in value and "rating" not in value, value
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(body["data"]["authors"])
    assert typenames >= {"Author", "Publisher", "Book", "Tag", "Review"}, typenames
    assert len(body["data"]["authors"]) > 1 and body["data"]["authors"][0]["books"][0]["tags"][0]["books"]


# -- Django models -------------------------------------------------------------------------------------------------


@pytest.fixture
def django_library(django_example_project, library):
    pytest.importorskip("django")
    library("default", authors=4, books=2, reviews=2)


def django_sdl_schema(listed):
    """SDL over orm_library with a root resolver only; *listed*: the to-many fields list their related manager, as
    they must without the switch (graphql-core's default resolver would return the manager)."""
    import graphql
    from orm_library import models

    schema = graphql.build_schema(SDL)
    schema.query_type.fields["authors"].resolve = lambda root, info: list(models.Author.objects.order_by("pk"))
    if listed:
        for type_name, names in TO_MANY.items():
            for name in names:
                schema.type_map[type_name].fields[name].resolve = lambda obj, info: list(
                    getattr(obj, info.field_name).all())
    return schema


def switch(on):
    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    return AutoRelationsExecutionContext if on else DataLoaderExecutionContext


def execution_class(on):
    """The keyword naming *on*'s class: ``executor_class`` on graphql-core 3.3, else ``execution_context_class``."""
    import graphql

    return {"executor_class" if hasattr(graphql.execution, "Executor") else "execution_context_class": switch(on)}


def graphql_core_sync(schema, query, on):
    import graphql

    registry = DataLoaderRegistry()
    result = graphql.graphql_sync(schema, query, context_value={"loaders": registry}, **execution_class(on))
    registry.close()
    return json.dumps(result.formatted)


def ariadne_sync(schema, query, on):
    ariadne = pytest.importorskip("ariadne")
    registry = DataLoaderRegistry()
    success, result = ariadne.graphql_sync(schema, {"query": query}, context_value={"loaders": registry},
                                           execution_context_class=switch(on))
    registry.close()
    assert success, result
    return json.dumps(result)


def ariadne_django_schema(listed):
    ariadne = pytest.importorskip("ariadne")
    from orm_library import models

    query = ariadne.QueryType()
    query.set_field("authors", lambda root, info: list(models.Author.objects.order_by("pk")))
    bindables = [query]
    if listed:
        for type_name, names in TO_MANY.items():
            bound = ariadne.ObjectType(type_name)
            for name in names:
                bound.set_field(name, lambda obj, info: list(getattr(obj, info.field_name).all()))
            bindables.append(bound)
    return ariadne.make_executable_schema(SDL, *bindables)


@pytest.mark.parametrize("stack", ["graphql-core", "ariadne"])
def test_meta_fields_on_django_models_answer_as_without_the_switch(django_library, stack):
    make, execute = {"graphql-core": (django_sdl_schema, graphql_core_sync),
                     "ariadne": (ariadne_django_schema, ariadne_sync)}[stack]
    same_answers(execute(make(listed=False), QUERY, on=True), execute(make(listed=True), QUERY, on=False))


def graphene_django_schema():
    pytest.importorskip("graphene")
    if importlib.util.find_spec("graphene_django") is None:
        pytest.skip("graphene_django is not installed")
    import graphene
    from graphene_django import DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    types = Registry()  # apart from other modules' types of these models

    def meta(model, fields, **more):
        return type("Meta", (), {"model": model, "fields": fields, "registry": types, **more})

    type("MetaTag", (DjangoObjectType,), {"Meta": meta(models.Tag, ("name", "books"), name="Tag")})
    type("MetaReview", (DjangoObjectType,), {"Meta": meta(models.Review, ("rating", "book"), name="Review")})
    type("MetaPublisher", (DjangoObjectType,), {"Meta": meta(models.Publisher, ("name", "authors"), name="Publisher")})
    type("MetaBook", (DjangoObjectType,), {"Meta": meta(models.Book, ("title", "author", "tags", "reviews"),
                                                        name="Book")})
    author = type("MetaAuthor", (DjangoObjectType,), {"Meta": meta(models.Author, ("name", "publisher", "books"),
                                                                    name="Author")})

    class Query(graphene.ObjectType):
        authors = graphene.List(graphene.NonNull(author), required=True)

        def resolve_authors(root, info):
            return models.Author.objects.order_by("pk")

    return graphene.Schema(query=Query)


def test_meta_fields_on_graphene_django_answer_as_without_the_switch(django_library):
    schema = graphene_django_schema()

    def execute(on):
        class Context:
            loaders = DataLoaderRegistry()

        result = schema.execute(QUERY, context_value=Context(), execution_context_class=switch(on))
        Context.loaders.close()
        return json.dumps(result.formatted)

    same_answers(execute(True), execute(False))


def test_meta_fields_through_the_django_setting_and_our_view_answer_as_without_it(django_library):
    schema = graphene_django_schema()
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext
    from django.urls import path

    from dataloader_sync.django import GraphQLView

    urls = type("urls", (), {"urlpatterns": [path("graphql", GraphQLView.as_view(schema=schema))]})

    def post(on):
        with override_settings(ROOT_URLCONF=urls, DATALOADER_SYNC_AUTO_RELATIONS=on), \
                CaptureQueriesContext(connection) as queries:
            response = Client().post("/graphql", {"query": QUERY}, content_type="application/json")
        assert response.status_code == 200, response.content
        return json.dumps(response.json()), len(queries)

    (on, statements), (off, plain_statements) = post(True), post(False)
    same_answers(on, off)
    # authors with their publishers (joined into the root's queryset), their authors, books, tags, theirs, reviews
    assert statements == 6 < plain_statements


# -- SQLAlchemy models ---------------------------------------------------------------------------------------------


@pytest.fixture
def sqlalchemy_catalogue(tmp_path):
    """Two sessions over one SQLite catalogue (the second with nothing loaded), and the statement counter."""
    pytest.importorskip("sqlalchemy")
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session
    from sqlalchemy_helpers import Base, Statements, fill

    engine = create_engine(f"sqlite:///{tmp_path / 'catalogue.db'}")
    Base.metadata.create_all(engine)
    with Session(engine) as session:
        fill(session)
    statements = Statements(engine)
    sessions = Session(engine), Session(engine)
    yield sessions, statements
    for session in sessions:
        session.close()
    statements.close()
    engine.dispose()


def sqlalchemy_root(root, info):
    from sqlalchemy import select
    from sqlalchemy_helpers import Author

    return info.context["session"].scalars(select(Author).order_by(Author.id)).all()


def sqlalchemy_sdl_schema(stack):
    if stack == "ariadne":
        ariadne = pytest.importorskip("ariadne")
        query = ariadne.QueryType()
        query.set_field("authors", sqlalchemy_root)
        return ariadne.make_executable_schema(SDL, query)
    import graphql

    schema = graphql.build_schema(SDL)
    schema.query_type.fields["authors"].resolve = sqlalchemy_root
    return schema


@pytest.mark.parametrize("stack", ["graphql-core", "ariadne"])
def test_meta_fields_on_sqlalchemy_models_answer_as_without_the_switch(sqlalchemy_catalogue, stack):
    import graphql

    (session, fresh), statements = sqlalchemy_catalogue
    schema = sqlalchemy_sdl_schema(stack)

    def execute(on, on_session):
        registry = DataLoaderRegistry()
        context = {"loaders": registry, "session": on_session}
        if stack == "ariadne":
            success, result = pytest.importorskip("ariadne").graphql_sync(
                schema, {"query": QUERY}, context_value=context, execution_context_class=switch(on))
        else:
            result = graphql.graphql_sync(schema, QUERY, context_value=context, **execution_class(on)).formatted
        registry.close()
        return json.dumps(result)

    statements.reset()
    on = execute(True, session)
    count = statements.count
    statements.reset()
    same_answers(on, execute(False, fresh))
    assert count < statements.count


GRAPHENE_SQLALCHEMY_QUERY = """{ __typename kind: __typename
    authors { __typename name publisher { __typename name authors { __typename name } }
        books { ...B tags { __typename name books { __typename title author { __typename name } } }
            reviews(first: 2) { __typename pageInfo { __typename hasNextPage }
                edges { __typename node { __typename rating book { __typename title } } } } } }
    META }
fragment B on Book { __typename title }""".replace("META", META)


@pytest.mark.filterwarnings("ignore:UnsortedSQLAlchemyConnectionField:DeprecationWarning")
def test_meta_fields_on_graphene_sqlalchemy_answer_as_without_the_switch(sqlalchemy_catalogue):
    pytest.importorskip("graphene")
    if importlib.util.find_spec("graphene_sqlalchemy") is None:
        pytest.skip("graphene-sqlalchemy is not installed")
    from test_sqlalchemy_auto_relations import graphene_sqlalchemy_schema

    (session, fresh), statements = sqlalchemy_catalogue
    execute = graphene_sqlalchemy_schema(batching=False)

    def run(on, on_session):
        registry = DataLoaderRegistry()
        result = execute(GRAPHENE_SQLALCHEMY_QUERY, {"loaders": registry, "session": on_session}, switch(on))
        registry.close()
        return json.dumps(result.formatted)

    on = run(True, session)
    same_answers(on, run(False, fresh))
    assert all(f'"__typename": "{name}"' in on for name in ("ReviewPConnection", "ReviewPEdge", "PageInfo", "Review"))
