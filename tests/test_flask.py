"""dataloader_sync.flask: a registry per request, closed at teardown, GraphQL over HTTP.

Everything goes through Flask's real test client; the batch functions record
their calls so the tests can count batches per request and per level.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
import types
from typing import Any, Optional

import pytest

flask = pytest.importorskip("flask")
graphene = pytest.importorskip("graphene")

from dataloader_sync import DataLoader, DataLoaderRegistry, ScheduledDataLoaderRegistry  # noqa: E402
from dataloader_sync.flask import DataLoaders, GraphQLContext, graphql_view  # noqa: E402

N = 25  # objects at the top level of the nested queries


class Recorder:
    """Builds registries the way an app's factory would, and remembers them.

    Each registry's loaders tag their values with the request's ``X-User``
    header, so a value served from another request's cache would show.
    """

    def __init__(self, barrier: Optional[threading.Barrier] = None) -> None:
        self.lock = threading.Lock()  # guards registries and calls
        self.registries: list[ScheduledDataLoaderRegistry] = []
        self.calls: list[dict[str, Any]] = []  # one entry per batch call
        self.barrier = barrier

    def _batch(self, loader: str, user: str, fn):
        def batch(keys):
            with self.lock:
                self.calls.append({"loader": loader, "keys": list(keys), "user": user,
                                   "thread": threading.get_ident()})
            if self.barrier is not None:
                self.barrier.wait(timeout=10)
            return [fn(user, key) for key in keys]

        return batch

    def factory(self) -> ScheduledDataLoaderRegistry:
        user = flask.request.headers.get("X-User", "anonymous") if flask.has_request_context() else "cli"
        registry = ScheduledDataLoaderRegistry()
        registry.register("item", DataLoader(self._batch("item", user, lambda u, k: {"id": k, "owner": u})))
        registry.register("children", DataLoader(self._batch(
            "children", user, lambda u, k: [{"id": k * 100 + i, "owner": u} for i in range(2)])))
        registry.register("grandchildren", DataLoader(self._batch(
            "grandchildren", user, lambda u, k: [{"id": k * 100 + i, "owner": u} for i in range(3)])))
        with self.lock:
            self.registries.append(registry)
        return registry

    def calls_of(self, loader: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["loader"] == loader]


class Grandchild(graphene.ObjectType):
    id = graphene.Int(required=True)
    owner = graphene.String(required=True)


class Child(graphene.ObjectType):
    id = graphene.Int(required=True)
    owner = graphene.String(required=True)
    grandchildren = graphene.List(graphene.NonNull(Grandchild), required=True)

    @staticmethod
    def resolve_grandchildren(child, info):
        return info.context.loaders["grandchildren"].load(child["id"])


class Item(graphene.ObjectType):
    id = graphene.Int(required=True)
    owner = graphene.String(required=True)
    children = graphene.List(graphene.NonNull(Child), required=True)
    broken = graphene.String()

    @staticmethod
    def resolve_children(item, info):
        return info.context.loaders["children"].load(item["id"])

    @staticmethod
    def resolve_broken(item, info):
        raise ValueError(f"item {item['id']} is broken")


class Query(graphene.ObjectType):
    item = graphene.Field(Item, id=graphene.Int(required=True))
    items = graphene.List(graphene.NonNull(Item), required=True, count=graphene.Int(default_value=N))

    @staticmethod
    def resolve_item(root, info, id):
        return info.context.loaders["item"].load(id)

    @staticmethod
    def resolve_items(root, info, count):
        return [info.context.loaders["item"].load(i) for i in range(1, count + 1)]


class Touch(graphene.Mutation):
    class Arguments:
        id = graphene.Int(required=True)

    item = graphene.Field(Item)

    @staticmethod
    def mutate(root, info, id):
        return Touch(item=info.context.loaders["item"].load(id))


class Mutation(graphene.ObjectType):
    touch = Touch.Field()


SCHEMA = graphene.Schema(query=Query, mutation=Mutation)
NESTED = "{ items { id owner children { id grandchildren { id owner } } } }"


def make_app(recorder: Recorder) -> tuple:
    app = flask.Flask(__name__)
    app.testing = True
    loaders = DataLoaders(app, factory=recorder.factory)
    app.add_url_rule("/graphql", view_func=graphql_view(SCHEMA))

    @app.get("/item/<int:key>")
    def item(key: int):
        registry = loaders.get_registry()
        assert registry is loaders.get_registry()  # one registry for the whole request
        future = registry["item"].load(key)
        registry.dispatch_all()
        return flask.jsonify(future.result(timeout=5))

    @app.get("/boom")
    def boom():
        loaders.get_registry()
        raise RuntimeError("the view failed")

    return app, loaders


@pytest.fixture
def recorder():
    rec = Recorder()
    yield rec
    for registry in rec.registries:
        registry.close()


@pytest.fixture
def app(recorder):
    return make_app(recorder)[0]


def post(client, query: str, user: str = "ann", **extra: Any):
    return client.post("/graphql", json={"query": query, **extra}, headers={"X-User": user})


# -- one registry per request ------------------------------------------------------
def test_DataLoaders_gives_each_request_its_own_registry_with_fresh_caches(app, recorder):
    client = app.test_client()
    first = client.get("/item/7", headers={"X-User": "ann"})
    second = client.get("/item/7", headers={"X-User": "bob"})
    assert first.json == {"id": 7, "owner": "ann"}
    assert second.json == {"id": 7, "owner": "bob"}  # not ann's cached value
    assert len(recorder.registries) == 2
    assert recorder.registries[0] is not recorder.registries[1]
    assert [c["keys"] for c in recorder.calls_of("item")] == [[7], [7]]  # the same key, loaded twice


def test_graphql_view_requests_do_not_share_caches(app, recorder):
    client = app.test_client()
    ann = post(client, "{ item(id: 3) { owner } }", user="ann")
    bob = post(client, "{ item(id: 3) { owner } }", user="bob")
    assert ann.status_code == bob.status_code == 200
    assert ann.json == {"data": {"item": {"owner": "ann"}}}
    assert bob.json == {"data": {"item": {"owner": "bob"}}}
    assert len(recorder.calls_of("item")) == 2


def test_DataLoaders_requests_sharing_an_app_context_still_get_their_own_registry(app, recorder):
    client = app.test_client()
    with app.app_context():
        client.get("/item/1")
        client.get("/item/1")
    assert len(recorder.registries) == 2
    assert all(r.closed for r in recorder.registries)


def test_DataLoaders_closes_the_registry_at_teardown(app, recorder):
    response = app.test_client().get("/item/1")
    assert response.status_code == 200
    (registry,) = recorder.registries
    assert registry.closed


def test_DataLoaders_closes_the_registry_when_the_view_raises(app, recorder):
    with pytest.raises(RuntimeError, match="the view failed"):
        app.test_client().get("/boom")  # app.testing propagates the error
    (registry,) = recorder.registries
    assert registry.closed


def test_graphql_view_closes_the_registry_when_a_resolver_raises(app, recorder):
    response = post(app.test_client(), "{ item(id: 1) { id broken } }")
    assert response.status_code == 200
    assert response.json["data"] == {"item": {"id": 1, "broken": None}}
    (error,) = response.json["errors"]
    assert error["message"] == "item 1 is broken"
    assert error["path"] == ["item", "broken"]
    (registry,) = recorder.registries
    assert registry.closed


def test_DataLoaders_registry_made_in_an_app_context_is_closed_with_it(recorder):
    app, loaders = make_app(recorder)
    with app.app_context():
        registry = loaders.get_registry()
        assert loaders.get_registry() is registry
        assert not registry.closed
    assert registry.closed


def test_DataLoaders_get_registry_outside_a_context_raises():
    loaders = DataLoaders(factory=ScheduledDataLoaderRegistry)
    with pytest.raises(RuntimeError, match="context"):
        loaders.get_registry()


def test_DataLoaders_rejects_a_factory_that_makes_no_registry():
    with pytest.raises(TypeError, match="factory must be callable"):
        DataLoaders(factory=None)  # type: ignore[arg-type]
    app = flask.Flask(__name__)
    loaders = DataLoaders(app, factory=lambda: {"not": "a registry"})  # type: ignore[arg-type,return-value]
    with app.app_context(), pytest.raises(TypeError, match="must return a DataLoaderRegistry"):
        loaders.get_registry()


def test_DataLoaders_and_graphql_view_refuse_a_class_that_is_not_a_registry_at_set_up():
    for make in (lambda factory: DataLoaders(flask.Flask(__name__), factory=factory),
                 lambda factory: graphql_view(SCHEMA, registry_factory=factory)):
        with pytest.raises(TypeError, match=r"^(registry_)?factory must make a DataLoaderRegistry, got the class "
                                            r"DataLoader: a registry factory is a registry class"):
            make(DataLoader)


def test_DataLoaders_get_registry_on_an_app_it_was_not_set_up_on_raises():
    loaders = DataLoaders(factory=DataLoaderRegistry)
    with flask.Flask(__name__).app_context(), pytest.raises(RuntimeError, match="init_app"):
        loaders.get_registry()


def test_DataLoaders_init_app_refuses_a_second_extension_on_one_app():
    app = flask.Flask(__name__)
    loaders = DataLoaders(app, factory=DataLoaderRegistry)
    loaders.init_app(app)  # the same extension again: a no-op
    with pytest.raises(RuntimeError, match="already set up"):
        DataLoaders(app, factory=DataLoaderRegistry)


def test_DataLoaders_accepts_a_plain_registry_without_close():
    app = flask.Flask(__name__)
    made: list[DataLoaderRegistry] = []

    def factory() -> DataLoaderRegistry:
        made.append(DataLoaderRegistry().register("item", DataLoader(lambda keys: [{"id": k} for k in keys])))
        return made[-1]

    DataLoaders(app, factory=factory)
    app.add_url_rule("/graphql", view_func=graphql_view(SCHEMA))
    response = app.test_client().post("/graphql", json={"query": "{ item(id: 5) { id } }"})
    assert response.json == {"data": {"item": {"id": 5}}}
    assert len(made) == 1


# -- batching ------------------------------------------------------------------------
def test_graphql_view_dispatches_through_the_request_registry(recorder):
    asked: list[str] = []

    def factory() -> ScheduledDataLoaderRegistry:
        registry = recorder.factory()
        plain = ScheduledDataLoaderRegistry(dispatch_predicate=lambda name, loader: asked.append(name) or True)
        for name, loader in registry.items():
            plain.register(name, loader)
        recorder.registries.append(plain)
        return plain

    app = flask.Flask(__name__)
    app.add_url_rule("/graphql", view_func=graphql_view(SCHEMA, registry_factory=factory))
    response = app.test_client().post("/graphql", json={"query": NESTED})
    assert response.status_code == 200, response.json
    assert {"item", "children", "grandchildren"} <= set(asked)  # the registry's predicate was consulted


def test_graphql_view_runs_one_batch_per_loader_per_level(app, recorder):
    response = post(app.test_client(), NESTED)
    assert response.status_code == 200, response.json
    items = response.json["data"]["items"]
    assert [item["id"] for item in items] == list(range(1, N + 1))
    assert all(len(item["children"]) == 2 for item in items)
    assert items[4]["children"][1]["grandchildren"][2] == {"id": 50102, "owner": "ann"}
    # one batch per level: N items, 2N children, 6N grandchildren
    assert [len(c["keys"]) for c in recorder.calls_of("item")] == [N]
    assert [len(c["keys"]) for c in recorder.calls_of("children")] == [N]
    assert [len(c["keys"]) for c in recorder.calls_of("grandchildren")] == [2 * N]
    # no executor: every batch ran on the request thread (here, the test's)
    assert {c["thread"] for c in recorder.calls} == {threading.get_ident()}


def test_graphql_view_concurrent_requests_each_use_their_own_registry(recorder):
    threads = 4
    recorder.barrier = threading.Barrier(threads)  # every request's first batch waits for the others
    app, _ = make_app(recorder)

    def run(user: str):
        return post(app.test_client(), "{ items(count: 3) { owner children { id } } }", user=user)

    with cf.ThreadPoolExecutor(threads, thread_name_prefix="test-flask-client") as pool:
        responses = list(pool.map(run, [f"user{i}" for i in range(threads)]))
    for i, response in enumerate(responses):
        assert response.status_code == 200, response.json
        assert {item["owner"] for item in response.json["data"]["items"]} == {f"user{i}"}
    assert len(recorder.registries) == threads
    assert all(r.closed for r in recorder.registries)
    item_calls = recorder.calls_of("item")
    assert sorted(c["user"] for c in item_calls) == [f"user{i}" for i in range(threads)]
    assert all(c["keys"] == [1, 2, 3] for c in item_calls)
    assert len({c["thread"] for c in item_calls}) == threads  # on each request's own thread


# -- the HTTP side of graphql_view ---------------------------------------------------------
def test_graphql_view_serves_GET_queries_with_variables(app):
    response = app.test_client().get(
        "/graphql", query_string={"query": "query Q($id: Int!) { item(id: $id) { id } }",
                                  "variables": '{"id": 4}', "operationName": "Q"})
    assert response.status_code == 200
    assert response.json == {"data": {"item": {"id": 4}}}


def test_graphql_view_refuses_a_mutation_by_GET_and_runs_it_by_POST(app):
    client = app.test_client()
    response = client.get("/graphql", query_string={"query": "mutation { touch(id: 2) { item { id } } }"})
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    response = post(client, "mutation { touch(id: 2) { item { id } } }")
    assert response.json == {"data": {"touch": {"item": {"id": 2}}}}


def test_graphql_view_accepts_application_graphql_bodies(app):
    response = app.test_client().post("/graphql", data="{ item(id: 9) { id } }", content_type="application/graphql")
    assert response.json == {"data": {"item": {"id": 9}}}


@pytest.mark.parametrize(
    "kwargs, status, message",
    [
        ({"json": {}}, 400, "Must provide query string."),
        ({"data": "{", "content_type": "application/json"}, 400, "POST body must be a JSON object"),
        ({"json": {"query": "{ item(id: 1) { id } }", "variables": "{"}}, 400, "Variables are invalid JSON."),
        ({"json": {"query": "{ item(id: 1) { id }"}}, 400, "Syntax Error"),
        ({"json": {"query": "{ nope }"}}, 400, "Cannot query field 'nope'"),
        ({"json": {"query": "query Q($id: Int!) { item(id: $id) { id } }"}}, 400, "$id"),
        ({"data": "x", "content_type": "text/plain"}, 415, "unsupported content type"),
    ],
)
def test_graphql_view_answers_bad_requests_with_an_error(app, recorder, kwargs, status, message):
    response = app.test_client().post("/graphql", **kwargs)
    assert response.status_code == status
    assert response.mimetype == "application/json"
    assert "data" not in response.json or response.json["data"] is None
    assert message in response.json["errors"][0]["message"]
    assert all(r.closed for r in recorder.registries)


def test_graphql_view_keeps_the_field_order_of_the_query(app):
    response = post(app.test_client(), "{ item(id: 1) { owner id } }")
    assert response.get_data(as_text=True) == '{"data":{"item":{"owner":"ann","id":1}}}'


def test_graphql_view_with_registry_factory_closes_the_registry_after_the_execution(recorder):
    app = flask.Flask(__name__)
    contexts: list[Any] = []

    def context_factory(registry):
        contexts.append(types.SimpleNamespace(loaders=registry, tenant="acme"))
        return contexts[-1]

    app.add_url_rule("/graphql", view_func=graphql_view(
        SCHEMA, registry_factory=recorder.factory, context_factory=context_factory, name="gql"))
    with app.test_request_context():
        assert flask.url_for("gql") == "/graphql"
    client = app.test_client()
    assert post(client, NESTED).status_code == 200
    assert post(client, NESTED).status_code == 200
    assert len(recorder.registries) == 2 and all(r.closed for r in recorder.registries)
    assert [c.loaders for c in contexts] == recorder.registries
    assert len(recorder.calls_of("grandchildren")) == 2  # once per request: the custom context was used


def test_graphql_view_default_context_holds_the_request_and_its_registry(app, recorder):
    seen: list[Any] = []

    class Q(graphene.ObjectType):
        me = graphene.String()

        @staticmethod
        def resolve_me(root, info):
            seen.append(info.context)
            return info.context.request.headers["X-User"]

    app.add_url_rule("/me", view_func=graphql_view(graphene.Schema(query=Q), name="me"))
    response = app.test_client().post("/me", json={"query": "{ me }"}, headers={"X-User": "cyd"})
    assert response.json == {"data": {"me": "cyd"}}
    (context,) = seen
    assert isinstance(context, GraphQLContext)
    assert context.loaders is recorder.registries[0]


def test_graphql_view_arguments_are_checked():
    with pytest.raises(ValueError, match="not both"):
        graphql_view(SCHEMA, loaders=DataLoaders(factory=DataLoaderRegistry), registry_factory=DataLoaderRegistry)
    with pytest.raises(TypeError, match="registry_factory must be callable"):
        graphql_view(SCHEMA, registry_factory=1)  # type: ignore[arg-type]
    app = flask.Flask(__name__)
    app.add_url_rule("/graphql", view_func=graphql_view(SCHEMA))
    app.testing = True
    with pytest.raises(RuntimeError, match="needs a registry"):
        app.test_client().post("/graphql", json={"query": "{ item(id: 1) { id } }"})


def test_flask_example_app_serves_the_schema_with_one_batch_per_level():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "flask_app.py"
    spec = importlib.util.spec_from_file_location("dataloader_sync_example_flask_app", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    before = dict(module.CALLS)
    response = module.app.test_client().post(
        "/graphql", json={"query": "{ books { title author { name books { title } } } }"})
    assert response.status_code == 200, response.json
    books = response.json["data"]["books"]
    assert len(books) == 5
    assert books[0]["author"] == {"name": "Ursula K. Le Guin",
                                  "books": [{"title": "A Wizard of Earthsea"}, {"title": "The Dispossessed"}]}
    calls = {k: v - before.get(k, 0) for k, v in module.CALLS.items()}
    assert calls == {"author": 1, "books_by_author": 1}


def test_dataloader_sync_flask_without_flask_says_which_extra_to_install():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['flask'] = None\n"
        "try:\n"
        "    import dataloader_sync.flask\n"
        "except ImportError as exc:\n"
        "    assert 'pip install \"dataloader_sync[flask]\"' in str(exc), exc\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_graphql_view_answers_an_invalid_schema_with_500_and_its_errors(recorder):
    from graphql import GraphQLArgument, GraphQLField, GraphQLObjectType, GraphQLSchema, GraphQLString

    # The schema builds, but validate_schema refuses a name starting with "__".
    field = GraphQLField(GraphQLString, args={"__bad": GraphQLArgument(GraphQLString)})
    query = GraphQLObjectType("Query", {"x": field})
    app = flask.Flask(__name__)
    app.add_url_rule("/graphql", view_func=graphql_view(GraphQLSchema(query), registry_factory=recorder.factory))
    response = app.test_client().post("/graphql", json={"query": "{ x }"})
    assert response.status_code == 500
    assert "__bad" in response.json["errors"][0]["message"]
    assert recorder.registries[0].closed


# -- the factory convention: the request or nothing ---------------------------------------
@pytest.mark.parametrize("cls", [DataLoaderRegistry, ScheduledDataLoaderRegistry])
def test_DataLoaders_and_graphql_view_take_the_registry_classes_as_factories(cls):
    app = flask.Flask(__name__)
    loaders = DataLoaders(app, factory=cls)
    made: list[DataLoaderRegistry] = []

    @app.get("/")
    def view():
        made.append(loaders.get_registry())
        return "ok"

    assert app.test_client().get("/").status_code == 200
    assert type(made[0]) is cls and made[0].closed

    bare = flask.Flask(__name__)
    bare.add_url_rule("/graphql", view_func=graphql_view(SCHEMA, registry_factory=cls))
    response = bare.test_client().post("/graphql", json={"query": "{ __typename }"})
    assert response.json == {"data": {"__typename": "Query"}}


def test_DataLoaders_and_graphql_view_pass_the_request_to_a_factory_that_takes_it():
    seen: list[Any] = []

    def make_registry(request) -> DataLoaderRegistry:
        seen.append(request)
        return DataLoaderRegistry().register("item", DataLoader(
            lambda keys: [{"id": k, "owner": request.headers["X-User"]} for k in keys]))

    app = flask.Flask(__name__)
    DataLoaders(app, factory=make_registry)
    app.add_url_rule("/graphql", view_func=graphql_view(SCHEMA))
    app.add_url_rule("/direct", view_func=graphql_view(SCHEMA, registry_factory=make_registry, name="direct"))
    for path in ("/graphql", "/direct"):
        response = app.test_client().post(path, json={"query": "{ item(id: 5) { owner } }"}, headers={"X-User": "ann"})
        assert response.json == {"data": {"item": {"owner": "ann"}}}
    assert [type(r) for r in seen] == [flask.Request, flask.Request]  # the request, not the proxy
    with app.app_context():  # an app context without a request: None
        app.extensions["dataloader_sync"].get_registry()
    assert seen[-1] is None


def test_DataLoaders_and_graphql_view_refuse_a_factory_of_two_arguments():
    def make_registry(request, user):
        return DataLoaderRegistry()

    with pytest.raises(TypeError, match=r"^factory must take the request or nothing, e\.g\. def make_registry"):
        DataLoaders(factory=make_registry)
    with pytest.raises(TypeError, match=r"^registry_factory must take the request or nothing"):
        graphql_view(SCHEMA, registry_factory=make_registry)
