"""dataloader_sync.graphql with graphql-core alone: awaitables refused everywhere, the
mutation opt-in that clears loaders, the warning for a loader reused across
executions, and the refusal of graphql-core 3.3 prereleases.

They run on graphql-core 3.2.x and 3.3.x (``.ci/graphql-matrix``).
"""
from __future__ import annotations

import gc
import inspect
import logging
import subprocess
import sys
import warnings
from typing import Any

import pytest
from graphql import build_schema, execute, graphql_sync, parse

from dataloader_sync import DataLoader, DataLoaderRegistry
from dataloader_sync.graphql import DataLoaderExecutionContext

CLASS_KW = (
    "executor_class"
    if "executor_class" in inspect.signature(graphql_sync).parameters
    else "execution_context_class"
)
REFUSED = "DataLoaderExecutionContext executes synchronously"


def run(schema: Any, query: str, cls: Any = DataLoaderExecutionContext, **kwargs: Any) -> Any:
    return graphql_sync(schema, query, **{CLASS_KW: cls}, **kwargs)


@pytest.fixture
def never_awaited():
    """Fails the test if a coroutine was left un-awaited (RuntimeWarning at its collection)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
        gc.collect()
    left = [str(w.message) for w in caught if "never awaited" in str(w.message)]
    assert left == []


def _errors(result: Any) -> list[Any]:
    return sorted((e.message.split(":")[0], tuple(e.path or ())) for e in result.errors or [])


# -- 7. awaitables are refused wherever they reach the execution -------------------------------


async def _async_value(value: Any = "x") -> Any:
    return value


def test_an_async_root_resolver_fails_its_field_with_the_clear_message(never_awaited) -> None:
    schema = build_schema("type Query { a: String b: String }")
    schema.query_type.fields["a"].resolve = lambda _s, _i: _async_value()
    schema.query_type.fields["b"].resolve = lambda _s, _i: "b"
    result = run(schema, "{ a b }")
    assert result.data == {"a": None, "b": "b"}
    assert _errors(result) == [(REFUSED, ("a",))]


def test_an_async_mutation_field_fails_with_the_clear_message_not_a_bare_type_error(never_awaited) -> None:
    schema = build_schema("type Query { x: Int } type Mutation { a: Int b: Int }")
    schema.mutation_type.fields["a"].resolve = lambda _s, _i: _async_value(1)
    schema.mutation_type.fields["b"].resolve = lambda _s, _i: 2
    result = run(schema, "mutation { a b }")
    assert result.data == {"a": None, "b": 2}
    assert _errors(result) == [(REFUSED, ("a",))]


def test_an_async_is_type_of_is_refused_and_the_object_is_not_taken_as_data(never_awaited) -> None:
    schema = build_schema("type Query { thing: Thing } type Thing { name: String }")
    schema.query_type.fields["thing"].resolve = lambda _s, _i: {"name": "rejected"}

    async def is_type_of(_value: Any, _info: Any) -> bool:
        return False

    schema.type_map["Thing"].is_type_of = is_type_of
    result = run(schema, "{ thing { name } }")
    assert result.data == {"thing": None}
    assert _errors(result) == [(REFUSED, ("thing",))]


def test_an_async_is_type_of_in_the_default_type_resolver_is_refused(never_awaited) -> None:
    schema = build_schema("type Query { thing: Named } interface Named { name: String }"
                          " type Thing implements Named { name: String }")
    schema.query_type.fields["thing"].resolve = lambda _s, _i: {"name": "t"}

    async def is_type_of(_value: Any, _info: Any) -> bool:
        return True

    schema.type_map["Thing"].is_type_of = is_type_of
    result = run(schema, "{ thing { name } }")
    assert result.data == {"thing": None}
    assert _errors(result) == [(REFUSED, ("thing",))]


def test_an_async_resolver_under_an_object_from_a_pending_future_fails_its_field(never_awaited) -> None:
    schema = build_schema("type Query { item: Item } type Item { id: Int name: String }")
    items = DataLoader(lambda keys: [{"id": k} for k in keys])
    schema.query_type.fields["item"].resolve = lambda _s, _i: items.load(1)
    schema.type_map["Item"].fields["name"].resolve = lambda item, _i: _async_value(f"n{item['id']}")
    result = run(schema, "{ item { id name } }")
    assert result.data == {"item": {"id": 1, "name": None}}
    assert _errors(result) == [(REFUSED, ("item", "name"))]


def test_an_awaitable_list_item_fails_with_the_clear_message(never_awaited) -> None:
    schema = build_schema("type Query { xs: [String] }")
    schema.query_type.fields["xs"].resolve = lambda _s, _i: ["a", _async_value("b")]
    result = run(schema, "{ xs }")
    assert result.errors and all(REFUSED in e.message for e in result.errors)
    assert result.data["xs"] in (None, ["a", None])  # 3.2 fails the item, 3.3 the list


def test_an_async_resolve_type_is_refused(never_awaited) -> None:
    schema = build_schema("type Query { thing: Named } interface Named { name: String }"
                          " type Thing implements Named { name: String }")
    schema.query_type.fields["thing"].resolve = lambda _s, _i: {"name": "t"}

    async def resolve_type(_value: Any, _info: Any, _type: Any) -> str:
        return "Thing"

    schema.type_map["Named"].resolve_type = resolve_type
    result = run(schema, "{ thing { name } }")
    assert result.data == {"thing": None}
    assert _errors(result) == [(REFUSED, ("thing",))]


def test_an_is_awaitable_argument_cannot_let_an_awaitable_through(never_awaited) -> None:
    schema = build_schema("type Query { a: String }")
    schema.query_type.fields["a"].resolve = lambda _s, _i: _async_value()
    result = execute(schema, parse("{ a }"), is_awaitable=lambda _value: False,
                     **{CLASS_KW: DataLoaderExecutionContext})
    assert _errors(result) == [(REFUSED, ("a",))]


# -- 4. opt-in: clear the request's loaders after each top-level mutation field ----------------


class ClearingContext(DataLoaderExecutionContext):
    clear_loaders_after_mutation_fields = True


def _counter_schema(loaders: DataLoaderRegistry) -> Any:
    """``rename`` changes a row; ``name`` reads it through the (caching) loader."""
    rows = {1: "old"}
    schema = build_schema("type Query { name: String } type Mutation { rename(to: String!): String name: String }")

    def rename(_s: Any, info: Any, to: str) -> Any:
        rows[1] = to
        return to

    schema.mutation_type.fields["rename"].resolve = rename
    schema.mutation_type.fields["name"].resolve = lambda _s, info: info.context.loaders["name"].load(1)
    loaders.register("name", DataLoader(lambda keys: [rows[k] for k in keys], name="name"))
    return schema


class Ctx:
    def __init__(self, loaders: DataLoaderRegistry) -> None:
        self.loaders = loaders


@pytest.mark.parametrize("cls, second", [(DataLoaderExecutionContext, "old"), (ClearingContext, "new")])
def test_clear_loaders_after_mutation_fields_is_opt_in(cls: Any, second: str) -> None:
    registry = DataLoaderRegistry()
    schema = _counter_schema(registry)
    result = run(schema, 'mutation { before: name rename(to: "new") after: name }',
                 cls=cls, context_value=Ctx(registry))
    assert result.errors is None
    assert result.data == {"before": "old", "rename": "new", "after": second}


def test_clearing_after_mutation_fields_also_clears_loaders_outside_a_registry() -> None:
    rows = {1: "old"}
    schema = build_schema("type Query { x: Int } type Mutation { rename(to: String!): String name: String }")
    loader = DataLoader(lambda keys: [rows[k] for k in keys])
    schema.mutation_type.fields["rename"].resolve = lambda _s, _i, to: rows.__setitem__(1, to) or to
    schema.mutation_type.fields["name"].resolve = lambda _s, _i: loader.load(1)
    result = run(schema, 'mutation { a: name rename(to: "new") b: name }', cls=ClearingContext)
    assert result.data == {"a": "old", "rename": "new", "b": "new"}


def test_queries_are_not_cleared_by_the_mutation_opt_in() -> None:
    calls: list[list[int]] = []
    schema = build_schema("type Query { a: String b: String }")
    loader = DataLoader(lambda keys: calls.append(list(keys)) or [str(k) for k in keys])
    schema.query_type.fields["a"].resolve = lambda _s, _i: loader.load(1)
    schema.query_type.fields["b"].resolve = lambda _s, _i: loader.load(1)
    assert run(schema, "{ a b }", cls=ClearingContext).data == {"a": "1", "b": "1"}
    assert calls == [[1]] and loader.load(1).done()  # still cached after the query


# -- 5. a loader reused by a second execution while it holds cached values ---------------------


def _reuse_schema(loader: DataLoader) -> Any:
    schema = build_schema("type Query { user(id: Int!): String }")
    schema.query_type.fields["user"].resolve = lambda _s, _i, id: loader.load(id)
    return schema


def _reuse_warnings(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "dataloader_sync" and r.levelno == logging.WARNING and "second GraphQL" in r.getMessage()]


class RequestContext:
    """A per-request context object, as Flask's and Django's views pass."""

    def __init__(self, viewer: str) -> None:
        self.viewer = viewer


@pytest.mark.parametrize("context_of", [RequestContext, lambda viewer: {"viewer": viewer}], ids=["object", "dict"])
def test_a_loader_reused_by_another_execution_with_cached_values_warns_once_naming_it(
        caplog: Any, context_of: Any) -> None:
    loader = DataLoader(lambda keys: [f"user {k}" for k in keys], name="global_users")
    schema = _reuse_schema(loader)
    caplog.set_level(logging.WARNING, logger="dataloader_sync")
    # The requests' contexts stay alive here: a dict context is told apart by
    # its id, which a later dict may reuse once the earlier one is freed.
    contexts = [context_of(viewer) for viewer in ("ann", "bob", "cid", "dan")]
    assert run(schema, "{ user(id: 1) }", context_value=contexts[0]).data == {"user": "user 1"}
    assert _reuse_warnings(caplog) == []
    for context in contexts[1:]:
        assert run(schema, "{ user(id: 2) }", context_value=context).data == {"user": "user 2"}
    messages = _reuse_warnings(caplog)
    assert len(messages) == 1
    assert "global_users" in messages[0] and "DataLoaders" in messages[0] and "DataLoaderMiddleware" in messages[0]


def test_a_loader_reused_by_requests_whose_contexts_are_freed_in_between_warns(caplog: Any) -> None:
    loader = DataLoader(lambda keys: list(keys), name="global")
    schema = _reuse_schema(loader)
    caplog.set_level(logging.WARNING, logger="dataloader_sync")
    for user in (1, 2):
        run(schema, f"{{ user(id: {user}) }}", context_value=RequestContext("someone"))
    assert len(_reuse_warnings(caplog)) == 1


def test_per_request_loaders_and_cleared_loaders_do_not_warn(caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="dataloader_sync")
    for viewer in ("ann", "bob"):  # a fresh loader per request
        loader = DataLoader(lambda keys: list(keys), name="per_request")
        run(_reuse_schema(loader), "{ user(id: 1) }", context_value={"viewer": viewer})
    shared = DataLoader(lambda keys: list(keys), name="cleared")
    schema = _reuse_schema(shared)
    for viewer in ("ann", "bob"):  # reused, but cleared between requests
        run(schema, "{ user(id: 1) }", context_value={"viewer": viewer})
        shared.clear_all()
    context = {"viewer": "ann"}  # two operations of one request share its context and loaders
    same_request = DataLoader(lambda keys: list(keys), name="same_request")
    schema = _reuse_schema(same_request)
    run(schema, "{ user(id: 1) }", context_value=context)
    run(schema, "{ user(id: 2) }", context_value=context)
    assert _reuse_warnings(caplog) == []


def test_a_module_level_loader_asked_for_the_same_keys_every_request_warns_once(caplog: Any) -> None:
    # The common case: every later request is all cache hits, so no execution ever queues a key in it.
    rows = {1: "ann"}
    loader = DataLoader(lambda keys: [rows[k] for k in keys], name="module_users")
    schema = _reuse_schema(loader)
    caplog.set_level(logging.WARNING, logger="dataloader_sync")
    contexts = [RequestContext(viewer) for viewer in ("ann", "bob", "cid")]
    assert run(schema, "{ user(id: 1) }", context_value=contexts[0]).data == {"user": "ann"}
    assert _reuse_warnings(caplog) == []
    rows[1] = "renamed"  # the row changes; the next requests are served the old value
    for context in contexts[1:]:
        assert run(schema, "{ user(id: 1) }", context_value=context).data == {"user": "ann"}
    messages = _reuse_warnings(caplog)
    assert len(messages) == 1 and "module_users" in messages[0] and "DataLoaderMiddleware" in messages[0]


def test_a_module_level_registry_served_from_its_cache_warns_once(caplog: Any) -> None:
    registry = DataLoaderRegistry().register("users", DataLoader(lambda keys: list(keys), name="registry_users"))
    schema = build_schema("type Query { user(id: Int!): Int }")
    schema.query_type.fields["user"].resolve = lambda _s, info, id: info.context["loaders"]["users"].load(id)
    caplog.set_level(logging.WARNING, logger="dataloader_sync")
    contexts = [{"loaders": registry, "viewer": viewer} for viewer in ("ann", "bob", "cid")]
    for context in contexts:
        assert run(schema, "{ user(id: 7) }", context_value=context).data == {"user": 7}
    assert len(_reuse_warnings(caplog)) == 1


def test_hits_of_one_request_and_loaders_that_keep_nothing_do_not_warn(caplog: Any) -> None:
    from dataloader_sync import MISSING, ValueCache

    caplog.set_level(logging.WARNING, logger="dataloader_sync")
    context = RequestContext("ann")  # one request, three operations: the later two all hits
    same_request = DataLoader(lambda keys: list(keys), name="same_request")
    for _ in range(3):
        run(_reuse_schema(same_request), "{ user(id: 1) }", context_value=context)
    uncached = DataLoader(lambda keys: list(keys), name="uncached", cache=False)

    class Shared(ValueCache[Any, Any]):  # a shared tier that holds nothing: every load a miss
        def get_values(self, keys: Any) -> list[Any]:
            return [MISSING] * len(keys)

        def set_values(self, keys: Any, values: Any) -> None:
            pass

        def delete(self, key: Any) -> None:
            pass

        def clear(self) -> None:
            pass

    shared = DataLoader(lambda keys: list(keys), name="shared", value_cache=Shared())
    contexts = [RequestContext(viewer) for viewer in ("ann", "bob", "cid")]
    for loader in (uncached, shared):
        for request in contexts:
            run(_reuse_schema(loader), "{ user(id: 1) }", context_value=request)
    assert _reuse_warnings(caplog) == []


def test_a_load_outside_any_execution_keeps_the_look_for_the_next_execution(caplog: Any) -> None:
    loader = DataLoader(lambda keys: list(keys), name="also_outside")
    schema = _reuse_schema(loader)
    caplog.set_level(logging.WARNING, logger="dataloader_sync")
    first, second = RequestContext("ann"), RequestContext("bob")
    run(schema, "{ user(id: 1) }", context_value=first)
    assert loader.load(1).result(timeout=5) == 1  # view code after the execution: no execution to check against
    assert _reuse_warnings(caplog) == []
    run(schema, "{ user(id: 1) }", context_value=second)
    assert len(_reuse_warnings(caplog)) == 1


# -- 3. graphql-core 3.3 prereleases before rc1 are refused at import --------------------------


class _V:
    def __init__(self, major: int, minor: int, micro: int, level: str = "final", serial: int = 0) -> None:
        self.major, self.minor, self.micro, self.releaselevel, self.serial = major, minor, micro, level, serial


@pytest.mark.parametrize("version, refused", [
    (_V(3, 2, 0), False), (_V(3, 2, 14), False), (_V(3, 3, 0, "alpha", 7), True),
    (_V(3, 3, 0, "alpha", 12), True), (_V(3, 3, 0, "beta", 1), True), (_V(3, 3, 0, "candidate", 0), True),
    (_V(3, 3, 0, "candidate", 1), False), (_V(3, 3, 0), False), (_V(3, 3, 2), False), (_V(3, 1, 7), True),
])
def test_graphql_core_versions_supported_or_refused_with_the_supported_versions(version: Any, refused: bool) -> None:
    from dataloader_sync.graphql._compat import unsupported_version

    message = unsupported_version(version)
    assert (message is not None) == refused
    if refused:
        assert "3.2.0 - 3.2.x" in message and "3.3.0rc1" in message


def test_a_33_prerelease_is_refused_when_dataloader_sync_graphql_is_imported() -> None:
    # graphql.version_info of a 3.3.0a12 install, without installing it: the
    # check reads graphql.version_info at import.
    code = (
        "import importlib, graphql\n"
        "v = importlib.import_module('graphql.version')\n"
        "graphql.version_info = v.VersionInfo.from_str('3.3.0a12')\n"
        "graphql.__version__ = '3.3.0a12'\n"
        "try:\n"
        "    import dataloader_sync.graphql\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "does not support graphql-core 3.3.0a12" in out.stdout and "3.3.0rc1" in out.stdout


def test_a_coroutine_delivered_by_a_loader_future_fails_its_field(never_awaited) -> None:
    schema = build_schema("type Query { a: String xs: [String] }")
    loader = DataLoader(lambda keys: [_async_value(k) for k in keys])
    schema.query_type.fields["a"].resolve = lambda _s, _i: loader.load("a")
    schema.query_type.fields["xs"].resolve = lambda _s, _i: loader.load_many(["x", "y"])
    result = run(schema, "{ a xs }")
    assert result.data == {"a": None, "xs": [None, None]}
    assert _errors(result) == [(REFUSED, ("a",)), (REFUSED, ("xs", 0)), (REFUSED, ("xs", 1))]


def test_an_asyncio_future_is_refused_too() -> None:
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        schema = build_schema("type Query { a: String }")
        schema.query_type.fields["a"].resolve = lambda _s, _i: loop.create_future()
        result = run(schema, "{ a }")
    finally:
        loop.close()
    assert result.data == {"a": None}
    assert _errors(result) == [(REFUSED, ("a",))]


def test_an_async_generator_returned_for_a_list_field_is_refused_like_other_awaitables() -> None:
    from dataloader_sync.graphql._awaitables import MESSAGE

    schema = build_schema("type Query { names: [String]  other: String }")

    async def names(_info: Any) -> Any:  # graphql-core's default resolver calls a root value's callables
        yield "ann"

    root = {"names": names, "other": lambda _info: "still here"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(schema, "{ names other }", root_value=root)
        gc.collect()
    assert result.data == {"names": None, "other": "still here"}
    assert [(error.message, error.path) for error in result.errors or ()] == [(MESSAGE, ["names"])]
    assert "async generators" in MESSAGE
    assert not [w for w in caught if "never awaited" in str(w.message)]
