"""Auto relations against the other ways of serving relations from graphene-django, side by side in one run.

The test suite's ``orm_library`` models (tests/orm_library: publishers 1-* authors
1-* books *-* tags, books 1-* reviews) on an in-memory SQLite database (or
``--postgres``), filled with ``--authors`` authors x ``--books`` books x
``--reviews`` reviews.  Every variant answers every shape through
``graphene.Schema.execute`` on one thread (no HTTP) and must return the same
data as the first variant:

  n-plus-one   DjangoObjectType fields naming the relations, no resolver written (what a team
               has today without loaders)
  auto         the same schema executed with AutoRelationsExecutionContext
               (what DATALOADER_SYNC_AUTO_RELATIONS = True gives)
  hand-written one related_loader resolver per relation (the documented way before)
  optimizer    graphene-django-optimizer's gql_optimizer.query() in the root resolvers,
               where it is installed (never a dependency: pip install graphene-django-optimizer)
  optimizer-hints  the optimizer with the resolvers written its way: each resolver's rows prefetched by
               a resolver_hints(prefetch_related=Prefetch(..., to_attr=...)) and read back from the
               attribute (the resolver shapes; the other shapes are the optimizer's)
  optimizer+auto  the optimizer's schema executed with AutoRelationsExecutionContext
  fetch-peers  Django's FETCH_PEERS fetch mode on the root querysets, no resolver written
               (Django 6.1 and later; left out, with the reason, on older Django)

Shapes (``--shapes``):

  plain        { authors { name publisher { name } books { title tags { name } reviews { rating } } } }
  joined       { authors { name books { title author { name publisher { name } } } } }
  reverse-m2m  { publishers { name authors { name books { title tags { name } } } } }
  custom       { authors { name recentBooks { title tags { name } } } }  -- recentBooks: a resolver of
               the user's returning a filtered queryset (a related_loader with that queryset in hand-written)
  sliced       { authors { name topTwo { title } } }  -- author.books.order_by("-year")[:2] (hand-written:
               the ordered relation's loader, sliced in Python)
  annotated    { authors { name reviewed { title } } }  -- author.books.annotate(n=Count("reviews"))
               .filter(n__gte=2) (hand-written: a related_loader with that queryset)
  list-field   { authors { name not2001 { title } } }  -- a DjangoListField whose resolver returns
               author.books.exclude(year=2001) (hand-written: a related_loader with that queryset)

Every variant executes as ``dataloader_sync.django.GraphQLView`` does: with
``DjangoDebugExecutionContext``, or ``AutoRelationsExecutionContext`` (which is
one) for ``auto``.  The variants run in alternating rounds (``--rounds`` x ``--requests`` after a
warm-up); the table gives SQL statements per request and the median (and
range) of the rounds' CPU ms per request (``time.process_time``), with the
ratio to ``hand-written``.  Only ratios measured side by side in one run mean
anything.

    python tools/bench_auto.py                 # default settings
    python tools/bench_auto.py --quick         # small settings, a few seconds
    python tools/bench_auto.py --json out.json # the same figures as JSON too
    python tools/bench_auto.py --postgres      # on a PostgreSQL server started for the run
    python tools/bench_auto.py --strawberry-django  # the same shapes on strawberry-django (graphql-core 3.3):
        no extension (n-plus-one), AutoRelationsExtension (auto), DjangoOptimizerExtension (optimizer; with
        optimizer-hints, the resolver shapes' fields written its way: prefetch_related=Prefetch(..., to_attr=...)
        hints read back), both (optimizer+auto)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import sys
import time
from typing import Any, Callable, Optional

import bench_django
from bench_django import Context, add_library_arguments, parsed, setup_django

SHAPES = {
    "plain": "{ authors { name publisher { name } books { title tags { name } reviews { rating } } } }",
    "joined": "{ authors { name books { title author { name publisher { name } } } } }",
    "reverse-m2m": "{ publishers { name authors { name books { title tags { name } } } } }",
    "custom": "{ authors { name recentBooks { title tags { name } } } }",
    "sliced": "{ authors { name topTwo { title } } }",
    "annotated": "{ authors { name reviewed { title } } }",
    "list-field": "{ authors { name not2001 { title } } }",
}
VARIANTS = ["n-plus-one", "auto", "hand-written", "optimizer", "optimizer-hints", "optimizer+auto", "fetch-peers"]
STRAWBERRY_VARIANTS = ["n-plus-one", "auto", "optimizer", "optimizer-hints", "optimizer+auto"]


def fill(authors: int, books: int, reviews: int) -> None:
    from orm_fixtures import fill_library

    fill_library("default", authors=authors, books=books, reviews=reviews, tags=5, publishers=max(2, authors // 10))


def schema_for(variant: str) -> Any:
    """The variant's graphene schema (a graphene-django registry of its own: the types never mix)."""
    import graphene
    from django.db.models import Prefetch
    from graphene_django import DjangoListField, DjangoObjectType
    from graphene_django.registry import Registry
    from orm_library import models

    from dataloader_sync.django import related_loader

    registry = Registry()
    hand = variant == "hand-written"
    optimizer = variant in ("optimizer", "optimizer+auto", "optimizer-hints")
    hints = variant == "optimizer-hints"
    peers = variant == "fetch-peers"
    from django.db.models import Count

    recent = models.Book.objects.filter(year__gte=2001).order_by("pk")
    by_year = models.Book.objects.order_by("-year", "pk")
    reviewed = models.Book.objects.annotate(n=Count("reviews")).filter(n__gte=2).order_by("title", "pk")
    not_2001 = models.Book.objects.exclude(year=2001).order_by("pk")

    def meta(model: Any, fields: tuple[str, ...]) -> type:
        return type("Meta", (), {"model": model, "fields": fields, "registry": registry})

    def loader(field: Any, queryset: Any = None) -> Callable[[Any, Any], Any]:
        def resolve(root: Any, info: Any) -> Any:
            return related_loader(info.context.loaders, field, queryset).load(root)
        return resolve

    extra: dict[str, dict[str, Any]] = {name: {} for name in ("tag", "review", "book", "author", "publisher")}
    if hand:
        extra["book"] = {"resolve_tags": loader(models.Book.tags), "resolve_reviews": loader(models.Book.reviews),
                         "resolve_author": loader(models.Book.author)}
        def resolve_top_two(root: Any, info: Any) -> Any:
            return related_loader(info.context.loaders, models.Author.books, by_year).load(root).then(
                lambda books: books[:2])

        extra["author"] = {"resolve_books": loader(models.Author.books),
                           "resolve_publisher": loader(models.Author.publisher),
                           "resolve_recent_books": loader(models.Author.books, recent),
                           "resolve_top_two": resolve_top_two,
                           "resolve_reviewed": loader(models.Author.books, reviewed),
                           "resolve_not_2001": loader(models.Author.books, not_2001)}
        extra["publisher"] = {"resolve_authors": loader(models.Publisher.authors)}
    elif hints:  # graphene-django-optimizer's way: each resolver's rows prefetched by a hint, read back
        import graphene_django_optimizer as gql_optimizer

        def hinted(attr: str, queryset: Callable[[], Any], post: Callable[[Any], Any] = list) -> Any:
            # a Prefetch per call: the optimizer prefixes the one it is given in place (add_prefix)
            @gql_optimizer.resolver_hints(prefetch_related=lambda info: Prefetch("books", queryset=queryset(),
                                                                                 to_attr=attr))
            def resolve(author: Any, info: Any) -> Any:
                return post(getattr(author, attr))
            return resolve

        extra["author"] = {
            "resolve_recent_books": hinted("recent_rows", lambda: recent.prefetch_related("tags")),
            "resolve_top_two": hinted("top_two_rows", lambda: by_year[:2]),
            "resolve_reviewed": hinted("reviewed_rows", lambda: reviewed),
            "resolve_not_2001": hinted("not_2001_rows", lambda: not_2001)}
    else:  # the resolvers as a team writes them: the relation's queryset, returned
        def resolve_recent_books(author: Any, info: Any) -> Any:
            return author.books.filter(year__gte=2001).order_by("pk")

        def resolve_top_two(author: Any, info: Any) -> Any:
            return author.books.order_by("-year", "pk")[:2]

        def resolve_reviewed(author: Any, info: Any) -> Any:
            return author.books.annotate(n=Count("reviews")).filter(n__gte=2).order_by("title", "pk")

        def resolve_not_2001(author: Any, info: Any) -> Any:
            return author.books.exclude(year=2001).order_by("pk")

        extra["author"] = {"resolve_recent_books": resolve_recent_books, "resolve_top_two": resolve_top_two,
                           "resolve_reviewed": resolve_reviewed, "resolve_not_2001": resolve_not_2001}

    tag = type("Tag", (DjangoObjectType,), {"Meta": meta(models.Tag, ("name",)), **extra["tag"]})
    review = type("Review", (DjangoObjectType,), {"Meta": meta(models.Review, ("rating",)), **extra["review"]})
    publisher_type: dict[str, Any] = {}
    book = type("Book", (DjangoObjectType,), {
        "Meta": meta(models.Book, ("title", "tags", "reviews", "author")),
        **({"tags": graphene.List(graphene.NonNull(tag), required=True),
            "reviews": graphene.List(graphene.NonNull(review), required=True)} if hand else {}),
        **extra["book"]})
    author = type("Author", (DjangoObjectType,), {
        "Meta": meta(models.Author, ("name", "publisher", "books")),
        "recent_books": (graphene.List(graphene.NonNull(book), required=True) if hand or hints
                         else DjangoListField(book, required=True)),
        "top_two": graphene.List(graphene.NonNull(book), required=True),
        "reviewed": graphene.List(graphene.NonNull(book), required=True),
        "not_2001": (graphene.List(graphene.NonNull(book), required=True) if hand or hints
                     else DjangoListField(book, required=True)),
        **({"books": graphene.List(graphene.NonNull(book), required=True)} if hand else {}),
        **extra["author"]})
    publisher = type("Publisher", (DjangoObjectType,), {
        "Meta": meta(models.Publisher, ("name", "authors")),
        **({"authors": graphene.List(graphene.NonNull(author), required=True)} if hand else {}),
        **extra["publisher"]})
    publisher_type["type"] = publisher

    def root(model: Any) -> Callable[[Any, Any], Any]:
        def resolve(root_value: Any, info: Any) -> Any:
            queryset = model.objects.order_by("pk")
            if peers:
                from django.db.models import FETCH_PEERS  # type: ignore[attr-defined]  # Django 6.1+

                return queryset.fetch_mode(FETCH_PEERS)
            if optimizer:
                import graphene_django_optimizer as gql_optimizer

                return gql_optimizer.query(queryset, info)
            return queryset
        return resolve

    query = type("Query", (graphene.ObjectType,), {
        "authors": graphene.List(graphene.NonNull(author), required=True), "resolve_authors": root(models.Author),
        "publishers": graphene.List(graphene.NonNull(publisher), required=True),
        "resolve_publishers": root(models.Publisher)})
    return graphene.Schema(query=query)


def execute(schema: Any, query: str, variant: str) -> Any:
    if not hasattr(schema, "graphql_schema"):  # strawberry
        context = Context()
        try:
            result = schema.execute_sync(query, context_value=context)
        finally:
            context.loaders.close()
        if result.errors:
            raise RuntimeError(f"{variant}: {result.errors[0]}")
        return result.data
    # every variant executes as dataloader_sync.django.GraphQLView does: DjangoDebugExecutionContext,
    # or AutoRelationsExecutionContext (which is one) with the switch on
    from dataloader_sync.django import DjangoDebugExecutionContext
    from dataloader_sync.graphql import AutoRelationsExecutionContext

    context = Context()
    cls = AutoRelationsExecutionContext if variant in ("auto", "optimizer+auto") else DjangoDebugExecutionContext
    try:
        result = schema.execute(query, context_value=context, execution_context_class=cls)
    finally:
        context.loaders.close()
    if result.errors:
        raise RuntimeError(f"{variant}: {result.errors[0]}")
    return result.data


def run(args: argparse.Namespace) -> dict[str, Any]:
    graphene = [] if args.strawberry_django else ["graphene_django"]
    setup_django(["django.contrib.contenttypes", *graphene, "orm_library"], "tests", args.database)
    fill(args.authors, args.books, args.reviews)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if args.strawberry_django:
        variants = STRAWBERRY_VARIANTS
        from bench_auto_strawberry import strawberry_schema_for

        built = {variant: strawberry_schema_for(variant) for variant in variants}
    else:
        left_out = _left_out()
        for variant, reason in left_out.items():
            if variant in args.variants:
                print(f"{variant}: left out ({reason})", file=sys.stderr)
        variants = [v for v in args.variants if v not in left_out]
        built = {variant: schema_for(variant) for variant in variants}
    rows: list[dict[str, Any]] = []
    for shape in args.shapes:
        query = SHAPES[shape]
        reference = None
        shape_rows: dict[str, dict[str, Any]] = {}
        for variant in variants:
            with CaptureQueriesContext(connection) as queries:
                data = json.loads(json.dumps(execute(built[variant], query, variant), sort_keys=True))
            if reference is None:
                reference = data
            elif data != reference:
                raise RuntimeError(f"{shape}: {variant} answered differently from {variants[0]}")
            shape_rows[variant] = {"shape": shape, "variant": variant, "sql_per_request": len(queries),
                                   "cpu_ms_per_request_rounds": []}
            for _ in range(args.warmup):
                execute(built[variant], query, variant)
        for _ in range(args.rounds):
            for variant in variants:
                start = time.process_time()
                for _ in range(args.requests):
                    execute(built[variant], query, variant)
                shape_rows[variant]["cpu_ms_per_request_rounds"].append(
                    (time.process_time() - start) * 1000 / args.requests)
        base_rounds = shape_rows.get("hand-written", shape_rows.get("optimizer", next(iter(shape_rows.values()))))[
            "cpu_ms_per_request_rounds"]
        base = statistics.median(base_rounds)
        for row in shape_rows.values():
            rounds = row["cpu_ms_per_request_rounds"]
            row["cpu_ms_per_request"] = statistics.median(rounds)
            row["cpu_ms_min"], row["cpu_ms_max"] = min(rounds), max(rounds)
            row["ratio"] = row["cpu_ms_per_request"] / base if base else None
            rows.append(row)
    import django

    stack = "strawberry-django" if args.strawberry_django else "graphene-django"
    return {
        "settings": {"authors": args.authors, "books_per_author": args.books, "reviews_per_book": args.reviews,
                     "requests_per_round": args.requests, "rounds": args.rounds, "warmup": args.warmup},
        "environment": {"python": platform.python_version(), "django": django.get_version(), "stack": stack,
                        "database": connection.vendor, "optimizer": "optimizer" in variants},
        "baseline": "optimizer" if args.strawberry_django else "hand-written",
        "rows": rows,
    }


def _left_out() -> dict[str, str]:
    """The variants this environment cannot run, and why."""
    import django
    import django.db.models

    left_out = {}
    if importlib.util.find_spec("graphene_django_optimizer") is None:
        for variant in ("optimizer", "optimizer-hints", "optimizer+auto"):
            left_out[variant] = "graphene-django-optimizer is not installed"
    if not hasattr(django.db.models, "FETCH_PEERS"):
        left_out["fetch-peers"] = f"Django {django.get_version()} has no fetch modes (Django 6.1 has)"
    return left_out


def table(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [(f"{s['authors']} authors x {s['books_per_author']} books x {s['reviews_per_book']} reviews; "
              f"{s['rounds']} rounds x {s['requests_per_round']} requests per variant; {report['environment']}"),
             f"| shape | variant | SQL / request | CPU ms / request (median) | min-max | vs {report['baseline']} |",
             "|---|---|---|---|---|---|"]
    for row in report["rows"]:
        lines.append(f"| {row['shape']} | {row['variant']} | {row['sql_per_request']} | "
                     f"{row['cpu_ms_per_request']:.2f} | {row['cpu_ms_min']:.2f}-{row['cpu_ms_max']:.2f} | "
                     f"{row['ratio']:.2f}x |")
    return "\n".join(lines)


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_library_arguments(p)
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=VARIANTS)
    p.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    p.add_argument("--strawberry-django", action="store_true",
                   help="the strawberry-django variants instead (needs strawberry-django, graphql-core 3.3)")
    return parsed(p, argv)


def main(argv: Optional[list[str]] = None) -> int:
    return bench_django.main(parse_args(argv), run, table, "bench_auto")


if __name__ == "__main__":
    sys.exit(main())
