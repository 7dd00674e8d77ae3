"""tests/postgres_server.py: a real PostgreSQL cluster made, run as the unprivileged user, and stopped."""
from __future__ import annotations

import os
import pwd

import pytest
from postgres_server import postgres_bindir, running_postgres_server


def test_postgres_server_accepts_connections_on_loopback_as_an_unprivileged_user(postgres_server):
    with postgres_server.connect() as conn:
        version, = conn.execute("SHOW server_version_num").fetchone()
        assert int(version) >= 120000
        pid, = conn.execute("SELECT pg_backend_pid()").fetchone()
        addr, port = conn.execute("SELECT host(inet_server_addr()), inet_server_port()").fetchone()
        with open(f"/proc/{pid}/status") as f:  # while connected: the backend ends with the connection
            uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    assert (addr, port) == ("127.0.0.1", postgres_server.port)
    expected = pwd.getpwnam("postgres").pw_uid if os.geteuid() == 0 else os.geteuid()
    assert uid == expected
    assert postgres_server.dir.startswith("/") and os.path.isdir(postgres_server.data)


def test_postgres_server_creates_databases_of_its_own(postgres_server):
    name = postgres_server.create_database("dataloader_sync_fixture_check")
    with postgres_server.connect(name) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == (name,)


def test_running_postgres_server_stops_and_removes_its_cluster():
    with running_postgres_server() as server:
        directory, port = server.dir, server.port
        with server.connect() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    assert not os.path.exists(directory)
    psycopg = pytest.importorskip("psycopg")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres connect_timeout=5")


def test_postgres_bindir_finds_initdb_and_pg_ctl():
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL binaries on this machine")
    assert os.access(os.path.join(bindir, "initdb"), os.X_OK) and os.access(os.path.join(bindir, "pg_ctl"), os.X_OK)


def test_orm_db_runs_a_test_on_sqlite_and_on_postgresql_with_the_library_rolled_back(request):
    pytest.importorskip("django")
    request.getfixturevalue("django_example_project")
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_fixtures import fill_library
    from orm_library.models import Book

    aliases = ["default"]
    if postgres_bindir() is not None or os.environ.get("DATALOADER_SYNC_REQUIRE_POSTGRES") == "1":
        from postgres_server import use_for_django

        aliases.append(use_for_django(request.getfixturevalue("postgres_server")))
    from django.db import transaction

    for alias in aliases:
        with transaction.atomic(using=alias):
            library = fill_library(alias, authors=4, books=2, tags=3)
            with CaptureQueriesContext(connections[alias]) as queries:
                titles = list(Book.objects.using(alias).filter(tags__name="tag 00").values_list("title", flat=True)
                              .order_by("title"))
            assert titles == ["book 0.0", "book 1.1", "book 2.0", "book 2.1", "book 3.0"]  # (a + b) % 3 in (0, 2)
            assert len(queries) == 1
            assert connections[alias].vendor == ("sqlite" if alias == "default" else "postgresql")
            assert [a.publisher_id is None for a in library.authors] == [False, False, True, False]
            transaction.set_rollback(True, using=alias)
        assert not Book.objects.using(alias).exists()


def test_postgres_server_url_names_the_server_for_sqlalchemy(postgres_server):
    assert postgres_server.url("db") == f"postgresql+psycopg://postgres@127.0.0.1:{postgres_server.port}/db"
