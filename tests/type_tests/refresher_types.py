"""PeriodicRefresher[T]: the value type comes from the load function."""
from __future__ import annotations

import datetime

from typing_extensions import assert_type

from dataloader_sync import Future, PeriodicRefresher, daily_at, refreshed_every


def load_rates() -> dict[str, float]:
    return {"EUR": 1.0}


rates = PeriodicRefresher(load_rates, datetime.timedelta(minutes=10))
assert_type(rates, PeriodicRefresher[dict[str, float]])
assert_type(rates.get(), dict[str, float])
assert_type(rates(), dict[str, float])
assert_type(rates.refresh(), dict[str, float])
assert_type(rates.request_refresh(), Future[dict[str, float]])
assert_type(rates.request_refresh().then(lambda table: table["EUR"]), Future[float])

nightly = PeriodicRefresher(load_rates, 3600, next_reload=daily_at(5), failure_backoff=60.0)
assert_type(nightly, PeriodicRefresher[dict[str, float]])


@refreshed_every(600)
def postal_codes() -> dict[str, str]:
    return {"75001": "Paris"}


assert_type(postal_codes, PeriodicRefresher[dict[str, str]])
assert_type(postal_codes(), dict[str, str])

PeriodicRefresher(load_rates, "10 minutes")  # type: ignore[arg-type]
