"""Tests for dataloader_sync._schedules (daily_at)."""
from __future__ import annotations

import datetime

import pytest

from dataloader_sync._schedules import daily_at, local_now

PARIS = pytest.importorskip("zoneinfo").ZoneInfo("Europe/Paris")


def test_daily_at_counts_seconds_until_the_next_occurrence():
    at5 = daily_at(5)
    utc = datetime.timezone.utc
    assert at5(datetime.datetime(2024, 5, 1, 4, 0, tzinfo=utc)) == 3600.0
    assert at5(datetime.datetime(2024, 5, 1, 5, 0, tzinfo=utc)) == 86400.0  # strictly after
    assert at5(datetime.datetime(2024, 5, 1, 23, 0, tzinfo=utc)) == 6 * 3600.0
    assert daily_at(5, 30)(datetime.datetime(2024, 5, 1, 5, 0)) == 1800.0  # naive works too
    assert repr(daily_at(5, 30)) == "daily_at(5, 30)"


def test_daily_at_honours_time_zone_and_daylight_saving():
    # Paris moves from +01:00 to +02:00 at 02:00 on 2024-03-31.
    saturday_6am = datetime.datetime(2024, 3, 30, 6, 0, tzinfo=PARIS)
    assert daily_at(5)(saturday_6am) == 22 * 3600.0  # a 23-hour day
    noon_utc = datetime.datetime(2024, 7, 1, 12, 0, tzinfo=datetime.timezone.utc)
    assert daily_at(5, tz=PARIS)(noon_utc) == 15 * 3600.0  # 14:00 in Paris


@pytest.mark.parametrize("hour, minute", [(-1, 0), (24, 0), (5, 60), (5, -1)])
def test_daily_at_rejects_out_of_range(hour, minute):
    with pytest.raises(ValueError, match="hour|minute"):
        daily_at(hour, minute)


def test_local_now_is_aware_and_in_the_local_zone():
    now = local_now()
    assert now.tzinfo is not None
    assert now.utcoffset() == datetime.datetime.now().astimezone().utcoffset()
