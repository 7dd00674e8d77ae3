"""DataLoaderRegistry: named loaders, dispatched together."""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, ItemsView, Iterator, KeysView, List, Optional, TypeVar, ValuesView

from ._dataloader import DataLoader
from ._statistics import Statistics

__all__ = ["DataLoaderRegistry"]

_R = TypeVar("_R", bound="DataLoaderRegistry")


class DataLoaderRegistry:
    """Loaders by name, typically one registry (and so one cache) per request.

    ``dispatch_all()`` visits the loaders in registration order; loads queued by
    callbacks while it runs may be included or left to the next dispatch.

    Thread-safe: registering, looking up and dispatching may happen on any
    threads at once; a dispatch sees a snapshot of the loaders.
    """

    def __init__(self) -> None:
        # _lock guards changes of _loaders; readers use _loaders as it is
        # (a dict read is atomic) or a snapshot of it, so dispatch never holds it.
        self._lock = threading.Lock()
        self._loaders: Dict[str, DataLoader] = {}
        self._closed = False  # OPEN -> CLOSED, once; written under _lock

    # -- lifecycle ---------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Mark the registry closed (idempotent).

        A plain registry schedules nothing, so this only records the state;
        ``ScheduledDataLoaderRegistry.close()`` also cancels its pending tasks.
        Loaders keep working, and ``dispatch_all()`` still dispatches.
        Integrations call it when a request ends, whatever the registry type.
        """
        with self._lock:
            self._closed = True

    def __enter__(self: _R) -> _R:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- registration ------------------------------------------------------------
    def register(self, name: str, loader: DataLoader) -> "DataLoaderRegistry":
        """Register *loader* under *name* (replacing any loader of that name).

        Raises:
            TypeError: *name* is not a str, or *loader* is not a DataLoader.
        """
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        if not isinstance(loader, DataLoader):
            raise TypeError("loader must be a DataLoader")
        with self._lock:
            self._loaders[name] = loader
        return self

    def unregister(self, name: str) -> "DataLoaderRegistry":
        """Remove the loader named *name*, if any."""
        with self._lock:
            self._loaders.pop(name, None)
        return self

    def compute_if_absent(self, name: str, factory: Callable[[str], DataLoader]) -> DataLoader:
        """Return the loader named *name*, registering ``factory(name)`` first if absent.

        The factory runs outside the lock; if two threads race, the first
        registration wins and both get that loader.

        Raises:
            TypeError: *name* is not a str, *factory* is not callable, or it
            returned something other than a DataLoader.
        """
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        loader = self._loaders.get(name)
        if loader is not None:
            return loader
        if not callable(factory):
            raise TypeError("factory must be callable")
        made = factory(name)
        with self._lock:
            loader = self._loaders.get(name)
            if loader is None:
                if not isinstance(made, DataLoader):
                    raise TypeError("factory must return a DataLoader")
                self._loaders[name] = loader = made
        return loader

    def __getitem__(self, name: str) -> DataLoader:
        return self._loaders[name]

    def get(self, name: str, default: Optional[DataLoader] = None) -> Optional[DataLoader]:
        return self._loaders.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._loaders

    def __len__(self) -> int:
        return len(self._loaders)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._loaders))

    def keys(self) -> KeysView[str]:
        return dict(self._loaders).keys()

    def values(self) -> ValuesView[DataLoader]:
        return dict(self._loaders).values()

    def items(self) -> ItemsView[str, DataLoader]:
        return dict(self._loaders).items()

    def _snapshot(self) -> List[Any]:
        return list(self._loaders.items())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} loaders={len(self._loaders)}>"

    # -- dispatching ---------------------------------------------------------------
    def dispatch_all(self) -> None:
        """Dispatch every loader."""
        self.dispatch_all_with_count()

    def dispatch_all_with_count(self) -> int:
        """Dispatch every loader; return how many keys were sent."""
        return sum(loader.dispatch_count() for _, loader in self._snapshot())

    @property
    def dispatch_depth(self) -> int:
        """Keys queued over all loaders."""
        return sum(loader.dispatch_depth for _, loader in self._snapshot())

    def statistics(self) -> Statistics:
        """The sum of every loader's statistics."""
        total = Statistics()
        for _, loader in self._snapshot():
            total = total + loader.statistics()
        return total
