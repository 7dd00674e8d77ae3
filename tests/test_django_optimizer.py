"""graphene-django-optimizer beside auto relations, on the orm_library app, SQLite and PostgreSQL: what the
optimizer prefetched or joined (``gql_optimizer.query`` in a root resolver, ``OptimizedDjangoObjectType``'s
``get_queryset``) is used as it is, so both on never cost more statements than the switch alone, with the
response byte-identical to the switch off.  graphene-django-optimizer is never a dependency: the module skips
without it (``pip install graphene-django-optimizer``)."""
from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)
if importlib.util.find_spec("graphene_django_optimizer") is None:
    pytest.skip("graphene-django-optimizer is not installed (never a dependency: "
                "pip install graphene-django-optimizer)", allow_module_level=True)

from orm_fixtures import library, orm_db  # noqa: F401

from dataloader_sync import DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project")


def make_schema(optimized_types, optimizer):
    """The library's types, ``OptimizedDjangoObjectType`` (*optimized_types*) or graphene-django's, relations
    resolved by default; the root resolvers pass their querysets to ``gql_optimizer.query`` when *optimizer*."""
    import graphene
    import graphene_django_optimizer as gql_optimizer
    from graphene_django import DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    types = Registry()
    base = gql_optimizer.OptimizedDjangoObjectType if optimized_types else DjangoObjectType
    prefix = f"Opt{int(optimized_types)}{int(optimizer)}"

    def get_queryset(cls, queryset, info):
        if queryset.db != info.context.db:  # graphene-django's get_node (a to-one field) asks the default one
            queryset = queryset.using(info.context.db)
        return super(cls, cls).get_queryset(queryset, info)

    def object_type(name, model, fields):
        meta = type("Meta", (), {"model": model, "fields": fields, "registry": types, "name": prefix + name})
        own = {"get_queryset": classmethod(get_queryset)} if optimized_types else {}
        return type(prefix + name, (base,), {"Meta": meta, **own})

    object_type("Tag", models.Tag, ("name",))
    object_type("Review", models.Review, ("rating",))
    object_type("Publisher", models.Publisher, ("name", "authors"))
    object_type("Book", models.Book, ("title", "year", "tags", "reviews", "author"))
    author = object_type("Author", models.Author, ("name", "publisher", "books"))
    publisher = types.get_type_for_model(models.Publisher)

    def root(model):
        def resolve(root_value, info):
            queryset = model.objects.using(info.context.db).order_by("pk")
            return gql_optimizer.query(queryset, info) if optimizer else queryset
        return resolve

    query = type("Query", (graphene.ObjectType,), {
        "authors": graphene.List(graphene.NonNull(author), required=True), "resolve_authors": root(models.Author),
        "publishers": graphene.List(graphene.NonNull(publisher), required=True),
        "resolve_publishers": root(models.Publisher)})
    return graphene.Schema(query=query)


class Context:
    def __init__(self, db):
        self.db = db
        self.loaders = DataLoaderRegistry()


def execute(schema, orm_db, query, auto):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    cls = AutoRelationsExecutionContext if auto else DataLoaderExecutionContext
    with CaptureQueriesContext(connections[orm_db]) as queries:
        result = schema.execute(query, context_value=Context(orm_db), execution_context_class=cls)
    return json.dumps(result.formatted), len(queries)


SHAPES = {
    "plain": "{ authors { name publisher { name } books { title tags { name } reviews { rating } } } }",
    "joined": "{ authors { name books { title author { name publisher { name } } } } }",
    "reverse-m2m": "{ publishers { name authors { name books { title tags { name } } } } }",
}


#: (shape, OptimizedDjangoObjectType) -> statements with both on: the root, the optimizer's prefetches (their rows
#: used as they are), the switch's batches of the rest (to-one fields of types with a get_queryset of their own)
BOTH_ON = {("plain", False): 4, ("plain", True): 1 + 3 + 1, ("joined", False): 2, ("joined", True): 1 + 1 + 2,
           ("reverse-m2m", False): 4, ("reverse-m2m", True): 1 + 3}


@pytest.mark.parametrize("optimized_types", [False, True], ids=["DjangoObjectType", "OptimizedDjangoObjectType"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_both_on_never_cost_more_than_the_switch_alone(orm_db, library, shape, optimized_types):
    library(orm_db, authors=10, books=3, reviews=2, tags=4, publishers=3)
    query = SHAPES[shape]
    counts = {}
    for optimizer in (False, True):
        schema = make_schema(optimized_types, optimizer)
        plain, counts[optimizer, False] = execute(schema, orm_db, query, False)
        auto, counts[optimizer, True] = execute(schema, orm_db, query, True)
        assert auto == plain and '"errors"' not in plain
    assert counts[True, True] == BOTH_ON[shape, optimized_types] <= counts[False, True]  # both on, the switch alone
    assert counts[True, True] <= counts[True, False]  # both on, the optimizer alone
