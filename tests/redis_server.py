"""A real redis-server for the tests: started on a free port of 127.0.0.1, stopped after.

``redis_server`` (module-scoped) gives a running ``RedisServer``; tests may
``kill()`` it and ``start()`` it again on the same port.  ``running_redis_server()``
is the same as a context manager, for a fixture of another scope.  Without a
``redis-server`` binary on PATH the tests that need it are skipped with the
reason — unless ``DATALOADER_SYNC_REQUIRE_REDIS=1`` (set by ``.ci/run``), then
they fail: CI must not pass by skipping them.  ``redis_missing()`` says why
without skipping, and ``skip_or_fail(reason)`` skips (or fails) for it, for a
test that runs what it can first (tests/test_docs_snippets.py: a page's
blocks that start a server of their own).
"""
from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import NoReturn, Optional

import pytest

READY = b"Ready to accept connections"
START_TIMEOUT = 20.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process (no persistence) on 127.0.0.1:``port``."""

    def __init__(self, binary: str, extra_args: tuple[str, ...] = ()) -> None:
        self.binary = binary
        self.extra_args = extra_args
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None
        self.dir = tempfile.mkdtemp(prefix="dataloader-sync-redis-")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start on ``port`` (a free one the first time); return once it accepts connections."""
        attempts = 1 if self.port else 5  # a free port may be taken meanwhile by another process
        for _ in range(attempts):
            port = self.port or _free_port()
            if self._start_on(port):
                self.port = port
                return
        raise RuntimeError(f"redis-server did not start (last output in {self.dir})")

    def _start_on(self, port: int) -> bool:
        proc = subprocess.Popen(
            [self.binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--daemonize", "no", "--loglevel", "notice", *self.extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        assert proc.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT
        output = b""
        while READY not in output:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([proc.stdout], [], [], max(left, 0))
            chunk = os.read(proc.stdout.fileno(), 65536) if ready else b""
            if not chunk:  # exited (e.g. the port was taken), or no word in time
                proc.kill()
                proc.wait()
                proc.stdout.close()
                with open(os.path.join(self.dir, "last-output.txt"), "wb") as f:
                    f.write(output)
                return False
            output += chunk
        # Redis ignores SIGPIPE: closing our end only silences its later log lines.
        proc.stdout.close()
        self.proc = proc
        return True

    def kill(self) -> None:
        """SIGKILL, as a crash: no goodbye to the clients."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


NO_REDIS_SERVER = "no redis-server binary on PATH (apt-get install redis-server; .ci/run installs it)"


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the test for *reason*, or fail it under DATALOADER_SYNC_REQUIRE_REDIS=1."""
    if os.environ.get("DATALOADER_SYNC_REQUIRE_REDIS") == "1":
        pytest.fail(reason + ", and DATALOADER_SYNC_REQUIRE_REDIS=1 forbids skipping")
    pytest.skip(reason)


def redis_missing() -> Optional[str]:
    """Why the tests that start a redis-server cannot run here, or None."""
    return None if shutil.which("redis-server") else NO_REDIS_SERVER


def redis_binary() -> str:
    """The redis-server binary, or skip (fail under DATALOADER_SYNC_REQUIRE_REDIS=1)."""
    binary = shutil.which("redis-server")
    if binary is None:
        skip_or_fail(NO_REDIS_SERVER)
    return binary


@contextlib.contextmanager
def running_redis_server() -> Iterator[RedisServer]:
    """A started ``RedisServer`` (or skip, as ``redis_binary``), stopped and its directory removed on exit."""
    server = RedisServer(redis_binary())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with running_redis_server() as server:
        yield server


class RedisCluster:
    """A Redis Cluster of ``n`` masters (no replicas) on loopback: ``ports``, ``startup_nodes()``."""

    def __init__(self, servers: list[RedisServer]) -> None:
        self.servers = servers

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self.servers]


@contextlib.contextmanager
def running_redis_cluster(n: int = 3) -> Iterator[RedisCluster]:
    """*n* ``redis-server --cluster-enabled yes`` processes joined by ``redis-cli --cluster create``; stopped on exit.

    Skips (fails under DATALOADER_SYNC_REQUIRE_REDIS=1) without ``redis-server`` or ``redis-cli``.
    """
    binary = redis_binary()
    cli = shutil.which("redis-cli")
    if cli is None:
        skip_or_fail("no redis-cli binary on PATH (apt-get install redis-tools; .ci/run installs it)")
    servers = [RedisServer(binary, ("--cluster-enabled", "yes", "--cluster-node-timeout", "5000"))
               for _ in range(n)]
    try:
        for server in servers:
            server.start()
        subprocess.run([cli, "--cluster", "create", *[f"127.0.0.1:{s.port}" for s in servers],
                        "--cluster-replicas", "0", "--cluster-yes"],
                       check=True, capture_output=True, timeout=START_TIMEOUT)
        # Every node must see every slot served before a client may rely on the slot map.
        deadline = time.monotonic() + START_TIMEOUT
        pending = list(servers)
        while pending:
            out = subprocess.run([cli, "-p", str(pending[0].port), "cluster", "info"], capture_output=True,
                                 text=True, timeout=START_TIMEOUT).stdout
            if "cluster_state:ok" in out:
                pending.pop(0)
            elif time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not become ready: {out}")
            else:
                select.select([], [], [], 0.05)  # the gossip needs a moment: poll, bounded by the deadline
        yield RedisCluster(servers)
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="module")
def redis_cluster() -> Iterator[RedisCluster]:
    with running_redis_cluster() as cluster:
        yield cluster
