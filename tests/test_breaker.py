"""dataloader_sync._core._breaker: the outage breaker of the shared caches, on a fake clock (no sleeps)."""
from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import textwrap
import threading

import pytest
from conftest import FakeClock

from dataloader_sync._core._breaker import Breaker, live_breakers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_Breaker_checks_its_arguments_at_once():
    with pytest.raises(TypeError, match="name"):
        Breaker(5)  # type: ignore[arg-type]
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="cool_down"):
            Breaker("b", bad)
    with pytest.raises(TypeError, match="cool_down"):
        Breaker("b", "5")  # type: ignore[arg-type]


def test_Breaker_opens_on_a_failure_lets_one_probe_after_the_cool_down_and_closes_on_success(caplog):
    clock = FakeClock()
    b = Breaker("books:", 5.0, clock=clock)
    assert b.allow() and not b.is_open
    with caplog.at_level(logging.DEBUG, logger="dataloader_sync"):
        b.failed(ConnectionError("refused"), "get_values")
        assert b.is_open and not b.allow()
        clock.advance(4.99)
        assert not b.allow()
        clock.advance(0.01)
        assert b.allow()  # the probe
        assert not b.allow() and b.is_open  # only one
        b.failed(ConnectionError("refused"), "get_values")  # the probe failed: another cool-down
        clock.advance(4.0)
        assert not b.allow()
        clock.advance(1.0)
        assert b.allow()
        b.succeeded()
        assert not b.is_open and b.allow() and b.allow()
    records = [r for r in caplog.records if r.name == "dataloader_sync"]
    assert [r.levelno for r in records] == [logging.WARNING, logging.DEBUG, logging.INFO]
    assert "books:" in records[0].getMessage() and records[0].exc_info is not None


def test_Breaker_lost_probe_is_replaced_after_a_cool_down():
    clock = FakeClock()
    b = Breaker("b", 2.0, clock=clock)
    b.failed(TimeoutError())
    clock.advance(2.0)
    assert b.allow()  # a probe that never reports (its thread died)
    clock.advance(1.9)
    assert not b.allow()
    clock.advance(0.1)
    assert b.allow()  # never closed for ever


def test_Breaker_lets_exactly_one_probe_through_among_many_threads():
    clock = FakeClock()
    b = Breaker("b", 1.0, clock=clock)
    b.failed(ConnectionError())
    clock.advance(1.0)
    start = threading.Barrier(16)
    allowed: list[bool] = []
    lock = threading.Lock()

    def ask() -> None:
        start.wait(10)
        ok = b.allow()
        with lock:
            allowed.append(ok)

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(allowed) == [False] * 15 + [True]


def test_live_breakers_holds_breakers_weakly():
    b = Breaker("only-here", 1.0)
    assert b in live_breakers()
    del b
    gc.collect()
    assert "only-here" not in [x.name for x in live_breakers()]


CHILD = textwrap.dedent("""
    import os, threading
    from dataloader_sync._core._breaker import Breaker
    b = Breaker("fork", 3600.0)  # open for the whole test, however slow the machine
    b.failed(ConnectionError("x"))
    bad = 0
    for _ in range(20):
        held = threading.Event(); go = threading.Event()
        def hold():
            with b._lock:
                held.set()
                go.wait(5)
        t = threading.Thread(target=hold); t.start(); held.wait(5)
        pid = os.fork()
        if pid == 0:
            ok = b.is_open and not b.allow()  # the state is kept, the lock is usable
            b.succeeded()
            os._exit(0 if ok and not b.is_open else 1)
        go.set(); t.join()
        _, status = os.waitpid(pid, 0)
        bad += status != 0
    print(bad)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_Breaker_works_in_a_child_forked_while_its_lock_was_held():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", CHILD], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"
