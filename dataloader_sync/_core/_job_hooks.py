"""Hooks around the jobs that run batch functions on a thread that is not their caller's.

Some resources live per thread and are let go at the end of a request, on
the request's thread: Django's database connections.  A batch function that
runs elsewhere — a dispatch job of the asyncio bridge on the loop's default
executor, a batch on a loader's ``executor=``, a tick or recheck of a
``ScheduledDataLoaderRegistry`` — opens such a thread's own resources, and no
request end ever lets them go.  An integration that owns such resources adds
a *job hook* here (``dataloader_sync.django`` does when it is imported); the
core calls every hook around each such job and knows nothing of what they do.

A hook is a callable taking nothing, called on the job's thread before the
job; it returns None or a callable taking nothing, called on that thread
after the job (whatever the job raised).  The core calls them in this order:
the hooks in the order they were added, the afters in reverse.

Guarantees:
- No hook added: a job pays one global read (``hooks``), nothing per load.
- Hooks and afters run with no lock of the package held; one that raises an
  ``Exception`` is logged on the ``dataloader_sync`` logger and skipped, and
  the job runs (and settles its keys) regardless.
- ``add`` is idempotent (a hook added twice is called once), and safe from
  any thread: ``hooks`` is replaced whole, so a job reads a consistent tuple.
"""
from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable, Optional, TypeVar

__all__ = ["JobHook", "add", "begin", "end", "hooks", "remove", "wrap"]

_LOGGER = logging.getLogger("dataloader_sync")
T = TypeVar("T")

#: A job hook: called before a job, it returns what to call after it (or None).
JobHook = Callable[[], Optional[Callable[[], None]]]

#: The hooks, in the order they were added; replaced whole under _LOCK, read without it.
hooks: tuple[JobHook, ...] = ()
_LOCK = threading.Lock()  # guards the replacement of hooks (two adds at once keep both)


def add(hook: JobHook) -> None:
    """Have *hook* called around every off-thread job from now on (a second add of it: nothing)."""
    global hooks
    if not callable(hook):
        raise TypeError(f"hook must be callable, got {type(hook).__name__}")
    with _LOCK:
        if hook not in hooks:
            hooks = (*hooks, hook)


def remove(hook: JobHook) -> None:
    """Stop calling *hook* (not added: nothing)."""
    global hooks
    with _LOCK:
        hooks = tuple(h for h in hooks if h is not hook)


def begin() -> list[Callable[[], None]]:
    """On the job's thread, before the job: call every hook; the afters they returned, for ``end``."""
    afters: list[Callable[[], None]] = []
    for hook in hooks:
        try:
            after = hook()
        except Exception:
            _LOGGER.exception("job hook %r raised before a batch job; the job runs without it", hook)
            continue
        if after is not None:
            afters.append(after)
    return afters


def end(afters: list[Callable[[], None]]) -> None:
    """On the job's thread, after the job: call what ``begin`` returned, last first."""
    for after in reversed(afters):
        try:
            after()
        except Exception:
            _LOGGER.exception("job hook %r raised after a batch job", after)


def wrap(fn: Callable[..., T]) -> Callable[..., T]:
    """*fn* with the hooks called around it on the thread that calls it (named as *fn*, for logs)."""

    @functools.wraps(fn)
    def job(*args: Any) -> T:
        afters = begin()
        try:
            return fn(*args)
        finally:
            end(afters)

    return job
