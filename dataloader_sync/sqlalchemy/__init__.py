"""SQLAlchemy 2.0 ORM integration: batch functions and loaders for relationships and models.

- ``load_related(instances, attribute, session=None)`` batch-loads a
  relationship attribute (many-to-one, one-to-many, many-to-many through
  ``secondary``, one-to-one) in at most one statement per batch;
  ``related_loader(registry, attribute, session=None)`` is its loader in a
  registry (``registry.loader_for(load_related, ...)``).
- ``load_model(values, Model, field="pk", session=...)`` and
  ``model_loader(registry, Model, field="pk", session=...)`` load instances
  by a column.

Importing this package installs an ``after_begin`` listener on
``sqlalchemy.orm.Session`` that records which thread began a session's
transaction (see the guide, "Sessions and threads").

Needs SQLAlchemy 2.0 (``pip install "dataloader_sync[sqlalchemy]"``).
"""
from __future__ import annotations

try:
    import sqlalchemy as _sqlalchemy
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dataloader_sync.sqlalchemy needs SQLAlchemy 2.0: pip install \"dataloader_sync[sqlalchemy]\""
    ) from exc

if int(_sqlalchemy.__version__.split(".")[0]) < 2:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"dataloader_sync.sqlalchemy needs SQLAlchemy 2.0 or later (found {_sqlalchemy.__version__}): "
        "pip install \"dataloader_sync[sqlalchemy]\""
    )

from ._loaders import model_loader as model_loader
from ._loaders import related_loader as related_loader
from ._models import load_model as load_model
from ._related import load_related as load_related

__all__ = ["load_model", "load_related", "model_loader", "related_loader"]
