"""ASGI side by side: our loaders awaited under strawberry's async execution, against what teams use instead.

Runs where strawberry-django is installed (it needs graphql-core 3.3: the venv
of ``.ci/strawberry-django``).  The ``orm_library`` models of tests/ on a
SQLite file database, filled with ``--authors`` authors × ``--books`` books ×
``--reviews`` reviews and 3 tags per book; every variant answers

    { authors { name publisher { name } books { title tags { name } reviews { stars } } } }

through a strawberry schema on one asyncio loop (no HTTP), one request at a
time, and must return the same data:

  ours-async      sync resolvers returning related_loader(...).load(self), awaited by
                  ``await schema.execute``: the batches on the loop's default executor
  sd-dataloader   strawberry's own DataLoader, its load_fn ``sync_to_async(load_related)``
                  (one statement per relation per level, what teams write today)
  optimizer       strawberry-django's fields and ``DjangoOptimizerExtension``, ``await schema.execute``
  ours-sync       ours-async's schema through ``schema.execute_sync`` with DataLoaderExecutionContext

The variants run in alternating rounds (``--rounds``, each ``--requests``
requests per variant after a warm-up); the table gives the median of the
rounds' process CPU ms per request (``time.process_time``: every thread), wall
ms per request, their ratio, SQL statements per request (counted on every
connection of every thread) and, for ours-async, the loop's wake-ups from other
threads per request.  Only ratios measured side by side in one run mean
anything.

    python tools/bench_asgi.py             # default settings
    python tools/bench_asgi.py --quick     # small settings, a few seconds

No ``from __future__ import annotations``: the strawberry types are made inside
a function (the models need Django set up) and strawberry resolves their
annotations from the real objects.
"""

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from typing import Any, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUERY = "{ authors { name publisher { name } books { title tags { name } reviews { stars } } } }"
VARIANTS = ["ours-async", "sd-dataloader", "optimizer", "ours-sync"]


class Counter:
    """SQL statements run on any connection of any thread (an execute wrapper per connection)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statements = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        with self.lock:
            self.statements += 1
        return execute(sql, params, many, context)


COUNTER = Counter()


def setup_django(path: str) -> None:
    import django
    from django.conf import settings

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "orm_library"],  # orm_library has generic relations
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": path}},
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        USE_TZ=True,
    )
    django.setup()
    from django.core.management import call_command
    from django.db.backends.signals import connection_created

    call_command("migrate", verbosity=0)
    def count_on(sender: Any, connection: Any, **kwargs: Any) -> None:
        if COUNTER not in connection.execute_wrappers:  # once per wrapper (a thread's reconnects reuse it)
            connection.execute_wrappers.append(COUNTER)

    connection_created.connect(count_on, weak=False)


def fill(authors: int, books: int, reviews: int) -> None:
    from orm_fixtures import fill_library

    fill_library("default", authors=authors, books=books, reviews=reviews, tags=3)


class Context:
    def __init__(self) -> None:
        from dataloader_sync import DataLoaderRegistry

        self.loaders = DataLoaderRegistry()
        self.sd_loaders: dict[str, Any] = {}


def make_schemas() -> dict[str, Any]:
    """The variants' strawberry schemas (made here: the models need Django set up)."""
    from typing import Optional as Opt

    import strawberry
    import strawberry_django
    from asgiref.sync import sync_to_async
    from orm_library.models import Author, Book, Publisher, Review, Tag
    from strawberry.dataloader import DataLoader as StrawberryDataLoader
    from strawberry_django.optimizer import DjangoOptimizerExtension

    from dataloader_sync.django import load_related, related_loader
    from dataloader_sync.graphql import DataLoaderExecutionContext

    # -- ours: sync resolvers returning our loaders' futures -----------------------------------
    @strawberry_django.type(Publisher, name="Publisher")
    class PublisherT:
        name: strawberry.auto

    @strawberry_django.type(Tag, name="Tag")
    class TagT:
        name: strawberry.auto

    @strawberry_django.type(Review, name="Review")
    class ReviewT:
        stars: int = strawberry_django.field(field_name="rating")

    @strawberry_django.type(Book, name="Book")
    class BookT:
        title: strawberry.auto

        @strawberry.field
        def tags(self, info: strawberry.Info) -> list[TagT]:
            return related_loader(info.context.loaders, Book.tags).load(self)  # type: ignore[no-any-return]

        @strawberry.field
        def reviews(self, info: strawberry.Info) -> list[ReviewT]:
            return related_loader(info.context.loaders, Book.reviews).load(self)  # type: ignore[no-any-return]

    @strawberry_django.type(Author, name="Author")
    class AuthorT:
        name: strawberry.auto

        @strawberry.field
        def publisher(self, info: strawberry.Info) -> Opt[PublisherT]:
            return related_loader(info.context.loaders, Author.publisher).load(self)  # type: ignore[no-any-return]

        @strawberry.field
        def books(self, info: strawberry.Info) -> list[BookT]:
            return related_loader(info.context.loaders, Author.books).load(self)  # type: ignore[no-any-return]

    @strawberry.type
    class Query:
        @strawberry_django.field
        def authors(self) -> list[AuthorT]:
            return Author.objects.order_by("id")  # type: ignore[return-value]

    # -- strawberry's DataLoader + sync_to_async(load_related) ---------------------------------
    def sd_loader(info: Any, field: Any) -> Any:
        loaders = info.context.sd_loaders
        loader = loaders.get(field)
        if loader is None:
            async def load_fn(instances: list[Any]) -> list[Any]:
                return await sync_to_async(load_related)(instances, field)  # type: ignore[no-any-return]
            loader = loaders[field] = StrawberryDataLoader(load_fn=load_fn, cache=False)
        return loader

    @strawberry_django.type(Book, name="Book")
    class SdBook:
        title: strawberry.auto

        @strawberry.field
        async def tags(self, info: strawberry.Info) -> list[TagT]:
            return await sd_loader(info, Book.tags).load(self)  # type: ignore[no-any-return]

        @strawberry.field
        async def reviews(self, info: strawberry.Info) -> list[ReviewT]:
            return await sd_loader(info, Book.reviews).load(self)  # type: ignore[no-any-return]

    @strawberry_django.type(Author, name="Author")
    class SdAuthor:
        name: strawberry.auto

        @strawberry.field
        async def publisher(self, info: strawberry.Info) -> Opt[PublisherT]:
            return await sd_loader(info, Author.publisher).load(self)  # type: ignore[no-any-return]

        @strawberry.field
        async def books(self, info: strawberry.Info) -> list[SdBook]:
            return await sd_loader(info, Author.books).load(self)  # type: ignore[no-any-return]

    @strawberry.type(name="Query")
    class SdQuery:
        @strawberry_django.field
        def authors(self) -> list[SdAuthor]:
            return Author.objects.order_by("id")  # type: ignore[return-value]

    # -- strawberry-django's own fields, with its optimizer --------------------------------------
    @strawberry_django.type(Book, name="Book")
    class OptBook:
        title: strawberry.auto
        tags: list[TagT] = strawberry_django.field()
        reviews: list[ReviewT] = strawberry_django.field()

    @strawberry_django.type(Author, name="Author")
    class OptAuthor:
        name: strawberry.auto
        publisher: Opt[PublisherT] = strawberry_django.field()
        books: list[OptBook] = strawberry_django.field()

    @strawberry.type(name="Query")
    class OptQuery:
        @strawberry_django.field
        def authors(self) -> list[OptAuthor]:
            return Author.objects.order_by("id")  # type: ignore[return-value]

    return {
        "ours-async": strawberry.Schema(query=Query),
        "sd-dataloader": strawberry.Schema(query=SdQuery),
        "optimizer": strawberry.Schema(query=OptQuery, extensions=[DjangoOptimizerExtension]),
        "ours-sync": strawberry.Schema(query=Query, execution_context_class=DataLoaderExecutionContext),
    }


def normalized(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


async def serve(schema: Any, variant: str, n: int) -> tuple[float, float, int, int, Any]:
    """*n* requests one after another: (CPU s, wall s, statements, loop wake-ups, last data)."""
    from asgiref.sync import sync_to_async

    try:
        from dataloader_sync._core import _asyncio_bridge
    except ModuleNotFoundError:  # a checkout from before the _core/ move (bench_ab runs old ones)
        from dataloader_sync import _asyncio_bridge

    loop = asyncio.get_running_loop()
    before = _asyncio_bridge.statistics(loop).wakeups
    statements = COUNTER.statements
    cpu, wall = time.process_time(), time.perf_counter()
    data = None
    for _ in range(n):
        if variant == "ours-sync":  # a WSGI-style request: the whole execution on one worker thread
            result = await sync_to_async(schema.execute_sync, thread_sensitive=True)(QUERY, context_value=Context())
        else:
            result = await schema.execute(QUERY, context_value=Context())
        assert result.errors is None, result.errors
        data = result.data
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu, wall, COUNTER.statements - statements, _asyncio_bridge.statistics(loop).wakeups - before, data


def run(args: argparse.Namespace) -> dict[str, Any]:
    schemas = make_schemas()
    rows: dict[str, dict[str, list[float]]] = {v: {"cpu": [], "wall": [], "statements": [], "wakeups": []}
                                               for v in VARIANTS}
    reference: Optional[str] = None

    async def main() -> None:
        nonlocal reference
        for variant in VARIANTS:  # warm-up, and every variant answers the same
            *_, data = await serve(schemas[variant], variant, args.warmup)
            if reference is None:
                reference = normalized(data)
            assert normalized(data) == reference, f"{variant} answers differently"
        for _ in range(args.rounds):
            for variant in VARIANTS:
                cpu, wall, statements, wakeups, _data = await serve(schemas[variant], variant, args.requests)
                row = rows[variant]
                row["cpu"].append(cpu * 1000 / args.requests)
                row["wall"].append(wall * 1000 / args.requests)
                row["statements"].append(statements / args.requests)
                row["wakeups"].append(wakeups / args.requests)

    asyncio.run(main())
    return {
        "settings": vars(args), "python": platform.python_version(),
        "variants": {v: {k: statistics.median(vals) for k, vals in row.items()} | {
            "cpu_range": [min(row["cpu"]), max(row["cpu"])]} for v, row in rows.items()},
    }


def table(report: dict[str, Any]) -> str:
    s = report["settings"]
    header = (f"{s['authors']} authors x {s['books']} books x {s['reviews']} reviews, 3 tags per book; "
              f"{s['rounds']} rounds x {s['requests']} requests; Python {report['python']}")
    lines = [header,
             ("| variant | CPU ms/req (median) | CPU range | wall ms/req | wall/CPU | statements/req"
              " | loop wake-ups/req |"),
             "|---|---|---|---|---|---|---|"]
    for name, v in report["variants"].items():
        lo, hi = v["cpu_range"]
        lines.append(f"| {name} | {v['cpu']:.2f} | {lo:.2f}-{hi:.2f} | {v['wall']:.2f} | {v['wall'] / v['cpu']:.2f} | "
                     f"{v['statements']:.1f} | {v['wakeups']:.1f} |")
    return "\n".join(lines)


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--authors", type=int, default=20)
    parser.add_argument("--books", type=int, default=5)
    parser.add_argument("--reviews", type=int, default=3)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small settings: a few seconds")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON too")
    args = parser.parse_args(argv)
    if args.quick:
        args.authors, args.books, args.requests, args.warmup, args.rounds = 5, 2, 5, 2, 2
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        setup_django(os.path.join(tmp, "bench.sqlite3"))
        fill(args.authors, args.books, args.reviews)
        report = run(args)
    print(table(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
