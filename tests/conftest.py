"""Fixtures shared by every test module.

The autouse ``no_leaked_threads`` fixture fails any test that leaves a thread
running which it did not find when it started: every executor, worker and
refresher a test creates must be shut down by the test.  Threads of the
process-wide default ScheduledExecutor are allowed (they are shared by design
and bounded).
"""
from __future__ import annotations

import threading

import pytest

_ALLOWED_PREFIXES = ("dataloader-sync-default",)


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
