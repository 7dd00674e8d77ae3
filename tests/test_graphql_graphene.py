"""Tests for dataloader_sync.graphql with graphene 3 schemas (and graphene-django's view).

graphene's ``Schema.execute`` passes ``execution_context_class`` on to
graphql-core's ``graphql_sync``; these tests use it exactly as an application
would, with real graphene types, loaders in ``info.context`` and registries.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

graphene = pytest.importorskip("graphene")

from dataloader_sync import (  # noqa: E402
    DISPATCH_ALWAYS,
    DISPATCH_NEVER,
    DataLoader,
    DataLoaderRegistry,
    ScheduledDataLoaderRegistry,
)
from dataloader_sync.graphql import DataLoaderExecutionContext  # noqa: E402


class Recorder:
    """A batch function over a value function, recording every call."""

    def __init__(self, fn: Any = lambda key: key) -> None:
        self.fn = fn
        self.calls: list[list[Any]] = []
        self.lock = threading.Lock()

    def __call__(self, keys: list[Any]) -> list[Any]:
        with self.lock:
            self.calls.append(list(keys))
        return [self.fn(key) for key in keys]


# -- a library: authors, their books, the books' reviews -------------------------------------

AUTHORS = {a: {"id": a, "name": f"author {a}"} for a in range(1, 6)}
BOOKS = {b: {"id": b, "title": f"book {b}", "author": 1 + b % 5} for b in range(1, 16)}
REVIEWS = {b: [{"stars": 1 + (b + r) % 5, "text": None if b == 7 else f"review {b}.{r}"} for r in range(2)]
           for b in BOOKS}


class Review(graphene.ObjectType):
    stars = graphene.Int(required=True)
    text = graphene.String(required=True)  # book 7's reviews have no text: null propagates


class Book(graphene.ObjectType):
    id = graphene.Int(required=True)
    title = graphene.String()
    author = graphene.Field(lambda: Author, required=True)
    reviews = graphene.List(graphene.NonNull(Review))

    def resolve_author(self, info):
        return info.context["loaders"]["author"](self["author"])

    def resolve_reviews(self, info):
        return info.context["loaders"]["reviews"](self["id"])

    def resolve_title(self, info):
        if self["id"] == 13:
            raise ValueError("unlucky title")
        return self["title"]


class Author(graphene.ObjectType):
    id = graphene.Int(required=True)
    name = graphene.String()
    books = graphene.List(graphene.NonNull(Book), required=True)

    def resolve_books(self, info):
        return info.context["loaders"]["books_by_author"](self["id"])


class Query(graphene.ObjectType):
    authors = graphene.List(graphene.NonNull(Author))
    book = graphene.Field(Book, id=graphene.Int(required=True))

    def resolve_authors(self, info):
        return [info.context["loaders"]["author"](a) for a in sorted(AUTHORS)]

    def resolve_book(self, info, id):
        return info.context["loaders"]["book"](id)


class Rate(graphene.Mutation):
    class Arguments:
        stars = graphene.Int(required=True)

    total = graphene.Int(required=True)

    def mutate(self, info, stars):
        return info.context["loaders"]["rate"](stars)


class Mutation(graphene.ObjectType):
    rate = Rate.Field()


SCHEMA = graphene.Schema(query=Query, mutation=Mutation)

VALUES = {
    "author": AUTHORS.get,
    "book": BOOKS.get,
    "books_by_author": lambda a: [BOOKS[b] for b in sorted(BOOKS) if BOOKS[b]["author"] == a],
    "reviews": REVIEWS.get,
}


def plain_context() -> dict[str, Any]:
    return {"loaders": dict(VALUES.items())}


def loader_context() -> Any:
    recorders = {name: Recorder(fn) for name, fn in VALUES.items()}
    loaders = {name: DataLoader(rec, name=name) for name, rec in recorders.items()}
    return {"loaders": {name: loader.load for name, loader in loaders.items()}}, recorders


QUERIES = [
    "{ authors { id name books { id title reviews { stars } } } }",
    "{ authors { name books { title reviews { stars text } } } }",  # book 7: text null → reviews null
    "{ book(id: 7) { title author { name books { id } } reviews { text } } }",
    "{ book(id: 13) { id title author { id } } }",
    "{ book(id: 99) { id } }",
]


@pytest.mark.parametrize("query", QUERIES)
def test_same_result_as_plain_resolvers(query: str) -> None:
    expected = SCHEMA.execute(query, context_value=plain_context())
    context, _ = loader_context()
    got = SCHEMA.execute(query, context_value=context, execution_context_class=DataLoaderExecutionContext)
    assert got.data == expected.data
    assert [e.formatted for e in got.errors or []] == [e.formatted for e in expected.errors or []]


def test_one_batch_per_loader_per_level() -> None:
    context, recorders = loader_context()
    result = SCHEMA.execute("{ authors { books { author { books { reviews { stars } } } } } }",
                            context_value=context, execution_context_class=DataLoaderExecutionContext)
    assert result.errors is None
    assert len(result.data["authors"]) == 5
    assert [len(c) for c in recorders["author"].calls] == [5]  # the level-3 authors are cached
    assert [len(c) for c in recorders["books_by_author"].calls] == [5]
    assert [len(c) for c in recorders["reviews"].calls] == [15]


def test_mutations_run_one_after_the_other() -> None:
    state = {"total": 0}
    log: list[str] = []

    def rate(batch: list[int]) -> list[Any]:
        log.append(f"rate {batch}")
        out = []
        for stars in batch:
            state["total"] += stars
            out.append(Rate(total=state["total"]))
        return out

    rate_loader = DataLoader(rate, cache=False)
    context = {"loaders": {"rate": rate_loader.load}}
    result = SCHEMA.execute("mutation { a: rate(stars: 2) { total } b: rate(stars: 3) { total } }",
                            context_value=context, execution_context_class=DataLoaderExecutionContext)
    assert result.errors is None
    assert result.data == {"a": {"total": 2}, "b": {"total": 5}}
    assert log == ["rate [2]", "rate [3]"]


# -- the Bench shape ----------------------------------------------------------------------------

def bench_schema() -> Any:
    """10 field loaders, a chained late load, children via loader-150 then a list."""
    def field(i: int) -> Any:
        return lambda item, info: info.context.loaders[f"loader-{i}"].load(item)

    def late(item: int, info: Any) -> Any:
        loaders = info.context.loaders
        return loaders["loader-100"].load(item).then(loaders["loader-101"].load)

    def children(item: int, info: Any) -> Any:
        return info.context.loaders["loader-150"].load(item).then(lambda i: [i * 100 + j for j in (1, 2, 3)])

    attrs: dict[str, Any] = {f"f{i}": graphene.Int(resolver=field(i)) for i in range(10)}
    attrs["id"] = graphene.Int(resolver=lambda item, info: item)
    attrs["late"] = graphene.Int(resolver=late)
    attrs["children"] = graphene.List(lambda: item_type, resolver=children)
    item_type = type("Item", (graphene.ObjectType,), attrs)
    query = type("Query", (graphene.ObjectType,), {
        "items": graphene.List(item_type, resolver=lambda root, info: list(range(1, 21)))})
    return graphene.Schema(query=query)


def test_bench_shape_with_200_loaders_on_a_ticker_registry() -> None:
    class Context:
        def __init__(self, loaders: Any) -> None:
            self.loaders = loaders

    fields = " ".join(f"f{i}" for i in range(10)) + " id late"
    query = f"{{ items {{ {fields} children {{ {fields} children {{ {fields} }} }} }} }}"
    recorders = {i: Recorder() for i in range(200)}
    # A long schedule: the ticker must not split a level while the request thread is busy.
    with ScheduledDataLoaderRegistry(ticker_mode=True, schedule=60.0, dispatch_predicate=DISPATCH_NEVER) as reg:
        for i in range(200):
            reg.register(f"loader-{i}", DataLoader(recorders[i], name=f"loader-{i}"), DISPATCH_ALWAYS)
        result = bench_schema().execute(query, context_value=Context(reg),
                                        execution_context_class=DataLoaderExecutionContext)
    assert result.errors is None

    def item(i: int, depth: int) -> dict[str, Any]:
        obj: dict[str, Any] = {f"f{k}": i for k in range(10)}
        obj.update(id=i, late=i)
        if depth:
            obj["children"] = [item(i * 100 + j, depth - 1) for j in (1, 2, 3)]
        return obj

    assert result.data == {"items": [item(i, 2) for i in range(1, 21)]}
    for i in (*range(10), 100, 101):
        assert [len(c) for c in recorders[i].calls] == [20, 60, 180], i  # one batch per level
    assert [len(c) for c in recorders[150].calls] == [20, 60]
    assert all(not recorders[i].calls for i in range(10, 100))


# -- graphene-django --------------------------------------------------------------------------

GRAPHENE_DJANGO_SCRIPT = textwrap.dedent("""
    import json
    import django
    from django.conf import settings
    settings.configure(SECRET_KEY="x", ALLOWED_HOSTS=["testserver"], INSTALLED_APPS=["graphene_django"],
                       DATABASES={}, ROOT_URLCONF=[])
    django.setup()
    import graphene
    from django.test import RequestFactory
    from graphene_django.views import GraphQLView
    from dataloader_sync import DataLoader
    from dataloader_sync.graphql import DataLoaderExecutionContext

    calls = []
    def batch(keys):
        calls.append(list(keys))
        return [k * 2 for k in keys]

    class Query(graphene.ObjectType):
        doubles = graphene.List(graphene.Int, n=graphene.Int())
        def resolve_doubles(root, info, n):
            loader = info.context.loader
            return [loader.load(i) for i in range(n)]

    class View(GraphQLView):
        def get_context(self, request):
            request.loader = DataLoader(batch)
            return request

    view = View.as_view(schema=graphene.Schema(query=Query),
                        execution_context_class=DataLoaderExecutionContext)
    request = RequestFactory().post("/graphql", data=json.dumps({"query": "{ doubles(n: 4) }"}),
                                    content_type="application/json")
    response = view(request)
    print(json.dumps({"status": response.status_code, "body": json.loads(response.content), "calls": calls}))
""")


def test_graphene_django_graphql_view_accepts_it() -> None:
    if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
        pytest.skip("graphene_django is not installed")
    out = subprocess.run([sys.executable, "-c", GRAPHENE_DJANGO_SCRIPT], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr

    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"status": 200, "body": {"data": {"doubles": [0, 2, 4, 6]}}, "calls": [[0, 1, 2, 3]]}


# -- a resolver that blocks on a load: sync on demand -----------------------------------------

OWNERS = {o: {"name": f"owner {o}"} for o in range(1, 4)}
PETS = {p: {"id": p, "owner": 1 + p % 3} for p in range(1, 5)}


class Pet(graphene.ObjectType):
    id = graphene.Int(required=True)
    owner_name = graphene.String()
    toys = graphene.List(graphene.String)

    def resolve_owner_name(self, info):
        # What people write in sync Python (and promise's DataLoader.get allowed):
        # block on the load, right here in the resolver.
        return info.context["owners"].load(self["owner"]).result(timeout=10)["name"]

    def resolve_toys(self, info):
        return info.context["toys"].load(self["id"])


class PetQuery(graphene.ObjectType):
    pets = graphene.List(Pet)

    def resolve_pets(self, info):
        return [info.context["pets"].load(p) for p in sorted(PETS)]


PET_SCHEMA = graphene.Schema(query=PetQuery)


@pytest.mark.parametrize("in_registry", [False, True], ids=["plain-loaders", "ticker-registry-never"])
def test_a_resolver_blocking_on_a_load_gets_its_value_and_the_rest_still_batches_per_level(in_registry: bool) -> None:
    recorders = {"pets": Recorder(PETS.get), "owners": Recorder(OWNERS.get),
                 "toys": Recorder(lambda p: [f"toy {p}.{t}" for t in range(2)])}
    loaders = {name: DataLoader(rec, name=name) for name, rec in recorders.items()}
    context: Any = loaders
    registry = None
    if in_registry:  # a registry whose predicate never passes: only the execution and blocking waits dispatch
        registry = ScheduledDataLoaderRegistry(ticker_mode=True, schedule=3600, dispatch_predicate=DISPATCH_NEVER)
        for name, loader in loaders.items():
            registry.register(name, loader, DISPATCH_ALWAYS if name != "owners" else DISPATCH_NEVER)
        context = dict(loaders, loaders=registry)
    try:
        result = PET_SCHEMA.execute("{ pets { id ownerName toys } }", context_value=context,
                                    execution_context_class=DataLoaderExecutionContext)
    finally:
        if registry is not None:
            registry.close()
    assert result.errors is None
    assert result.data == {"pets": [{"id": p, "ownerName": f"owner {1 + p % 3}",
                                     "toys": [f"toy {p}.0", f"toy {p}.1"]} for p in sorted(PETS)]}
    assert recorders["pets"].calls == [[1, 2, 3, 4]]
    assert recorders["toys"].calls == [[1, 2, 3, 4]]  # one batch for the level, as without the blocking field
    # The cost of blocking: that field's loader dispatches early, once per distinct key here.
    assert recorders["owners"].calls == [[2], [3], [1]]


def test_blocking_loads_that_split_a_level_log_one_warning_per_execution_naming_the_loader(caplog) -> None:
    recorders = {"pets": Recorder(PETS.get), "owners": Recorder(OWNERS.get),
                 "toys": Recorder(lambda p: [f"toy {p}.{t}" for t in range(2)])}
    registry = DataLoaderRegistry()
    for name, rec in recorders.items():
        registry.register(name, DataLoader(rec))  # unnamed loaders: the registry's names are used
    context = {**{name: registry[name] for name in recorders}, "loaders": registry}
    with caplog.at_level(logging.WARNING, logger="dataloader_sync"):
        result = PET_SCHEMA.execute("{ pets { id ownerName toys } }", context_value=context,
                                    execution_context_class=DataLoaderExecutionContext)
    assert result.errors is None
    assert recorders["owners"].calls == [[2], [3], [1]]
    (record,) = caplog.records
    assert record.levelname == "WARNING"
    assert record.getMessage() == (
        "one batch per key: resolvers blocked on loads with .result() inside this GraphQL execution, and each "
        "wait sent its loader's batch early: DataLoader 'owners' (3 batches). Return the future from the "
        "resolver (return loader.load(key), or loader.load(key).then(...)) to keep one batch per loader per level"
    )


def test_returned_futures_and_a_single_blocking_load_log_no_warning(caplog) -> None:
    class Root(graphene.ObjectType):
        first = graphene.String()
        pets = graphene.List(Pet)

        def resolve_first(self, info):  # one wait, one batch: nothing was split
            return info.context["owners"].load(1).result(timeout=10)["name"]

        def resolve_pets(self, info):
            return [info.context["pets"].load(p) for p in sorted(PETS)]

    loaders = {"pets": DataLoader(Recorder(PETS.get)), "owners": DataLoader(Recorder(OWNERS.get), name="owners"),
               "toys": DataLoader(Recorder(lambda p: [f"toy {p}"]))}
    with caplog.at_level(logging.WARNING, logger="dataloader_sync"):
        result = graphene.Schema(query=Root).execute("{ first pets { toys } }", context_value=loaders,
                                                     execution_context_class=DataLoaderExecutionContext)
    assert result.errors is None and result.data["first"] == "owner 1"
    assert caplog.records == []


# -- mutations and caches; awaitables -------------------------------------------------------------------
SHELF = {1: "first title"}


class RetitleBook(graphene.Mutation):
    class Arguments:
        id = graphene.Int(required=True)
        title = graphene.String(required=True)

    title = graphene.String()

    @staticmethod
    def mutate(root, info, id, title):
        SHELF[id] = title
        return RetitleBook(title=title)


class AsyncMutation(graphene.Mutation):
    ok = graphene.Boolean()

    @staticmethod
    async def mutate(root, info):
        return AsyncMutation(ok=True)


class ShelfMutation(graphene.ObjectType):
    retitle = RetitleBook.Field()
    title = graphene.String(id=graphene.Int(required=True))
    go_async = AsyncMutation.Field()

    @staticmethod
    def resolve_title(root, info, id):
        return info.context["titles"].load(id)


class ShelfQuery(graphene.ObjectType):
    title = graphene.String(id=graphene.Int(required=True))


class ClearingExecutionContext(DataLoaderExecutionContext):
    clear_loaders_after_mutation_fields = True


@pytest.mark.parametrize("cls, after", [(DataLoaderExecutionContext, "first title"),
                                        (ClearingExecutionContext, "second title")])
def test_graphene_mutation_then_a_load_of_the_changed_row_sees_it_only_with_the_clearing_opt_in(
        cls: Any, after: str) -> None:
    SHELF[1] = "first title"
    titles = Recorder(lambda key: SHELF[key])
    result = graphene.Schema(query=ShelfQuery, mutation=ShelfMutation).execute(
        'mutation { before: title(id: 1) retitle(id: 1, title: "second title") { title } after: title(id: 1) }',
        context_value={"titles": DataLoader(titles)}, execution_context_class=cls)
    assert result.errors is None
    assert result.data == {"before": "first title", "retitle": {"title": "second title"}, "after": after}
    assert titles.calls == ([[1]] if cls is DataLoaderExecutionContext else [[1], [1]])


def test_graphene_async_mutation_is_refused_with_the_clear_message() -> None:
    import gc
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = graphene.Schema(query=ShelfQuery, mutation=ShelfMutation).execute(
            "mutation { goAsync { ok } retitle(id: 1, title: \"t\") { title } }",
            execution_context_class=DataLoaderExecutionContext)
        gc.collect()
    assert result.data == {"goAsync": None, "retitle": {"title": "t"}}
    assert [(e.message.split(":")[0], e.path) for e in result.errors] == [
        ("DataLoaderExecutionContext executes synchronously", ["goAsync"])]
    assert not [w for w in caught if "never awaited" in str(w.message)]
