"""REST framework serializers, five shapes, side by side: plain, by hand, two prefetch planners and the switch.

The example project's models (examples/django_project/books: authors, books,
reviews) on an in-memory SQLite database (or ``--postgres``), filled with
``--authors`` authors x ``--books`` books x ``--reviews`` reviews.  Each
shape is one ``serializer.data`` of a list (one thread, no HTTP):

  nested     authors -> books -> reviews, nested ModelSerializers (many=True)
  filtered   a SerializerMethodField serializing
             obj.books.exclude(...).order_by("-title")
  counting   a SerializerMethodField returning obj.books.count()
  source     reviews with source="book.title" and source="book.author.name"
  run-time   a SerializerMethodField picking the books' serializer per author
             (one with the books' reviews, one without) and serializing obj.books.all()

and each variant serializes it its own way:

  plain                 REST framework as it is: the N+1
  prefetch              hand-written prefetch_related on the queryset (for the
                        method fields: a Prefetch(to_attr=...) and the method
                        rewritten to read it, as a team does by hand; for the
                        source= path: select_related("book__author"), the join
                        a team writes for a path of to-one hops)
  serializer-prefetch   drf-serializer-prefetch's PrefetchingSerializerMixin on the
                        top serializer (the package serializer_prefetch)
  auto-prefetching      django-auto-prefetching's prefetch(queryset, serializer)
                        (the package django_auto_prefetching)
  switch                dataloader_sync.rest_framework.batched_data(serializer)

The two planners are not dependencies of the project: install them to measure
them (``pip install drf-serializer-prefetch django-auto-prefetching``); a
variant whose package is missing is skipped, and the table says so.  Every
variant must return the same JSON as ``plain`` (checked before timing: a
difference stops the run).  The variants run in alternating rounds
(``--rounds``; each round runs every shape's every variant ``--requests``
times, after a warm-up); the table gives, per shape and variant, SQL
statements per request, the median and range over the rounds of CPU ms per
request (``time.process_time``), and the median's ratio to ``prefetch``.
Only ratios measured side by side in one run mean anything.

    python tools/bench_rest.py                  # default settings
    python tools/bench_rest.py --quick          # small settings, a few seconds
    python tools/bench_rest.py --json out.json --postgres --shapes nested counting
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable, Optional

import bench_django
from bench_django import add_library_arguments, parsed, setup_django
from bench_orm import fill

VARIANTS = ["plain", "prefetch", "serializer-prefetch", "auto-prefetching", "switch"]
SHAPES = ["nested", "filtered", "counting", "source", "run-time"]
#: The package each optional variant needs.
PACKAGES = {"serializer-prefetch": ("serializer_prefetch", "drf-serializer-prefetch"),
            "auto-prefetching": ("django_auto_prefetching", "django-auto-prefetching")}


def serializers_for(shape: str) -> dict[str, Any]:
    """*shape*'s serializers: ``top`` (what the list serializes), ``prefetch``'s own ``top`` where the method
    must read a ``to_attr`` list, the queryset ``root`` and ``by_hand``, what ``prefetch`` adds to it."""
    from books import models
    from django.db.models import Prefetch
    from rest_framework import serializers

    class ReviewSerializer(serializers.ModelSerializer):
        class Meta:
            model = models.Review
            fields = ["rating"]

    class BookSerializer(serializers.ModelSerializer):
        class Meta:
            model = models.Book
            fields = ["title"]

    class BookReviewsSerializer(serializers.ModelSerializer):
        reviews = ReviewSerializer(many=True)

        class Meta:
            model = models.Book
            fields = ["title", "reviews"]

    authors = models.Author.objects.order_by("id")
    if shape == "nested":
        class NestedAuthorSerializer(serializers.ModelSerializer):
            books = BookReviewsSerializer(many=True)

            class Meta:
                model = models.Author
                fields = ["name", "books"]

        return {"top": NestedAuthorSerializer, "root": authors, "by_hand": ("books__reviews",)}
    if shape == "filtered":
        def later(books: Any) -> Any:
            return books.exclude(title__endswith=".0").order_by("-title")

        class FilteredAuthorSerializer(serializers.ModelSerializer):
            later_books = serializers.SerializerMethodField()

            class Meta:
                model = models.Author
                fields = ["name", "later_books"]

            def get_later_books(self, obj: Any) -> Any:
                return BookSerializer(later(obj.books), many=True).data

        class FilteredByHandSerializer(FilteredAuthorSerializer):
            def get_later_books(self, obj: Any) -> Any:
                return BookSerializer(obj.later_books_list, many=True).data

        return {"top": FilteredAuthorSerializer, "prefetch_top": FilteredByHandSerializer, "root": authors,
                "by_hand": (Prefetch("books", queryset=later(models.Book.objects), to_attr="later_books_list"),)}
    if shape == "counting":
        class CountingAuthorSerializer(serializers.ModelSerializer):
            book_count = serializers.SerializerMethodField()

            class Meta:
                model = models.Author
                fields = ["name", "book_count"]

            def get_book_count(self, obj: Any) -> int:
                return obj.books.count()

        return {"top": CountingAuthorSerializer, "root": authors, "by_hand": ("books",)}
    if shape == "source":
        class SourceReviewSerializer(serializers.ModelSerializer):
            book_title = serializers.CharField(source="book.title")
            author_name = serializers.CharField(source="book.author.name")

            class Meta:
                model = models.Review
                fields = ["rating", "book_title", "author_name"]

        # by hand, a dotted path of to-one hops is a join: select_related, not a prefetch per hop
        return {"top": SourceReviewSerializer, "root": models.Review.objects.order_by("id"),
                "by_hand": (), "by_hand_joined": ("book__author",)}
    if shape == "run-time":
        class RunTimeAuthorSerializer(serializers.ModelSerializer):
            books = serializers.SerializerMethodField()

            class Meta:
                model = models.Author
                fields = ["name", "books"]

            def get_books(self, obj: Any) -> Any:
                chosen = BookReviewsSerializer if obj.id % 2 else BookSerializer
                return chosen(obj.books.all(), many=True).data

        return {"top": RunTimeAuthorSerializer, "root": authors, "by_hand": ("books__reviews",)}
    raise ValueError(f"unknown shape {shape!r}")


def request_for(variant: str, shape: str) -> Callable[[], Any]:
    """One request of *variant* on *shape*: the serialized list."""
    from dataloader_sync.rest_framework import batched_data

    made = serializers_for(shape)
    top, root = made["top"], made["root"]
    if variant == "plain":
        return lambda: top(root.all(), many=True).data
    if variant == "prefetch":
        by_hand = made.get("prefetch_top", top)
        lookups, joined = made["by_hand"], made.get("by_hand_joined", ())
        planned = root.select_related(*joined) if joined else root
        return lambda: by_hand(planned.prefetch_related(*lookups), many=True).data
    if variant == "serializer-prefetch":
        from serializer_prefetch import PrefetchingSerializerMixin

        planned = type(f"Prefetching{top.__name__}", (PrefetchingSerializerMixin, top), {})
        return lambda: planned(root.all(), many=True).data
    if variant == "auto-prefetching":
        import django_auto_prefetching

        return lambda: top(django_auto_prefetching.prefetch(root.all(), top), many=True).data
    if variant == "switch":
        return lambda: batched_data(top(root.all(), many=True))
    raise ValueError(f"unknown variant {variant!r}")


def available(variants: list[str]) -> tuple[list[str], dict[str, str]]:
    """The variants that can run, and why each other one is skipped."""
    running, skipped = [], {}
    for variant in variants:
        module, package = PACKAGES.get(variant, (None, None))
        if module is not None and importlib.util.find_spec(module) is None:
            skipped[variant] = f"{package} is not installed (pip install {package})"
        else:
            running.append(variant)
    return running, skipped


def run(args: argparse.Namespace) -> dict[str, Any]:
    setup_django(["books"], os.path.join("examples", "django_project"), args.database)
    fill(args.authors, args.books, args.reviews)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    variants, skipped = available(args.variants)
    if "plain" not in variants:
        variants.insert(0, "plain")  # the reference every variant's data is checked against
    requests = {(shape, variant): request_for(variant, shape) for shape in args.shapes for variant in variants}
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for shape in args.shapes:
        reference = None
        for variant in variants:
            request = requests[shape, variant]
            with CaptureQueriesContext(connection) as queries:
                data = json.dumps(request())
            if reference is None:
                reference = data
            elif data != reference:
                raise RuntimeError(f"{shape}: {variant} answered differently from plain REST framework")
            rows[shape, variant] = {"shape": shape, "variant": variant, "sql_per_request": len(queries),
                                    "cpu_ms_per_request_rounds": []}
            for _ in range(args.warmup):
                request()
    for _ in range(args.rounds):
        for key, request in requests.items():
            start = time.process_time()
            for _ in range(args.requests):
                request()
            rows[key]["cpu_ms_per_request_rounds"].append((time.process_time() - start) * 1000 / args.requests)
    for (shape, _), row in rows.items():
        rounds = row["cpu_ms_per_request_rounds"]
        row["cpu_ms_per_request"] = statistics.median(rounds)
        row["cpu_ms_min"], row["cpu_ms_max"] = min(rounds), max(rounds)
        base = rows.get((shape, "prefetch"))
        row["ratio_to_prefetch"] = (row["cpu_ms_per_request"] / statistics.median(base["cpu_ms_per_request_rounds"])
                                    if base is not None else None)
    import django
    import rest_framework

    return {
        "settings": {"authors": args.authors, "books_per_author": args.books, "reviews_per_book": args.reviews,
                     "requests_per_round": args.requests, "rounds": args.rounds, "warmup": args.warmup},
        "environment": {"python": platform.python_version(), "django": django.get_version(),
                        "djangorestframework": rest_framework.VERSION, "database": connection.vendor},
        "skipped": skipped,
        "rows": list(rows.values()),
    }


def table(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [(f"{s['authors']} authors x {s['books_per_author']} books x {s['reviews_per_book']} reviews; "
              f"{s['rounds']} rounds x {s['requests_per_round']} requests per variant; {report['environment']}"),
             "| shape | variant | SQL / request | CPU ms / request (median) | min-max | vs prefetch |",
             "|---|---|---|---|---|---|"]
    for row in report["rows"]:
        ratio = "-" if row["ratio_to_prefetch"] is None else f"{row['ratio_to_prefetch']:.2f}x"
        lines.append(f"| {row['shape']} | {row['variant']} | {row['sql_per_request']} | "
                     f"{row['cpu_ms_per_request']:.2f} | {row['cpu_ms_min']:.2f}-{row['cpu_ms_max']:.2f} | {ratio} |")
    for variant, why in report["skipped"].items():
        lines.append(f"skipped {variant}: {why}")
    return "\n".join(lines)


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_library_arguments(p)
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=VARIANTS)
    p.add_argument("--shapes", nargs="+", choices=SHAPES, default=SHAPES)
    return parsed(p, argv)


def main(argv: Optional[list[str]] = None) -> int:
    return bench_django.main(parse_args(argv), run, table, "bench_rest")


if __name__ == "__main__":
    sys.exit(main())
