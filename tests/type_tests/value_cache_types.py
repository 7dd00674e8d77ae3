"""ValueCache: a typed user's own value cache, given to a DataLoader (its types still inferred)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typing_extensions import assert_type

from dataloader_sync import MISSING, Breaker, DataLoader, Future, Statistics, ValueCache


class Book:
    title: str = "Dune"


class DictValueCache(ValueCache[int, Book]):
    def __init__(self) -> None:
        self.data: dict[int, Book] = {}

    def get_values(self, keys: Sequence[int]) -> list[Any]:  # a Book or MISSING per key
        return [self.data.get(k, MISSING) for k in keys]

    def set_values(self, keys: Sequence[int], values: Sequence[Book]) -> None:
        self.data.update(zip(keys, values))

    def delete(self, key: int) -> None:
        self.data.pop(key, None)

    def clear(self) -> None:
        self.data.clear()


def load_books(ids: list[int]) -> list[Book]:
    return [Book() for _ in ids]


shared = DictValueCache()
books = DataLoader(load_books, value_cache=shared)
assert_type(books.load(1), "Future[Book]")
fut: Future[Book] = books.load(2)

shared.breaker = Breaker("books", cool_down=2.0)  # the breaker in front of a cache of one's own
shared.breaker = None  # or none
assert_type(Breaker("b").is_open, bool)
assert_type(Breaker("b").name, str)



def first_title(cache: ValueCache[int, Book]) -> str:
    entry = cache.get_values([1])[0]
    if entry is MISSING:  # MISSING is an enum member: `is` narrows
        return ""
    assert_type(entry, Book)
    return entry.title


stats = books.statistics()
assert_type(stats, Statistics)
assert_type(stats.value_cache_hit_count, int)
assert_type(stats.value_cache_miss_count, int)
assert_type(stats.value_cache_hit_ratio, float)


class NearDictValueCache(DictValueCache):
    """A value cache with a tier of its own in the process: loaders ask it at load time."""

    def __init__(self) -> None:
        super().__init__()
        self.near: dict[int, Book] = {}

    def get_local_values(self, keys: Sequence[int]) -> list[Any]:  # a Book or MISSING per key, from memory
        return [self.near.get(k, MISSING) for k in keys]


near_books = DataLoader(load_books, value_cache=NearDictValueCache())
assert_type(near_books.load(1), "Future[Book]")
