"""``run_on(loop, awaitable)``: ``asyncio.Runner(loop_factory=...).run(...)`` for Python 3.9 and 3.10 too.

``asyncio.Runner`` is 3.11's; the tests that count a loop's wake-ups need a loop
of their own class, so they make it and run it here, as ``Runner`` does: the
loop set as the thread's current one while it runs, the tasks left cancelled,
async generators and the default executor shut down, the loop closed.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


def run_on(loop: asyncio.AbstractEventLoop, main: Awaitable[T]) -> T:
    """Run *main* on *loop* (a new one) to completion, then close *loop*."""
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


