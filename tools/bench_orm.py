"""CPU per request of a graphene-django query served by the ORM loaders, against prefetch_related by hand.

The example project's models (examples/django_project/books: authors, books,
reviews) on an in-memory SQLite database, filled with ``--authors`` authors ×
``--books`` books × ``--reviews`` reviews.  Every variant answers the same
query, ``{ authors { name books { title author { name } reviews { rating } } } }``,
through ``graphene.Schema.execute`` on one thread (graphene-django's
``DjangoObjectType``; no HTTP), and must return the same data:

  loaders        related_loader(Author.books), (Book.author), (Book.reviews) per field;
                 a fresh DataLoaderRegistry per request, DataLoaderExecutionContext
  prefetch       by hand in the root resolver: Author.objects.prefetch_related("books__reviews"),
                 the fields read the prefetched managers (book.author is Django's cached parent)
  select+prefetch  Book.author by select_related inside a Prefetch("books", ...), reviews prefetched
  n-plus-one     the same fields, each relation one query per parent (what users have without either;
                 book.author is the related manager's known parent, no query)

The variants run in alternating rounds (``--rounds``, each ``--requests`` requests
per variant after a warm-up), so their ratios hold on a loaded machine; the
table gives the median and the range of the rounds' CPU ms per request
(``time.process_time``), and SQL statements per request.  Only the ratios
measured side by side in one run mean anything.

    python tools/bench_orm.py                 # default settings
    python tools/bench_orm.py --quick         # small settings, a few seconds
    python tools/bench_orm.py --json out.json # the same figures as JSON too
    python tools/bench_orm.py --big 70000 [--postgres]   # one 70,000-key batch: statements, seconds
    python tools/bench_orm.py --postgres      # the table on PostgreSQL (a server started for the run)
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any, Optional

import bench_django
from bench_django import Context, add_library_arguments, parsed, setup_django

QUERY = "{ authors { name books { title author { name } reviews { rating } } } }"
VARIANTS = ["loaders", "prefetch", "select+prefetch", "n-plus-one"]


def fill(authors: int, books: int, reviews: int) -> None:
    from books.models import Author, Book, Review

    Author.objects.all().delete()  # the example's sample rows
    made = Author.objects.bulk_create([Author(name=f"author {a}") for a in range(authors)])
    made_books = Book.objects.bulk_create([Book(title=f"book {a}.{b}", author=author)
                                           for a, author in enumerate(made) for b in range(books)])
    Review.objects.bulk_create([Review(book=book, rating=1 + (i + r) % 5) for i, book in enumerate(made_books)
                                for r in range(reviews)])


def schema_for(variant: str) -> Any:
    """The variant's graphene schema (its types are named apart: one graphene-django registry holds them all)."""
    import graphene
    from books import models
    from django.db.models import Prefetch
    from graphene_django import DjangoObjectType

    from dataloader_sync.django import related_loader

    loaders = variant == "loaders"
    suffix = variant.replace("+", "_").replace("-", "_").title().replace("_", "")

    def meta(model: Any, fields: tuple[str, ...], name: str) -> type:
        return type("Meta", (), {"model": model, "fields": fields, "name": f"{name}{suffix}"})

    def resolve_author(book: Any, info: Any) -> Any:
        return related_loader(info.context.loaders, models.Book.author).load(book) if loaders else book.author

    def resolve_reviews(book: Any, info: Any) -> Any:
        return related_loader(info.context.loaders, models.Book.reviews).load(book) if loaders else book.reviews.all()

    def resolve_books(author: Any, info: Any) -> Any:
        return related_loader(info.context.loaders, models.Author.books).load(author) if loaders else author.books.all()

    def resolve_authors(root: Any, info: Any) -> Any:
        authors = models.Author.objects.order_by("id")
        if variant == "prefetch":
            return authors.prefetch_related("books__reviews")
        if variant == "select+prefetch":
            return authors.prefetch_related(
                Prefetch("books", queryset=models.Book.objects.select_related("author")), "books__reviews")
        return authors

    types: dict[str, Any] = {}
    review = type(f"Review{suffix}", (DjangoObjectType,), {"Meta": meta(models.Review, ("rating",), "Review")})
    book = type(f"Book{suffix}", (DjangoObjectType,), {
        "Meta": meta(models.Book, ("title",), "Book"),
        "author": graphene.Field(lambda: types["author"], required=True),
        "reviews": graphene.List(graphene.NonNull(review), required=True),
        "resolve_author": resolve_author, "resolve_reviews": resolve_reviews})
    types["author"] = type(f"Author{suffix}", (DjangoObjectType,), {
        "Meta": meta(models.Author, ("name",), "Author"),
        "books": graphene.List(graphene.NonNull(book), required=True), "resolve_books": resolve_books})
    query = type(f"Query{suffix}", (graphene.ObjectType,), {
        "authors": graphene.List(graphene.NonNull(types["author"]), required=True), "resolve_authors": resolve_authors})
    return graphene.Schema(query=query)


def execute(schema: Any) -> Any:
    from dataloader_sync.graphql import DataLoaderExecutionContext

    result = schema.execute(QUERY, context_value=Context(), execution_context_class=DataLoaderExecutionContext)
    if result.errors:
        raise RuntimeError(result.errors[0])
    return result.data


def normalized(data: Any) -> Any:
    """The data with the variant's type names out of the way (they differ; the values must not), and
    each list in one order: the example's relations are unordered, and PostgreSQL gives a prefetch's
    rows and a loader's in orders of its own."""
    def ordered(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: ordered(item) for key, item in value.items()}
        if isinstance(value, list):
            return sorted((ordered(item) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
        return value

    return ordered(json.loads(json.dumps(data, sort_keys=True)))


def big_batches(keys: int) -> list[dict[str, Any]]:
    """One batch of *keys* keys through model_loader(Author) and related_loader(Author.books): statements, seconds.

    The parents are unsaved instances with primary keys 1..keys (only the
    first few exist), so the batch is as large as asked without that many rows.
    """
    from books.models import Author
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync import DataLoaderRegistry
    from dataloader_sync.django import model_loader, related_loader

    first = Author.objects.order_by("pk").values_list("pk", flat=True).first() or 1
    parents = [Author(pk=pk) for pk in range(first, first + keys)]
    for parent in parents:
        parent._state.db = "default"
    rows = []
    for case, loader_of, batch in [
        ("model_loader(Author).load(pk)", lambda r: model_loader(r, Author), [p.pk for p in parents]),
        ("related_loader(Author.books).load(author)", lambda r: related_loader(r, Author.books), parents),
        ("related_loader(Author.books, first=1).load(author)",
         lambda r: related_loader(r, Author.books, first=1), parents),
    ]:
        registry = DataLoaderRegistry()
        loader = loader_of(registry)
        with CaptureQueriesContext(connection) as queries:
            start = time.perf_counter()
            futures = [loader.load(key) for key in batch]
            registry.dispatch_all()
            found = sum(1 for f in futures if f.result(0))
            seconds = time.perf_counter() - start
        rows.append({"case": case, "keys": keys, "statements": len(queries), "seconds": seconds, "found": found})
    return rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    setup_django(["graphene_django", "books"], os.path.join("examples", "django_project"), args.database)
    fill(args.authors, args.books, args.reviews)
    if args.big:
        return {"database": connection_vendor(), "big_batches": big_batches(args.big)}
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    built = {variant: schema_for(variant) for variant in args.variants}
    reference = None
    rows: dict[str, dict[str, Any]] = {}
    for variant in args.variants:
        schema = built[variant]
        with CaptureQueriesContext(connection) as queries:
            data = normalized(execute(schema))
        if reference is None:
            reference = data
        elif data != reference:
            raise RuntimeError(f"{variant} answered differently from {args.variants[0]}")
        rows[variant] = {"variant": variant, "sql_per_request": len(queries), "cpu_ms_per_request_rounds": []}
        for _ in range(args.warmup):
            execute(schema)
    for _ in range(args.rounds):
        for variant in args.variants:
            schema = built[variant]
            start = time.process_time()
            for _ in range(args.requests):
                execute(schema)
            rows[variant]["cpu_ms_per_request_rounds"].append((time.process_time() - start) * 1000 / args.requests)
    base = statistics.median(rows[args.variants[0]]["cpu_ms_per_request_rounds"])
    for row in rows.values():
        rounds = row["cpu_ms_per_request_rounds"]
        row["cpu_ms_per_request"] = statistics.median(rounds)
        row["cpu_ms_min"], row["cpu_ms_max"] = min(rounds), max(rounds)
        row[f"ratio_to_{args.variants[0]}"] = row["cpu_ms_per_request"] / base if base else None
    import django
    import graphene

    return {
        "settings": {"authors": args.authors, "books_per_author": args.books, "reviews_per_book": args.reviews,
                     "requests_per_round": args.requests, "rounds": args.rounds, "warmup": args.warmup,
                     "query": QUERY},
        "environment": {"python": platform.python_version(), "django": django.get_version(),
                        "graphene": graphene.__version__, "database": "sqlite in-memory"},
        "variants": list(rows.values()),
    }


def connection_vendor() -> str:
    from django.db import connection

    return str(connection.vendor)


def table(report: dict[str, Any]) -> str:
    if "big_batches" in report:
        lines = [f"one batch on {report['database']}", "| case | keys | statements | seconds (load + dispatch) |",
                 "|---|---|---|---|"]
        lines += [f"| {r['case']} | {r['keys']} | {r['statements']} | {r['seconds']:.2f} |"
                  for r in report["big_batches"]]
        return "\n".join(lines)
    s = report["settings"]
    first = report["variants"][0]["variant"]
    lines = [(f"{s['authors']} authors x {s['books_per_author']} books x {s['reviews_per_book']} reviews; "
              f"{s['rounds']} rounds x {s['requests_per_round']} requests per variant; {report['environment']}"),
             f"| variant | SQL / request | CPU ms / request (median) | min-max | vs {first} |",
             "|---|---|---|---|---|"]
    for row in report["variants"]:
        lines.append(f"| {row['variant']} | {row['sql_per_request']} | {row['cpu_ms_per_request']:.2f} | "
                     f"{row['cpu_ms_min']:.2f}-{row['cpu_ms_max']:.2f} | {row[f'ratio_to_{first}']:.2f}x |")
    return "\n".join(lines)


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_library_arguments(p)
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=VARIANTS)
    p.add_argument("--big", type=int, metavar="KEYS", default=0,
                   help="instead: one batch of KEYS keys per loader kind (statements, seconds)")
    return parsed(p, argv)


def main(argv: Optional[list[str]] = None) -> int:
    return bench_django.main(parse_args(argv), run, table, "bench_orm")


if __name__ == "__main__":
    sys.exit(main())
