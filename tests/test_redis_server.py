"""tests/redis_server.py: without a redis-server binary, every test that needs one skips and says why.

The Redis tests run again in a pytest of their own, with a PATH that is this
one less ``redis-server`` and ``redis-cli`` (each directory holding them
replaced by one of links to its other programs): they must all skip, naming
the missing binary, and none fail — and under ``DATALOADER_SYNC_REQUIRE_REDIS=1``
(CI) they must fail instead, so that CI cannot pass by skipping them.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from redis_server import NO_REDIS_SERVER

pytest.importorskip("redis")

ROOT = pathlib.Path(__file__).resolve().parent.parent
REDIS_PROGRAMS = ("redis-server", "redis-cli")
#: Every module whose tests start a redis-server, and the docs page whose blocks start one.
REDIS_TESTS = [
    "tests/test_redis.py",
    "tests/test_cache_consistency.py",
    "tests/test_django_value_cache.py",
    "tests/test_bench_value_cache.py",
    "tests/test_docs_snippets.py::test_the_python_blocks_of_a_page_run_as_written[docs/value-cache.rst]",
]


def path_without_redis(shadow: pathlib.Path) -> str:
    """This PATH, each directory holding a Redis program replaced by a directory of links to its others."""
    directories = []
    for i, directory in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        if not any(os.path.exists(os.path.join(directory, p)) for p in REDIS_PROGRAMS):
            directories.append(directory)
            continue
        links = shadow / str(i)
        links.mkdir(parents=True)
        for name in os.listdir(directory):
            if name not in REDIS_PROGRAMS:
                (links / name).symlink_to(os.path.join(directory, name))
        directories.append(str(links))
    return os.pathsep.join(directories)


def run_pytest(tmp_path: pathlib.Path, *args: str, require: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "DATALOADER_SYNC_REQUIRE_REDIS"}
    env["PATH"] = path_without_redis(tmp_path / "bin")
    env["COLUMNS"] = "1000"  # the summary lines whole, with their reasons
    if require:
        env["DATALOADER_SYNC_REQUIRE_REDIS"] = "1"
    check = subprocess.run([sys.executable, "-c", "import shutil; print(shutil.which('redis-server'))"],
                           env=env, capture_output=True, text=True, check=True)
    assert check.stdout.strip() == "None"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsfE", "-p", "no:cacheprovider",
                          "--basetemp", str(tmp_path / "run"), *args],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=280, check=False)
    return out.stdout + out.stderr


@pytest.mark.timeout(300)
def test_without_redis_server_every_redis_test_skips_with_its_reason(tmp_path: pathlib.Path) -> None:
    output = run_pytest(tmp_path, *REDIS_TESTS, require=False)
    summary = output.strip().splitlines()[-1]
    assert " failed" not in summary and " error" not in summary and " skipped" in summary, output[-6000:]
    skips = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert skips and all(NO_REDIS_SERVER in line for line in skips), skips
    assert any("docs/value-cache.rst" in line and "were not run" in line for line in skips), skips


@pytest.mark.timeout(300)
def test_without_redis_server_the_redis_tests_fail_where_ci_requires_them(tmp_path: pathlib.Path) -> None:
    output = run_pytest(tmp_path, "tests/test_redis.py::test_RedisValueCache_round_trips_nested_values_as_JSON",
                        REDIS_TESTS[-1], require=True)
    failures = [line for line in output.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert len(failures) == 2 and all("DATALOADER_SYNC_REQUIRE_REDIS=1 forbids skipping" in line
                                      for line in failures), output[-6000:]
