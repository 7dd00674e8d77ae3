"""tune_gc: the cyclic-GC settings for servers, checked in fresh interpreters (they are process-wide)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from dataloader_sync import tune_gc


def _run(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_tune_gc_freezes_the_heap_and_raises_the_first_threshold():
    out = _run("""
        import gc
        from dataloader_sync import tune_gc
        before = gc.get_threshold()
        frozen_at_start = gc.get_freeze_count()  # 0, but CPython 3.12 freezes a few hundred at startup
        previous = tune_gc()
        assert previous == before, (previous, before)
        assert gc.get_threshold() == (100_000,) + before[1:], gc.get_threshold()
        assert gc.get_freeze_count() > frozen_at_start + 1000  # the imported modules, classes and functions
        print("ok")
    """)
    assert out == "ok"


def test_tune_gc_can_leave_the_threshold_or_skip_the_freeze():
    out = _run("""
        import gc
        from dataloader_sync import tune_gc
        before = gc.get_threshold()
        tune_gc(threshold=None)
        assert gc.get_threshold() == before and gc.get_freeze_count() > 0
        gc.unfreeze()
        tune_gc(threshold=5000, freeze=False)
        assert gc.get_threshold()[0] == 5000 and gc.get_freeze_count() == 0
        print("ok")
    """)
    assert out == "ok"


def test_tune_gc_does_not_keep_import_time_garbage_and_still_collects_cycles():
    out = _run("""
        import gc, weakref
        from dataloader_sync import tune_gc

        class Node:
            pass

        def cycle():
            a, b = Node(), Node()
            a.other, b.other = b, a
            return weakref.ref(a)

        before_freeze = cycle()  # garbage made during "imports"
        tune_gc(threshold=50)
        assert before_freeze() is None  # collected before the freeze, not frozen for good
        later = cycle()
        for _ in range(1000):  # enough allocations to pass the first threshold
            [[] for _ in range(10)]
        gc.collect(0)
        assert later() is None
        print("ok")
    """)
    assert out == "ok"


def test_tune_gc_in_a_parent_then_fork_gives_working_children_every_time():
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    out = _run("""
        import gc, os, weakref
        from dataloader_sync import DataLoader, tune_gc

        tune_gc()  # a pre-fork server's master, after importing the app
        for _ in range(20):
            pid = os.fork()
            if pid == 0:  # a worker: loads work, the settings are inherited, cycles are collected
                ok = gc.get_threshold()[0] == 100_000 and gc.get_freeze_count() > 0
                loader = DataLoader(lambda keys: keys)
                fut = loader.load(1)
                loader.dispatch()
                ok = ok and fut.result(timeout=5) == 1
                class Node: pass
                a = Node(); a.me = a; ref = weakref.ref(a); del a
                gc.collect()
                os._exit(0 if ok and ref() is None else 1)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
        print("ok")
    """)
    assert out == "ok"


@pytest.mark.parametrize("threshold, error", [(0, ValueError), (-1, ValueError), (1.5, TypeError),
                                              (True, TypeError), ("700", TypeError)])
def test_tune_gc_rejects_a_bad_threshold_naming_it_and_changes_nothing(threshold, error):
    import gc

    before = gc.get_threshold(), gc.get_freeze_count()
    with pytest.raises(error, match="threshold"):
        tune_gc(threshold=threshold)
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
