"""Helpers shared by the value-cache tests (test_value_cache, test_redis, test_django_value_cache)."""
from __future__ import annotations

import logging
from typing import Any

from dataloader_sync import DataLoader

TIMEOUT = 10.0


def load_all(loader: DataLoader, keys: list[Any]) -> list[Any]:
    """``load_many(keys, return_exceptions=True)``, dispatched: the values, or the exceptions, of ``keys``."""
    many = loader.load_many(keys, return_exceptions=True)
    loader.dispatch()
    return many.result(TIMEOUT)


def warnings_of(caplog: Any) -> list[logging.LogRecord]:
    """The WARNING records the library's logger ("dataloader_sync") left in ``caplog``."""
    return [r for r in caplog.records if r.name == "dataloader_sync" and r.levelno == logging.WARNING]
