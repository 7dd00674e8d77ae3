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
It uses the registry's public interface only: it remembers the predicates it
is given, as java-dataloader's registry does, and asks them itself.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from dataloader_sync import DISPATCH_ALWAYS, DataLoader, ScheduledDataLoaderRegistry

Predicate = Callable[[str, Any], bool]

__all__ = ["PerLoaderChainsRegistry"]


class PerLoaderChainsRegistry(ScheduledDataLoaderRegistry):
    """A registry with java-dataloader 6.0.0's per-loader reschedule chains."""

    def __init__(self, *, dispatch_predicate: Predicate = DISPATCH_ALWAYS, **options: Any) -> None:
        super().__init__(dispatch_predicate=dispatch_predicate, **options)
        self._chain_default = dispatch_predicate
        self._chain_predicates: dict[str, Predicate] = {}

    def register(self, name: str, loader: DataLoader, predicate: Optional[Predicate] = None
                 ) -> PerLoaderChainsRegistry:
        super().register(name, loader, predicate)
        if predicate is None:
            self._chain_predicates.pop(name, None)
        else:
            self._chain_predicates[name] = predicate
        return self

    def unregister(self, name: str) -> PerLoaderChainsRegistry:
        super().unregister(name)
        self._chain_predicates.pop(name, None)
        return self

    def dispatch_all_with_count(self) -> int:
        return sum(self._dispatch_or_reschedule(name, loader) for name, loader in self.items())

    def reschedule_now(self) -> None:
        for name, loader in self.items():
            self._reschedule(name, loader)

    def _chain_should_dispatch(self, name: str, loader: DataLoader) -> bool:
        predicate = self._chain_predicates.get(name, self._chain_default)
        try:
            return bool(predicate(name, loader))
        except Exception:  # as the library's registry: logged, and "not now"
            logging.getLogger("dataloader_sync").exception("dispatch predicate %r raised for %r", predicate, name)
            return False

    def _reschedule(self, name: str, loader: DataLoader) -> None:
        if not self.closed:
            self.scheduled_executor.schedule(self._dispatch_or_reschedule, self.schedule, name, loader)

    def _dispatch_or_reschedule(self, name: str, loader: DataLoader) -> int:
        count = 0
        should_dispatch = self._chain_should_dispatch(name, loader)
        if should_dispatch:
            count = loader.dispatch_count()
        if self.ticker_mode or not should_dispatch:
            self._reschedule(name, loader)
        return count
