"""CPU per request of a three-level graphene-django relay query: related loaders against prefetch by hand.

The query (the example project's ``books`` app, in-memory SQLite, data made here):

    { authors(first: A) { edges { node { name
        books(first: 3) { edges { node { title
          reviews(first: 2) { edges { node { rating } } } } } } } } } }

served by three schemas, one request after another on this thread, the
variants interleaved round by round so that their ratios hold on a noisy
machine:

  loaders     dataloader_sync.django's DjangoConnectionField, resolvers returning
              related_loader(...).load(parent), DataLoaderExecutionContext: the page's
              rows per parent in the batch (ROW_NUMBER), one statement per level
  prefetch    graphene-django's DjangoConnectionField, resolvers returning the relation's
              queryset, the root queryset with prefetch_related("books__reviews") written
              by hand (every book and review is fetched, graphene-django slices the cache)
  n-plus-one  graphene-django's DjangoConnectionField, resolvers returning the relation's
              queryset, nothing prefetched (one count and one page per parent)

Columns: process CPU per request (``time.process_time``, median of the rounds,
milliseconds) and SQL statements per request.  The database is in memory, so
the CPU is that of Python, graphene and the ORM, the I/O left out.

    python tools/bench_connections.py                   # 50 authors, 5 books each, 4 reviews per book
    python tools/bench_connections.py --authors 200 --rounds 5
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time
from typing import Any, Callable

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "django_project"))


def setup(authors: int, books: int, reviews: int) -> None:
    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["graphene_django", "books"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField", USE_TZ=True,
        GRAPHENE={"RELAY_CONNECTION_MAX_LIMIT": 10_000})
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from books.models import Author, Book, Review

    Author.objects.all().delete()
    made = Author.objects.bulk_create([Author(name=f"author {a}") for a in range(authors)])
    made_books = Book.objects.bulk_create([Book(title=f"book {a}.{b}", author=author)
                                           for a, author in enumerate(made) for b in range(books)])
    Review.objects.bulk_create([Review(book=book, rating=1 + r % 5) for book in made_books for r in range(reviews)])


def schemas() -> dict[str, Any]:
    import graphene
    from books.models import Author, Book, Review
    from graphene import relay
    from graphene_django import DjangoObjectType
    from graphene_django.fields import DjangoConnectionField as StockField

    from dataloader_sync.django import DjangoConnectionField, related_loader

    def make(suffix: str, field: Callable[..., Any], books: Callable[..., Any], reviews: Callable[..., Any],
             authors: Callable[..., Any]) -> Any:
        class ReviewNode(DjangoObjectType):
            class Meta:
                model = Review
                fields = ("id", "rating")
                interfaces = (relay.Node,)
                name = f"Review{suffix}"
                skip_registry = True

        class BookNode(DjangoObjectType):
            class Meta:
                model = Book
                fields = ("id", "title")
                interfaces = (relay.Node,)
                name = f"Book{suffix}"
                skip_registry = True

            reviews_page = field(ReviewNode, name="reviews")

            def resolve_reviews_page(book: Any, info: Any, **kwargs: Any) -> Any:
                return reviews(book, info)

        class AuthorNode(DjangoObjectType):
            class Meta:
                model = Author
                fields = ("id", "name")
                interfaces = (relay.Node,)
                name = f"Author{suffix}"
                skip_registry = True

            books_page = field(BookNode, name="books")

            def resolve_books_page(author: Any, info: Any, **kwargs: Any) -> Any:
                return books(author, info)

        class Query(graphene.ObjectType):
            authors_page = field(AuthorNode, name="authors")

            def resolve_authors_page(root: Any, info: Any, **kwargs: Any) -> Any:
                return authors()

        return graphene.Schema(query=Query)

    ordered = Author.objects.order_by("id")
    return {
        "loaders": make("L", DjangoConnectionField,
                        lambda a, info: related_loader(info.context.loaders, Author.books).load(a),
                        lambda b, info: related_loader(info.context.loaders, Book.reviews).load(b),
                        lambda: ordered.all()),
        "prefetch": make("P", StockField, lambda a, info: a.books.all(), lambda b, info: b.reviews.all(),
                         lambda: ordered.prefetch_related("books__reviews")),
        "n-plus-one": make("N", StockField, lambda a, info: a.books.all(), lambda b, info: b.reviews.all(),
                           lambda: ordered.all()),
    }


class Request:
    def __init__(self) -> None:
        from dataloader_sync import DataLoaderRegistry

        self.loaders = DataLoaderRegistry()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--authors", type=int, default=50)
    parser.add_argument("--books", type=int, default=5)
    parser.add_argument("--reviews", type=int, default=4)
    parser.add_argument("--requests", type=int, default=20, help="requests per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    setup(options.authors, options.books, options.reviews)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from dataloader_sync.graphql import DataLoaderExecutionContext

    query = ("{ authors(first: AUTHORS) { edges { node { name books(first: 3) { edges { node { title "
             "reviews(first: 2) { edges { node { rating } } } } } } } } } }").replace("AUTHORS", str(options.authors))
    variants = schemas()
    expected = None
    statements: dict[str, int] = {}
    for name, schema in variants.items():  # a warm-up request each, checked against the others
        with CaptureQueriesContext(connection) as queries:
            result = schema.execute(query, context_value=Request(), execution_context_class=DataLoaderExecutionContext)
        assert result.errors is None, result.errors
        expected = expected or result.data
        assert result.data == expected, name
        statements[name] = len(queries.captured_queries)
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(options.rounds):
        for name, schema in variants.items():
            start = time.process_time()
            for _ in range(options.requests):
                schema.execute(query, context_value=Request(), execution_context_class=DataLoaderExecutionContext)
            cpu[name].append((time.process_time() - start) / options.requests * 1000)
    print(f"{options.authors} authors x {options.books} books x {options.reviews} reviews; pages 3 books, 2 reviews;"
          f" {options.rounds} rounds of {options.requests} requests per variant, interleaved")
    print(f"{'variant':<12} {'CPU ms/request (median)':>24} {'SQL statements/request':>24}")
    for name in variants:
        print(f"{name:<12} {statistics.median(cpu[name]):>24.2f} {statements[name]:>24}")


if __name__ == "__main__":
    main()
