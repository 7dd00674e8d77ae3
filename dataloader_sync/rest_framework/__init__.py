"""Django REST framework: serializers read breadth-first, one statement per relation per level.

- ``AutoRelationsMixin``: listed first in a ``GenericAPIView``'s or a
  viewset's bases (``class AuthorViewSet(AutoRelationsMixin, ModelViewSet)``),
  the serializers its ``get_serializer`` makes load the relations they read
  — nested serializers, ``depth``, ``source="a.b"`` paths, relational fields —
  for every instance of a level in one statement per relation, then the next
  level; relations that methods evaluate in place are answered per level,
  and ``SerializerMethodField`` methods may return loader futures.
- ``batched_data(serializer)``: what ``serializer.data`` returns, serialized
  the same way, for serializers made elsewhere (an ``APIView``, a task).
- ``PerRowStatementError``: what the test mode raises
  (``DATALOADER_SYNC_REST_FRAMEWORK_STRICT = True``) when REST framework runs
  a statement once per row while it serializes.

The output is what REST framework makes without them; nothing of REST
framework is patched.  Importing this package installs the Django auto
relations' ``QuerySet`` seam (``dataloader_sync.django._inplace``), inert
outside a batched serialization.  See ``_views``, ``_walk``, ``_plan``,
``_futures``, ``_alone``, ``_strict`` and ``dataloader_sync.django._level_relations``.

Needs Django REST framework (``pip install "dataloader_sync[rest-framework]"``).
"""
from __future__ import annotations

from .._optional import missing_dependency

try:
    import rest_framework as _rest_framework  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing_dependency("dataloader_sync.rest_framework", exc, "rest-framework") from exc

from ._strict import PerRowStatementError as PerRowStatementError
from ._views import AutoRelationsMixin as AutoRelationsMixin
from ._views import batched_data as batched_data

__all__ = ["AutoRelationsMixin", "PerRowStatementError", "batched_data"]
