"""dataloader_sync.django.FETCH_LEVEL (Django >= 6.1): a fetch mode whose peers are the instances of the
running execution's level, on the orm_library app, on SQLite and PostgreSQL.  Custom resolvers and
@property reading a to-one relation or a deferred column cost one statement per level, whichever querysets
loaded the level; outside an execution it is FETCH_PEERS; one request's level never reaches another's."""
from __future__ import annotations

import importlib.util
import json
import os
import pickle
import re
import threading

import pytest

pytest.importorskip("django")
pytest.importorskip("graphene")

from orm_fixtures import committed_library, library, orm_db  # noqa: F401

from dataloader_sync import DataLoaderRegistry

pytestmark = pytest.mark.usefixtures("django_example_project")

HAS_FETCH_MODES = importlib.util.find_spec("django.db.models.fetch_modes") is not None
# .ci/django-matrix sets it on Django 6.1 and later: there these tests must run, not skip
REQUIRED = os.environ.get("DATALOADER_SYNC_REQUIRE_FETCH_MODES") == "1"
needs_fetch_modes = pytest.mark.skipif(
    not HAS_FETCH_MODES and not REQUIRED, reason="Django < 6.1 has no fetch modes: FETCH_LEVEL needs Django >= 6.1")
AUTHORS, PUBLISHERS, PARTS = 50, 10, 5
TIMEOUT = 10.0


def modes():
    from django.db import models

    from dataloader_sync.django import FETCH_LEVEL

    return {"one": models.FETCH_ONE, "peers": models.FETCH_PEERS, "level": FETCH_LEVEL}


def make_schema():
    """Authors with a custom resolver reading ``self.publisher`` and the model's ``display_name``
    property (a column, deferred by ``only``); the root querysets use the fetch mode named by ``mode``."""
    import graphene
    from orm_library import models

    from dataloader_sync.django import related_loader

    class Author(graphene.ObjectType):
        class Meta:
            name = "LevelAuthor"

        name = graphene.String()
        publisher_name = graphene.String()
        display_name = graphene.String()  # the model's @property, read by graphene's default resolver

        def resolve_name(author, info):
            return author.__dict__.get("name", "(deferred)")  # not a fetch: display_name is the one

        def resolve_publisher_name(author, info):
            wait = getattr(info.context, "before_fetch", None)
            if wait is not None:
                wait()
            publisher = author.publisher
            return None if publisher is None else publisher.name

    class Publisher(graphene.ObjectType):
        """``authors`` through one loader per publisher: its own queryset, its own batch."""

        class Meta:
            name = "LevelPublisher"

        name = graphene.String()
        authors = graphene.List(Author, mode=graphene.String(required=True))

        def resolve_authors(publisher, info, mode):
            queryset = models.Author.objects.fetch_mode(modes()[mode]).filter(name__endswith=publisher.name[-1])
            return related_loader(info.context.loaders, models.Publisher.authors, queryset).load(publisher)

    class AutoPublisher(graphene.ObjectType):
        """``authors`` with no resolver: auto relations load it (with FETCH_LEVEL on the querysets they run)."""

        class Meta:
            name = "LevelAutoPublisher"

        name = graphene.String()
        authors = graphene.List(Author)

    class Early(graphene.ObjectType):
        class Meta:
            name = "LevelEarly"

        name = graphene.String()

    class Late(graphene.ObjectType):
        class Meta:
            name = "LevelLate"

        name = graphene.String()

    class ByPublisher(graphene.Union):
        """Typed by reading ``self.publisher`` in ``resolve_type``: before the author's own fields run."""

        class Meta:
            name = "LevelByPublisher"
            types = (Early, Late)

        @classmethod
        def resolve_type(cls, author, info):
            return Early if author.publisher.name < "publisher 5" else Late

    def authors(db, mode, only):
        queryset = models.Author.objects.using(db).fetch_mode(modes()[mode]).order_by("pk")
        return queryset.only("id", "publisher") if only else queryset

    class Query(graphene.ObjectType):
        authors = graphene.List(Author, db=graphene.String(required=True), mode=graphene.String(required=True),
                                only=graphene.Boolean(default_value=False), half=graphene.Int())
        authors_in_parts = graphene.List(Author, db=graphene.String(required=True),
                                         mode=graphene.String(required=True),
                                         only=graphene.Boolean(default_value=False))
        publishers = graphene.List(Publisher, db=graphene.String(required=True))
        typed_in_parts = graphene.List(ByPublisher, db=graphene.String(required=True),
                                       mode=graphene.String(required=True))
        auto_publishers = graphene.List(AutoPublisher, db=graphene.String(required=True))

        def resolve_authors(root, info, db, mode, only, half=None):
            found = authors(db, mode, only)
            if half is not None:  # publishers 0-4 or 5-9
                found = found.filter(publisher__name__in=[f"publisher {p}" for p in range(5 * half, 5 * half + 5)])
            return found

        def resolve_authors_in_parts(root, info, db, mode, only):
            # one list from several querysets (say, a feed merging sources): one level, PARTS querysets
            rows = list(authors(db, "one", only).values_list("pk", flat=True))
            size = len(rows) // PARTS
            return [author for part in range(PARTS)
                    for author in authors(db, mode, only).filter(pk__in=rows[part * size:(part + 1) * size])]

        def resolve_typed_in_parts(root, info, db, mode):
            return Query.resolve_authors_in_parts(root, info, db, mode, False)

        def resolve_publishers(root, info, db):
            return models.Publisher.objects.using(db).order_by("pk")

        def resolve_auto_publishers(root, info, db):
            return models.Publisher.objects.using(db).order_by("pk")

    return graphene.Schema(query=Query)


@pytest.fixture(scope="module")
def schema(django_example_project):
    return make_schema()


class Context:
    def __init__(self, before_fetch=None):
        self.loaders = DataLoaderRegistry()
        if before_fetch is not None:
            self.before_fetch = before_fetch


def fill(alias):
    """PUBLISHERS publishers, AUTHORS authors ``"author {a}"`` of publisher ``a % PUBLISHERS``: every author
    has one (so that FETCH_ONE costs one statement per author)."""
    from orm_library import models

    publishers = models.Publisher.objects.using(alias).bulk_create(
        [models.Publisher(name=f"publisher {p}") for p in range(PUBLISHERS)])
    models.Author.objects.using(alias).bulk_create(
        [models.Author(name=f"author {a}", publisher=publishers[a % PUBLISHERS]) for a in range(AUTHORS)])


def execute(schema, orm_db, query, auto=False, context=None, **variables):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext

    cls = AutoRelationsExecutionContext if auto else DataLoaderExecutionContext
    with CaptureQueriesContext(connections[orm_db]) as queries:
        result = schema.execute(query, variable_values={"db": orm_db, **variables},
                                context_value=Context() if context is None else context,
                                execution_context_class=cls)
    assert not result.errors, result.errors
    return json.dumps(result.data), len(queries)


ROOT = "query ($db: String!, $mode: String!) { authors(db: $db, mode: $mode) { name publisherName } }"
PARTS_QUERY = ("query ($db: String!, $mode: String!) { authorsInParts(db: $db, mode: $mode) "
               "{ name publisherName } }")
PUBLISHERS_QUERY = ("query ($db: String!, $mode: String!) { publishers(db: $db) { name authors(mode: $mode) "
                    "{ name publisherName } } }")
TYPED = ("query ($db: String!, $mode: String!) { typedInParts(db: $db, mode: $mode) { __typename "
         "... on LevelEarly { name } ... on LevelLate { name } } }")
DEFERRED = "query ($db: String!, $mode: String!) { authors(db: $db, mode: $mode, only: true) { displayName } }"
DEFERRED_PARTS = ("query ($db: String!, $mode: String!) { authorsInParts(db: $db, mode: $mode, only: true) "
                  "{ displayName } }")


@needs_fetch_modes
@pytest.mark.parametrize("query, expected", [
    # statements with FETCH_ONE / FETCH_PEERS / FETCH_LEVEL
    pytest.param(ROOT, (1 + AUTHORS, 2, 2), id="one queryset"),
    pytest.param(PARTS_QUERY, (1 + PARTS + AUTHORS, 1 + 2 * PARTS, 1 + PARTS + 1), id="a list of several querysets"),
    pytest.param(PUBLISHERS_QUERY, (1 + PUBLISHERS + AUTHORS, 1 + 2 * PUBLISHERS, 1 + PUBLISHERS + 1),
                 id="several parents' related_loader batches"),
    pytest.param(TYPED, (1 + PARTS + AUTHORS, 1 + 2 * PARTS, 1 + PARTS + 1), id="a union's resolve_type"),
])
def test_a_custom_resolver_reading_a_relation_costs_one_statement_per_level(schema, orm_db, library, query,
                                                                             expected):
    library(orm_db, authors=0, publishers=0, books=0, reviews=0, tags=0)
    fill(orm_db)
    answers, counts = zip(*(execute(schema, orm_db, query, mode=mode) for mode in ("one", "peers", "level")))
    assert counts == expected
    assert answers[0] == answers[1] == answers[2]
    assert "publisher 9" in answers[2] or "LevelLate" in answers[2]


@needs_fetch_modes
@pytest.mark.parametrize("query, expected", [
    pytest.param(DEFERRED, (1 + AUTHORS, 2, 2), id="one queryset"),
    pytest.param(DEFERRED_PARTS, (1 + PARTS + AUTHORS, 1 + 2 * PARTS, 1 + PARTS + 1),
                 id="a list of several querysets"),
])
def test_a_property_reading_a_deferred_column_costs_one_statement_per_level(schema, orm_db, library, query,
                                                                            expected):
    library(orm_db, authors=0, publishers=0, books=0, reviews=0, tags=0)
    fill(orm_db)
    answers, counts = zip(*(execute(schema, orm_db, query, mode=mode) for mode in ("one", "peers", "level")))
    assert counts == expected
    assert answers[0] == answers[1] == answers[2]
    assert "Author 49" in answers[2]


@needs_fetch_modes
def test_the_instances_auto_relations_load_carry_it(schema, orm_db, library):
    library(orm_db, authors=0, publishers=0, books=0, reviews=0, tags=0)
    fill(orm_db)
    query = "query ($db: String!) { autoPublishers(db: $db) { name authors { name publisherName } } }"
    answer, statements = execute(schema, orm_db, query, auto=True)
    # publishers, their authors (one batch); the authors' publishers are their parents, set on them by the
    # batch as a related manager sets them (no statement at all, FETCH_LEVEL or not)
    assert statements == 2
    expected, _ = execute(schema, orm_db, PUBLISHERS_QUERY, mode="one")  # resolvers written, Django's default
    assert json.loads(answer)["autoPublishers"] == json.loads(expected)["publishers"]


@needs_fetch_modes
def test_outside_an_execution_it_is_fetch_peers(orm_db, library):
    from django.db import connections
    from django.test.utils import CaptureQueriesContext
    from orm_library import models

    from dataloader_sync.django import FETCH_LEVEL

    library(orm_db, authors=0, publishers=0, books=0, reviews=0, tags=0)
    fill(orm_db)
    with CaptureQueriesContext(connections[orm_db]) as queries:
        authors = list(models.Author.objects.using(orm_db).fetch_mode(FETCH_LEVEL).only("id", "publisher")
                       .order_by("pk"))
        names = [(author.publisher.name, author.display_name) for author in authors]
    assert len(queries) == 3  # the authors, every publisher, every name
    assert names[7] == ("publisher 7", "Author 7")
    assert pickle.loads(pickle.dumps(FETCH_LEVEL)) is FETCH_LEVEL
    assert repr(FETCH_LEVEL) == "FETCH_LEVEL"


@needs_fetch_modes
def test_two_executions_on_two_threads_keep_their_levels_apart(schema, orm_db, committed_library):
    """Both executions hold their authors when each reads its first publisher (a barrier): each reads its
    own five publishers in one statement, none of the other's."""
    if orm_db == "default":
        pytest.skip("in-memory SQLite is one database per thread: two requests need PostgreSQL")
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    committed_library(orm_db, authors=0, publishers=0, books=0, reviews=0, tags=0)
    fill(orm_db)
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    waited = set()
    outcomes = {}

    def run(half):
        def before_fetch():
            if half not in waited:  # once per execution: both are in the middle of their level
                waited.add(half)
                barrier.wait()

        try:
            with CaptureQueriesContext(connections[orm_db]) as queries:
                result = schema.execute(
                    "query ($db: String!, $half: Int!) { authors(db: $db, mode: \"level\", half: $half) "
                    "{ name publisherName } }", variable_values={"db": orm_db, "half": half},
                    context_value=Context(before_fetch), execution_context_class=DataLoaderExecutionContext)
            outcomes[half] = (result, [q["sql"] for q in queries.captured_queries])
        except BaseException as exc:  # reported by the test thread
            outcomes[half] = exc
            barrier.abort()
        finally:
            connections.close_all()

    from dataloader_sync.graphql import DataLoaderExecutionContext

    threads = [threading.Thread(target=run, args=(half,), name=f"fetch-level-{half}") for half in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    read = {}
    for half in (0, 1):
        outcome = outcomes[half]
        assert not isinstance(outcome, BaseException), outcome
        result, statements = outcome
        assert not result.errors, result.errors
        own = {f"publisher {p}" for p in range(5 * half, 5 * half + 5)}
        assert {author["publisherName"] for author in result.data["authors"]} == own
        assert len(result.data["authors"]) == AUTHORS // 2
        assert len(statements) == 2, statements  # its authors, then its five publishers
        read[half] = set(re.findall(r"\d+", statements[1].partition(" IN ")[2]))
        assert len(read[half]) == 5, statements[1]
    assert not read[0] & read[1]


def test_FETCH_LEVEL_names_the_django_it_needs():
    import django

    import dataloader_sync.django as dj

    if HAS_FETCH_MODES:
        from dataloader_sync.django import FETCH_LEVEL

        assert "FETCH_LEVEL" in dir(dj) and FETCH_LEVEL is dj.FETCH_LEVEL
        return
    assert "FETCH_LEVEL" not in dir(dj)
    with pytest.raises(ImportError, match=r"FETCH_LEVEL needs Django >= 6\.1 .*Django "
                       + django.get_version().replace(".", r"\.")):
        from dataloader_sync.django import FETCH_LEVEL
