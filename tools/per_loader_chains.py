"""java-dataloader 6.0.0's ticker design, modelled for contrast (tools only, not the library).

In 6.0.0, ``ScheduledDataLoaderRegistry.dispatchAll()`` calls
``dispatchOrReschedule`` for every loader, and in ticker mode that reschedules
a task for that loader whatever the predicate said; each task, when it runs,
does the same.  So every ``dispatchAll()`` starts one more self-rescheduling
chain per loader, and the chains already running keep going:

    private void reschedule(String key, DataLoader<?, ?> dataLoader) {
        if (!closed) {
            Runnable runThis = () -> dispatchOrReschedule(key, dataLoader);
            scheduledExecutorService.schedule(runThis, schedule.toMillis(), TimeUnit.MILLISECONDS);
        }
    }
    ... if (tickerMode || !shouldDispatch) { reschedule(key, dataLoader); }

``PerLoaderChainsRegistry`` reproduces exactly that on top of this library's
``ScheduledDataLoaderRegistry`` (same predicates, same executor), so
``tools/repro.py`` and ``tools/bench.py`` can measure both designs side by side.
"""
from __future__ import annotations

from dataloader_sync import DataLoader, ScheduledDataLoaderRegistry

__all__ = ["PerLoaderChainsRegistry"]


class PerLoaderChainsRegistry(ScheduledDataLoaderRegistry):
    """A registry with java-dataloader 6.0.0's per-loader reschedule chains."""

    def dispatch_all_with_count(self) -> int:
        return sum(self._dispatch_or_reschedule(name, loader) for name, loader in self._snapshot())

    def reschedule_now(self) -> None:
        for name, loader in self._snapshot():
            self._reschedule(name, loader)

    def _reschedule(self, name: str, loader: DataLoader) -> None:
        if not self.closed:
            self.scheduled_executor.schedule(self._dispatch_or_reschedule, self.schedule, name, loader)

    def _dispatch_or_reschedule(self, name: str, loader: DataLoader) -> int:
        count = 0
        should_dispatch = self._should_dispatch(name, loader)
        if should_dispatch:
            count = loader.dispatch_count()
        if self.ticker_mode or not should_dispatch:
            self._reschedule(name, loader)
        return count
