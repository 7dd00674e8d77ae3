"""OpenTelemetry metrics of a ScheduledExecutor: queued tasks, pool threads, queue wait.

Guarantees:
- ``instrument_executor(executor=None, meter_provider=None)`` (the default
  executor when None) reports, with the attribute ``dataloader.executor.name``:
  observable gauges ``dataloader.executor.tasks.queued`` (unit ``{task}``:
  tasks due and handed to the pool, not started: ``queued_count``) and
  ``dataloader.executor.pool.threads`` (unit ``{thread}``, with
  ``dataloader.executor.thread.state`` ``"busy"`` or ``"idle"``: the owned
  pool's threads; none for a given executor, whose threads are its own), and
  the histogram ``dataloader.executor.queue_wait`` (unit ``s``: due time, or
  ``submit()``, to the start of each task run; the ticks of registries and
  the batch calls of ``executor=`` loaders included).
- Idempotent per executor: instrumenting an instrumented executor returns
  the handle it has (whatever *meter_provider*).  ``handle.uninstrument()``
  stops every report of it (idempotent); then it may be instrumented again.
- The gauges exist once per meter and report every executor instrumented
  with that meter, so several executors share one meter provider (the SDK
  keeps the first callback registered under a name).
- Queue wait comes from the executor's run observer (``add_run_observer``):
  one histogram record per task run, on the thread that ran it, outside the
  executor's lock.  An executor not instrumented pays one attribute test per
  run.
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import Any, Optional

from opentelemetry.metrics import CallbackOptions, Histogram, Meter, MeterProvider, Observation

from .._executor import ScheduledExecutor, get_default_scheduled_executor
from ._metrics import get_meter, histogram

__all__ = ["ExecutorInstrumentation", "instrument_executor"]

QUEUE_WAIT_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

# _lock guards _handles and every _MeterInstruments.executors; gauge
# callbacks take a snapshot under it and read the executors outside it.
_lock = threading.Lock()
_handles: weakref.WeakKeyDictionary[ScheduledExecutor, ExecutorInstrumentation] = weakref.WeakKeyDictionary()


class _MeterInstruments:
    """The executor instruments of one meter, and the executors they report."""

    def __init__(self, meter: Meter) -> None:
        self.executors: dict[int, ExecutorInstrumentation] = {}  # by id(handle)
        self.queue_wait = histogram(
            meter, "dataloader.executor.queue_wait", "s",
            "Time a ScheduledExecutor task waited for a pool thread (due time or submit to start).",
            QUEUE_WAIT_BUCKETS)
        meter.create_observable_gauge(
            "dataloader.executor.tasks.queued", callbacks=[self._queued], unit="{task}",
            description="ScheduledExecutor tasks that are due and handed to the pool, not started yet.")
        meter.create_observable_gauge(
            "dataloader.executor.pool.threads", callbacks=[self._threads], unit="{thread}",
            description="Threads of a ScheduledExecutor's own pool, by state (busy or idle).")

    def _live(self) -> list[tuple[ScheduledExecutor, dict[str, str]]]:
        with _lock:
            handles = list(self.executors.values())
        live = []
        for handle in handles:
            executor = handle.executor
            if executor is not None:
                live.append((executor, handle.attributes))
        return live

    def _queued(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(executor.queued_count, attributes) for executor, attributes in self._live()]

    def _threads(self, options: CallbackOptions) -> Iterable[Observation]:
        observations = []
        for executor, attributes in self._live():
            pool = executor.statistics().pool
            if pool is None:  # a given executor: its threads are not ours to count
                continue
            for state, count in (("busy", pool.busy_threads), ("idle", pool.idle_threads)):
                observations.append(Observation(count, {**attributes, "dataloader.executor.thread.state": state}))
        return observations


_meters: weakref.WeakKeyDictionary[Any, _MeterInstruments] = weakref.WeakKeyDictionary()  # guarded by _lock


class ExecutorInstrumentation:
    """The handle ``instrument_executor`` returns: ``uninstrument()`` undoes it.

    Thread-safe.
    """

    def __init__(self, executor: ScheduledExecutor, instruments: _MeterInstruments) -> None:
        self._executor = weakref.ref(executor)  # the meter's callbacks must not keep it alive
        self._instruments = instruments
        self.attributes = {"dataloader.executor.name": executor.name}
        self._queue_wait: Histogram = instruments.queue_wait
        self._active = True  # written under _lock

    @property
    def executor(self) -> Optional[ScheduledExecutor]:
        """The executor, while it is alive and instrumented; else None."""
        return self._executor() if self._active else None

    @property
    def active(self) -> bool:
        return self._active

    def _observe(self, queue_wait: float, run_time: float) -> None:
        self._queue_wait.record(max(queue_wait, 0.0), self.attributes)

    def uninstrument(self) -> None:
        """Stop reporting this executor (gauges and histogram).  Idempotent."""
        with _lock:
            if not self._active:
                return
            self._active = False
            self._instruments.executors.pop(id(self), None)
            executor = self._executor()
            if executor is not None and _handles.get(executor) is self:
                del _handles[executor]
        if executor is not None:
            executor.remove_run_observer(self._observe)

    def __repr__(self) -> str:
        state = "active" if self._active else "uninstrumented"
        return f"<ExecutorInstrumentation {self.attributes['dataloader.executor.name']} {state}>"


def instrument_executor(executor: Optional[ScheduledExecutor] = None,
                        meter_provider: Optional[MeterProvider] = None) -> ExecutorInstrumentation:
    """Report *executor*'s queued tasks, pool threads and queue wait as OpenTelemetry metrics.

    See the module notes for the instruments.

    Args:
        executor: a ``ScheduledExecutor``; None: the process-wide default one
            (``get_default_scheduled_executor()``), which registries and
            ticks use unless given another.
        meter_provider: where the meter comes from; None: the global one.

    Returns:
        The executor's handle (the same one while it stays instrumented);
        its ``uninstrument()`` undoes this.

    Raises:
        TypeError: *executor* is not a ScheduledExecutor, or *meter_provider*
            has no ``get_meter``.
    """
    if executor is None:
        executor = get_default_scheduled_executor()
    elif not isinstance(executor, ScheduledExecutor):
        raise TypeError(f"executor must be a ScheduledExecutor or None, got {type(executor).__name__}")
    meter = get_meter(meter_provider)
    with _lock:  # the SDK calls nothing of ours while instruments are created
        handle = _handles.get(executor)
        if handle is not None:
            return handle
        instruments = _meters.get(meter)
        if instruments is None:
            instruments = _meters[meter] = _MeterInstruments(meter)
        handle = ExecutorInstrumentation(executor, instruments)
        instruments.executors[id(handle)] = handle
        _handles[executor] = handle
    executor.add_run_observer(handle._observe)
    return handle
