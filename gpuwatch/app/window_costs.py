"""The cost rows of any window, summed by the store (docs/storage.md#daily-sums).

:func:`window_cost_rows` reads the window's summed samples per UTC day
(:func:`gpuwatch.store.repository_daily.load_daily_samples`), costs them with the analytics'
own :func:`~gpuwatch.analytics.costing.prepare`, and sums the cost model's quantities per
(UTC day, GPU unit, pod): the same figures the hourly rows give, from a few rows per unit and
day. Units that node-level attribution may give to pods are read by the hour instead, since
that attribution follows the pods' start and end times.
"""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Engine

from gpuwatch.analytics.costing import node_level_units, prepare
from gpuwatch.app import rollup
from gpuwatch.domain.durations import DAY_S
from gpuwatch.domain.pricing import PriceBook
from gpuwatch.store import repository
from gpuwatch.store.repository_daily import load_daily_samples


def window_cost_rows(
    engine: Engine,
    pods: pd.DataFrame,
    price_book: PriceBook,
    idle_threshold_ratio: float,
    window: tuple[int, int],
    finished_before_ts: int,
) -> pd.DataFrame:
    """Per (UTC day ``day_ts``, GPU unit, pod) of the window ``[start_ts, end_ts)`` (whole
    hours): the cost model's sums (:data:`~gpuwatch.app.rollup.COST_SUMS`) with unit and pod
    text (:func:`~gpuwatch.app.rollup.cost_sums`).
    ``finished_before_ts``: the hour after the last collected one."""
    start_ts, end_ts = window
    samples = load_daily_samples(engine, start_ts, end_ts, finished_before_ts)
    by_hour = node_level_units(samples, pods)
    if len(by_hour):
        hourly = repository.load_hourly_samples(
            engine, start_ts, end_ts, health=False, gpu_ids=by_hour.tolist()
        )
        kept = samples[~samples["gpu_id"].isin(by_hour)]
        samples = pd.concat([kept, hourly], ignore_index=True)
    rows = rollup.compact(prepare(samples, pods, price_book))
    days = rows["ts"].to_numpy(dtype="int64") // DAY_S * DAY_S
    return rollup.cost_sums(rows, "day_ts", days, idle_threshold_ratio)
