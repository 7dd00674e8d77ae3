"""AutoRelationsExecutionContext on plain graphql-core (an SDL schema, graphql-core's default resolver) over the
orm_library Django models: relation fields batched, the same response as without it, on graphql-core 3.2 (the
field plan) and 3.3 (graphql-core's own field loop, through the middleware manager), with middleware too."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("django")
graphql = pytest.importorskip("graphql")

from orm_fixtures import library, orm_db  # noqa: E402, F401

from dataloader_sync import DataLoaderRegistry  # noqa: E402

pytestmark = pytest.mark.usefixtures("django_example_project")

SDL = """
type Query { authors(db: String!): [Author!]! }
type Author { name: String! publisher: Publisher books: [Book!]! }
type Publisher { name: String! }
type Book { title: String! tags: [Tag!]! author: Author! }
type Tag { name: String! }
"""
QUERY = """query ($db: String!) { authors(db: $db) { name publisher { name }
    books { title tags { name } author { name } } } }"""


def make_schema(listed=False):
    """The SDL schema with a root resolver only; *listed*: the to-many fields list their related manager, as
    they must without auto relations (graphql-core's default resolver would call the manager)."""
    from orm_library import models

    schema = graphql.build_schema(SDL)
    schema.query_type.fields["authors"].resolve = lambda root, info, db: list(
        models.Author.objects.using(db).order_by("pk"))
    if listed:
        for type_name, field_name in (("Author", "books"), ("Book", "tags")):
            schema.type_map[type_name].fields[field_name].resolve = (
                lambda obj, info: list(getattr(obj, info.field_name).all()))
    return schema


def run(schema, orm_db, cls, middleware=None):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    registry = DataLoaderRegistry()
    kind = "executor_class" if hasattr(graphql.execution, "Executor") else "execution_context_class"
    with CaptureQueriesContext(connections[orm_db]) as queries:
        result = graphql.execute(schema, graphql.parse(QUERY), context_value={"loaders": registry},
                                 variable_values={"db": orm_db}, middleware=middleware, **{kind: cls})
    registry.close()
    return json.dumps(result.formatted), len(queries)


class Nothing:
    def resolve(self, next_, root, info, **args):
        return next_(root, info, **args)


@pytest.mark.parametrize("middleware", [None, [Nothing()]], ids=["plain", "with middleware"])
def test_graphql_core_default_resolver_on_django_models(orm_db, library, middleware):
    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    library(orm_db, authors=6, books=2)
    auto, statements = run(make_schema(), orm_db, AutoRelationsExecutionContext, middleware)
    plain, plain_statements = run(make_schema(listed=True), orm_db, DataLoaderExecutionContext)
    assert auto == plain and '"errors"' not in auto
    assert statements == 4  # authors; publishers; books (their author is each book's known parent); tags
    assert plain_statements > 4 + 6


def test_no_auto_relations_on_a_graphql_core_field(orm_db, library):
    from dataloader_sync import no_auto_relations
    from dataloader_sync.graphql import AutoRelationsExecutionContext

    library(orm_db, authors=6, books=2)
    schema = make_schema()
    field = schema.type_map["Author"].fields["publisher"]
    assert no_auto_relations(field) is field
    auto, statements = run(schema, orm_db, AutoRelationsExecutionContext)
    plain, _ = run(make_schema(listed=True), orm_db, AutoRelationsExecutionContext)
    assert auto == plain
    assert statements == 3 + 4  # each of the 4 published authors reads its publisher: one statement each
