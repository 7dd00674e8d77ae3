"""Schedules for ``PeriodicRefresher(next_reload=...)``: when the next reload is due.

A schedule is any callable ``next_reload(now) -> seconds`` (or a
``timedelta``), called after each successful load with the wall-clock time;
``daily_at`` is the one the package ships ("every day at 05:00").  The
refresher itself measures time on a monotonic clock; only schedules read the
wall clock, through ``local_now`` (its default ``wall_clock``).

Guarantees:
- ``daily_at(h, m)(now)`` is the number of seconds until the next ``h:m``
  strictly after ``now``, counted in real elapsed time (a daylight-saving
  change between the two is honoured).
- Arguments are checked when the schedule is made, not inside the first
  reload on a background thread.
"""
from __future__ import annotations

import datetime

__all__ = ["daily_at", "local_now"]


def local_now() -> datetime.datetime:
    """The current wall-clock time, timezone-aware, in the local zone."""
    return datetime.datetime.now().astimezone()


class daily_at:
    """A ``next_reload`` schedule: every day at ``hour:minute``.

    ``daily_at(5)(now)`` is the number of seconds from ``now`` until the next
    05:00 strictly after it (a reload at 05:00 sharp waits for tomorrow's).
    With ``tz``, the hour is read in that zone; otherwise in ``now``'s own
    zone (the local zone with the refresher's default wall clock). Seconds are
    counted in real elapsed time, so a daylight-saving change is honoured.

    Args:
        hour: 0-23.
        minute: 0-59.
        tz: a ``datetime.tzinfo`` (e.g. ``zoneinfo.ZoneInfo("Europe/Paris")``),
            not a zone name.

    Raises:
        TypeError: ``hour`` or ``minute`` is not an int, or ``tz`` is not a
            ``tzinfo`` (a string such as ``"Europe/Paris"`` included).
        ValueError: ``hour`` or ``minute`` is out of range.
    """

    def __init__(self, hour: int, minute: int = 0, tz: datetime.tzinfo | None = None) -> None:
        for name, value in (("hour", hour), ("minute", minute)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int")
        if tz is not None and not isinstance(tz, datetime.tzinfo):
            hint = f" (e.g. zoneinfo.ZoneInfo({tz!r}))" if isinstance(tz, str) else ""
            raise TypeError(f"tz must be a datetime.tzinfo or None{hint}")
        if not 0 <= hour <= 23:
            raise ValueError("hour must be in 0..23")
        if not 0 <= minute <= 59:
            raise ValueError("minute must be in 0..59")
        self.hour, self.minute, self.tz = hour, minute, tz

    def __call__(self, now: datetime.datetime) -> float:
        if self.tz is not None:
            now = now.astimezone(self.tz)
        target = now.replace(hour=self.hour, minute=self.minute, second=0, microsecond=0)
        if target <= now:
            target += datetime.timedelta(days=1)  # same wall time tomorrow
        if now.tzinfo is None:
            return (target - now).total_seconds()
        # Aware datetimes sharing a tzinfo subtract as wall times; go through
        # UTC so that a daylight-saving change between now and target counts.
        utc = datetime.timezone.utc
        return (target.astimezone(utc) - now.astimezone(utc)).total_seconds()

    def __repr__(self) -> str:
        tz = f", tz={self.tz!r}" if self.tz is not None else ""
        return f"daily_at({self.hour}, {self.minute}{tz})"
