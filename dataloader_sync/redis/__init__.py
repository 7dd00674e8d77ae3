"""Redis integration: ``RedisValueCache``, a ``ValueCache`` over redis-py.

Needs redis-py (``pip install "dataloader_sync[redis]"``).
"""
from __future__ import annotations

try:
    import redis as _redis  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("dataloader_sync.redis needs redis-py: pip install \"dataloader_sync[redis]\"") from exc

from ._value_cache import RedisValueCache as RedisValueCache

__all__ = ["RedisValueCache"]
