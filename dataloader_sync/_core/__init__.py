"""The loader and its futures: the only modules that touch their private fields.

``DataLoader``, ``Future`` and the modules around them (the loads, the batch
call, sync on demand, the value-cache tier the batch call drives, and the
process-level basics they stand on: ``_fork``, ``_time``). The rest of the
package sits beside this folder and imports from it; nothing here imports
from beside it (``tests/test_package_structure.py`` checks both, and that no
module outside this folder reads a private attribute of a class defined in
it).
"""

from __future__ import annotations

from ._asyncio_bridge import start_driving as start_driving
from ._asyncio_bridge import stop_driving as stop_driving
from ._batch_shapes import BatchLoaderEnvironment as BatchLoaderEnvironment
from ._batch_shapes import BatchLoadError as BatchLoadError
from ._batch_shapes import DispatchResult as DispatchResult
from ._breaker import Breaker as Breaker
from ._breaker import live_breakers as live_breakers
from ._cache_tier import DEFAULT_COOL_DOWN as DEFAULT_COOL_DOWN
from ._cache_tier import check_negative_ttl as check_negative_ttl
from ._cache_tier import check_prefix as check_prefix
from ._cache_tier import check_ttl_rule as check_ttl_rule
from ._cache_tier import make_breaker as make_breaker
from ._cache_tier import make_single_flight as make_single_flight
from ._cache_tier import ttl_of as ttl_of
from ._compat import CANCELLED as CANCELLED
from ._compat import CANCELLED_AND_NOTIFIED as CANCELLED_AND_NOTIFIED
from ._compat import FINISHED as FINISHED
from ._compat import PENDING as PENDING
from ._compat import RUNNING as RUNNING
from ._compat import loop_getter as loop_getter
from ._dataloader import DataLoader as DataLoader
from ._dispatch_scope import current_scope as current_scope
from ._dispatch_scope import reset_scope as reset_scope
from ._dispatch_scope import set_scope as set_scope
from ._future import Future as Future
from ._future import abandon_in_child as abandon_in_child
from ._future import renew_lock_in_child as renew_lock_in_child
from ._future import settle as settle
from ._gather import gather as gather
from ._instrumentation_seam import DataLoaderInstrumentationContext as DataLoaderInstrumentationContext
from ._instrumentation_seam import begin_batch as begin_batch
from ._instrumentation_seam import begin_dispatch as begin_dispatch
from ._instrumentation_seam import check_instrumentation as check_instrumentation
from ._instrumentation_seam import completed as completed
from ._instrumentation_seam import value_cache_lookup as value_cache_lookup
from ._listeners import left_to_execution as left_to_execution
from ._listeners import registered as registered
from ._listeners import report_queued as report_queued
from ._listeners import unwatch as unwatch
from ._listeners import watch as watch
from ._listeners import watched_by as watched_by
from ._loader_cache import cached_beyond_queue as cached_beyond_queue
from ._loader_cache import watch_next_load as watch_next_load
from ._loader_family import BoundBatch as BoundBatch
from ._loader_family import family_key as family_key
from ._loader_family import family_label as family_label
from ._loader_family import family_options as family_options
from ._new_futures import completed_future as completed_future
from ._new_futures import failed_future as failed_future
from ._new_futures import following as following
from ._statistics import Statistics as Statistics
from ._sync_only import check_sync as check_sync
from ._time import Clock as Clock
from ._time import Delay as Delay
from ._time import check_callable as check_callable
from ._time import check_clock as check_clock
from ._time import seconds as seconds
from ._time import wait_timeout as wait_timeout
from ._types import P as P
from ._types import Values as Values
from ._value_cache import MISSING as MISSING
from ._value_cache import AllFinished as AllFinished
from ._value_cache import FailureLog as FailureLog
from ._value_cache import ValueCache as ValueCache
from ._value_cache import identical as identical

# isort: split
# Last, once every module above is imported: the reference path's switch, which may rebind what they
# bound (see there).
from . import _reference_path as _reference_path
