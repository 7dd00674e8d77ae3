"""_fork: one mechanism repairs every object holding threads and locks in a forked child."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import pytest

from dataloader_sync import _fork

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _run_script(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, env=env)


def test_fork_hooks_run_in_tracking_order_around_every_fork():
    proc = _run_script(
        """
        import os, sys
        from dataloader_sync import _fork
        calls = []
        class Tracked:
            def __init__(self, name):
                self.name = name
                _fork.track(self)
            def _before_fork(self):
                calls.append(("before", self.name))
            def _after_fork_in_parent(self):
                calls.append(("parent", self.name))
            def _after_fork_in_child(self):
                calls.append(("child", self.name))
        a, b = Tracked("a"), Tracked("b")
        pid = os.fork()
        if pid == 0:
            ok = calls == [("before", "a"), ("before", "b"), ("child", "a"), ("child", "b")]
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert calls == [("before", "a"), ("before", "b"), ("parent", "a"), ("parent", "b")], calls
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_fork_one_failing_repair_does_not_stop_the_others():
    proc = _run_script(
        """
        import os, sys
        from dataloader_sync import _fork
        repaired = []
        class Broken:
            def _after_fork_in_child(self):
                raise RuntimeError("broken repair")
        class Fine:
            def _after_fork_in_child(self):
                repaired.append(True)
        broken, fine = Broken(), Fine()
        _fork.track(broken)
        _fork.track(fine)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if repaired == [True] else 1)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "broken repair" in proc.stderr  # logged


def test_fork_tracking_keeps_nothing_alive():
    class Tracked:
        def _after_fork_in_child(self) -> None:
            pass

    obj = Tracked()
    _fork.track(obj)
    assert any(ref() is obj for ref in list(_fork._tracked.values()))
    ref_to_obj = [ref for ref in list(_fork._tracked.values()) if ref() is obj][0]
    del obj
    gc.collect()
    assert ref_to_obj() is None
    assert ref_to_obj not in list(_fork._tracked.values())  # and its entry is gone


def test_PeriodicRefresher_reload_in_flight_at_a_fork_does_not_block_the_child():
    proc = _run_script(
        """
        import os, sys, threading
        from dataloader_sync import PeriodicRefresher
        gate, loading = threading.Event(), threading.Event()
        calls = []
        def load():
            calls.append(os.getpid())
            if len(calls) > 1 and os.getpid() == parent:
                loading.set()
                gate.wait(30)
            return os.getpid()
        parent = os.getpid()
        refresher = PeriodicRefresher(load, 3600)
        assert refresher.get() == parent
        refresher.request_refresh()              # a background reload, stuck in the parent
        assert loading.wait(10)
        pid = os.fork()
        if pid == 0:
            done = threading.Event()
            def child():
                if refresher.refresh() == os.getpid():   # not waiting for the parent's reload
                    done.set()
            threading.Thread(target=child, daemon=True).start()
            os._exit(0 if done.wait(10) else 1)
        _, status = os.waitpid(pid, 0)
        gate.set()
        refresher.close()
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
