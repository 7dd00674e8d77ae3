"""dataloader_sync.ariadne and Ariadne with DataLoaderExecutionContext.

Real Ariadne: ``graphql_sync`` and its WSGI app (through werkzeug's test
client), with extensions and middleware.  The batch functions record their
calls, so the tests count batches per level; ticker registries on an
executor of the test's own show that no tick is left pending once a
response is out.
"""
from __future__ import annotations

import json
import threading
from typing import Any

import pytest

ariadne = pytest.importorskip("ariadne")
werkzeug_test = pytest.importorskip("werkzeug.test")

from ariadne import ObjectType, QueryType, graphql_sync, make_executable_schema  # noqa: E402
from ariadne.types import Extension  # noqa: E402

from dataloader_sync import (  # noqa: E402
    DataLoader,
    DataLoaderRegistry,
    ScheduledDataLoaderRegistry,
    ScheduledExecutor,
)
from dataloader_sync.ariadne import GraphQL  # noqa: E402
from dataloader_sync.ariadne._wsgi import ENVIRON_KEY  # noqa: E402
from dataloader_sync.graphql import DataLoaderExecutionContext  # noqa: E402

N = 10

TYPE_DEFS = """
    type Query { items(n: Int!): [Item!]!  environ: Boolean! }
    type Item { id: Int!  child: Child! }
    type Child { id: Int!  tag: String! }
"""

query = QueryType()
item_type = ObjectType("Item")
child_type = ObjectType("Child")


@query.field("items")
def resolve_items(_obj: Any, info: Any, n: int) -> Any:
    return info.context["loaders"]["item"].load_many(range(n))


@query.field("environ")
def resolve_environ(_obj: Any, info: Any) -> bool:
    return isinstance(info.context["request"], dict) and "REQUEST_METHOD" in info.context["request"]


@item_type.field("child")
def resolve_child(item: dict[str, Any], info: Any) -> Any:
    return info.context["loaders"]["child"].load(item["id"])


@child_type.field("tag")
def resolve_tag(child: dict[str, Any], info: Any) -> Any:
    if child["id"] < 0:
        raise ValueError("negative child")
    return info.context["loaders"]["tag"].load(child["id"]).then(lambda tag: tag.upper())


SCHEMA = make_executable_schema(TYPE_DEFS, query, item_type, child_type)

QUERY = "query ($n: Int!) { items(n: $n) { id child { id tag } } }"


def expected(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "child": {"id": 100 + i, "tag": f"TAG{100 + i}"}} for i in range(n)]


class Registries:
    """A registry factory that records its registries and their batch calls."""

    def __init__(self, *, ticker: bool = False) -> None:
        self.lock = threading.Lock()  # guards registries, calls, environs
        self.registries: list[DataLoaderRegistry] = []
        self.calls: list[tuple[str, list[Any]]] = []
        self.environs: list[dict[str, Any]] = []
        self.ticker = ticker
        self.executor = ScheduledExecutor() if ticker else None

    def _batch(self, name: str, fn: Any) -> Any:
        def batch(keys: list[Any]) -> list[Any]:
            with self.lock:
                self.calls.append((name, list(keys)))
            return [fn(k) for k in keys]

        return batch

    def __call__(self, environ: dict[str, Any]) -> DataLoaderRegistry:
        registry: DataLoaderRegistry
        if self.ticker:
            registry = ScheduledDataLoaderRegistry(scheduled_executor=self.executor, ticker_mode=True)
        else:
            registry = DataLoaderRegistry()
        registry.register("item", DataLoader(self._batch("item", lambda k: {"id": k})))
        registry.register("child", DataLoader(self._batch("child", lambda k: {"id": 100 + k})))
        registry.register("tag", DataLoader(self._batch("tag", lambda k: f"tag{k}")))
        with self.lock:
            self.registries.append(registry)
            self.environs.append(environ)
        return registry

    def batches(self, name: str) -> int:
        return sum(1 for n, _ in self.calls if n == name)

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown()


@pytest.fixture
def registries() -> Any:
    made = Registries(ticker=True)
    yield made
    made.close()


def post(app: Any, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    client = werkzeug_test.Client(app)
    response = client.post("/", json=payload)
    return response.status_code, json.loads(response.get_data(as_text=True))


# --- graphql_sync, no module of ours ----------------------------------------------------------


def test_graphql_sync_with_the_execution_context_batches_one_call_per_loader_per_level() -> None:
    registries = Registries()
    registry = registries({})
    success, result = graphql_sync(
        SCHEMA, {"query": QUERY, "variables": {"n": N}},
        context_value={"loaders": registry},
        execution_context_class=DataLoaderExecutionContext,
    )
    assert success, result
    assert result["data"] == {"items": expected(N)}
    assert [name for name, _ in registries.calls] == ["item", "child", "tag"]
    assert registries.calls[1] == ("child", list(range(N)))


def test_graphql_sync_with_plain_loaders_in_the_context_needs_no_registry() -> None:
    registries = Registries()
    registry = registries({})
    context = {"loaders": {name: registry[name] for name in registry.keys()}}
    success, result = graphql_sync(SCHEMA, {"query": QUERY, "variables": {"n": 3}},
                                   context_value=context, execution_context_class=DataLoaderExecutionContext)
    assert success, result
    assert result["data"] == {"items": expected(3)}
    assert [name for name, _ in registries.calls] == ["item", "child", "tag"]


def test_graphql_sync_keeps_field_errors_and_their_paths() -> None:
    registries = Registries()
    registry = DataLoaderRegistry()
    registry.register("item", DataLoader(registries._batch("item", lambda k: {"id": k})))
    registry.register("child", DataLoader(registries._batch("child", lambda k: {"id": -k})))
    registry.register("tag", DataLoader(registries._batch("tag", lambda k: "t")))
    success, result = graphql_sync(SCHEMA, {"query": QUERY, "variables": {"n": 2}},
                                   context_value={"loaders": registry},
                                   execution_context_class=DataLoaderExecutionContext)
    assert not success
    # id 0 resolves (-0 == 0); item 1's child has id -1: its non-null tag nulls the non-null
    # child and the item, which nulls the whole non-null list.
    assert result["data"] is None
    assert [e["path"] for e in result["errors"]] == [["items", 1, "child", "tag"]]
    assert result["errors"][0]["message"] == "negative child"


# --- the WSGI app ------------------------------------------------------------------------------


def test_GraphQL_batches_per_level_and_closes_the_registry_after_the_response(registries: Registries) -> None:
    app = GraphQL(SCHEMA, registry_factory=registries)
    status, body = post(app, {"query": QUERY, "variables": {"n": N}})
    assert status == 200, body
    assert body == {"data": {"items": expected(N)}}
    assert registries.batches("item") == registries.batches("child") == registries.batches("tag") == 1
    (registry,) = registries.registries
    assert registry.closed
    assert registries.executor is not None and registries.executor.pending_count == 0
    assert ENVIRON_KEY not in registries.environs[0]


def test_GraphQL_gives_each_request_a_fresh_registry_and_leaves_no_tick_pending(registries: Registries) -> None:
    app = GraphQL(SCHEMA, registry_factory=registries)
    for n in range(1, 51):
        status, body = post(app, {"query": QUERY, "variables": {"n": n % 5 + 1}})
        assert status == 200 and body["data"]["items"] == expected(n % 5 + 1)
        assert registries.executor is not None and registries.executor.pending_count == 0
    assert len(registries.registries) == 50
    assert len({id(r) for r in registries.registries}) == 50
    assert all(r.closed for r in registries.registries)
    assert registries.batches("child") == 50


def test_GraphQL_keeps_ariadnes_default_context(registries: Registries) -> None:
    app = GraphQL(SCHEMA, registry_factory=registries)
    status, body = post(app, {"query": "{ environ }"})
    assert (status, body) == (200, {"data": {"environ": True}})
    assert registries.environs[0]["REQUEST_METHOD"] == "POST"


def test_GraphQL_copies_a_static_context_dict_per_request(registries: Registries) -> None:
    static = {"request": {"REQUEST_METHOD": "static"}, "tenant": "acme"}
    seen: list[dict[str, Any]] = []

    def middleware(resolver: Any, obj: Any, info: Any, **args: Any) -> Any:
        seen.append(info.context)
        return resolver(obj, info, **args)

    app = GraphQL(SCHEMA, registry_factory=registries, context_value=static, middleware=[middleware])
    for _ in range(2):
        assert post(app, {"query": "{ items(n: 1) { id } }"})[0] == 200
    assert static == {"request": {"REQUEST_METHOD": "static"}, "tenant": "acme"}
    first, second = seen[0], seen[-1]
    assert first is not second and first["tenant"] == "acme"
    assert first["loaders"] is registries.registries[0] and second["loaders"] is registries.registries[1]


def test_GraphQL_adds_the_registry_to_a_context_callable_result(registries: Registries) -> None:
    class Context:
        loaders: Any = None

    contexts: list[Any] = []

    def make_dict(environ: dict[str, Any], data: Any) -> dict[str, Any]:
        return {"request": environ, "user": "ann"}

    def make_object(environ: dict[str, Any], data: Any) -> Any:
        contexts.append(Context())
        return contexts[-1]

    assert post(GraphQL(SCHEMA, registry_factory=registries, context_value=make_dict),
                {"query": QUERY, "variables": {"n": 2}})[1] == {"data": {"items": expected(2)}}

    def resolve_items_attr(_obj: Any, info: Any, n: int) -> Any:
        return info.context.loaders["item"].load_many(range(n))

    attr_query = QueryType()
    attr_query.set_field("items", resolve_items_attr)
    attr_schema = make_executable_schema(TYPE_DEFS, attr_query)
    status, body = post(GraphQL(attr_schema, registry_factory=registries, context_value=make_object),
                        {"query": "{ items(n: 3) { id } }"})
    assert (status, body) == (200, {"data": {"items": [{"id": 0}, {"id": 1}, {"id": 2}]}})
    assert contexts[0].loaders is registries.registries[1]
    assert registries.registries[1].closed


def test_GraphQL_refuses_a_context_that_cannot_hold_the_registry(registries: Registries) -> None:
    app = GraphQL(SCHEMA, registry_factory=registries, context_value=lambda environ, data: ("no", "room"))
    with pytest.raises(TypeError, match="'loaders' key nor as a 'loaders' attribute"):
        post(app, {"query": "{ environ }"})
    assert all(r.closed for r in registries.registries)


def test_GraphQL_closes_the_registry_when_the_request_fails(registries: Registries) -> None:
    class Boom(Extension):
        def request_started(self, context: Any) -> None:
            raise RuntimeError("extension failed")

    app = GraphQL(SCHEMA, registry_factory=registries, extensions=[Boom])
    with pytest.raises(RuntimeError, match="extension failed"):
        post(app, {"query": QUERY, "variables": {"n": 2}})
    (registry,) = registries.registries
    assert registry.closed
    assert registries.executor is not None and registries.executor.pending_count == 0


def test_GraphQL_closes_the_registry_of_a_query_that_fails_validation(registries: Registries) -> None:
    app = GraphQL(SCHEMA, registry_factory=registries)
    status, body = post(app, {"query": "{ nope }"})
    assert status == 400 and "nope" in body["errors"][0]["message"]
    assert all(r.closed for r in registries.registries)


def test_GraphQL_makes_no_registry_for_the_explorer_or_a_bad_body(registries: Registries) -> None:
    app = GraphQL(SCHEMA, registry_factory=registries)
    client = werkzeug_test.Client(app)
    assert client.get("/").status_code == 200
    assert client.post("/", data="{", content_type="application/json").status_code == 400
    assert registries.registries == []


def test_GraphQL_runs_get_queries_and_extensions_with_loaders(registries: Registries) -> None:
    events: list[str] = []

    class Record(Extension):
        def request_started(self, context: Any) -> None:
            events.append("started:" + type(context["loaders"]).__name__)

        def request_finished(self, context: Any) -> None:
            events.append("finished:" + str(context["loaders"].closed))

    app = GraphQL(SCHEMA, registry_factory=registries, execute_get_queries=True, extensions=[Record])
    response = werkzeug_test.Client(app).get("/", query_string={"query": "{ items(n: 2) { id child { id } } }"})
    assert response.status_code == 200
    assert json.loads(response.get_data(as_text=True)) == {
        "data": {"items": [{"id": 0, "child": {"id": 100}}, {"id": 1, "child": {"id": 101}}]}}
    assert events == ["started:ScheduledDataLoaderRegistry", "finished:False"]
    assert registries.registries[0].closed
    assert registries.batches("child") == 1


def test_GraphQL_keeps_a_given_execution_context_class(registries: Registries) -> None:
    class Own(DataLoaderExecutionContext):
        pass

    app = GraphQL(SCHEMA, registry_factory=registries, execution_context_class=Own)
    assert app.execution_context_class is Own
    assert GraphQL(SCHEMA, registry_factory=registries).execution_context_class is DataLoaderExecutionContext


def test_GraphQL_checks_its_registry_factory() -> None:
    with pytest.raises(TypeError, match="registry_factory must be callable"):
        GraphQL(SCHEMA, registry_factory=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        GraphQL(SCHEMA)  # type: ignore[call-arg]
    app = GraphQL(SCHEMA, registry_factory=lambda environ: "not a registry")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="must return a DataLoaderRegistry"):
        post(app, {"query": "{ environ }"})


# --- the factory convention: the request or nothing ---------------------------------------------


@pytest.mark.parametrize("cls", [DataLoaderRegistry, ScheduledDataLoaderRegistry])
def test_GraphQL_takes_a_registry_class_as_the_factory(cls: type) -> None:
    status, body = post(GraphQL(SCHEMA, registry_factory=cls), {"query": "{ environ }"})
    assert (status, body) == (200, {"data": {"environ": True}})


def test_GraphQL_calls_a_factory_of_nothing_with_nothing_and_refuses_one_of_two() -> None:
    registries = Registries()
    status, body = post(GraphQL(SCHEMA, registry_factory=lambda: registries({})),
                        {"query": QUERY, "variables": {"n": 2}})
    assert (status, body) == (200, {"data": {"items": expected(2)}})
    assert registries.registries[0].closed
    with pytest.raises(TypeError, match=r"^registry_factory must take the request or nothing"):
        GraphQL(SCHEMA, registry_factory=lambda environ, data: registries({}))


def test_GraphQL_refuses_a_class_that_is_not_a_registry_at_set_up() -> None:
    with pytest.raises(TypeError, match=r"^registry_factory must make a DataLoaderRegistry, got the class DataLoader"):
        GraphQL(SCHEMA, registry_factory=DataLoader)  # type: ignore[arg-type]
