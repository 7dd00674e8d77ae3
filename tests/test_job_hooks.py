"""The job hooks (dataloader_sync._core._job_hooks): called around every job that runs batch functions off
their caller's thread, on that thread, never failing the job."""
from __future__ import annotations

import asyncio
import concurrent.futures as cf
import logging
import threading

import pytest

from dataloader_sync import DataLoader
from dataloader_sync._core import _job_hooks


@pytest.fixture
def recording():
    """A hook noting (before/after, thread) of every job, added for one test."""
    seen = []

    def hook():
        seen.append(("before", threading.current_thread()))
        return lambda: seen.append(("after", threading.current_thread()))

    _job_hooks.add(hook)
    try:
        yield seen
    finally:
        _job_hooks.remove(hook)


def test_an_await_runs_its_batch_inside_the_hooks_on_the_executor_thread(recording):
    def batch(keys):
        recording.append(("batch", threading.current_thread()))
        return keys

    loader = DataLoader(batch)

    async def main():
        return await asyncio.gather(loader.load(1), loader.load(2))

    assert asyncio.run(main()) == [1, 2]
    steps = [step for step, _ in recording]
    assert steps == ["before", "batch", "after"]
    assert len({thread for _, thread in recording}) == 1 and recording[0][1] is not threading.main_thread()


def test_a_batch_on_an_executor_runs_inside_the_hooks_and_a_plain_dispatch_outside(recording):
    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        loader = DataLoader(lambda keys: keys, executor=pool)
        fut = loader.load(1)
        loader.dispatch()
        assert fut.result(timeout=10) == 1
    assert [step for step, _ in recording] == ["before", "after"]
    assert recording[0][1] is not threading.main_thread()
    recording.clear()
    plain = DataLoader(lambda keys: keys)  # dispatched on the caller's thread: no job, no hook
    fut = plain.load(1)
    plain.dispatch()
    assert fut.result(0) == 1 and recording == []


def test_a_hook_that_raises_is_logged_and_the_job_runs(caplog):
    def broken():
        raise RuntimeError("hook broke")

    def broken_after():
        def after():
            raise RuntimeError("after broke")
        return after

    _job_hooks.add(broken)
    _job_hooks.add(broken_after)
    try:
        loader = DataLoader(lambda keys: [k * 2 for k in keys])

        async def main():
            return await loader.load(21)

        with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
            assert asyncio.run(main()) == 42
    finally:
        _job_hooks.remove(broken)
        _job_hooks.remove(broken_after)
    messages = [r.getMessage() for r in caplog.records]
    assert any("raised before a batch job" in m for m in messages)
    assert any("raised after a batch job" in m for m in messages)


def test_add_is_idempotent_and_refuses_what_is_not_callable():
    def hook():
        return None

    before = _job_hooks.hooks
    _job_hooks.add(hook)
    _job_hooks.add(hook)
    assert _job_hooks.hooks == (*before, hook)
    _job_hooks.remove(hook)
    assert _job_hooks.hooks == before
    with pytest.raises(TypeError, match="hook must be callable"):
        _job_hooks.add(42)  # type: ignore[arg-type]


def test_wrap_keeps_the_name_of_the_function_it_wraps():
    def load_books(keys):
        return keys

    wrapped = _job_hooks.wrap(load_books)
    assert wrapped.__qualname__ == load_books.__qualname__ and wrapped([1]) == [1]
