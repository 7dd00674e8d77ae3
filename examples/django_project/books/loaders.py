"""The request's loaders: each batch function is one SQL query, whatever the number of keys.

``make_registry`` is named by the ``DATALOADER_SYNC_REGISTRY_FACTORY`` setting;
``DataLoaderMiddleware`` calls it once per request, so every request starts
with empty caches and no request sees another's rows.
"""
from collections import defaultdict
from collections.abc import Sequence
from typing import Optional

from django.conf import settings

from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry
from dataloader_sync.django import DjangoValueCache

from .models import Author, Book, Review

try:  # a span per batch call when OpenTelemetry is installed (a no-op until an SDK is configured)
    from dataloader_sync.otel import OpenTelemetryInstrumentation
except ImportError:
    INSTRUMENTATION = None
else:
    INSTRUMENTATION = OpenTelemetryInstrumentation()


def load_authors(ids: Sequence[int]) -> dict[int, Author]:
    """Authors by id (a mapping: a missing id loads as None)."""
    return {author.id: author for author in Author.objects.filter(id__in=ids)}


def load_books(ids: Sequence[int]) -> dict[int, Book]:
    """Books by id."""
    return {book.id: book for book in Book.objects.filter(id__in=ids)}


def load_books_by_author(author_ids: Sequence[int]) -> list[list[Book]]:
    """Each author's books, in id order (an empty list for an author without books)."""
    by_author: dict[int, list[Book]] = defaultdict(list)
    for book in Book.objects.filter(author_id__in=author_ids).order_by("id"):
        by_author[book.author_id].append(book)
    return [by_author[author_id] for author_id in author_ids]


def load_reviews_by_book(book_ids: Sequence[int]) -> list[list[Review]]:
    """Each book's reviews, in id order."""
    by_book: dict[int, list[Review]] = defaultdict(list)
    for review in Review.objects.filter(book_id__in=book_ids).order_by("id"):
        by_book[review.book_id].append(review)
    return [by_book[book_id] for book_id in book_ids]


def value_cache(name: str) -> Optional[DjangoValueCache]:
    """Loader *name*'s shared value cache, when the ``BOOKS_VALUE_CACHE`` setting names a cache.

    Off by default.  With ``BOOKS_VALUE_CACHE = "default"`` (an alias of
    ``CACHES``), rows one request loaded are served to the next requests — of
    every process using that cache — for ``BOOKS_VALUE_CACHE_TTL`` seconds,
    without SQL.  Nothing here depends on who asks, so the keys need no user.
    """
    alias = getattr(settings, "BOOKS_VALUE_CACHE", None)
    if not alias:
        return None
    return DjangoValueCache(alias, prefix=f"books:{name}:", ttl=getattr(settings, "BOOKS_VALUE_CACHE_TTL", 60))


def make_registry(request) -> ScheduledDataLoaderRegistry:
    """A new registry with fresh loaders for *request*.

    No executor and no ticker mode: batch functions run on the request thread,
    where Django's database connection lives.
    """
    registry = ScheduledDataLoaderRegistry(instrumentation=INSTRUMENTATION)
    for name, batch_fn in (("author", load_authors), ("book", load_books),
                           ("books_by_author", load_books_by_author), ("reviews_by_book", load_reviews_by_book)):
        registry.register(name, DataLoader(batch_fn, name=name, value_cache=value_cache(name)))
    return registry
