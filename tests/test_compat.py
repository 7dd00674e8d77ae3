"""The walls (``_core/_compat.py``, ``graphql/_compat.py``): each upstream private name the package reads,
checked against the interpreter and graphql-core this suite runs on (CPython 3.9–3.13 in CI's matrix,
graphql-core 3.2 and 3.3 in its graphql matrix), and each fallback to the public path against the
private one."""
from __future__ import annotations

import asyncio
import concurrent.futures as cf
import sys
import threading
from typing import Any

import pytest

from dataloader_sync import DataLoader
from dataloader_sync._core import _compat


def test_the_future_states_are_the_standard_futures_as_its_public_methods_move_it() -> None:
    fut: cf.Future[Any] = cf.Future()
    assert fut._state is _compat.PENDING and not fut.running()
    assert fut.set_running_or_notify_cancel()
    assert fut._state is _compat.RUNNING and fut.running()
    fut.set_result(1)
    assert fut._state is _compat.FINISHED and fut.done()
    gone: cf.Future[Any] = cf.Future()
    gone.cancel()
    assert gone._state is _compat.CANCELLED
    gone.set_running_or_notify_cancel()
    assert gone._state is _compat.CANCELLED_AND_NOTIFIED


def test_the_future_fields_are_the_standard_futures_and_ours_keep_them() -> None:
    assert set(_compat.FUTURE_FIELDS) <= set(vars(cf.Future()))
    loader: DataLoader[int, int] = DataLoader(lambda keys: keys)
    fut = loader.load(1)
    done, _ = cf.wait([fut], timeout=10)  # wait() reaches for _condition and _waiters: ours makes them on demand
    assert done == {fut}
    assert (fut._state, fut._result, fut._exception) == (_compat.FINISHED, 1, None)


def test_running_loop_and_its_fallback_agree_on_and_off_a_loop() -> None:
    getter = _compat.loop_getter()
    assert getter is asyncio._get_running_loop  # the private one exists on every CPython CI installs
    assert _compat.running_loop() is None and _compat.public_running_loop() is None and getter() is None

    async def on_loop() -> tuple[Any, ...]:
        return asyncio.get_running_loop(), _compat.running_loop(), _compat.public_running_loop(), getter()

    loop, *seen = asyncio.run(on_loop())
    assert seen == [loop, loop, loop]


def test_getframe_and_its_fallback_give_the_same_frames() -> None:
    assert _compat.getframe is sys._getframe

    def inner() -> tuple[Any, Any, Any, Any]:
        return _compat.getframe(0), _compat.public_getframe(0), _compat.getframe(1), _compat.public_getframe(1)

    here = sys._getframe(0)
    own, own_fallback, caller, caller_fallback = inner()
    assert own is own_fallback and own.f_code is inner.__code__
    assert caller is caller_fallback is here
    with pytest.raises(ValueError):
        _compat.public_getframe(10_000)


def test_the_chain_callback_is_what_wrap_future_puts_on_a_future() -> None:
    fut: cf.Future[Any] = cf.Future()
    seen: list[Any] = []

    async def wrap() -> None:
        wrapped = asyncio.wrap_future(fut)
        seen.extend(fut._done_callbacks)
        fut.set_result(3)
        assert await wrapped == 3

    asyncio.run(wrap())
    assert [fn.__name__ for fn in seen] == [_compat.CHAIN_CALLBACK_NAME]
    assert seen[0].__code__ is _compat.chain_callback_code()


def test_wrap_future_of_a_pending_load_is_dispatched_at_the_loops_batching_point() -> None:
    # the chain callback recognised (above) is what makes this work: without it the load would wait forever
    loader: DataLoader[int, int] = DataLoader(lambda keys: [k * 2 for k in keys])
    done = threading.Event()

    async def main() -> int:
        value = await asyncio.wait_for(asyncio.wrap_future(loader.load(4)), timeout=10)
        done.set()
        return int(value)

    assert asyncio.run(main()) == 8 and done.is_set()


def test_graphql_cores_resolve_info_and_path_are_the_named_tuples_the_wall_builds() -> None:
    pytest.importorskip("graphql")
    from graphql import GraphQLResolveInfo
    from graphql.pyutils import Path

    from dataloader_sync.graphql import _compat as graphql_compat

    assert graphql_compat.Info is GraphQLResolveInfo
    if graphql_compat.FAST_TUPLES:  # graphql-core 3.2: built past __new__, the same tuple
        path = graphql_compat.tuple_new(Path, (None, "a", "Query"))
        assert path == Path(None, "a", "Query") and type(path) is Path
        values = tuple(range(len(graphql_compat.INFO_FIELDS)))
        info = graphql_compat.tuple_new(GraphQLResolveInfo, values)
        assert info == GraphQLResolveInfo(*values) and info.field_name == 0  # type: ignore[arg-type]
    else:
        assert getattr(GraphQLResolveInfo, "_fields", None) != graphql_compat.INFO_FIELDS or \
            not graphql_compat.OWN_FIELDS


def test_the_plan_slots_are_named_in_the_order_the_field_loop_unpacks_them() -> None:
    pytest.importorskip("graphql")
    import ast
    import inspect

    from dataloader_sync.graphql import _compat as graphql_compat
    from dataloader_sync.graphql import _execution

    loops = [node for node in ast.walk(ast.parse(inspect.getsource(_execution)))
             if isinstance(node, ast.For) and isinstance(node.iter, ast.Name) and node.iter.id == "plan"]
    assert len(loops) == 1
    unpacked = [target.id for target in loops[0].target.elts]  # type: ignore[attr-defined]
    slots = sorted((value, name) for name, value in vars(graphql_compat).items() if name.startswith("PLAN_"))
    assert [value for value, _ in slots] == list(range(len(unpacked)))
    aliases = {"resolve_fn": "resolve"}
    assert [name[len("PLAN_"):].lower() for _, name in slots] == [aliases.get(n, n) for n in unpacked]
