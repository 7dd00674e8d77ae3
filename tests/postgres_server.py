"""A real PostgreSQL server for the tests: ``initdb`` and ``pg_ctl`` in a temporary directory, stopped after.

``postgres_server`` (session-scoped; tests/conftest.py imports it, so that
there is one server per run: do not import it into a test module, which
would make that module a server of its own) gives a running ``PostgresServer``:
``host`` (always ``127.0.0.1``), ``port`` (a free loopback port), ``user``
(``postgres``, trust authentication: no password), ``dsn(dbname)`` (libpq),
``url(dbname)`` (SQLAlchemy), ``connect(dbname)`` (psycopg) and
``create_database(name)``.  ``running_postgres_server()`` is the same as a
context manager, for a fixture of another scope.  One server serves the whole
run; each user of it creates its own database (``create_database``), so
suites do not see each other's rows.

The server runs as the unprivileged ``postgres`` user when the tests run as
root (``initdb`` refuses root), as the current user otherwise; its data
directory and its Unix socket live in the temporary directory, so nothing
outside it is touched.  Durability is off (``fsync``, ``synchronous_commit``,
``full_page_writes``): the data is thrown away after the run.

The binaries are found on PATH (``initdb``, ``pg_ctl``), else in
``pg_config --bindir``, else in the newest ``/usr/lib/postgresql/*/bin``.
Where none exists, or the Python driver (``psycopg``, in the ``test``
extra) is missing, the tests that need them are skipped with the reason —
unless ``DATALOADER_SYNC_REQUIRE_POSTGRES=1`` (set by ``.ci/run``, which
installs Debian's ``postgresql`` package when it is missing), then they fail:
CI must not pass by skipping them.

Django: ``tests/django_settings.py`` declares the database alias
``"postgres"`` (``POSTGRES_ALIAS``) with an empty ``HOST``/``PORT``/``NAME``;
``use_for_django(server)`` fills them in (a database of its own, created
here) before the first connection, and migrates it.  See
``tests/orm_library/__init__.py`` for the test app and the ``orm_db`` fixture
of ``tests/test_django_orm.py`` for a test run on SQLite and on PostgreSQL.
"""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any, Optional

import pytest

START_TIMEOUT = 60  # seconds, for pg_ctl -w (initdb and the first start on a loaded machine)
POSTGRES_ALIAS = "postgres"  # the Django database alias tests/django_settings.py declares
_TOOLS = ("initdb", "pg_ctl")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_bindir() -> Optional[str]:
    """The directory holding ``initdb`` and ``pg_ctl``, or None."""
    on_path = [shutil.which(tool) for tool in _TOOLS]
    if all(on_path):
        return os.path.dirname(os.path.realpath(str(on_path[0])))
    candidates = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidates.append(out.stdout.strip())

    def version(path: str) -> tuple[int, ...]:
        part = path.rstrip("/").split("/")[-2]
        return tuple(int(p) for p in part.split(".") if p.isdigit())

    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    for directory in candidates:
        if directory and all(os.access(os.path.join(directory, tool), os.X_OK) for tool in _TOOLS):
            return directory
    return None


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("DATALOADER_SYNC_REQUIRE_POSTGRES") == "1":
        pytest.fail(reason + ", and DATALOADER_SYNC_REQUIRE_POSTGRES=1 forbids skipping")
    pytest.skip(reason)


class PostgresServer:
    """One PostgreSQL server on 127.0.0.1:``port``, its cluster in a temporary directory.

    Not thread-safe (the fixture starts and stops it); connecting to it is.
    """

    def __init__(self, bindir: str) -> None:
        self.bindir = bindir
        self.host = "127.0.0.1"
        self.port = 0
        self.user = "postgres"
        self.dir = tempfile.mkdtemp(prefix="dataloader-sync-postgres-")
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self._run_as: Optional[pwd.struct_passwd] = None
        if os.geteuid() == 0:  # initdb refuses root: run the cluster as the unprivileged postgres user
            try:
                self._run_as = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root, but there is no 'postgres' user to run PostgreSQL as") from None
            os.chown(self.dir, self._run_as.pw_uid, self._run_as.pw_gid)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, Any] = {}
        if self._run_as is not None:
            kwargs.update(user=self._run_as.pw_uid, group=self._run_as.pw_gid, extra_groups=[])
        return subprocess.run([os.path.join(self.bindir, args[0]), *args[1:]], capture_output=True, text=True,
                              check=False, cwd=self.dir, env={**os.environ, "LC_ALL": "C"}, **kwargs)

    def start(self) -> None:
        """``initdb`` (the first time), then start on a free port; return once it accepts connections."""
        if not os.path.isdir(self.data):
            done = self._run("initdb", "-D", self.data, "-U", self.user, "-A", "trust", "-E", "UTF8",
                             "--no-locale", "--no-sync")
            if done.returncode != 0:
                raise RuntimeError(f"initdb failed: {done.stdout}{done.stderr}")
        for _ in range(5):  # a free port may be taken meanwhile by another process
            self.port = _free_port()
            options = (f"-h {self.host} -p {self.port} -k {self.dir} -c fsync=off -c synchronous_commit=off"
                       " -c full_page_writes=off -c max_connections=200")
            done = self._run("pg_ctl", "-D", self.data, "-l", self.log, "-o", options, "-t", str(START_TIMEOUT),
                             "-w", "start")
            if done.returncode == 0:
                return
        with open(self.log) as f:
            raise RuntimeError(f"PostgreSQL did not start: {done.stdout}{done.stderr}\n{f.read()[-4000:]}")

    def stop(self) -> None:
        """Stop the server (fast shutdown: connections are closed) and remove its directory."""
        if self.port:
            self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")
            self.port = 0
        shutil.rmtree(self.dir, ignore_errors=True)

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection string for *dbname*."""
        return f"host={self.host} port={self.port} user={self.user} dbname={dbname}"

    def url(self, dbname: str = "postgres", driver: str = "psycopg") -> str:
        """A SQLAlchemy URL for *dbname* (``postgresql+psycopg://postgres@127.0.0.1:PORT/dbname``)."""
        return f"postgresql+{driver}://{self.user}@{self.host}:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres") -> Any:
        """A new autocommit ``psycopg.Connection`` to *dbname* (close it)."""
        import psycopg

        return psycopg.connect(self.dsn(dbname), autocommit=True)

    def create_database(self, name: str) -> str:
        """Create the database *name* (dropped with the server); return *name*."""
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name


@contextlib.contextmanager
def running_postgres_server() -> Iterator[PostgresServer]:
    """A started ``PostgresServer`` (or skip, see the module notes), stopped and its directory removed on exit."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _skip_or_fail("no psycopg (pip install 'psycopg[binary]'; the test extra has it)")
    bindir = postgres_bindir()
    if bindir is None:
        _skip_or_fail("no PostgreSQL binaries (initdb, pg_ctl) found (apt-get install postgresql; .ci/run installs it)")
    assert bindir is not None
    server = PostgresServer(bindir)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    with running_postgres_server() as server:
        yield server


def use_for_django(server: PostgresServer, dbname: str = "dataloader_sync_django") -> str:
    """Point Django's ``"postgres"`` alias at *server* (a new database *dbname*) and migrate it; idempotent.

    Django must be configured (``django_example_project``) and the alias not
    yet connected: its settings are read when a thread first connects.

    Returns:
        The alias, ``"postgres"``.
    """
    from django.core.management import call_command
    from django.db import connections

    settings = connections.settings[POSTGRES_ALIAS]  # the dict each connection of the alias is made from
    if settings["PORT"] != str(server.port):
        connections[POSTGRES_ALIAS].close()  # this thread's, if any, is to another server
        server.create_database(dbname)
        settings.update(HOST=server.host, PORT=str(server.port), NAME=dbname, USER=server.user)
        call_command("migrate", database=POSTGRES_ALIAS, verbosity=0)
    return POSTGRES_ALIAS
