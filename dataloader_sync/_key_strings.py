"""Keys of shared caches: one stable string per loader cache key, the same in every process.

A value cache shared by processes (Redis, Django's cache) needs each cache key
as a string that (1) is the same in every process and every run — so not
``hash()`` (randomized for str) nor a ``repr()`` that holds an address — and
(2) differs for different keys.  ``encode_key`` writes the key as compact
JSON, which keeps the types apart (``1``, ``1.0``, ``true`` and ``"1"``), with
tuples as arrays (``(7, "b")`` -> ``[7,"b"]``), bytes as ``{"b":"<hex>"}`` and
UUIDs as ``{"u":"<uuid>"}``.  Other types are refused: give the loader a
``cache_key_fn`` that maps them to one of these.

Standard library only; the integrations build their store keys on it.
"""
from __future__ import annotations

import json
import uuid
from typing import Any

__all__ = ["encode_key"]

_SUPPORTED = "str, int, float, bool, None, bytes, uuid.UUID or tuples of them"


def _plain(key: Any) -> Any:
    if key is None or isinstance(key, (str, int, float)):  # bool is an int
        return key
    if isinstance(key, tuple):
        return [_plain(part) for part in key]
    if isinstance(key, bytes):
        return {"b": key.hex()}
    if isinstance(key, uuid.UUID):
        return {"u": str(key)}
    raise TypeError(
        f"a shared value cache cannot name a key of type {type(key).__name__}; "
        f"give the loader a cache_key_fn= that returns {_SUPPORTED}"
    )


def encode_key(key: Any) -> str:
    """The key as a compact JSON string, stable across processes; distinct keys give distinct strings.

    Raises:
        TypeError: a key (or part of a tuple key) of another type.
    """
    kind = type(key)
    if kind is int:  # the common keys, without json.dumps' set-up (same text)
        return int.__repr__(key)
    if kind is str:
        return _encode_str(key)
    return json.dumps(_plain(key), separators=(",", ":"), ensure_ascii=False)


_encode_str = json.encoder.encode_basestring  # what json.dumps(str, ensure_ascii=False) writes
