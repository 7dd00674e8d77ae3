"""The test mode: a statement that REST framework runs once per row, while it serializes, raises.

With the Django setting ``DATALOADER_SYNC_REST_FRAMEWORK_STRICT = True`` (a
test's settings, ``override_settings``), ``rows_checked()`` wraps REST
framework's own serializing pass — after the walk loaded what it could —
in a ``connection.execute_wrapper`` on every database connection this
thread has opened: the first time a statement's SQL (with its placeholders,
not its parameters) runs a second time during the pass, it raises
``PerRowStatementError`` naming the statement.  That is the signature of a
relation read row by row: a field the walk cannot follow (a method reading
``obj.books.filter(...)``, a property, a field in ``Meta.no_auto_relations``).
The walk's batches and the futures settled after the pass are not checked.

Guarantees:
- Off (the default), it costs one settings read per serialization.
- The wrappers are Django's documented ``execute_wrapper`` hook, removed when
  the pass ends, raising or not; per call state only.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Callable

from django.conf import settings
from django.db import connections

__all__ = ["SETTING", "PerRowStatementError", "rows_checked"]

#: The Django setting that turns the test mode on.
SETTING = "DATALOADER_SYNC_REST_FRAMEWORK_STRICT"


class PerRowStatementError(AssertionError):
    """A statement ran once per row while REST framework serialized, under ``DATALOADER_SYNC_REST_FRAMEWORK_STRICT``."""


class _Once:
    """An ``execute_wrapper`` that refuses a statement's second run."""

    __slots__ = ("seen", "serializer")

    def __init__(self, serializer: str) -> None:
        self.serializer = serializer
        self.seen: set[str] = set()

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if sql in self.seen:
            raise PerRowStatementError(
                f"{self.serializer} ran this statement once per row while REST framework serialized "
                f"({SETTING} is on): a relation read row by row, which dataloader_sync.rest_framework cannot "
                f"batch (see docs/rest-framework.rst): {sql}")
        self.seen.add(sql)
        return execute(sql, params, many, context)


@contextlib.contextmanager
def rows_checked(serializer: Any) -> Iterator[None]:
    """The test mode around REST framework's serializing pass of *serializer*, if the setting is on."""
    if not getattr(settings, SETTING, False):
        yield
        return
    child = getattr(serializer, "child", None)
    once = _Once(f"{type(child).__name__}(many=True)" if child is not None else type(serializer).__name__)
    with contextlib.ExitStack() as stack:
        for connection in connections.all(initialized_only=True):
            stack.enter_context(connection.execute_wrapper(once))
        yield
