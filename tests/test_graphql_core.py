"""Tests for dataloader_sync.graphql with graphql-core alone (no graphene).

They run on graphql-core 3.2.x (``execution_context_class=``) and 3.3.x
(``executor_class=``).  The strongest evidence is ``test_same_result_as_plain``:
the same schema and queries give the same data and errors whether resolvers
return plain values (graphql-core's own ExecutionContext) or Futures in
various shapes (this library's).
"""
from __future__ import annotations

import concurrent.futures as cf
import inspect
import itertools
import subprocess
import sys
import threading
import time
from typing import Any, Callable

import pytest
from conftest import FakeClock
from graphql import build_schema, execute, graphql_sync, parse

from dataloader_sync import (
    DISPATCH_ALWAYS,
    DISPATCH_NEVER,
    DataLoader,
    DataLoaderRegistry,
    Future,
    ScheduledDataLoaderRegistry,
    ScheduledExecutor,
    completed_future,
    failed_future,
)
from dataloader_sync.graphql import DataLoaderExecutionContext, ExecutionStalledError

TIMEOUT = 10.0
# graphql-core 3.3 renamed the option; detect it by the signature, as users would.
CLASS_KW = (
    "executor_class"
    if "executor_class" in inspect.signature(graphql_sync).parameters
    else "execution_context_class"
)


def run(schema: Any, query: str, cls: Any = DataLoaderExecutionContext, **kwargs: Any) -> Any:
    return graphql_sync(schema, query, **{CLASS_KW: cls}, **kwargs)


def plain(schema: Any, query: str, **kwargs: Any) -> Any:
    return graphql_sync(schema, query, **kwargs)


def normalized(result: Any) -> dict[str, Any]:
    """``result.formatted`` with errors in a fixed order (3.3 does not sort them)."""
    out = dict(result.formatted)
    if out.get("errors"):
        out["errors"] = sorted(out["errors"], key=lambda e: (str(e.get("path")), e["message"]))
    return out


class Recorder:
    """A batch function over a value function, recording every call."""

    def __init__(self, fn: Callable[[Any], Any] = lambda key: key) -> None:
        self.fn = fn
        self.calls: list[list[Any]] = []
        self.threads: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, keys: list[Any]) -> list[Any]:
        with self.lock:
            self.calls.append(list(keys))
            self.threads.append(threading.get_ident())
        return [self.fn(key) for key in keys]


# -- a schema with every kind of position, resolved in several Future shapes --------------

SDL = """
interface Node { id: ID! }
type Owner implements Node { id: ID! name: String! }
type Item implements Node {
  id: ID!
  name: String
  size: Int
  nn: String!
  tags: [String!]
  children: [Item!]
  kids: [Item]!
  maybe: Item
  owner: Owner!
}
union Thing = Item | Owner
type Query {
  items: [Item!]!
  item(id: ID!): Item
  node(id: ID!): Node
  things: [Thing]
  strictNull: Item!
  numbers: [Int!]
  broken: String
  notList: [Int]
}
"""

OWNERS = {"o1": {"id": "o1", "name": "Ann"}, "o2": {"id": "o2", "name": "Bob"}}
ITEMS: dict[str, dict[str, Any]] = {
    "1": {"id": "1", "name": "one", "size": 1, "nn": "a", "tags": ["x", "y"], "children": ["2", "3"],
          "kids": ["2", None, "3"], "maybe": "2", "owner": "o1"},
    "2": {"id": "2", "name": "two", "size": "big", "nn": "b", "tags": ["a", None], "children": [],
          "kids": [], "maybe": None, "owner": "o2"},
    "3": {"id": "3", "name": RuntimeError("no name for 3"), "size": 3, "nn": "c", "tags": None,
          "children": ["1"], "kids": ["1"], "maybe": "1", "owner": "o1"},
    "4": {"id": "4", "name": "four", "size": 4, "nn": None, "tags": [], "children": ["1", "4"],
          "kids": ["4"], "maybe": "4", "owner": None},
    "5": {"id": "5", "name": ValueError("five fails"), "size": 5, "nn": None, "tags": [], "children": [],
          "kids": [], "maybe": None, "owner": "o2"},
}


def _value(v: Any) -> Any:
    if isinstance(v, Exception):
        raise v
    return v


def _plain_resolvers() -> dict[str, dict[str, Callable[..., Any]]]:
    item = ITEMS.get
    return {
        "Query": {
            "items": lambda _s, _i: [ITEMS[k] for k in ("1", "2", "3", "4")],
            "item": lambda _s, _i, id: item(id),
            "node": lambda _s, _i, id: ITEMS.get(id) or OWNERS.get(id),
            "things": lambda _s, _i: [ITEMS["1"], OWNERS["o1"], None, ITEMS["2"]],
            "strictNull": lambda _s, _i: None,
            "numbers": lambda _s, _i: [1, 2, None, 3],
            "broken": lambda _s, _i: _value(ValueError("broken")),
            "notList": lambda _s, _i: 5,
        },
        "Item": {
            "name": lambda s, _i: _value(s["name"]),
            "size": lambda s, _i: s["size"],
            "nn": lambda s, _i: s["nn"],
            "tags": lambda s, _i: s["tags"],
            "children": lambda s, _i: [ITEMS[k] for k in s["children"]],
            "kids": lambda s, _i: [None if k is None else ITEMS[k] for k in s["kids"]],
            "maybe": lambda s, _i: s["maybe"] and ITEMS[s["maybe"]],
            "owner": lambda s, _i: s["owner"] and OWNERS[s["owner"]],
        },
    }


def _type_name(value: Any, _info: Any, _type: Any) -> str:
    return "Item" if "nn" in value else "Owner"


class Deferrer:
    """Turns a plain resolver into one returning a Future of the given shape."""

    MODES = ("plain", "done", "loader", "then", "chained", "list-items", "mixed")

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.thunks: dict[int, Callable[[], Any]] = {}
        self.ids = itertools.count()
        self.loader = DataLoader(self._batch, name="deferred")

    def _batch(self, keys: list[int]) -> list[Any]:
        out = []
        for key in keys:
            try:
                out.append(self.thunks.pop(key)())
            except Exception as exc:  # that key fails, as the plain resolver raised
                out.append(exc)
        return out

    def load(self, thunk: Callable[[], Any]) -> Future:
        key = next(self.ids)
        self.thunks[key] = thunk
        return self.loader.load(key)

    def wrap(self, fn: Callable[..., Any], field: str) -> Callable[..., Any]:
        mode = self.mode
        if mode == "mixed":
            mode = self.MODES[1 + sum(map(ord, field)) % (len(self.MODES) - 2)]

        def resolve(*args: Any, **kwargs: Any) -> Any:
            thunk = lambda: fn(*args, **kwargs)  # noqa: E731
            if mode == "plain":
                return thunk()
            if mode == "done":
                try:
                    return completed_future(thunk())
                except Exception as exc:
                    return failed_future(exc)
            if mode == "loader":
                return self.load(thunk)
            if mode == "then":
                return self.load(lambda: None).then(lambda _: thunk())
            if mode == "chained":
                return self.load(lambda: None).then(lambda _: self.load(thunk))
            value = thunk()  # list-items: lists of futures, other values as one future
            if isinstance(value, list):
                return [self.load(lambda v=v: v) for v in value]
            return self.load(lambda: value)

        return resolve


def make_schema(deferrer: Any = None) -> Any:
    schema = build_schema(SDL)
    for type_name, fields in _plain_resolvers().items():
        for name, fn in fields.items():
            schema.type_map[type_name].fields[name].resolve = fn if deferrer is None else deferrer.wrap(fn, name)
    for abstract in ("Node", "Thing"):
        schema.type_map[abstract].resolve_type = (
            _type_name if deferrer is None else deferrer.wrap(_type_name, abstract))
    return schema


QUERIES = {
    "scalars": "{ items { id name size } }",
    "non-null to the root": "{ items { id nn } }",
    "lists and nesting": "{ item(id: 1) { children { id tags nn } kids { id name } maybe { id maybe { id } } } }",
    "abstract types": ('{ node(id: "o1") { id ... on Owner { name } ... on Item { itemName: name } }'
                       " things { __typename ... on Item { id size } ... on Owner { name } } }"),
    "root errors": "{ numbers broken notList }",
    "non-null root field": "{ item(id: 1) { id } strictNull { id } }",
    "aliases and fragments": ("{ a: item(id: 1) { ...F } b: item(id: 2) { ...F x: name } }"
                              " fragment F on Item { id label: name owner { name } }"),
    "non-null object nulls its parent": "{ item(id: 4) { id owner { name } } }",
    "sibling error first": "{ item(id: 5) { name nn } }",
    "sibling error after": "{ item(id: 5) { nn name } }",
    "deep recursion": "{ item(id: 4) { children { id children { id children { id nn owner { id } } } } } }",
}


def _nulled_prefix(data: Any, path: list[Any]) -> Any:
    """The longest proper prefix of *path* whose value in *data* is null, or None."""
    node, found = data, None
    for i, key in enumerate(path[:-1]):
        node = node[key]
        if node is None:
            return tuple(path[: i + 1])
    return found


def assert_same_result(got: Any, expected: Any, siblings_may_differ: bool = False) -> None:
    """Same data and errors; with *siblings_may_differ*, errors of fields whose parent
    was nulled by another field may differ (they depend on which completed first)."""
    got_n, expected_n = normalized(got), normalized(expected)
    if not siblings_may_differ or expected.data is None:
        assert got_n == expected_n
        return
    assert got_n["data"] == expected_n["data"]

    def split(errors: list[dict[str, Any]]) -> Any:
        kept = [e for e in errors if _nulled_prefix(got.data, e["path"]) is None]
        nulled = {_nulled_prefix(got.data, e["path"]) for e in errors} - {None}
        return kept, nulled

    assert split(got_n.get("errors", [])) == split(expected_n.get("errors", []))


# Futures complete in load order when one loader batch holds them all; in the
# modes that defer siblings differently ('mixed', 'list-items'), a field that
# nulls its parent may complete before or after an erroring sibling.
SIBLING_QUERIES = {QUERIES["sibling error first"], QUERIES["sibling error after"]}


@pytest.mark.parametrize("mode", Deferrer.MODES)
@pytest.mark.parametrize("query", list(QUERIES.values()), ids=list(QUERIES))
def test_same_result_as_plain(mode: str, query: str) -> None:
    expected = plain(make_schema(), query)
    assert expected.data is not None or expected.errors[0].path  # the query itself is valid
    got = run(make_schema(Deferrer(mode)), query)
    assert_same_result(got, expected, query in SIBLING_QUERIES and mode in ("mixed", "list-items"))
    if got.errors:  # located: message, path and locations all present
        assert all(e.path and e.locations for e in got.errors)


def test_same_result_as_plain_with_graphql_cores_execute() -> None:
    """``execute`` (not ``graphql_sync``) gives a plain ExecutionResult too."""
    query = QUERIES["lists and nesting"]
    expected = plain(make_schema(), query)
    got = execute(make_schema(Deferrer("loader")), parse(query), **{CLASS_KW: DataLoaderExecutionContext})
    assert normalized(got) == normalized(expected)


# -- the failure modes of the existing add-ons, one test each -------------------------------

NN_SDL = "type Query { item: Item } type Item { id: Int! name: String! }"


def _nn_schema(loader: DataLoader) -> Any:
    schema = build_schema(NN_SDL)
    schema.query_type.fields["item"].resolve = lambda _s, _i: {"id": 1}
    schema.type_map["Item"].fields["name"].resolve = lambda s, _i: loader.load(s["id"])
    return schema


def test_non_null_field_null_via_loader_propagates_with_one_located_error() -> None:
    loader = DataLoader(lambda keys: [None for _ in keys])
    result = run(_nn_schema(loader), "{ item { id name } }")
    assert result.data == {"item": None}
    assert [(e.message, e.path, [(loc.line, loc.column) for loc in e.locations]) for e in result.errors] == [
        ("Cannot return null for non-nullable field Item.name.", ["item", "name"], [(1, 13)])
    ]


def test_batch_function_that_raises_gives_located_field_errors() -> None:
    def batch(keys: list[Any]) -> list[Any]:
        raise RuntimeError("database down")

    schema = build_schema("type Query { a: String b: String c: Int }")
    loader = DataLoader(batch, name="db")
    for name in ("a", "b"):
        schema.query_type.fields[name].resolve = lambda _s, _i, n=name: loader.load(n)
    schema.query_type.fields["c"].resolve = lambda _s, _i: 3
    result = run(schema, "{ a b c }")
    assert result.data == {"a": None, "b": None, "c": 3}
    assert sorted((e.message, tuple(e.path)) for e in result.errors) == [
        ("database down", ("a",)), ("database down", ("b",))]
    assert all(e.locations for e in result.errors)


def test_wrong_result_count_fails_the_fields_with_a_clear_error() -> None:
    schema = build_schema("type Query { a: String b: String }")
    loader = DataLoader(lambda keys: ["only one"], name="short")
    for name in ("a", "b"):
        schema.query_type.fields[name].resolve = lambda _s, _i, n=name: loader.load(n)
    result = run(schema, "{ a b }")
    assert result.data == {"a": None, "b": None}
    assert len(result.errors) == 2
    assert all("'short'" in e.message and "1 values for 2 keys" in e.message for e in result.errors)


def test_serial_mutations_see_the_previous_fields_effect() -> None:
    schema = build_schema("type Query { total: Int } type Mutation { add(n: Int!): Int! total: Int! }")
    state = {"total": 0}
    log: list[str] = []

    def add_batch(keys: list[int]) -> list[int]:
        log.append(f"add {keys}")
        out = []
        for n in keys:
            state["total"] += n
            out.append(state["total"])
        return out

    adder = DataLoader(add_batch, cache=False)
    reader = DataLoader(lambda keys: [state["total"] for _ in keys], cache=False)
    mutation = schema.mutation_type.fields
    mutation["add"].resolve = lambda _s, _i, n: (log.append(f"resolve add {n}"), adder.load(n))[1]
    mutation["total"].resolve = lambda _s, _i: reader.load("t")
    result = run(schema, "mutation { a: add(n: 1) b: add(n: 2) t: total c: add(n: 3) }")
    assert result.errors is None
    assert result.data == {"a": 1, "b": 3, "t": 3, "c": 6}
    # Each field is resolved only after the previous one completed: no batching across them.
    assert log == ["resolve add 1", "add [1]", "resolve add 2", "add [2]", "resolve add 3", "add [3]"]


def test_serial_mutation_non_null_failure_nulls_data_and_stops() -> None:
    schema = build_schema("type Query { x: Int } type Mutation { a: Int! b: Int }")
    called: list[str] = []
    loader = DataLoader(lambda keys: [None for _ in keys])
    schema.mutation_type.fields["a"].resolve = lambda _s, _i: loader.load("a")
    schema.mutation_type.fields["b"].resolve = lambda _s, _i: called.append("b") or 2
    result = run(schema, "mutation { a b }")
    assert result.data is None  # as graphql-core gives when a non-null root field is null
    assert [(e.message, e.path) for e in result.errors] == [
        ("Cannot return null for non-nullable field Mutation.a.", ["a"])]
    assert called == []  # the fields after it are not executed


def _one_field_schema(resolve: Callable[..., Any], type_: str = "String") -> Any:
    schema = build_schema(f"type Query {{ f: {type_} }}")
    schema.query_type.fields["f"].resolve = resolve
    return schema


def test_then_on_an_already_resolved_cached_future() -> None:
    recorder = Recorder(lambda k: f"v{k}")
    loader = DataLoader(recorder)
    loader.prime(1, "cached")
    schema = _one_field_schema(lambda _s, _i: loader.load(1).then(lambda v: v + "!"))
    assert run(schema, "{ f }").data == {"f": "cached!"}
    assert recorder.calls == []


def test_then_on_a_failed_future_propagates_the_error_not_none() -> None:
    loader = DataLoader(lambda keys: [ValueError(f"no {k}") for k in keys])
    seen: list[Any] = []
    schema = _one_field_schema(lambda _s, _i: loader.load(7).then(lambda v: seen.append(v) or "never"))
    result = run(schema, "{ f }")
    assert result.data == {"f": None}
    assert [(e.message, e.path) for e in result.errors] == [("no 7", ["f"])]
    assert seen == []


def test_a_chained_load_inside_then_is_dispatched_in_one_batch() -> None:
    first, second = Recorder(lambda k: k * 10), Recorder(lambda k: f"v{k}")
    a, b = DataLoader(first, name="a"), DataLoader(second, name="b")
    schema = build_schema("type Query { items: [Item] } type Item { id: Int late: String }")
    schema.query_type.fields["items"].resolve = lambda _s, _i: [{"id": i} for i in range(5)]
    schema.type_map["Item"].fields["late"].resolve = lambda s, _i: a.load(s["id"]).then(b.load)
    result = run(schema, "{ items { id late } }")
    assert result.errors is None
    assert [i["late"] for i in result.data["items"]] == ["v0", "v10", "v20", "v30", "v40"]
    assert first.calls == [[0, 1, 2, 3, 4]]
    assert second.calls == [[0, 10, 20, 30, 40]]


def test_lists_of_futures_and_a_future_of_a_list() -> None:
    loader = DataLoader(Recorder(lambda k: k + 1))
    schema = build_schema("type Query { xs: [Int] ys: [Int!]! }")
    schema.query_type.fields["xs"].resolve = lambda _s, _i: [loader.load(1), 5, loader.load(2)]
    schema.query_type.fields["ys"].resolve = lambda _s, _i: loader.load_many([10, 20])
    assert run(schema, "{ xs ys }").data == {"xs": [2, 5, 3], "ys": [11, 21]}


def test_an_executors_plain_future() -> None:
    with cf.ThreadPoolExecutor(2) as pool:
        schema = build_schema("type Query { f: String g: [Int] }")
        schema.query_type.fields["f"].resolve = lambda _s, _i: pool.submit(lambda: "from pool")
        schema.query_type.fields["g"].resolve = lambda _s, _i: [pool.submit(lambda: 1), pool.submit(int, "2")]
        assert run(schema, "{ f g }").data == {"f": "from pool", "g": [1, 2]}


def test_a_cancelled_future_is_a_field_error_that_says_so() -> None:
    cancelled: cf.Future = cf.Future()
    cancelled.cancel()  # done before the field sees it
    later: cf.Future = cf.Future()  # cancelled while the field waits
    canceller = DataLoader(lambda keys: [later.cancel() for _ in keys])
    schema = build_schema("type Query { a: String b: String c: Boolean }")
    schema.query_type.fields["a"].resolve = lambda _s, _i: cancelled
    schema.query_type.fields["b"].resolve = lambda _s, _i: later
    schema.query_type.fields["c"].resolve = lambda _s, _i: canceller.load(1)
    result = run(schema, "{ a b c }")
    assert result.data == {"a": None, "b": None, "c": True}
    assert sorted((e.path[0], e.message) for e in result.errors) == [
        ("a", "the future of this field was cancelled"), ("b", "the future of this field was cancelled")]


def test_a_future_nobody_completes_stalls_then_fails_clearly() -> None:
    class Quick(DataLoaderExecutionContext):
        stall_timeout = 0.05

    orphan: cf.Future = cf.Future()
    schema = _one_field_schema(lambda _s, _i: orphan)
    result = run(schema, "{ f }", cls=Quick)
    assert result.data == {"f": None}
    assert "no progress for 0.05 s" in result.errors[0].message
    assert "futures are pending elsewhere" in result.errors[0].message
    assert isinstance(result.errors[0].original_error, ExecutionStalledError)


# -- batching ---------------------------------------------------------------------------------

TREE_SDL = """
type Query { roots(n: Int!): [Node!]! }
type Node { id: Int! label: String! children: [Node!]! }
"""


def _tree_schema(node_loader: DataLoader, children_loader: DataLoader, label_loader: DataLoader) -> Any:
    schema = build_schema(TREE_SDL)
    schema.query_type.fields["roots"].resolve = lambda _s, _i, n: node_loader.load_many(range(1, n + 1))
    fields = schema.type_map["Node"].fields
    fields["label"].resolve = lambda s, _i: label_loader.load(s["id"])
    fields["children"].resolve = lambda s, _i: children_loader.load(s["id"]).then(node_loader.load_many)
    return schema


def test_three_levels_over_n_objects_make_one_batch_per_loader_per_level() -> None:
    nodes, kids, labels = Recorder(lambda k: {"id": k}), Recorder(lambda k: [k * 10 + 1, k * 10 + 2]), Recorder(str)
    schema = _tree_schema(DataLoader(nodes), DataLoader(kids), DataLoader(labels))
    query = "{ roots(n: 7) { label children { label children { label children { id } } } } }"
    result = run(schema, query)
    assert result.errors is None
    assert len(result.data["roots"]) == 7
    assert result.data["roots"][3]["children"][1]["children"][0] == {"label": "421", "children": [
        {"id": 4211}, {"id": 4212}]}
    assert len(labels.calls) == 3  # one per level, not one per field
    assert len(kids.calls) == 3
    assert len(nodes.calls) == 4  # roots + the children of 3 levels
    assert [len(c) for c in labels.calls] == [7, 14, 28]


def test_the_waiting_fields_of_every_level_are_kept_in_the_same_two_lists(monkeypatch: Any) -> None:
    # The loop's list of waiting fields is not a new list at each step: a new
    # young list of every waiting field is what each young collection of the
    # cyclic GC would walk again (see Run.spare).
    from dataloader_sync.graphql import _loop

    lists: dict[int, list[Any]] = {}  # id -> the list itself (kept: ids stay unique)
    real = _loop.resume_done

    def recording(ctx: Any, run: Any) -> bool:
        lists[id(run.unwatched)] = run.unwatched
        lists[id(run.spare)] = run.spare
        return real(ctx, run)

    monkeypatch.setattr(_loop, "resume_done", recording)
    nodes, kids, labels = Recorder(lambda k: {"id": k}), Recorder(lambda k: [k * 10 + 1, k * 10 + 2]), Recorder(str)
    schema = _tree_schema(DataLoader(nodes), DataLoader(kids), DataLoader(labels))
    result = run(schema, "{ roots(n: 7) { label children { label children { label children { id } } } } }")
    assert result.errors is None and result.data["roots"][3]["children"][1]["children"][0]["label"] == "421"
    assert len(labels.calls) == 3
    assert len(lists) == 2


def test_batches_of_different_loaders_run_in_parallel_with_an_executor() -> None:
    barrier = threading.Barrier(2, timeout=TIMEOUT)

    def batch(keys: list[Any]) -> list[Any]:
        barrier.wait()  # passes only when both loaders' batches run at the same time
        return [f"v{k}" for k in keys]

    with cf.ThreadPoolExecutor(2) as pool:
        a, b = DataLoader(batch, executor=pool), DataLoader(batch, executor=pool)
        schema = build_schema("type Query { a: String b: String }")
        schema.query_type.fields["a"].resolve = lambda _s, _i: a.load(1)
        schema.query_type.fields["b"].resolve = lambda _s, _i: b.load(2)
        assert run(schema, "{ a b }").data == {"a": "v1", "b": "v2"}


def test_loads_chained_on_an_executor_thread_are_dispatched_on_the_request_thread() -> None:
    second = Recorder(lambda k: f"v{k}")
    with cf.ThreadPoolExecutor(2) as pool:
        a = DataLoader(Recorder(lambda k: k * 10), executor=pool)  # its then-callbacks run on the pool
        b = DataLoader(second)  # no executor: runs where it is dispatched
        schema = build_schema("type Query { items: [Item] } type Item { id: Int late: String }")
        schema.query_type.fields["items"].resolve = lambda _s, _i: [{"id": i} for i in range(5)]
        schema.type_map["Item"].fields["late"].resolve = lambda s, _i: a.load(s["id"]).then(b.load)
        result = run(schema, "{ items { id late } }")
    assert result.errors is None
    assert [i["late"] for i in result.data["items"]] == ["v0", "v10", "v20", "v30", "v40"]
    assert sorted(k for call in second.calls for k in call) == [0, 10, 20, 30, 40]
    assert set(second.threads) == {threading.get_ident()}


def test_completions_run_on_the_request_thread() -> None:
    threads: list[int] = []
    with cf.ThreadPoolExecutor(3) as pool:
        loader = DataLoader(Recorder(lambda k: {"id": k}), executor=pool)
        schema = build_schema("type Query { items: [Item] } type Item { id: Int tid: Int }")
        schema.query_type.fields["items"].resolve = lambda _s, _i: loader.load_many(range(4))
        schema.type_map["Item"].fields["tid"].resolve = lambda s, _i: threads.append(threading.get_ident()) or 1
        result = run(schema, "{ items { id tid } }")
    assert result.errors is None
    assert threads == [threading.get_ident()] * 4


def test_sixteen_concurrent_requests_with_per_request_loaders_never_mix() -> None:
    schema = build_schema("type Query { items(req: Int!): [Item] } type Item { key: String owner: Int }")
    seen: dict[int, list[list[Any]]] = {}

    def items(_s: Any, info: Any, req: int) -> Any:
        loader = info.context["loader"]
        return [loader.load(f"{req}-{i}") for i in range(20)]

    schema.query_type.fields["items"].resolve = items
    schema.type_map["Item"].fields["owner"].resolve = lambda s, info: info.context["owner"].load(s["key"])

    def one_request(req: int) -> Any:
        calls: list[list[Any]] = []
        loader = DataLoader(lambda keys: (calls.append(list(keys)), [{"key": k} for k in keys])[1])
        owner = DataLoader(lambda keys: [int(k.split("-")[0]) for k in keys])
        result = run(schema, f"{{ items(req: {req}) {{ key owner }} }}",
                     context_value={"loader": loader, "owner": owner})
        seen[req] = calls
        return result

    with cf.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one_request, range(16)))
    for req, result in enumerate(results):
        assert result.errors is None
        assert [i["key"] for i in result.data["items"]] == [f"{req}-{i}" for i in range(20)]
        assert {i["owner"] for i in result.data["items"]} == {req}
        assert seen[req] == [[f"{req}-{i}" for i in range(20)]]


# -- registries ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", ["registry", "attribute", "key"])
def test_a_registry_in_the_context_dispatches_through_dispatch_all(shape: str) -> None:
    class Registry(DataLoaderRegistry):
        dispatches = 0

        def dispatch_all(self) -> None:
            Registry.dispatches += 1
            super().dispatch_all()

    registry = Registry()
    inside, outside = Recorder(lambda k: f"in{k}"), Recorder(lambda k: f"out{k}")
    registry.register("inside", DataLoader(inside))
    stray = DataLoader(outside)  # not registered: dispatched directly
    context: Any = {"registry": registry, "attribute": type("Ctx", (), {"loaders": registry})(),
                    "key": {"loaders": registry}}[shape]
    schema = build_schema("type Query { a: String b: String }")
    schema.query_type.fields["a"].resolve = lambda _s, _i: registry["inside"].load(1)
    schema.query_type.fields["b"].resolve = lambda _s, _i: stray.load(2)
    result = run(schema, "{ a b }", context_value=context)
    assert result.data == {"a": "in1", "b": "out2"}
    assert Registry.dispatches == 1
    assert inside.calls == [[1]] and outside.calls == [[2]]


def test_a_registry_that_never_dispatches_fails_the_fields_clearly_instead_of_hanging() -> None:
    class Quick(DataLoaderExecutionContext):
        stall_timeout = 0.05

    with ScheduledDataLoaderRegistry(dispatch_predicate=DISPATCH_NEVER, schedule=0.01) as registry:
        registry.register("never", DataLoader(lambda keys: keys, name="never"))
        schema = _one_field_schema(lambda _s, _i: registry["never"].load("k"))
        result = run(schema, "{ f }", cls=Quick, context_value=registry)
    assert result.data == {"f": None}
    message = result.errors[0].message
    assert "never (1 keys)" in message and "predicate" in message


BENCH_SDL = """
type Query {{ items: [Item!]! }}
type Item {{ id: Int! {} late: String children: [Item!]! }}
""".format(" ".join(f"f{i}: String" for i in range(10)))


def bench_schema() -> Any:
    """The Bench shape: 10 field loaders, a chained late load, children via a loader then a list."""
    schema = build_schema(BENCH_SDL)
    schema.query_type.fields["items"].resolve = lambda _s, _i: [{"id": i, "depth": 1} for i in range(1, 21)]
    fields = schema.type_map["Item"].fields
    for i in range(10):
        fields[f"f{i}"].resolve = lambda s, info, i=i: info.context[f"loader-{i}"].load(s["id"])
    fields["late"].resolve = lambda s, info: info.context["loader-100"].load(s["id"]).then(
        info.context["loader-101"].load)
    fields["children"].resolve = lambda s, info: info.context["loader-150"].load((s["id"], s["depth"])).then(
        lambda kids: kids)
    return schema


BENCH_QUERY = "{ items { id %s late children { id %s late children { id %s late } } } }" % (
    (" ".join(f"f{i}" for i in range(10)),) * 3)


@pytest.mark.parametrize("schedule", [60.0, 0.001])
def test_bench_shape_on_a_ticker_registry_gives_one_batch_per_loader_per_level(schedule: float) -> None:
    """With a long schedule, and with one far shorter than a level: a tick leaves the loaders
    an execution at work was told of to it (it dispatches them when the level is done)."""
    recorders = {i: Recorder(lambda k, i=i: f"{i}:{k}") for i in range(200)}
    recorders[100] = Recorder(lambda k: k + 1000)
    recorders[150] = Recorder(lambda key: [] if key[1] == 3 else [
        {"id": key[0] * 1000 + j, "depth": key[1] + 1} for j in (1, 2)])
    with ScheduledDataLoaderRegistry(ticker_mode=True, schedule=schedule, dispatch_predicate=DISPATCH_NEVER) as reg:
        for i in range(200):
            reg.register(f"loader-{i}", DataLoader(recorders[i], name=f"loader-{i}"), predicate=DISPATCH_ALWAYS)
        context = {f"loader-{i}": reg[f"loader-{i}"] for i in range(200)}
        context["loaders"] = reg
        result = run(bench_schema(), BENCH_QUERY, context_value=context)
    assert result.errors is None
    items = result.data["items"]
    assert len(items) == 20 and items[3]["f7"] == "7:4" and items[3]["late"] == "101:1004"
    assert items[3]["children"][1]["children"][0]["f0"] == "0:4002001"
    assert items[3]["children"][1]["children"][0]["late"] == "101:4003001"
    for i in range(10):
        assert [len(c) for c in recorders[i].calls] == [20, 40, 80]  # one batch per level
    assert [len(c) for c in recorders[100].calls] == [20, 40, 80]
    assert [len(c) for c in recorders[101].calls] == [20, 40, 80]
    assert [len(c) for c in recorders[150].calls] == [20, 40]  # level 3 asks no children
    assert all(recorders[i].calls == [] for i in range(10, 100))


def test_a_ticker_sleeps_while_the_execution_dispatches_itself_and_wakes_when_it_ends() -> None:
    """A tick that finds every queued key told to an execution at work does not re-arm (it would
    only leave them to it again); the execution wakes the ticker when it ends."""
    clock = FakeClock()
    executor = ScheduledExecutor(name="test-sleeping-ticker", clock=clock)
    seen: list[int] = []

    def probe(item: int, info: Any) -> int:
        # Every item's x was loaded before this (the last) probe: let one tick see them.
        if item == 3:
            runs = executor.statistics().tasks_run
            clock.advance(1.0)
            executor.wake()
            deadline = time.monotonic() + 10.0
            pause = threading.Event()
            while executor.statistics().tasks_run == runs and time.monotonic() < deadline:
                pause.wait(0.001)
            seen.append(executor.statistics().tasks_run - runs)
            seen.append(executor.pending_count)  # 0: the tick did not re-arm (the clock stands still)
        return item

    schema = build_schema("type Query { items: [Item] } type Item { x: Int probe: Int }")
    schema.query_type.fields["items"].resolve = lambda _s, _i: [1, 2, 3]
    schema.type_map["Item"].fields["x"].resolve = lambda item, info: info.context.loaders["x"].load(item)
    schema.type_map["Item"].fields["probe"].resolve = probe
    xs = Recorder(lambda k: k * 10)
    try:
        with ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=1.0) as reg:
            reg.register("x", DataLoader(xs))
            reg.dispatch_all()  # the ticker starts
            context = type("Context", (), {"loaders": reg})()
            result = run(schema, "{ items { x probe } }", context_value=context)
            ended = executor.pending_count  # 1: the execution woke the ticker when it ended
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    assert result.errors is None
    assert result.data == {"items": [{"x": 10, "probe": 1}, {"x": 20, "probe": 2}, {"x": 30, "probe": 3}]}
    assert seen == [1, 0] and ended == 1
    assert xs.calls == [[1, 2, 3]]  # one batch: the level's, sent by the execution


def test_a_ticker_asks_a_refusing_predicate_again_while_the_execution_waits() -> None:
    """The ticker slept while the level was being resolved; the execution, about to wait on keys
    the predicate refused, wakes it, and the tick that the predicate lets through completes them."""
    asked = itertools.count(1)

    def third_time(name: str, loader: Any) -> bool:
        return next(asked) >= 3

    schema = build_schema("type Query { items: [Item] } type Item { x: Int }")
    schema.query_type.fields["items"].resolve = lambda _s, _i: [1, 2, 3]
    schema.type_map["Item"].fields["x"].resolve = lambda item, info: info.context.loaders["x"].load(item)
    xs = Recorder(lambda k: k * 10)
    with ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.001, dispatch_predicate=third_time) as reg:
        reg.register("x", DataLoader(xs))
        context = type("Context", (), {"loaders": reg})()
        result = run(schema, "{ items { x } }", context_value=context)
    assert result.errors is None
    assert result.data == {"items": [{"x": 10}, {"x": 20}, {"x": 30}]}
    assert xs.calls == [[1, 2, 3]]


def _busy_execution_with_an_outside_load(outside_first: bool, wait_on_the_key: bool) -> tuple[Any, Recorder]:
    """An execution queues a key on L and is then busy in a slow resolver, while a thread of its own
    (outside any execution) has loaded another key of L -- just before the execution's key, or while
    the slow resolver runs.  The resolver waits for that key through a done-callback (so only a tick
    can dispatch it) or by blocking on it.  No tick dispatches L before the slow resolver starts."""
    schema = build_schema("type Query { a: Int slow: Boolean }")
    xs = Recorder()
    armed = threading.Event()
    with ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.005,
                                     dispatch_predicate=lambda _n, _l: armed.is_set()) as reg:
        reg.register("x", DataLoader(xs))
        outside: list[Any] = []

        def load_outside() -> None:  # on a new thread: outside any execution
            t = threading.Thread(target=lambda: outside.append(reg["x"].load("outside")))
            t.start()
            t.join(10)

        def a(_s: Any, info: Any) -> Any:
            if outside_first:
                load_outside()
            return info.context.loaders["x"].load(1)

        def slow(_s: Any, _i: Any) -> bool:
            if not outside_first:
                load_outside()
            armed.set()
            fut = outside[0]
            if wait_on_the_key:
                return fut.result(5) == "outside"
            settled = threading.Event()
            fut.add_done_callback(lambda _f: settled.set())
            return settled.wait(5)  # only a tick can dispatch it while this resolver runs

        schema.query_type.fields["a"].resolve = a
        schema.query_type.fields["slow"].resolve = slow
        context = type("Context", (), {"loaders": reg})()
        reg.dispatch_all()  # the ticker runs
        result = run(schema, "{ a slow }", context_value=context)
    return result, xs


@pytest.mark.parametrize("outside_first", [False, True], ids=["execution-first", "outside-first"])
def test_a_load_outside_an_execution_is_dispatched_by_a_tick_while_the_execution_is_busy(outside_first: bool) -> None:
    result, xs = _busy_execution_with_an_outside_load(outside_first, wait_on_the_key=False)
    assert result.errors is None
    assert result.data == {"a": 1, "slow": True}   # the outside key settled while the resolver ran
    assert sorted(map(str, sum(xs.calls, []))) == ["1", "outside"]


def test_a_slow_resolver_waiting_on_an_outside_key_of_the_same_loader_does_not_hang() -> None:
    result, xs = _busy_execution_with_an_outside_load(False, wait_on_the_key=True)
    assert result.errors is None
    assert result.data == {"a": 1, "slow": True}


# -- abstract types ------------------------------------------------------------------------------

def test_resolve_type_and_is_type_of_may_return_futures() -> None:
    schema = build_schema("""
        interface Pet { name: String }
        type Cat implements Pet { name: String meows: Boolean }
        type Dog implements Pet { name: String }
        type Query { pets: [Pet] dog: Dog }
    """)
    kinds = DataLoader(Recorder(lambda name: "Cat" if name.startswith("c") else "Dog"))
    checks = DataLoader(Recorder(lambda name: name.startswith("d")))
    schema.type_map["Pet"].resolve_type = lambda v, _i, _t: kinds.load(v["name"])
    schema.type_map["Dog"].is_type_of = lambda v, _i: checks.load(v["name"])
    schema.query_type.fields["pets"].resolve = lambda _s, _i: [{"name": "cleo"}, {"name": "dex"}]
    schema.query_type.fields["dog"].resolve = lambda _s, _i: {"name": "cat-in-disguise"}
    result = run(schema, "{ pets { name ... on Cat { meows } } dog { name } }")
    assert result.data == {"pets": [{"name": "cleo", "meows": None}, {"name": "dex"}], "dog": None}
    assert [e.message for e in result.errors] == [
        "Expected value of type 'Dog' but got: {'name': 'cat-in-disguise'}."]
    assert result.errors[0].path == ["dog"]


# -- packaging -----------------------------------------------------------------------------------

def test_the_core_never_imports_graphql() -> None:
    code = "import sys, dataloader_sync; print(sorted(m for m in sys.modules if m.split('.')[0] == 'graphql'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_graphql_core_the_import_error_names_the_extra() -> None:
    code = ("import sys; sys.modules['graphql'] = None\n"
            "try:\n    import dataloader_sync.graphql\nexcept ImportError as exc:\n    print(exc)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "dataloader_sync[graphql]"' in out.stdout


def test_loaders_of_a_request_with_a_context_without_weakref_support_are_freed_after_it() -> None:
    import gc
    import weakref

    class SlotsContext:
        __slots__ = ("loaders",)

        def __init__(self, loaders: Any) -> None:
            self.loaders = loaders

    def loaders(context: Any) -> Any:
        return context["loaders"] if isinstance(context, dict) else context.loaders

    schema = _one_field_schema(lambda _s, info: loaders(info.context)["a"].load("k"))
    refs = []
    for context_of in (SlotsContext, lambda registry: {"loaders": registry}):
        registry = DataLoaderRegistry().register("a", DataLoader(lambda keys: keys, name="a"))
        refs.append(weakref.ref(registry["a"]))
        result = run(schema, "{ f }", context_value=context_of(registry))
        assert result.data == {"f": "k"}
        del registry, result
    gc.collect()
    assert [ref() for ref in refs] == [None, None]


# -- the fast path (a field's value written into its object's results) and the general one ----------

PATHS_SDL = """
interface Named { name: String }
type Box implements Named { name: String a: String b: String! c: String tags: [String!] kids: [Box!] }
type Query { box: Box boxes: [Box] named: Named late: String }
"""

BOXES = {
    "ok": {"name": "ok", "a": "A", "b": "B", "c": "C", "tags": ["t1", "t2"], "kids": ["k1", "k2"]},
    "nn": {"name": "nn", "a": "A", "b": None, "c": "C", "tags": ["t"], "kids": []},
    "tag": {"name": "tag", "a": "A", "b": "B", "c": "C", "tags": ["t", None], "kids": []},
    "kid": {"name": "kid", "a": "A", "b": "B", "c": "C", "tags": [], "kids": ["nn", "k1"]},
    "k1": {"name": "k1", "a": "a1", "b": "b1", "c": None, "tags": None, "kids": []},
    "k2": {"name": "k2", "a": "a2", "b": "b2", "c": "c2", "tags": [], "kids": []},
}


def paths_schema(loaders: Any, root: str, *, futures: bool) -> Any:
    """Every Box field loads through *loaders* (one loader per field) when *futures*, else returns its value."""
    schema = build_schema(PATHS_SDL)

    def field(name: str) -> Callable[..., Any]:
        def resolve(box: Any, _info: Any) -> Any:
            value = box[name]
            if name == "kids":
                value = [BOXES[k] for k in value]
            if name == "tags" and futures and value is not None:  # Futures inside a list
                return [loaders["item"].load(("#item", box["name"], i)) for i in range(len(value))]
            return loaders[name].load((box["name"], name)) if futures else value
        return resolve

    for name in ("name", "a", "b", "c", "tags", "kids"):
        schema.type_map["Box"].fields[name].resolve = field(name)
    schema.query_type.fields["box"].resolve = lambda _s, _i: BOXES[root]
    schema.query_type.fields["boxes"].resolve = lambda _s, _i: [BOXES["ok"], BOXES[root], BOXES["k2"]]
    schema.query_type.fields["named"].resolve = lambda _s, _i: BOXES[root]
    schema.type_map["Named"].resolve_type = (
        (lambda _v, _i, _t: loaders["type"].load(("#type", "Box"))) if futures else (lambda _v, _i, _t: "Box"))
    if futures:
        schema.query_type.fields["late"].resolve = lambda _s, _i: loaders["a"].load(("#late", 1)).then(
            lambda _v: loaders["a"].load(("#late", 2, "after the level")))
    else:
        schema.query_type.fields["late"].resolve = lambda _s, _i: "after the level"
    return schema


def _paths_loaders() -> dict[str, DataLoader]:
    def value(key: Any) -> Any:
        if key[0] == "#item":
            return BOXES[key[1]]["tags"][key[2]]
        if key[0] in ("#late", "#type"):
            return key[-1]
        box, field = key
        return [BOXES[k] for k in BOXES[box][field]] if field == "kids" else BOXES[box][field]

    def values(keys: list[Any]) -> list[Any]:
        return [value(key) for key in keys]

    return {name: DataLoader(values, name=name) for name in ("name", "a", "b", "c", "tags", "kids", "item", "type")}


PATHS_QUERY = "{ %s { name a b c tags kids { name a b c } } }"


@pytest.mark.parametrize("root", ["ok", "nn", "tag", "kid"])
@pytest.mark.parametrize("where", ["box", "boxes", "named"])
def test_waiting_fields_land_where_plain_values_do(root: str, where: str) -> None:
    """Fields of objects (fast path), Futures in lists and behind an interface (general path), and a
    non-null failure that nulls an object whose other fields still wait: same as plain values."""
    selection = PATHS_QUERY % where if where != "named" else "{ named { ... on Box { name a b c tags } } }"
    expected = plain(paths_schema(None, root, futures=False), selection)
    got = run(paths_schema(_paths_loaders(), root, futures=True), selection)
    assert normalized(got) == normalized(expected)


def test_a_non_null_failure_skips_the_waiting_siblings_of_the_nulled_object() -> None:
    loaders = _paths_loaders()
    BOXES["nn-kids"] = dict(BOXES["nn"], name="nn-kids", kids=["k1"])
    try:
        got = run(paths_schema(loaders, "nn-kids", futures=True), "{ box { a b kids { name } c } boxes { b c } }")
    finally:
        del BOXES["nn-kids"]
    assert got.data == {"box": None, "boxes": [{"b": "B", "c": "C"}, None, {"b": "b2", "c": "c2"}]}
    assert sorted(e.path for e in got.errors) == [["box", "b"], ["boxes", 1, "b"]]
    # box.kids was waiting beside box.b: once box is null, its objects are not completed
    assert loaders["name"].statistics().load_count == 0


def test_a_chain_that_completes_after_its_level_lands_in_its_field() -> None:
    loaders = _paths_loaders()
    calls: list[Any] = []
    batch_call = loaders["a"]._batch_call  # the loader's batch call owns its batch function
    inner = batch_call._batch_load_fn
    batch_call._batch_load_fn = lambda keys: calls.append(list(keys)) or inner(keys)
    got = run(paths_schema(loaders, "ok", futures=True), "{ late box { a kids { a } } }")
    assert got.errors is None
    assert got.data == {"late": "after the level", "box": {"a": "A", "kids": [{"a": "a1"}, {"a": "a2"}]}}
    # level 1: late's first load and box.a; the chained load is made by that batch's
    # callback, so it joins level 2 (box.kids.a): one batch per level
    assert [len(c) for c in calls] == [2, 3]


# -- a resolver that blocks on a load (sync on demand) -------------------------------------------


def test_a_resolver_blocking_on_a_then_chain_gets_its_value_and_the_level_still_batches() -> None:
    schema = build_schema("""
        type Query { items: [Item] }
        type Item { id: Int, label: String, tags: [String] }
    """)
    recorders = {name: Recorder(fn) for name, fn in
                 (("items", lambda k: {"id": k}), ("labels", lambda k: f"label {k}"),
                  ("owners", lambda k: k * 100), ("tags", lambda k: [f"tag {k}"]))}
    loaders = {name: DataLoader(rec, name=name) for name, rec in recorders.items()}

    def resolve_label(item: Any, info: Any) -> Any:
        # blocks on a chain through two loaders: each is dispatched as the chain reaches it
        chain = loaders["owners"].load(item["id"]).then(lambda owner: loaders["labels"].load(owner))
        return chain.result(timeout=10)

    schema.query_type.fields["items"].resolve = lambda _root, info: [loaders["items"].load(i) for i in (1, 2)]
    item_fields = schema.type_map["Item"].fields
    item_fields["label"].resolve = resolve_label
    item_fields["tags"].resolve = lambda item, info: loaders["tags"].load(item["id"])
    result = run(schema, "{ items { id label tags } }")
    assert result.errors is None
    assert result.data == {"items": [{"id": i, "label": f"label {i * 100}", "tags": [f"tag {i}"]} for i in (1, 2)]}
    assert recorders["tags"].calls == [[1, 2]]  # the level's other loads: one batch
    assert recorders["owners"].calls == [[1], [2]] and recorders["labels"].calls == [[100], [200]]


def test_a_subclass_overriding_complete_value_sees_every_loaded_value() -> None:
    seen: list[Any] = []

    class Spy(DataLoaderExecutionContext):
        def complete_value(self, return_type: Any, field_nodes: Any, info: Any, path: Any, result: Any,
                           *rest: Any) -> Any:
            if not isinstance(result, cf.Future):
                seen.append((info.field_name, result))
            return super().complete_value(return_type, field_nodes, info, path, result, *rest)

    loaders = _paths_loaders()
    got = run(paths_schema(loaders, "ok", futures=True), "{ box { a tags kids { a c } } }", cls=Spy)
    assert got.errors is None and got.data["box"]["kids"] == [{"a": "a1", "c": None}, {"a": "a2", "c": "c2"}]
    for value in [("a", "A"), ("tags", "t1"), ("a", "a1"), ("c", None), ("a", "a2"), ("c", "c2")]:
        assert value in seen


# -- a waiting field of an object keeps no resolve info: what it is given again ------------------


ALIAS_SDL = """
type Thing { id: Int big: Int name: String }
type Query { things: [Thing] }
"""


def _alias_schema(value_of: Callable[[str, Any], Any]) -> Any:
    schema = build_schema(ALIAS_SDL)
    schema.query_type.fields["things"].resolve = lambda _s, _i: [1, 2]
    for name in ("id", "big", "name"):
        schema.type_map["Thing"].fields[name].resolve = lambda thing, info, name=name: value_of(name, thing)
    return schema


def test_loaded_fields_under_aliases_completed_off_the_request_thread_land_as_plain_values_do() -> None:
    """The loop waits (the batches run on an executor), so every waiting field is watched; the same
    future under two aliases, a value that fails to serialize, and a failed load land where plain
    values land, with the same errors."""
    query = "{ things { a: id b: id id big n: name } }"
    values = {"id": lambda t: t, "big": lambda t: 2 ** 40 if t == 2 else t, "name": lambda t: f"n{t}"}

    def plain_value(name: str, thing: Any) -> Any:
        if name == "name" and thing == 1:
            raise ValueError("no name for 1")
        return values[name](thing)

    pool = cf.ThreadPoolExecutor(2)
    try:
        def batch(keys: list[Any]) -> Any:
            return pool.submit(lambda: [ValueError("no name for 1") if key == ("name", 1) else values[key[0]](key[1])
                                        for key in keys])

        loader = DataLoader(batch, name="things")
        got = run(_alias_schema(lambda name, thing: loader.load((name, thing))), query)
    finally:
        pool.shutdown(wait=True)
    expected = plain(_alias_schema(plain_value), query)
    assert normalized(got) == normalized(expected)
    assert sorted(e.path for e in got.errors) == [["things", 0, "n"], ["things", 1, "big"]]
    assert got.data["things"][0] == {"a": 1, "b": 1, "id": 1, "big": 1, "n": None}


def test_the_completion_of_a_loaded_object_sees_the_resolve_info_its_resolver_got() -> None:
    schema = build_schema("""
        type Owner { name: String }
        type Item { owner(unused: Int): Owner }
        type Query { items: [Item] }
    """)
    by_resolver: list[Any] = []
    by_completion: list[Any] = []

    def described(info: Any) -> Any:
        return (info.field_name, info.field_nodes, info.return_type, info.parent_type, info.path.as_list(),
                info.path.typename, info.context, info.variable_values, info.operation, info.root_value)

    owners = DataLoader(lambda keys: [{"name": f"owner of {key}"} for key in keys], name="owners")

    def resolve_owner(item: Any, info: Any, **_args: Any) -> Any:
        by_resolver.append(described(info))
        return owners.load(item)

    def is_owner(value: Any, info: Any) -> bool:
        by_completion.append(described(info))
        return True

    schema.query_type.fields["items"].resolve = lambda _s, _i: [1, 2]
    schema.type_map["Item"].fields["owner"].resolve = resolve_owner
    schema.type_map["Owner"].is_type_of = is_owner
    context = object()
    result = run(schema, "{ items { o: owner { name } } }", context_value=context)
    assert result.errors is None
    assert result.data == {"items": [{"o": {"name": "owner of 1"}}, {"o": {"name": "owner of 2"}}]}
    assert by_completion == by_resolver and len(by_resolver) == 2
    assert by_resolver[1][4] == ["items", 1, "o"]


# -- an object's fields run by the execution itself (graphql-core 3.2), or by graphql-core -----------

FIELDS_SDL = """
type Item { id: Int label(prefix: String = "#"): String size: Int owner: Owner }
type Owner { name: String! }
type Query { items: [Item] item(id: Int!): Item }
"""


def _fields_schema(loader: Any = None) -> Any:
    schema = build_schema(FIELDS_SDL)
    rows = {1: {"id": 1, "size": 10, "owner": "ann"}, 2: {"id": 2, "size": "big", "owner": None}}
    item_fields = schema.type_map["Item"].fields
    schema.query_type.fields["items"].resolve = lambda _s, _i: [rows[1], rows[2]]
    schema.query_type.fields["item"].resolve = lambda _s, _i, id: rows.get(id)
    item_fields["label"].resolve = lambda item, _i, prefix: f"{prefix}{item['id']}"
    item_fields["size"].resolve = lambda item, _i: item["size"] if loader is None else loader.load(item["size"])
    item_fields["owner"].resolve = lambda item, _i: item["owner"] and {"name": item["owner"].title()}
    schema.type_map["Owner"].fields["name"].resolve = lambda owner, _i: owner["name"] if owner["name"] != "Ann" \
        else None
    return schema


FIELDS_QUERY = '{ items { id label l2: label(prefix: $p) size owner { name } } item(id: 2) { id size } }'


@pytest.mark.parametrize("loaded", [False, True])
def test_fields_with_and_without_arguments_give_graphql_cores_results_and_errors(loaded: bool) -> None:
    query = "query Q($p: String) " + FIELDS_QUERY
    loader = DataLoader(lambda keys: keys, name="sizes") if loaded else None
    got = run(_fields_schema(loader), query, variable_values={"p": "no."})
    expected = plain(_fields_schema(), query, variable_values={"p": "no."})
    assert got.errors and normalized(got) == normalized(expected)


def test_a_field_the_schema_does_not_know_is_left_out_as_graphql_core_does() -> None:
    document = parse("{ items { id nope size } }")  # not validated: graphql-core skips the unknown field
    got = execute(_fields_schema(), document, **{CLASS_KW: DataLoaderExecutionContext})
    expected = execute(_fields_schema(), document)
    assert normalized(got) == normalized(expected)
    assert got.data["items"][0] == {"id": 1, "size": 10}


def test_middleware_and_a_subclass_overriding_execute_field_see_every_field() -> None:
    seen: list[Any] = []

    def middleware(next_: Any, root: Any, info: Any, **args: Any) -> Any:
        seen.append(("middleware", info.field_name))
        return next_(root, info, **args)

    class Spy(DataLoaderExecutionContext):
        def execute_field(self, parent_type: Any, source: Any, field_nodes: Any, *rest: Any) -> Any:
            seen.append(("execute_field", getattr(field_nodes[0], "node", field_nodes[0]).name.value))
            return super().execute_field(parent_type, source, field_nodes, *rest)

    query = "{ item(id: 1) { id size } }"
    loader = DataLoader(lambda keys: keys, name="sizes")
    assert run(_fields_schema(loader), query, middleware=[middleware]).data == {"item": {"id": 1, "size": 10}}
    assert [name for kind, name in seen if kind == "middleware"] == ["item", "id", "size"]
    seen.clear()
    assert run(_fields_schema(loader), query, cls=Spy).data == {"item": {"id": 1, "size": 10}}
    assert [name for kind, name in seen if kind == "execute_field"] == ["item", "id", "size"]


def _described_info(info: Any) -> Any:
    return (type(info), info.field_name, info.field_nodes, info.return_type, info.parent_type, type(info.path),
            info.path.as_list(), info.path.typename, info.schema, info.fragments, info.root_value, info.operation,
            info.variable_values, info.context)


def test_resolvers_get_the_resolve_info_graphql_core_gives_them() -> None:
    seen: dict[str, list[Any]] = {"plain": [], "ours": []}
    into: list[list[Any]] = []
    context, root = object(), object()
    query = "query Q($p: String) { items { id ...F } item(id: 1) { l: label(prefix: $p) } } fragment F on Item { size }"
    schema = _fields_schema()
    for type_name, names in (("Query", ("items", "item")), ("Item", ("id", "label", "size"))):
        for name in names:
            field = schema.type_map[type_name].fields[name]
            field.resolve = (lambda inner: lambda source, info, **args: into[-1].append(_described_info(info))
                             or inner(source, info, **args))(field.resolve)
    document = parse(query)
    for key, kwargs in (("plain", {}), ("ours", {CLASS_KW: DataLoaderExecutionContext})):
        into.append(seen[key])
        result = execute(schema, document, root_value=root, context_value=context, variable_values={"p": "no."},
                         **kwargs)
        assert result.errors  # item 2's size is not an Int
    assert len(seen["ours"]) == 7 and seen["ours"] == seen["plain"]


def test_a_subclass_overriding_build_resolve_info_builds_every_resolve_info() -> None:
    built: list[str] = []

    class Spy(DataLoaderExecutionContext):
        def build_resolve_info(self, field_def: Any, field_nodes: Any, *rest: Any) -> Any:
            info = super().build_resolve_info(field_def, field_nodes, *rest)
            built.append(info.field_name)
            return info

    loader = DataLoader(lambda keys: keys, name="sizes")
    got = run(_fields_schema(loader), "{ item(id: 1) { id size l: label owner { name } } }", cls=Spy)
    assert got.data == {"item": {"id": 1, "size": 10, "l": "#1", "owner": None}}
    assert [e.path for e in got.errors] == [["item", "owner", "name"]]
    assert built == ["item", "id", "size", "label", "owner", "name"]


def _scalar_schema(loader: Any = None) -> Any:
    schema = build_schema("scalar Odd type Row { n: Int odd: Odd } type Query { rows: [Row] }")
    odd = schema.type_map["Odd"]
    odd.serialize = lambda value: value if value % 2 else None  # null for even values
    if hasattr(odd, "coerce_output_value"):  # graphql-core 3.3's name
        odd.coerce_output_value = odd.serialize
    schema.query_type.fields["rows"].resolve = lambda _s, _i: [1, 2, 3]
    for name in ("n", "odd"):
        schema.type_map["Row"].fields[name].resolve = (
            (lambda row, _i: row) if loader is None else (lambda row, _i: loader.load(row)))
    return schema


@pytest.mark.parametrize("loaded", [False, True])
def test_a_scalar_that_serializes_to_null_fails_its_field_with_graphql_cores_error(loaded: bool) -> None:
    query = "{ rows { n odd } }"
    got = run(_scalar_schema(DataLoader(lambda keys: keys, name="rows") if loaded else None), query)
    expected = plain(_scalar_schema(), query)
    assert normalized(got) == normalized(expected)
    assert got.data == {"rows": [{"n": 1, "odd": 1}, {"n": 2, "odd": None}, {"n": 3, "odd": 3}]}
    assert [e.path for e in got.errors] == [["rows", 1, "odd"]]
    assert "(2)` to return non-nullable" in got.errors[0].message


class _Unhashable:
    """A scalar's serializer that cannot be a dict key."""

    __hash__ = None  # type: ignore[assignment]

    def __call__(self, value: Any) -> Any:
        return f"<{value}>"


# Values at the edges of what graphql-core's Int, String, ID and Boolean serializers return as they are
# (the execution writes an exact int, str or bool as it is when graphql-core's serializer would), per field.
_EDGE_VALUES = {
    "i": [0, 2 ** 31 - 1, -2 ** 31, 2 ** 31, -2 ** 31 - 1, True, False, 3.0, "7", None],
    "s": ["a", "", 1, True, 2.5, None, type("S", (str,), {})("sub")],
    "id": ["x", 12, True, None],
    "b": [True, False, 1, 0, 2.0, "yes", None],
    "u": [1, "a", None],
}


def _edge_schema(value_of: Callable[[str, int], Any]) -> Any:
    schema = build_schema("scalar U type Row { i: Int s: String id: ID b: Boolean u: U } type Query { rows: [Row] }")
    unhashable = _Unhashable()
    schema.type_map["U"].serialize = unhashable
    if hasattr(schema.type_map["U"], "coerce_output_value"):  # graphql-core 3.3's name
        schema.type_map["U"].coerce_output_value = unhashable
    schema.query_type.fields["rows"].resolve = lambda _s, _i: list(range(max(map(len, _EDGE_VALUES.values()))))
    for name in _EDGE_VALUES:
        schema.type_map["Row"].fields[name].resolve = lambda row, _i, name=name: value_of(name, row)
    return schema


def _edge_value(name: str, row: int) -> Any:
    values = _EDGE_VALUES[name]
    return values[row % len(values)]


@pytest.mark.parametrize("how", ["loaded", "cached"])
def test_loaded_leaf_values_at_the_edges_of_each_built_in_scalar_serialize_as_plain_ones(how: str) -> None:
    # loaded: every field's future is pending when its resolver returns (the loop resumes it); cached: done.
    loader = DataLoader(lambda keys: [_edge_value(*key) for key in keys], name="edges")
    if how == "cached":
        for name in _EDGE_VALUES:
            for row in range(len(_EDGE_VALUES["i"])):
                loader.prime((name, row), _edge_value(name, row))
    query = "{ rows { i s id b u } }"
    got = run(_edge_schema(lambda name, row: loader.load((name, row))), query)
    expected = plain(_edge_schema(_edge_value), query)
    assert normalized(got) == normalized(expected)
    assert sorted(tuple(e.path) for e in got.errors) == [
        ("rows", 2, "id"), ("rows", 3, "i"), ("rows", 4, "i"), ("rows", 5, "b"), ("rows", 6, "id")]
    assert got.data["rows"][0] == {"i": 0, "s": "a", "id": "x", "b": True, "u": "<1>"}
    assert [row["i"] for row in got.data["rows"]] == [0, 2 ** 31 - 1, -2 ** 31, None, None, 1, 0, 3, 7, None]


def test_a_subclass_overriding_complete_leaf_value_completes_every_leaf() -> None:
    class Doubling(DataLoaderExecutionContext):
        @staticmethod
        def complete_leaf_value(return_type: Any, result: Any) -> Any:
            return result * 2

    loader = DataLoader(lambda keys: keys, name="rows")
    got = run(_scalar_schema(loader), "{ rows { n } }", cls=Doubling)
    assert got.errors is None and got.data == {"rows": [{"n": 2}, {"n": 4}, {"n": 6}]}
    got = run(_scalar_schema(), "{ rows { n } }", cls=Doubling)
    assert got.errors is None and got.data == {"rows": [{"n": 2}, {"n": 4}, {"n": 6}]}


def test_done_futures_of_an_objects_fields_complete_as_their_values_would() -> None:
    # A field of an object whose resolver returns a done future (a cached load) completes its value as if the
    # resolver had returned it: a leaf serialized (its error located), an object, a future inside (flattened),
    # a failed or cancelled one fails its field; a stdlib Future the same as ours.
    loader = DataLoader(lambda keys: [f"loaded {k}" for k in keys])
    cancelled: cf.Future[Any] = cf.Future()
    cancelled.cancel()
    stdlib: cf.Future[Any] = cf.Future()
    stdlib.set_result("stdlib")
    schema = build_schema("type Query { o: O }  type O { leaf: String n: Int bad: Int obj: P inner: String "
                          "failed: String gone: String std: String }  type P { x: String }")
    resolvers = {
        "leaf": lambda o, i: completed_future("a"),
        "n": lambda o, i: completed_future(7),
        "bad": lambda o, i: completed_future("not an int"),
        "obj": lambda o, i: completed_future({"x": "in p"}),
        "inner": lambda o, i: completed_future(loader.load(3)),
        "failed": lambda o, i: failed_future(ValueError("no value")),
        "gone": lambda o, i: cancelled,
        "std": lambda o, i: stdlib,
    }
    for name, fn in resolvers.items():
        schema.type_map["O"].fields[name].resolve = fn
    schema.query_type.fields["o"].resolve = lambda root, info: {}
    result = run(schema, "{ o { leaf n bad obj { x } inner failed gone std } }")
    assert result.data == {"o": {"leaf": "a", "n": 7, "bad": None, "obj": {"x": "in p"}, "inner": "loaded 3",
                                 "failed": None, "gone": None, "std": "stdlib"}}
    errors = {tuple(e.path): e.message for e in result.errors}
    assert set(errors) == {("o", "bad"), ("o", "failed"), ("o", "gone")}
    assert "Int cannot represent non-integer value" in errors[("o", "bad")]
    assert errors[("o", "failed")] == "no value" and "cancelled" in errors[("o", "gone")]


def test_a_step_that_finds_no_future_done_leaves_the_waiting_fields_as_they_are(monkeypatch: Any) -> None:
    # Before each dispatch the loop finds a level's futures all pending: it reads their states only
    # (first_done), keeps the same list with the same entries, and dispatches.
    from dataloader_sync.graphql import _loop

    steps: list[tuple[bool, bool, bool]] = []  # (resumed, same list, same entries) per step
    real = _loop.resume_done

    def recording(ctx: Any, run: Any) -> bool:
        before, entries = run.unwatched, list(run.unwatched)
        resumed = real(ctx, run)
        steps.append((resumed, run.unwatched is before, run.unwatched == entries))
        return resumed

    monkeypatch.setattr(_loop, "resume_done", recording)
    nodes, kids, labels = Recorder(lambda k: {"id": k}), Recorder(lambda k: [k * 10 + 1, k * 10 + 2]), Recorder(str)
    schema = _tree_schema(DataLoader(nodes), DataLoader(kids), DataLoader(labels))
    result = run(schema, "{ roots(n: 3) { label children { label children { id } } } }")
    assert result.errors is None and result.data["roots"][2]["children"][1]["children"][0]["id"] == 321
    idle = [step for step in steps if not step[0]]
    assert idle and all(same_list and same_entries for _, same_list, same_entries in idle), steps
    assert any(resumed for resumed, _, _ in steps)


def test_each_waiting_entry_is_a_field_of_an_object_or_a_pending(monkeypatch: Any) -> None:
    # Run.unwatched holds a Waiting's slots per placeholder: a field of an object (frame, nodes, return
    # type, no pending) or any other placeholder (its Pending only); read back with Run.entries.
    from dataloader_sync.graphql import _loop
    from dataloader_sync.graphql._run import Frame, Pending, Run

    seen: list[Any] = []
    real = _loop.resume_done

    def recording(ctx: Any, run: Any) -> bool:
        seen.extend(Run.entries(run.unwatched))
        return real(ctx, run)

    monkeypatch.setattr(_loop, "resume_done", recording)
    nodes, kids, labels = Recorder(lambda k: {"id": k}), Recorder(lambda k: [k * 10 + 1, k * 10 + 2]), Recorder(str)
    schema = _tree_schema(DataLoader(nodes), DataLoader(kids), DataLoader(labels))
    result = run(schema, "{ roots(n: 3) { label children { label children { id } } } }")
    assert result.errors is None
    fields = [e for e in seen if e.pending is None]
    others = [e for e in seen if e.pending is not None]
    assert fields and others  # the roots' fields, and the root field itself
    assert all(isinstance(e.frame, Frame) and e.nodes and e.return_type is not None for e in fields)
    assert all(isinstance(e.pending, Pending) and e.frame is None and e.nodes is None and e.return_type is None
               for e in others)


def test_first_done_finds_the_first_entry_whose_future_is_done() -> None:
    from dataloader_sync.graphql._loop import first_done
    from dataloader_sync.graphql._run import ENTRY

    def entry(future: Any) -> list[Any]:  # a Waiting's slots, the rest of them None
        return [future] + [None] * (ENTRY - 1)

    pending, done = Future(), completed_future(1)
    assert first_done([]) == -1
    assert first_done(entry(pending) * 3) == -1
    assert first_done(entry(pending) + entry(done) + entry(pending)) == ENTRY
    assert first_done(entry(done)) == 0


# -- subscriptions: graphql-core's subscribe serves them, each event batched ---------------------------
def test_a_subscription_is_served_and_each_event_runs_synchronously_with_its_batches() -> None:
    import asyncio

    from graphql import subscribe

    from dataloader_sync.graphql import _compat

    if not _compat.IS_EXECUTOR:
        pytest.skip("graphql-core 3.2's subscribe takes no execution context class (3.3's takes executor_class)")
    schema = build_schema("type Query { x: Int }  type Subscription { users: [User] }  type User { name: String }")

    async def source(_root: Any, _info: Any) -> Any:  # a coroutine of the stream, as strawberry's resolvers are
        async def events() -> Any:
            yield [1, 2]
            yield [3]
        return events()

    users = schema.subscription_type.fields["users"]  # type: ignore[union-attr]
    users.subscribe = source
    users.resolve = lambda ids, _info: [{"id": i} for i in ids]
    schema.type_map["User"].fields["name"].resolve = (  # type: ignore[union-attr]
        lambda user, info: info.context["names"].load(user["id"]))
    calls: list[list[int]] = []
    names = DataLoader(lambda ids: calls.append(list(ids)) or [f"user {i}" for i in ids])
    async def run() -> list[Any]:
        stream: Any = subscribe(schema, parse("subscription { users { name } }"), context_value={"names": names},
                                executor_class=DataLoaderExecutionContext)
        if inspect.isawaitable(stream):
            stream = await stream
        assert not hasattr(stream, "errors"), stream.errors
        return [(result.data, result.errors) async for result in stream]

    results = asyncio.run(asyncio.wait_for(run(), 10))
    assert results == [({"users": [{"name": "user 1"}, {"name": "user 2"}]}, None),
                       ({"users": [{"name": "user 3"}]}, None)]
    assert calls == [[1, 2], [3]]  # one batch per event's level
