"""Frozen statistics snapshots of a ScheduledExecutor, and the bounded windows behind them."""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any, Optional

from ._pool import PoolStatistics

__all__ = ["ExecutorStatistics", "TimingStatistics"]

WINDOW = 1000  # samples kept per measure: mean, max and p99 are over the most recent ones


@dataclasses.dataclass(frozen=True)
class TimingStatistics:
    """One measure (in seconds) of a ScheduledExecutor's task runs.

    Fields:
        count: samples over the executor's life.
        mean, max, p99: over the most recent 1,000 samples (0.0 with none).
    """

    count: int = 0
    mean: float = 0.0
    max: float = 0.0
    p99: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ExecutorStatistics:
    """What a ScheduledExecutor has done, as of the ``statistics()`` call that made it.

    Fields:
        tasks_run: task runs finished (each run of a periodic task counts).
        tasks_failed: runs that raised.
        slow_tasks: runs longer than ``slow_task_threshold``.
        pending: tasks waiting for their time (``pending_count``).
        queued: tasks due and handed over, not started (``queued_count``).
        queue_wait: due time (or ``submit()``) -> start of the run.
        run_time: start -> end of the run.
        timer_lateness: due time -> hand-over, the timer's own delay (scheduled tasks only).
        pool: the owned pool's threads (``None`` with a given executor).

    Snapshots do not add up (a p99 cannot be summed): there is no ``+``.
    """

    tasks_run: int = 0
    tasks_failed: int = 0
    slow_tasks: int = 0
    pending: int = 0
    queued: int = 0
    queue_wait: TimingStatistics = TimingStatistics()
    run_time: TimingStatistics = TimingStatistics()
    timer_lateness: TimingStatistics = TimingStatistics()
    pool: Optional[PoolStatistics] = None

    @property
    def failure_ratio(self) -> float:
        """``tasks_failed / tasks_run``, 0.0 before any run."""
        return self.tasks_failed / self.tasks_run if self.tasks_run else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict of plain values (nested dicts for timings and the pool)."""
        return dataclasses.asdict(self)


class Window:
    """A measure's count over all time and its most recent samples.  Not thread-safe."""

    __slots__ = ("count", "samples")

    def __init__(self) -> None:
        self.count = 0
        self.samples: collections.deque[float] = collections.deque(maxlen=WINDOW)

    def add(self, seconds: float) -> None:
        self.count += 1
        self.samples.append(seconds)

    def snapshot(self) -> TimingStatistics:
        samples = sorted(self.samples)
        if not samples:
            return TimingStatistics(count=self.count)
        p99 = samples[max(0, math.ceil(0.99 * len(samples)) - 1)]
        return TimingStatistics(self.count, sum(samples) / len(samples), samples[-1], p99)
