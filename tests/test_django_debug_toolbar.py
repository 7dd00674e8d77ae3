"""dataloader_sync.django.debug_toolbar: the DataLoaders panel, with the real django-debug-toolbar
through Django's test client (in a process of its own: tests/debug_toolbar_requests.py), and its
BatchRecorder alone, in this process's Django (tests/django_settings.py)."""
from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("debug_toolbar")
if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
    pytest.skip("graphene_django is not installed", allow_module_level=True)

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def toolbar():
    """What the toolbar stored and rendered for the panel, per scenario (see debug_toolbar_requests.py)."""
    out = subprocess.run([sys.executable, str(HERE / "debug_toolbar_requests.py")], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def rows(stats):
    return [(b["loader"], b["round"], b["keys"], b["value_cache_hits"]) for b in stats["batches"]]


def test_DataLoadersPanel_lists_each_batch_in_order_with_round_keys_and_hits(toolbar):
    page = toolbar["page"]
    assert page["page_status"] == 200 and page["has_toolbar"]
    assert rows(page["stats"]) == [("books_by_author", 1, 3, 0), ("reviews_by_book", 2, 5, 0)]
    assert all(b["duration_ms"] >= 0 and b["error"] is None for b in page["stats"]["batches"])
    assert page["nav_subtitle"] == "2 batches, 2 SQL"


def test_DataLoadersPanel_attributes_each_batchs_sql_to_it(toolbar):
    stats = toolbar["page"]["stats"]
    books, reviews = ([s["sql"] for s in b["sql"]] for b in stats["batches"])
    assert len(books) == 1 and 'FROM "books_book"' in books[0] and "IN (1, 2, 3)" in books[0]
    assert len(reviews) == 1 and 'FROM "books_review"' in reviews[0] and "IN (1, 2, 3, 4, 5)" in reviews[0]
    # the root field's queryset ran outside any batch
    assert (stats["sql_in_batches"], stats["sql_outside_batches"]) == (2, 1)


def test_DataLoadersPanel_renders_from_the_store_through_render_panel(toolbar):
    page = toolbar["page"]
    assert page["status"] == 200
    content = page["content"]
    assert content.startswith("<p>Batch calls: 2; SQL statements in them: 2; outside any batch: 1.</p>")
    assert content.index("<td>books_by_author</td>") < content.index("<td>reviews_by_book</td>")
    assert "&quot;books_review&quot;.&quot;book_id&quot; IN (1, 2, 3, 4, 5)" in content  # escaped SQL


def test_DataLoadersPanel_shows_value_cache_hits_and_no_sql_for_a_cached_request(toolbar):
    cached = toolbar["cached_page"]
    assert rows(cached["stats"]) == [("books_by_author", 1, 0, 3), ("reviews_by_book", 2, 0, 5)]
    assert [b["sql"] for b in cached["stats"]["batches"]] == [[], []]
    assert [b["duration_ms"] for b in cached["stats"]["batches"]] == [None, None]
    assert cached["nav_subtitle"] == "0 batches, 0 SQL, 8 cache hits"


def test_DataLoadersPanel_records_a_graphql_json_request_without_a_toolbar_on_it(toolbar):
    graphql = toolbar["graphql"]
    assert graphql["status"] == 200
    assert rows(graphql["stats"]) == [("books_by_author", 1, 3, 0), ("reviews_by_book", 2, 5, 0)]
    assert "<td>reviews_by_book</td>" in graphql["content"]


# -- BatchRecorder alone, in this process's Django --------------------------------------------------
@pytest.fixture
def books(example_books):
    example_books(authors=2, books=2, reviews=1)


def test_BatchRecorder_records_only_registries_made_while_started_and_their_sql(books):
    from books import loaders
    from books.models import Author

    from dataloader_sync import DataLoaderRegistry
    from dataloader_sync.django._batch_recorder import BatchRecorder

    before = loaders.make_registry(None)
    recorder = BatchRecorder()
    recorder.start()
    try:
        registry = loaders.make_registry(None)
        ids = list(Author.objects.values_list("id", flat=True))  # outside any batch
        books = registry["books_by_author"].load_many(ids)
        registry.dispatch_all()
        assert [len(b) for b in books.result(timeout=10)] == [2, 2]
        other = before["books_by_author"].load(ids[0])  # made before start: not recorded
        before.dispatch_all()
        other.result(timeout=10)
        plain = DataLoaderRegistry()
        plain.register("echo", loaders.DataLoader(lambda keys: list(keys)))
        plain["echo"].load(1)
        plain.dispatch_all()
    finally:
        recorder.stop()
    after = loaders.make_registry(None)  # made after stop: not recorded
    after["books_by_author"].load(ids[0])
    after.dispatch_all()
    stats = recorder.stats()
    assert rows(stats) == [("books_by_author", 1, 2, 0), ("echo", 2, 1, 0)]
    assert [len(b["sql"]) for b in stats["batches"]] == [1, 0]
    assert stats["sql_outside_batches"] == 1 + 1  # the ids, and the batch of the loader made before start
    json.dumps(stats)  # plain JSON
    assert before.instrumentation is after.instrumentation is loaders.INSTRUMENTATION  # untouched


def test_BatchRecorder_records_a_failed_batch_and_per_key_errors(books):
    from dataloader_sync import DataLoader, DataLoaderRegistry
    from dataloader_sync.django._batch_recorder import BatchRecorder

    def broken(keys):
        raise ConnectionError("db down")

    recorder = BatchRecorder()
    recorder.start()
    try:
        registry = DataLoaderRegistry()
        registry.register("broken", DataLoader(broken))
        registry.register("some_missing", DataLoader(lambda keys: [KeyError(k) if k % 2 else k for k in keys]))
        failed, half = registry["broken"].load(1), registry["some_missing"].load_many([1, 2, 3],
                                                                                      return_exceptions=True)
        registry.dispatch_all()
        assert isinstance(failed.exception(timeout=10), ConnectionError)
        assert len(half.result(timeout=10)) == 3
    finally:
        recorder.stop()
    [broken_entry, half_entry] = recorder.stats()["batches"]
    assert broken_entry["error"] == "ConnectionError: db down"
    assert (half_entry["error"], half_entry["key_errors"]) == (None, 2)


def test_BatchRecorder_does_not_see_sql_of_a_batch_on_an_executor_thread(books):
    from books.models import Book

    from dataloader_sync import DataLoader, DataLoaderRegistry
    from dataloader_sync.django._batch_recorder import BatchRecorder

    def titles(ids):  # on the pool's thread: its own connection (and in-memory database)
        from django.db import connection, connections

        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                return [cursor.fetchone()[0] for _ in ids]
        finally:
            connections.close_all()  # this thread's connections (an in-memory SQLite one Django keeps open:)
            if connection.connection is not None:  # closed here, or Python 3.13 warns when the thread's is collected
                connection.connection.close()
                connection.connection = None

    recorder = BatchRecorder()
    recorder.start()
    try:
        with cf.ThreadPoolExecutor(max_workers=1) as pool:
            registry = DataLoaderRegistry()
            registry.register("titles", DataLoader(titles, executor=pool))
            first = Book.objects.order_by("id").first()
            value = registry["titles"].load(first.id)
            registry.dispatch_all()
            assert value.result(timeout=10) == 1
    finally:
        recorder.stop()
    [entry] = recorder.stats()["batches"]
    assert entry["keys"] == 1 and entry["sql"] == [] and entry["duration_ms"] is not None
