"""The test mode: a statement that REST framework runs once per row, while it serializes, raises.

With the Django setting ``DATALOADER_SYNC_REST_FRAMEWORK_STRICT = True`` (a
test's settings, ``override_settings``), ``rows_checked()`` wraps REST
framework's own serializing pass — after the walk loaded what it could —
in a ``connection.execute_wrapper`` on every database connection this
thread has opened.  A statement runs once per row when its SQL (with its
placeholders, not its parameters) runs again for another row; it then
raises ``PerRowStatementError`` naming the statement.  The row of a run is:

- what the statement reads a row of, when the in-place seam
  (``dataloader_sync.django._inplace``) saw it run as written: the related
  manager's instance (``author.books.count()``) or the instance whose
  to-one read missed its cache, else the relation or primary key values its
  ``WHERE`` compares at the top (``Review.objects.filter(book=book)``: the
  book's key) (``_inplace.row_of``);
- else (it names none: django-taggit's ``obj.tags.all()``, raw SQL) the
  instance its serializer was serializing (each serializer of the tree
  tells its instance while the pass runs: ``to_representation`` wrapped on
  the serializer objects for the pass).

So a field reading a relation row by row (a method's ``obj.books.filter(...)``,
a property, a field in ``Meta.no_auto_relations``, django-taggit's
``obj.tags.all()``) raises at the second instance of its level, and a method
querying a model once per row it iterates (``Review.objects.filter(book=b)``
for each book) raises at the second row; one object's fields running one
query with different constants (``Thumbnail.objects.get(original=self,
size=...)`` for three sizes: one original, three sizes) do not, nor a
statement run again for the same row from another serializer (one user's
token read for a board's submitter and again for its cover pin's); the
same row read for two instances of one serializer (instances of a level
that share a key, each reading it as written) is per row.  The walk's batches, the
in-place seam's level loads (``InPlace.loading``) and the futures settled
after the pass are not checked.

Guarantees:
- Off (the default), it costs one settings read per serialization.
- The wrappers are Django's documented ``execute_wrapper`` hook and the
  serializer objects' own attribute, removed when the pass ends, raising or
  not; per call state only.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Callable, Optional

from django.conf import settings
from django.db import connections
from django.db.models import Model
from rest_framework.serializers import ListSerializer, Serializer

from ..django import _inplace

__all__ = ["SETTING", "PerRowStatementError", "rows_checked"]

#: The Django setting that turns the test mode on.
SETTING = "DATALOADER_SYNC_REST_FRAMEWORK_STRICT"
_NONE: Any = object()  # a serializer without a to_representation of its own


class PerRowStatementError(AssertionError):
    """A statement ran once per row while REST framework serialized, under ``DATALOADER_SYNC_REST_FRAMEWORK_STRICT``."""


class _Once:
    """An ``execute_wrapper`` that refuses a statement run again for another row (see the module notes)."""

    __slots__ = ("kept", "seen", "serializer", "serializing", "state")

    def __init__(self, serializer: str, state: Optional[_inplace.InPlace]) -> None:
        self.serializer = serializer
        self.state = state  # the in-place seam's, watching its rows; None without one
        #: SQL -> the rows it ran for -> {id(the serializer): id(the instance it serialized then)}
        self.seen: dict[str, dict[Any, dict[int, int]]] = {}
        self.serializing: list[tuple[int, Any]] = []  # (id(a serializer), its instance), innermost last
        self.kept: list[Any] = []  # the instances a row names by identity, alive for the pass (ids not reused)

    def row(self) -> tuple[Any, int, int]:
        """The row of the statement running now (what it reads a row of, else the instance serialized),
        the serializer serializing and its instance."""
        serializer, current = self.serializing[-1] if self.serializing else (0, None)
        self.kept.append(current)
        asking = None if self.state is None else self.state.asking
        if isinstance(asking, Model):
            self.kept.append(asking)
            return ("instance", id(asking)), serializer, id(current)
        if asking is not None:
            return ("keys", asking), serializer, id(current)
        return ("serializing", id(current)), serializer, id(current)

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        state = self.state
        if state is not None and state.loading:  # a level's load: the seam's batch
            return execute(sql, params, many, context)
        row, serializer, current = self.row()
        rows = self.seen.get(sql)
        if rows is None:
            self.seen[sql] = {row: {serializer: current}}
            return execute(sql, params, many, context)
        by_serializer = rows.get(row)
        # another row, or the same one for another instance of the same serializer (a level's instances
        # that share a key, read one by one); the same row from elsewhere (another level) is not per row
        if by_serializer is None or by_serializer.setdefault(serializer, current) != current:
            raise PerRowStatementError(
                f"{self.serializer} ran this statement once per row while REST framework serialized "
                f"({SETTING} is on): a relation read row by row, which dataloader_sync.rest_framework cannot "
                f"batch (see docs/rest-framework.rst): {sql}")
        return execute(sql, params, many, context)


class _Telling:
    """A serializer's ``to_representation`` for the pass: tells the test mode the instance it serializes."""

    __slots__ = ("method", "once", "serializer")

    def __init__(self, serializer: Any, once: _Once) -> None:
        self.method = serializer.to_representation
        self.serializer = id(serializer)
        self.once = once

    def __call__(self, instance: Any) -> Any:
        serializing = self.once.serializing
        serializing.append((self.serializer, instance))
        try:
            return self.method(instance)
        finally:
            serializing.pop()


def _tell_instances(serializer: Any, once: _Once, stack: contextlib.ExitStack, seen: set[int]) -> None:
    """Wrap the ``to_representation`` of *serializer*'s nested serializers (and theirs) for the pass."""
    if id(serializer) in seen:
        return
    seen.add(id(serializer))
    for field in serializer.fields.values():
        nested = field.child if isinstance(field, ListSerializer) else field
        if isinstance(nested, Serializer):
            _tell(nested, once, stack)
            _tell_instances(nested, once, stack, seen)


def _tell(serializer: Any, once: _Once, stack: contextlib.ExitStack) -> None:
    own = serializer.__dict__.get("to_representation", _NONE)
    serializer.to_representation = _Telling(serializer, once)

    def restore() -> None:
        if own is _NONE:
            serializer.__dict__.pop("to_representation", None)
        else:
            serializer.to_representation = own

    stack.callback(restore)


@contextlib.contextmanager
def rows_checked(serializer: Any, instance: Any) -> Iterator[None]:
    """The test mode around REST framework's serializing pass of *serializer* over *instance*, if the
    setting is on."""
    if not getattr(settings, SETTING, False):
        yield
        return
    child = getattr(serializer, "child", None)
    state = _inplace.watch_rows()
    once = _Once(f"{type(child).__name__}(many=True)" if child is not None else type(serializer).__name__, state)
    with contextlib.ExitStack() as stack:
        if state is not None:
            stack.callback(_inplace.unwatch_rows, state)
        top = child if child is not None else serializer
        if isinstance(top, Serializer):
            if child is not None:
                _tell(child, once, stack)
            else:
                # REST framework's pass calls its class's method, not the attribute: told here
                once.serializing.append((id(serializer), instance))
            _tell_instances(top, once, stack, set())
        for connection in connections.all(initialized_only=True):
            stack.enter_context(connection.execute_wrapper(once))
        yield
