"""dataloader_sync: batching and caching of loads for sync Python.

The core imports only the standard library; ``dataloader_sync.graphql``,
``dataloader_sync.flask`` and ``dataloader_sync.django`` are integrations,
imported only when used.
"""
from __future__ import annotations

#: The distribution's version (setup.cfg reads it from here: one source).
__version__ = "0.1.0"

from ._auto import no_auto_relations as no_auto_relations
from ._core import MISSING as MISSING
from ._core import BatchLoaderEnvironment as BatchLoaderEnvironment
from ._core import BatchLoadError as BatchLoadError
from ._core import Breaker as Breaker
from ._core import DataLoader as DataLoader
from ._core import DispatchResult as DispatchResult
from ._core import Future as Future
from ._core import Statistics as Statistics
from ._core import ValueCache as ValueCache
from ._core import completed_future as completed_future
from ._core import failed_future as failed_future
from ._core import gather as gather
from ._core import live_breakers as live_breakers
from ._executor import ScheduledExecutor as ScheduledExecutor
from ._executor import get_default_scheduled_executor as get_default_scheduled_executor
from ._executor_statistics import ExecutorStatistics as ExecutorStatistics
from ._executor_statistics import TimingStatistics as TimingStatistics
from ._gc import tune_gc as tune_gc
from ._instrumentation import ChainedInstrumentation as ChainedInstrumentation
from ._instrumentation import DataLoaderInstrumentation as DataLoaderInstrumentation
from ._instrumentation import (
    DataLoaderInstrumentationContext as DataLoaderInstrumentationContext,
)
from ._pool import PoolStatistics as PoolStatistics
from ._predicates import DISPATCH_ALWAYS as DISPATCH_ALWAYS
from ._predicates import DISPATCH_NEVER as DISPATCH_NEVER
from ._predicates import DispatchPredicate as DispatchPredicate
from ._predicates import (
    dispatch_if_depth_greater_than as dispatch_if_depth_greater_than,
)
from ._predicates import dispatch_if_longer_than as dispatch_if_longer_than
from ._refresher import PeriodicRefresher as PeriodicRefresher
from ._refresher import RefresherStatistics as RefresherStatistics
from ._refresher import refreshed_every as refreshed_every
from ._registry import DataLoaderRegistry as DataLoaderRegistry
from ._scheduled_registry import (
    ScheduledDataLoaderRegistry as ScheduledDataLoaderRegistry,
)
from ._schedules import daily_at as daily_at
from ._timer import ScheduledFuture as ScheduledFuture
from ._worker import RestartableWorker as RestartableWorker
from ._worker import WorkerState as WorkerState

__all__ = [
    "BatchLoadError",
    "BatchLoaderEnvironment",
    "Breaker",
    "ChainedInstrumentation",
    "DISPATCH_ALWAYS",
    "DISPATCH_NEVER",
    "DataLoader",
    "DataLoaderInstrumentation",
    "DataLoaderInstrumentationContext",
    "DataLoaderRegistry",
    "DispatchPredicate",
    "DispatchResult",
    "ExecutorStatistics",
    "Future",
    "MISSING",
    "PeriodicRefresher",
    "PoolStatistics",
    "RefresherStatistics",
    "RestartableWorker",
    "ScheduledDataLoaderRegistry",
    "ScheduledExecutor",
    "ScheduledFuture",
    "Statistics",
    "TimingStatistics",
    "ValueCache",
    "WorkerState",
    "completed_future",
    "daily_at",
    "dispatch_if_depth_greater_than",
    "dispatch_if_longer_than",
    "failed_future",
    "gather",
    "get_default_scheduled_executor",
    "live_breakers",
    "no_auto_relations",
    "refreshed_every",
    "tune_gc",
]
