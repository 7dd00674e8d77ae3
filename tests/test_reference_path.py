"""The reference path (``_core/_reference_path``): the fast copies and their plain versions do the same.

Each scenario runs twice in this process, once through the fast copies and
once through the plain versions (``_reference_path.using``), and writes down
everything it can observe: values, errors, the batch function's calls, the
counters, which futures share a ticket and a lock, who heard of a queue, the
order of done-callbacks and what each saw.  The two records must be equal:
that is what keeps the copies in step.  The routing tests show that the
environment variable really routes every call (no fast copy runs with it,
none of the plain versions without it), in a fresh interpreter each.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any, Callable

import pytest

from dataloader_sync import DataLoader, DataLoaderRegistry, Future, gather
from dataloader_sync._core import _reference_path, reset_scope, set_scope
from dataloader_sync._core._reference_path import VARIABLE, enabled_in, routes, using

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def describe(fut: Any) -> Any:
    """What a future shows: its state and outcome (no ids)."""
    if not fut.done():
        return ("pending", type(fut).__name__)
    if fut.cancelled():
        return ("cancelled",)
    exc = fut.exception()
    if exc is not None:
        return ("raised", type(exc).__name__, str(exc))
    return ("value", repr(fut.result()))


def stats(loader: DataLoader[Any, Any]) -> str:
    return repr(loader.statistics())


class Recorder:
    """A batch function that writes down its calls (and fails the keys it is told to)."""

    def __init__(self, trace: list[Any], fail: frozenset[Any] = frozenset()) -> None:
        self.trace = trace
        self.fail = fail

    def __call__(self, keys: list[Any]) -> list[Any]:
        self.trace.append(("batch", list(keys)))
        return [ValueError(f"no {k}") if k in self.fail else f"v{k}" for k in keys]


class Escape(BaseException):
    """What a done-callback raises that is not an ``Exception`` (as a gevent ``Timeout`` is not)."""


class Scope:
    """A dispatch scope that writes down who told it of a loader."""

    def __init__(self, name: str, trace: list[Any], dispatches_itself: bool = True) -> None:
        self.name = name
        self.trace = trace
        self.dispatches_itself = dispatches_itself

    def loader_queued(self, loader: Any) -> None:
        self.trace.append(("heard", self.name, loader.name))

    def dispatched_by_a_wait(self, loader: Any) -> None:
        self.trace.append(("dispatched by a wait", self.name, loader.name))


def plain_loader(trace: list[Any]) -> list[Any]:
    loader: DataLoader[Any, Any] = DataLoader(Recorder(trace, frozenset({3})), name="plain")
    a, b, a2, c = loader.load(1), loader.load(2), loader.load(1), loader.load(3)
    trace.append(("hit is first", a2 is a))
    trace.append(("one ticket", a._ticket is b._ticket is c._ticket, a._ticket is not None))
    trace.append(("lock", a._lock is loader._lock, a._shared is loader._lock, type(a).__name__, describe(a)))
    trace.append(("depth", loader.dispatch_depth, stats(loader)))
    many = loader.load_many([2, 4, 1])
    trace.append(("dispatched", loader.dispatch_count()))
    trace.extend(describe(f) for f in (a, b, c, many))
    after = loader.load(5)
    trace.append(("new ticket", after._ticket is not a._ticket))
    loader.dispatch()
    trace.append(("after", describe(after), stats(loader)))
    with pytest.raises(TypeError) as raised:
        loader.load([1])
    trace.append(("unhashable", str(raised.value)))
    return trace


def general_loaders(trace: list[Any]) -> list[Any]:
    class FailingMap(dict):  # type: ignore[type-arg]
        def __setitem__(self, key: Any, value: Any) -> None:
            if key == "x4":
                raise RuntimeError("full")
            super().__setitem__(key, value)

    keyed: DataLoader[Any, Any] = DataLoader(Recorder(trace), name="keyed", cache_key_fn=lambda k: f"x{k}",
                                              cache_map=FailingMap(), max_batch_size=2)
    fs = [keyed.load(1), keyed.load(2, key_context="c2"), keyed.load(1), keyed.load(4), keyed.load(3, "c3")]
    trace.append(("keyed queue", fs[0] is fs[2], len(keyed._queue or ()), keyed._queue.contexts))  # type: ignore[union-attr]
    keyed.dispatch()
    trace.extend(describe(f) for f in fs)
    trace.append(("keyed", stats(keyed)))
    uncached: DataLoader[Any, Any] = DataLoader(Recorder(trace), name="uncached", cache=False)
    u = [uncached.load(1), uncached.load(1)]
    trace.append(("uncached", u[0] is u[1], stats(uncached)))
    uncached.dispatch()
    trace.extend(describe(f) for f in u)
    eager: DataLoader[Any, Any] = DataLoader(Recorder(trace), name="eager", batch=False)
    e = [eager.load(7), eager.load(8), eager.load(7)]
    trace.extend(describe(f) for f in e)
    trace.append(("eager", stats(eager), e[0] is e[2]))
    return trace


def chains(trace: list[Any]) -> list[Any]:
    loader: DataLoader[Any, Any] = DataLoader(Recorder(trace, frozenset({9})), name="chains")
    other: DataLoader[Any, Any] = DataLoader(Recorder(trace), name="other")
    first = loader.load(1)
    seen: list[Any] = []

    def look(fut: Any) -> None:  # every future of the batch is settled before any callback runs
        seen.append(("callback", describe(first), describe(second), describe(failing)))

    second = loader.load(2)
    failing = loader.load(9)
    first.add_done_callback(look)
    to_value = first.then(lambda v: v + "!")
    to_future = second.then(lambda v: other.load(v))
    raising = first.then(lambda v: 1 / 0)
    from_failed = failing.then(lambda v: v)
    cancelled = second.then(lambda v: v)
    trace.append(("then shares", to_value._shared is loader._lock, to_value._lock is loader._lock,
                  to_value._follow is first, type(to_value).__name__))
    trace.append(("cancel", cancelled.cancel(), describe(cancelled)))
    own = Future[Any]().then(lambda v: v)
    trace.append(("own lock", own._shared is None, own._lock is not None))
    loader.dispatch()
    trace.append(("inner pending", describe(to_future), other.dispatch_depth))
    other.dispatch()
    trace.extend(seen)
    trace.extend(describe(f) for f in (to_value, to_future, raising, from_failed, cancelled))
    trace.append(("let go", [f._follow is None for f in (to_value, to_future, raising, from_failed, cancelled)]))
    done_then = to_value.then(lambda v: v * 2)  # on a done future: at once
    trace.append(("done then", describe(done_then)))
    with pytest.raises(TypeError) as raised:
        first.then(3)  # type: ignore[call-overload]
    trace.append(("not callable", str(raised.value)))
    trace.append(("gather", describe(gather([first, to_value]))))
    return trace


def detached_and_order(trace: list[Any]) -> list[Any]:
    loader: DataLoader[Any, Any] = DataLoader(Recorder(trace), name="detached")
    a, b, c = loader.load(1), loader.load(2), loader.load(3)
    assert b._condition is not None  # what concurrent.futures.wait reaches for: b takes a lock of its own
    trace.append(("detached", b._lock is not loader._lock, a._lock is loader._lock))
    order: list[Any] = []
    for name, fut in (("a", a), ("b", b), ("c", c)):
        fut.add_done_callback(lambda f, name=name: order.append((name, describe(a), describe(b), describe(c))))

    def escape(fut: Any) -> None:
        order.append("escape")
        raise Escape

    a.add_done_callback(escape)
    with pytest.raises(Escape):
        loader.dispatch()
    trace.extend(order)
    trace.extend(describe(f) for f in (a, b, c))
    return trace


def scopes_and_registries(trace: list[Any]) -> list[Any]:
    registry = DataLoaderRegistry()
    loader: DataLoader[Any, Any] = DataLoader(Recorder(trace))
    registry.register("users", loader)
    keyed: DataLoader[Any, Any] = DataLoader(Recorder(trace), cache_key_fn=str)
    registry.register("keyed", keyed)
    one, two = Scope("one", trace), Scope("two", trace, dispatches_itself=False)
    for target in (loader, keyed):
        for scope, key in ((one, 1), (one, 2), (two, 3), (None, 4), (one, 5), (None, 6), (two, 7)):
            token = set_scope(scope)
            try:
                target.load(key)
                target.load(key, key_context="ctx") if key == 5 else None
            finally:
                reset_scope(token)
            trace.append(("told", target.name, "MIXED" if target._told is not None and not isinstance(
                target._told, Scope) else getattr(target._told, "name", None)))
    trace.append(("registry sent", registry.dispatch_all_with_count()))
    token = set_scope(one)
    try:
        loader.load(8)
        trace.append(("registry sent", registry.dispatch_all_with_count()))
    finally:
        reset_scope(token)
    return trace


def on_a_loop(trace: list[Any]) -> list[Any]:
    loader: DataLoader[Any, Any] = DataLoader(Recorder(trace), name="async")

    async def main() -> list[Any]:
        values = await asyncio.gather(*(loader.load(k) for k in (1, 2, 1)))
        chained = await loader.load(3).then(lambda v: v + "?")
        return [*values, chained]

    trace.append(("awaited", asyncio.run(main()), stats(loader)))
    return trace


SCENARIOS: dict[str, Callable[[list[Any]], list[Any]]] = {
    "plain_loader": plain_loader,
    "general_loaders": general_loaders,
    "chains": chains,
    "detached_and_order": detached_and_order,
    "scopes_and_registries": scopes_and_registries,
    "on_a_loop": on_a_loop,
}


@pytest.fixture
def reference_before() -> Iterator[bool]:
    """The path in use when the test began (the suite may run with the variable set): restored after."""
    before = _reference_path._current
    yield before
    _reference_path.use(before)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_fast_copies_and_the_plain_versions_do_the_same(name: str, reference_before: bool) -> None:
    with using(False):
        fast = SCENARIOS[name]([])
    with using(True):
        plain = SCENARIOS[name]([])
    assert len(fast) > 2
    assert plain == fast


def test_use_rebinds_every_binding_of_the_other_path(reference_before: bool) -> None:
    pairs = routes()
    fast = {id(f) for f, _ in pairs.values()}
    plain = {id(p) for _, p in pairs.values()}
    for reference, absent in ((True, fast), (False, plain)):
        with using(reference):
            bound = [(getattr(owner, "__name__", owner), name) for owner, name, value in _reference_path._bindings()
                     if id(value) in absent]
            assert bound == []
    assert DataLoader.load is pairs["DataLoader.load"][reference_before]


def test_a_value_other_than_0_or_1_is_an_error_naming_the_variable() -> None:
    assert enabled_in({}) is False
    assert enabled_in({VARIABLE: "0"}) is False
    assert enabled_in({VARIABLE: "1"}) is True
    with pytest.raises(ValueError, match=f"{VARIABLE} must be 1"):
        enabled_in({VARIABLE: "yes"})


# Run in a fresh interpreter: every integration imported, a few loads, dispatches and chains, with a
# profiler noting every function called; prints which of the fast and plain functions ran, and every
# binding left in any dataloader_sync module of the path not chosen.
ROUTING = textwrap.dedent("""
    import json, pkgutil, importlib, sys
    try:
        import django
        from django.conf import settings
    except ImportError:
        pass
    else:
        settings.configure(INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"])
        django.setup()
    import dataloader_sync
    for info in pkgutil.walk_packages(dataloader_sync.__path__, "dataloader_sync."):
        try:
            importlib.import_module(info.name)
        except ImportError:  # an integration whose framework is not installed
            pass
    from dataloader_sync import DataLoader
    from dataloader_sync._core import _reference_path
    pairs = _reference_path.routes()
    codes = {}
    for name, (fast, plain) in pairs.items():
        codes[fast.__code__] = ("fast", name)
        codes[plain.__code__] = ("plain", name)
    ran = set()
    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            ran.add(codes[frame.f_code])
    sys.setprofile(profile)
    loader = DataLoader(lambda keys: [k * 2 for k in keys])
    futures = [loader.load(1), loader.load(2), loader.load(3, key_context="c"), loader.load_many([4, 5])]
    chained = loader.load(1).then(lambda v: loader.load(v + 10))
    loader.dispatch()
    loader.dispatch()
    values = [f.result() for f in futures] + [chained.result()]
    sys.setprofile(None)
    other = 0 if _reference_path.ENABLED else 1
    left = sorted(f"{getattr(owner, '__name__', owner)}.{name}" for owner, name, value in _reference_path._bindings()
                  if any(value is pair[other] for pair in pairs.values()))
    print(json.dumps({"ran": sorted(map(list, ran)), "values": values, "left": left}))
""")


def routed(env_value: Any) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop(VARIABLE, None)
    if env_value is not None:
        env[VARIABLE] = env_value
    out = subprocess.run([sys.executable, "-c", ROUTING], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("env_value, path", [("1", "plain"), (None, "fast"), ("0", "fast")])
def test_the_variable_routes_every_call(env_value: Any, path: str) -> None:
    result = routed(env_value)
    assert result["values"] == [2, 4, 6, [8, 10], 24]
    assert sorted(result["ran"]) == sorted([path, name] for name in routes())
    assert result["left"] == []


def test_a_bad_value_fails_the_import_naming_the_variable() -> None:
    env = dict(os.environ, **{VARIABLE: "true"})
    out = subprocess.run([sys.executable, "-c", "import dataloader_sync"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode != 0
    assert f"{VARIABLE} must be 1" in out.stderr
