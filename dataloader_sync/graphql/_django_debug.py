"""DjangoDebugExecutionContext: graphene-django's ``_debug`` field, right with loaders.

graphene-django's ``DjangoDebugMiddleware`` records the SQL a request runs
from its first resolver until the ``_debug`` field resolves, then stops.
Without loaders that is the end of the request (its resolvers run field by
field, ``_debug`` last when it is asked last).  With loaders, the root
fields resolve first and the batches of every level run after them, when
the execution is idle: ``_debug { sql }`` listed only the statements the root
resolvers ran.

This execution context keeps the root fields whose type is graphene-django's
``DjangoDebug`` out of the root selection set, runs the whole operation (all
levels, all batches, so all their SQL is recorded), and only then executes
those fields: the middleware's ``get_debug_result()`` runs last, stops the
recording and returns every statement.  The fields keep their place in the
response.

Guarantees:
- ``_debug { sql }`` lists every statement the execution ran, in order, the
  batches of every level included; ``_debug { exceptions }`` every error the
  middleware saw.
- Recording stops when the execution ends, also when the root fails or the
  query asks no ``_debug`` (graphene-django's middleware would leave the
  request thread's connections instrumented until a later request's
  ``_debug`` resolves).
- Nothing changes for a schema without graphene-django's ``DjangoDebug``
  type: one schema lookup per root selection set.  The class never imports
  graphene-django (the type is found by name, as the middleware finds it).
- graphene-django runs on graphql-core 3.2 only (graphene 3 requires it);
  on 3.3 this class is ``DataLoaderExecutionContext`` under another name.

It lives in ``graphql/`` (published as ``dataloader_sync.django.DjangoDebugExecutionContext``)
because it is about the order graphql-core executes fields in and needs
nothing of Django's, and because ``AutoRelationsExecutionContext`` extends it
on every stack where graphene-django is installed: ``graphql/`` never imports
``django/``.
"""
from __future__ import annotations

from typing import Any, Optional

from graphql.type import get_named_type

from ._compat import IS_EXECUTOR
from ._execution import DataLoaderExecutionContext

__all__ = ["DjangoDebugExecutionContext"]

#: The name graphene-django gives its debug type (``graphene_django.debug.DjangoDebug``).
DEBUG_TYPE_NAME = "DjangoDebug"


class DjangoDebugExecutionContext(DataLoaderExecutionContext):
    """``DataLoaderExecutionContext`` that completes graphene-django's ``_debug`` field last.

    Use it with graphene-django's ``DjangoDebugMiddleware`` (in
    ``GRAPHENE["MIDDLEWARE"]`` or the view's ``middleware``):
    ``dataloader_sync.django.GraphQLView`` executes with it by default; give
    it to graphene-django's own view as
    ``GraphQLView.as_view(execution_context_class=DjangoDebugExecutionContext)``.
    A ``DjangoDebug`` field at the root of the query or of a mutation is
    executed after every other field, its level's batches and theirs.

    One instance runs one operation, on the calling thread.
    """

    # (root type, root value, deferred fields, response keys in query order), set
    # while the root selection set runs without its debug fields
    _debug_deferred: Optional[tuple[Any, Any, dict[str, Any], list[str]]] = None

    if not IS_EXECUTOR:

        def execute_operation(self, *args: Any) -> Any:
            """graphql-core's root hook: the operation, then its deferred ``DjangoDebug`` fields."""
            try:
                data = super().execute_operation(*args)
                deferred = self._debug_deferred
                if deferred is not None and data is not None:
                    root_type, root_value, fields, order = deferred
                    self._debug_deferred = None
                    debug = DataLoaderExecutionContext.execute_fields(self, root_type, root_value, None, fields)
                    data = {key: debug[key] if key in fields else data[key] for key in order}
                return data
            finally:
                self._debug_deferred = None
                recorder = getattr(self.context_value, "django_debug", None)
                if recorder is not None and callable(getattr(recorder, "disable_instrumentation", None)):
                    recorder.disable_instrumentation()

        def execute_fields(self, parent_type: Any, source_value: Any, path: Any, fields: Any) -> Any:
            """graphql-core's ``execute_fields``; at the root, without the ``DjangoDebug`` fields."""
            if path is None:
                fields = self._defer_debug_fields(parent_type, source_value, fields)
            return super().execute_fields(parent_type, source_value, path, fields)

        def execute_fields_serially(self, parent_type: Any, source_value: Any, path: Any, fields: Any,
                                    *rest: Any) -> Any:
            """graphql-core's ``execute_fields_serially``; at the root, without the ``DjangoDebug`` fields."""
            if path is None:
                fields = self._defer_debug_fields(parent_type, source_value, fields)
            return super().execute_fields_serially(parent_type, source_value, path, fields, *rest)

    def _defer_debug_fields(self, parent_type: Any, source_value: Any, fields: Any) -> Any:
        """*fields* less the ``DjangoDebug`` ones, which are kept for the end of the operation."""
        debug_type = self.schema.get_type(DEBUG_TYPE_NAME)
        if debug_type is None or self._debug_deferred is not None:
            return fields
        deferred: dict[str, Any] = {}
        for response_name, field_nodes in fields.items():
            field_def = parent_type.fields.get(field_nodes[0].name.value)
            if field_def is not None and get_named_type(field_def.type) is debug_type:
                deferred[response_name] = field_nodes
        if not deferred:
            return fields
        self._debug_deferred = (parent_type, source_value, deferred, list(fields))
        return {name: nodes for name, nodes in fields.items() if name not in deferred}
