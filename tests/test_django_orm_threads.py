"""ORM batches off the request thread (ticks of a scheduled registry, executor=) on PostgreSQL: no
connection is left open by a pool thread, and such loads do not see the request's uncommitted writes."""
from __future__ import annotations

import concurrent.futures as cf
import threading
import time

import pytest

pytest.importorskip("django")

from orm_fixtures import committed_library, library  # noqa: F401
from postgres_server import use_for_django

from dataloader_sync import DataLoaderRegistry, ScheduledDataLoaderRegistry, ScheduledExecutor

pytestmark = pytest.mark.usefixtures("django_example_project")
TIMEOUT = 10.0


@pytest.fixture
def pg(postgres_server, django_example_project):
    return use_for_django(postgres_server)


@pytest.fixture
def executor():
    ex = ScheduledExecutor(name="orm-pool")
    yield ex
    ex.shutdown(wait=True, cancel_futures=True)


def other_connections(postgres_server, alias, within=10.0):
    """Backends connected to the alias's database, other than this thread's own Django connection.

    A backend leaves ``pg_stat_activity`` when its process has ended, a
    moment after the client closed the connection: the count is asked again
    until it is empty or *within* seconds have passed, so a connection just
    closed is not counted, and one left open (it never goes) is.
    """
    from django.db import connections

    own = connections[alias]
    own.ensure_connection()
    own_pid = own.connection.info.backend_pid
    deadline = time.monotonic() + within
    with postgres_server.connect() as conn:
        while True:
            rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> %s AND pid <> "
                                "pg_backend_pid()", [own.settings_dict["NAME"], own_pid]).fetchall()
            if not rows or time.monotonic() > deadline:
                return [pid for pid, in rows]
            conn.execute("SELECT pg_sleep(0.02)")  # the server waits, not this test: then ask again


def settled(futures):
    done = threading.Semaphore(0)
    for f in futures:
        f.add_done_callback(lambda _: done.release())
    for _ in futures:
        assert done.acquire(timeout=TIMEOUT), "a load was not dispatched"
    return [f.result(0) for f in futures]


def test_ticks_leave_no_connection_open_after_200_requests(pg, postgres_server, committed_library, executor):
    from django.test import Client, override_settings

    committed_library(pg, authors=3, books=2)
    client = Client()
    threads = set()
    with override_settings(ROOT_URLCONF="orm_library.urls", ORM_TEST_SCHEDULED_EXECUTOR=executor):
        for _ in range(200):
            response = client.get("/authors-books/", {"db": pg})
            assert response.status_code == 200, response.content
            body = response.json()
            assert body["books"] == [["book 0.0", "book 0.1"], ["book 1.0", "book 1.1"], ["book 2.0", "book 2.1"]]
            threads.update(body["threads"])
    assert threads and threading.current_thread().name not in threads
    assert all(name.startswith("orm-pool") for name in threads)  # the batches ran on the pool's threads
    assert other_connections(postgres_server, pg) == []


def test_executor_batches_leave_no_connection_open(pg, postgres_server, committed_library):
    from orm_library.models import Author

    from dataloader_sync.django import load_related

    lib = committed_library(pg, authors=4, books=1)
    pool = cf.ThreadPoolExecutor(max_workers=4, thread_name_prefix="orm-executor")

    def load_related_in_parallel(instances, field, queryset=None, first=None):
        return load_related(instances, field, queryset, first)

    load_related_in_parallel.dataloader_options = {"executor": pool}
    load_related_in_parallel.dataloader_key = load_related.dataloader_key
    try:
        for _ in range(200):
            registry = DataLoaderRegistry()
            books = [registry.loader_for(load_related_in_parallel, Author.books).load(a) for a in lib.authors]
            profiles = [registry.loader_for(load_related_in_parallel, Author.profile).load(a) for a in lib.authors]
            registry.dispatch_all()  # two batches, run in parallel on the pool
            assert [[b.title for b in v] for v in settled(books)] == [[f"book {a}.0"] for a in range(4)]
            assert [p and p.bio for p in settled(profiles)] == ["bio 0", None, "bio 2", None]
        assert other_connections(postgres_server, pg) == []
    finally:
        pool.shutdown(wait=True)


def test_a_load_off_the_request_thread_does_not_see_its_uncommitted_writes(pg, committed_library, executor):
    from django.db import transaction
    from orm_library.models import Author, Book

    from dataloader_sync.django import related_loader

    lib = committed_library(pg, authors=1, books=1)
    author = lib.authors[0]
    with transaction.atomic(using=pg):  # as ATOMIC_REQUESTS wraps a view
        Book.objects.using(pg).create(title="uncommitted", author=author)
        here = DataLoaderRegistry()
        on_this_thread = related_loader(here, Author.books).load(author)
        here.dispatch_all()
        with ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=0.001) as ticking:
            ticking.dispatch_all()
            [off_thread] = settled([related_loader(ticking, Author.books).load(author)])
        assert [b.title for b in on_this_thread.result(0)] == ["book 0.0", "uncommitted"]
        assert [b.title for b in off_thread] == ["book 0.0"]  # another connection: only committed rows
        transaction.set_rollback(True, using=pg)


def test_a_batch_inside_an_atomic_block_keeps_its_connection(pg, library):
    from django.db import connections
    from orm_library.models import Author

    from dataloader_sync.django import related_loader

    lib = library(pg, authors=2)  # an atomic block on this (non-request) thread
    registry = DataLoaderRegistry()
    futures = [related_loader(registry, Author.books).load(a) for a in lib.authors]
    registry.dispatch_all()
    assert [len(v) for v in settled(futures)] == [2, 2]
    assert connections[pg].connection is not None and connections[pg].in_atomic_block


def test_a_batch_on_a_thread_serving_a_request_leaves_its_connection_to_django(pg, committed_library):
    from django.core.signals import request_finished, request_started
    from django.db import connections
    from orm_library.models import Author

    from dataloader_sync.django import related_loader

    lib = committed_library(pg, authors=1)
    result = {}

    def request():  # a WSGI worker thread: a request starts and ends there
        request_started.send(sender=None)
        try:
            connections[pg].close()  # no connection yet: the batch opens it
            registry = DataLoaderRegistry()
            fut = related_loader(registry, Author.books).load(lib.authors[0])
            registry.dispatch_all()
            result["books"] = len(fut.result(0))
            result["open after the batch"] = connections[pg].connection is not None
        finally:
            request_finished.send(sender=None)  # Django's close_old_connections closes it
            result["open after the request"] = connections[pg].connection is not None
            connections[pg].close()

    worker = threading.Thread(target=request)
    worker.start()
    worker.join(TIMEOUT)
    assert result == {"books": 2, "open after the batch": True, "open after the request": False}


# -- batch functions the user wrote (no batch_connection): the job hooks close their connections -----------
class Recorded:
    """The connection object of each thread a hand-written batch function ran on (kept alive: after its
    thread ended, an unclosed one still holds its backend)."""

    def __init__(self, alias):
        self.alias = alias
        self.lock = threading.Lock()
        self.by_thread = {}

    def books_of(self, author_ids):  # plain ORM code, as a user writes it
        from django.db import connections
        from orm_library.models import Book

        with self.lock:
            self.by_thread[threading.current_thread().name] = connections[self.alias]
        by_author = {i: [] for i in author_ids}
        for book in Book.objects.using(self.alias).filter(author_id__in=author_ids).order_by("id"):
            by_author[book.author_id].append(book.title)
        return [by_author[i] for i in author_ids]

    def open(self):
        return sorted(name for name, connection in self.by_thread.items() if connection.connection is not None)


@pytest.mark.parametrize("kind", ["ThreadPoolExecutor", "ScheduledExecutor"])
def test_hand_written_batch_functions_on_an_executor_leave_no_connection_open(pg, postgres_server,
                                                                              committed_library, kind):
    from dataloader_sync import DataLoader

    lib = committed_library(pg, authors=4, books=1)
    pool = (cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="orm-executor") if kind == "ThreadPoolExecutor"
            else ScheduledExecutor(name="orm-executor", max_workers=2))
    recorded = Recorded(pg)
    try:
        for _ in range(50):
            loader = DataLoader(recorded.books_of, executor=pool)
            futures = [loader.load(a.pk) for a in lib.authors]
            loader.dispatch()
            assert settled(futures) == [[f"book {a}.0"] for a in range(4)]
    finally:
        pool.shutdown(wait=True)  # every job (and what runs after it) is over
    assert recorded.by_thread and all(name.startswith("orm-executor") for name in recorded.by_thread)
    assert recorded.open() == []
    assert other_connections(postgres_server, pg) == []


@pytest.mark.parametrize("mode", ["ticks", "rechecks"])
def test_hand_written_batch_functions_of_ticks_and_rechecks_leave_no_connection_open(pg, postgres_server,
                                                                                     committed_library, mode):
    from dataloader_sync import DataLoader

    lib = committed_library(pg, authors=3, books=1)
    executor = ScheduledExecutor(name="orm-ticks")
    recorded = Recorded(pg)
    try:
        for _ in range(50):
            asked = []

            def second_time(name, loader, asked=asked):  # rechecks: the first check says no, the recheck yes
                asked.append(name)
                return len(asked) > 1

            predicate = {"dispatch_predicate": second_time} if mode == "rechecks" else {}
            with ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=mode == "ticks",
                                             schedule=0.001, **predicate) as registry:
                loader = registry.register("books", DataLoader(recorded.books_of)).get("books")
                futures = [loader.load(a.pk) for a in lib.authors]
                if mode == "ticks":
                    registry.reschedule_now()  # the ticker starts: a tick dispatches
                else:
                    registry.dispatch_all()  # refused: a recheck dispatches
                assert settled(futures) == [[f"book {a}.0"] for a in range(3)]
    finally:
        executor.shutdown(wait=True)
    assert recorded.by_thread and all(name.startswith("orm-ticks") for name in recorded.by_thread)
    assert recorded.open() == []
    assert other_connections(postgres_server, pg) == []
