"""CPU per request of a REST framework serializer batched by dataloader_sync.rest_framework, against prefetch_related.

The example project's models (examples/django_project/books: authors, books,
reviews) on an in-memory SQLite database (or ``--postgres``), filled with
``--authors`` authors × ``--books`` books × ``--reviews`` reviews.  Every
variant serializes ``Author.objects.order_by("id")`` with the same nested
serializers — ``{name, books: [{title, author_name (source="author.name"),
reviews: [{rating}]}]}`` — on one thread (``serializer.data``; no HTTP), and
must return the same data:

  batched      batched_data(AuthorSerializer(queryset, many=True)): a registry per request
  prefetch     by hand: queryset.prefetch_related("books__reviews"), then serializer.data
  n-plus-one   serializer.data on the plain queryset (what users have without either)

The variants run in alternating rounds (``--rounds``, each ``--requests``
requests per variant after a warm-up); the table gives the median and the
range of the rounds' CPU ms per request (``time.process_time``) and SQL
statements per request.  Only the ratios measured side by side in one run
mean anything.

    python tools/bench_rest_framework.py               # default settings
    python tools/bench_rest_framework.py --quick       # small settings, a few seconds
    python tools/bench_rest_framework.py --json out.json --postgres
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable, Optional

import bench_django
from bench_django import add_library_arguments, parsed, setup_django
from bench_orm import fill

VARIANTS = ["batched", "prefetch", "n-plus-one"]


def serializer_class() -> Any:
    from books import models
    from rest_framework import serializers

    class ReviewSerializer(serializers.ModelSerializer):
        class Meta:
            model = models.Review
            fields = ["rating"]

    class BookSerializer(serializers.ModelSerializer):
        author_name = serializers.CharField(source="author.name")
        reviews = ReviewSerializer(many=True)

        class Meta:
            model = models.Book
            fields = ["title", "author_name", "reviews"]

    class AuthorSerializer(serializers.ModelSerializer):
        books = BookSerializer(many=True)

        class Meta:
            model = models.Author
            fields = ["name", "books"]

    return AuthorSerializer


def request_for(variant: str) -> Callable[[], Any]:
    """One request of *variant*: the serialized authors."""
    from books.models import Author

    from dataloader_sync.rest_framework import batched_data

    serializer = serializer_class()
    if variant == "batched":
        return lambda: batched_data(serializer(Author.objects.order_by("id"), many=True))
    if variant == "prefetch":
        return lambda: serializer(Author.objects.order_by("id").prefetch_related("books__reviews"), many=True).data
    return lambda: serializer(Author.objects.order_by("id"), many=True).data


def run(args: argparse.Namespace) -> dict[str, Any]:
    setup_django(["books"], os.path.join("examples", "django_project"), args.database)
    fill(args.authors, args.books, args.reviews)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    requests = {variant: request_for(variant) for variant in args.variants}
    reference = None
    rows: dict[str, dict[str, Any]] = {}
    for variant, request in requests.items():
        with CaptureQueriesContext(connection) as queries:
            data = request()
        if reference is None:
            reference = data
        elif data != reference:
            raise RuntimeError(f"{variant} answered differently from {args.variants[0]}")
        rows[variant] = {"variant": variant, "sql_per_request": len(queries), "cpu_ms_per_request_rounds": []}
        for _ in range(args.warmup):
            request()
    for _ in range(args.rounds):
        for variant, request in requests.items():
            start = time.process_time()
            for _ in range(args.requests):
                request()
            rows[variant]["cpu_ms_per_request_rounds"].append((time.process_time() - start) * 1000 / args.requests)
    base = statistics.median(rows[args.variants[0]]["cpu_ms_per_request_rounds"])
    for row in rows.values():
        rounds = row["cpu_ms_per_request_rounds"]
        row["cpu_ms_per_request"] = statistics.median(rounds)
        row["cpu_ms_min"], row["cpu_ms_max"] = min(rounds), max(rounds)
        row[f"ratio_to_{args.variants[0]}"] = row["cpu_ms_per_request"] / base if base else None
    import django
    import rest_framework

    return {
        "settings": {"authors": args.authors, "books_per_author": args.books, "reviews_per_book": args.reviews,
                     "requests_per_round": args.requests, "rounds": args.rounds, "warmup": args.warmup},
        "environment": {"python": platform.python_version(), "django": django.get_version(),
                        "djangorestframework": rest_framework.VERSION, "database": connection.vendor},
        "variants": list(rows.values()),
    }


def table(report: dict[str, Any]) -> str:
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
    return parsed(p, argv)


def main(argv: Optional[list[str]] = None) -> int:
    return bench_django.main(parse_args(argv), run, table, "bench_rest_framework")


if __name__ == "__main__":
    sys.exit(main())
