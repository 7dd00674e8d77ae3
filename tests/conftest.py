"""Fixtures shared by every test module.

The autouse ``no_leaked_threads`` fixture fails any test that leaves a thread
running which it did not find when it started: every executor, worker and
refresher a test creates must be shut down by the test.  Threads of the
process-wide default ScheduledExecutor are allowed (they are shared by design
and bounded).

``FakeClock`` is the clock every test injects where the library takes a
``clock=`` (``from conftest import FakeClock``): time moves only when the test
says so, so no test sleeps to wait.
"""
from __future__ import annotations

import threading

import pytest

_ALLOWED_PREFIXES = ("dataloader-sync-default",)


class FakeClock:
    """A monotonic clock in seconds that moves only when told to."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _alive() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.is_alive()}


@pytest.fixture(autouse=True)
def no_leaked_threads():
    before = _alive()
    yield
    leaked = set()
    for t in _alive() - before:
        if t.name.startswith(_ALLOWED_PREFIXES):
            continue
        # A thread that is already on its way out gets a moment to finish.
        t.join(timeout=5.0)
        if t.is_alive():
            leaked.add(t)
    assert not leaked, f"test leaked threads: {sorted(t.name for t in leaked)}"
