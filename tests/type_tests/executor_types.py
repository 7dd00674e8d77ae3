"""ScheduledExecutor: a task's future has the task's return type; its arguments are checked."""
from __future__ import annotations

import time

from typing_extensions import assert_type

from dataloader_sync import Future, ScheduledExecutor, ScheduledFuture, get_default_scheduled_executor


def greet(name: str, punctuation: str = "!") -> str:
    return f"hello, {name}{punctuation}"


def tick() -> None:
    pass


executor = ScheduledExecutor(name="typed", clock=time.monotonic)
assert_type(executor.schedule(greet, 0.5, "ann"), ScheduledFuture[str])
assert_type(executor.schedule(greet, 0.5, "ann", punctuation="?"), ScheduledFuture[str])
assert_type(executor.schedule(greet, 0.5, "ann").result(), str)
assert_type(executor.submit(greet, "bob"), ScheduledFuture[str])
assert_type(executor.submit(greet, "bob").then(len), Future[int])
assert_type(executor.schedule_at_fixed_rate(tick, 0, 1.0), ScheduledFuture[None])
assert_type(executor.schedule_with_fixed_delay(greet, 0, 1.0, "ann"), ScheduledFuture[None])
assert_type(executor.schedule(greet, 1, "ann").delay(), float)
assert_type(get_default_scheduled_executor(), ScheduledExecutor)

executor.schedule(greet, 0.5, 42)  # type: ignore[arg-type]
executor.submit(greet)  # type: ignore[call-arg]
executor.schedule(greet, "soon", "ann")  # type: ignore[arg-type]
executor.shutdown()
