"""Durations and clocks: the one rule for every delay a user gives.

Every delay, period, interval, schedule, back-off and timeout of the package
goes through ``seconds()``, so they all accept and refuse the same things.

Guarantees:
- A delay is a number of seconds (``int`` or ``float``, never a ``bool``) or
  a ``datetime.timedelta``; anything else is a ``TypeError`` naming the
  parameter.
- It is finite: NaN, infinities and integers too large for a float are a
  ``ValueError`` naming the parameter.  With ``positive=True`` it must also
  be > 0; otherwise a negative delay is allowed (callers read it as "now").
- ``wait_timeout()`` bounds a checked delay by ``threading.TIMEOUT_MAX``, so
  a very long (but finite) delay waits "for ever" instead of raising
  ``OverflowError`` inside a lock or a ``Condition.wait``.
- A clock (or any other callable argument) is checked by
  ``check_callable()`` at once, instead of failing later on a background
  thread; a clock's first reading is checked by ``check_clock()`` (a clock
  returning NaN would make every due time silently never come).
"""
from __future__ import annotations

import datetime
import math
import threading
from typing import Any, Callable, Union

__all__ = ["Clock", "Delay", "check_callable", "check_clock", "seconds", "wait_timeout"]

#: Seconds, or a ``timedelta``.
Delay = Union[float, int, datetime.timedelta]

#: Returns the current time in seconds (``time.monotonic`` by default).
Clock = Callable[[], float]


def seconds(name: str, value: Delay, *, positive: bool = False) -> float:
    """Return *value* as a float number of seconds, checked.

    Args:
        name: the parameter's name, for the error message.
        value: seconds or a ``datetime.timedelta``.
        positive: refuse a value <= 0.

    Returns:
        The seconds, finite (and > 0 with ``positive``).

    Raises:
        TypeError: *value* is not a number (a bool is not one) nor a timedelta.
        ValueError: *value* is NaN, infinite, too large for a float, or <= 0
            with ``positive``.
    """
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds or a timedelta")
    try:
        result = float(value)
    except OverflowError:  # an int beyond the float range
        raise ValueError(f"{name} must be finite (got an int too large for a float)") from None
    if math.isnan(result) or math.isinf(result):
        raise ValueError(f"{name} must be finite")
    if positive and result <= 0:
        raise ValueError(f"{name} must be > 0")
    return result


def wait_timeout(delay: float) -> float:
    """A checked delay, bounded so that ``Lock.acquire``/``Condition.wait`` accept it."""
    return min(delay, threading.TIMEOUT_MAX)


def check_callable(name: str, value: Any) -> Any:
    """Return *value* if it is callable (a clock, a factory, ...).

    Raises:
        TypeError: it is not, e.g. ``clock=None`` or ``clock=5``.
    """
    if not callable(value):
        raise TypeError(f"{name} must be callable")
    return value


def check_clock(name: str, clock: Any) -> float:
    """Check that *clock* is callable and that its reading is a finite number; return the reading.

    Raises:
        TypeError: *clock* is not callable, or returns something other than
            an ``int``/``float`` (a bool is not one).
        ValueError: it returns NaN or an infinity.
    """
    check_callable(name, clock)
    now = clock()
    if isinstance(now, bool) or not isinstance(now, (int, float)):
        raise TypeError(f"{name} must return a number of seconds, got {type(now).__name__}")
    if math.isnan(now) or math.isinf(now):
        raise ValueError(f"{name} must return a finite number of seconds, got {now!r}")
    return float(now)
