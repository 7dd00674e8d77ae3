"""Breaker: skip a failing shared cache for a cool-down, then let one call probe it.

A value cache that times out costs every request its client's timeout budget
for as long as the outage lasts.  A ``Breaker`` in front of it turns that
into one budget per cool-down per process: after a failed call, every
loader of the process skips the cache (its keys go straight to the batch
function, its writes are dropped) until ``cool_down`` seconds have passed;
then one call goes through as a probe.  A probe that works closes the
breaker; one that fails opens it for another cool-down.

States (``_state``, guarded by ``_lock``)::

    CLOSED --failure--> OPEN --cool_down passed, a caller asks--> PROBING
    PROBING --success--> CLOSED      PROBING --failure--> OPEN
    PROBING --no answer within cool_down (the probe was lost)--> PROBING (a new probe)

Guarantees:
- ``allow()`` costs one attribute read when the breaker is closed (the
  common case) and never blocks; the lock is held only to move the state.
- One WARNING (with the failure's traceback) when the breaker opens, one
  INFO when it closes; failed probes are logged at DEBUG only.
- No user code runs here; logging happens after the lock is released.
- ``live_breakers()`` lists the breakers alive in the process (held weakly),
  for gauges such as ``dataloader.value_cache.breaker_open``.
- After ``os.fork()`` the child's locks are new (a parent thread may have
  held one at the fork); the state is kept (the outage is the same).
"""
from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Callable

from ._time import seconds

__all__ = ["Breaker", "live_breakers"]

_LOGGER = logging.getLogger("dataloader_sync")

CLOSED, OPEN, PROBING = "closed", "open", "probing"

_live: weakref.WeakSet[Breaker] = weakref.WeakSet()
_live_lock = threading.Lock()  # guards _live (a WeakSet is not safe to iterate while another thread adds)


def live_breakers() -> list[Breaker]:
    """The breakers alive in this process, in no particular order.

    Returns:
        A new list (strong references: drop it when done).
    """
    with _live_lock:
        return list(_live)


class Breaker:
    """A circuit breaker for one shared cache (thread-safe).

    Args:
        name: what logs and gauges call it; ``RedisValueCache`` and
            ``DjangoValueCache`` use their ``prefix``.
        cool_down: seconds (or a ``timedelta``) the cache is skipped after a
            failure, > 0.
        clock: a monotonic clock in seconds (injected by tests).

    Raises:
        TypeError, ValueError: a bad ``name`` or ``cool_down``.
    """

    __slots__ = ("name", "cool_down", "_clock", "_lock", "_state", "_until", "__weakref__")

    def __init__(self, name: str, cool_down: float = 5.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        self.name = name
        self.cool_down = seconds("cool_down", cool_down, positive=True)
        self._clock = clock
        self._lock = threading.Lock()  # guards _state and _until
        self._state = CLOSED
        self._until = 0.0  # OPEN: when a probe may go; PROBING: when the probe counts as lost
        with _live_lock:
            _live.add(self)

    def __repr__(self) -> str:
        return f"Breaker({self.name!r}, cool_down={self.cool_down!r})"

    @property
    def is_open(self) -> bool:
        """True from a failure until a probe works (the cache is being skipped)."""
        return self._state is not CLOSED

    def allow(self) -> bool:
        """May the caller use the cache now?  True when closed, or for the one probe.

        A caller that gets True must report ``succeeded()`` or ``failed()``.
        """
        if self._state is CLOSED:  # a racy read is fine: a call that slips through reports its outcome
            return True
        now = self._clock()
        with self._lock:
            if self._state is CLOSED:
                return True
            if now < self._until:
                return False
            self._state, self._until = PROBING, now + self.cool_down
            return True

    def succeeded(self) -> None:
        """A call worked: close the breaker (INFO once, if it was open)."""
        if self._state is CLOSED:
            return
        with self._lock:
            was, self._state = self._state, CLOSED
        if was is not CLOSED:
            _LOGGER.info("value cache %r works again: its breaker closed", self.name)

    def failed(self, exc: BaseException, what: str = "a call") -> None:
        """A call failed: open the breaker for ``cool_down`` seconds (WARNING once, when it opens)."""
        now = self._clock()
        with self._lock:
            was, self._state, self._until = self._state, OPEN, now + self.cool_down
        if was is CLOSED:
            _LOGGER.warning(
                "value cache %r failed in %s: its breaker opened; for %g s no loader of this process uses it "
                "(keys load from the batch function, writes are skipped), then one call probes it",
                self.name, what, self.cool_down, exc_info=(type(exc), exc, exc.__traceback__))
        else:
            _LOGGER.debug("value cache %r: probe failed in %s (%s); closed for %g s more",
                          self.name, what, exc, self.cool_down)


def _after_fork_in_child() -> None:
    global _live_lock
    _live_lock = threading.Lock()
    for breaker in list(_live):  # the child has one thread: no lock needed, no user code run
        breaker._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
