"""What every analysis reads: the store's frames for a window, the price book and the policy.

Built from the settings once per command or request, then passed to the pure analytics.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from gpuwatch.analytics.costing import node_level_units
from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.config import Settings
from gpuwatch.domain.health import HealthPolicy
from gpuwatch.domain.pricing import PriceBook, build_price_book
from gpuwatch.domain.series import StoredDetail
from gpuwatch.store import daily, repository, repository_daily, repository_detail
from gpuwatch.store.models import HOUR_S

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Inputs:
    """The store's frames for ``[start_ts, end_ts)``, from raw samples or hourly roll-ups."""

    start_ts: int
    end_ts: int
    samples: pd.DataFrame
    pods: pd.DataFrame
    gpus: pd.DataFrame
    nodes: pd.DataFrame
    resolution: str = "raw"
    #: The roll-ups' recommendation detail, read with hourly roll-ups (None with raw samples).
    detail: StoredDetail | None = None
    #: The health roll-up of the window widened to whole hours, summed per (unit, pod) in the
    #: store (HEALTH_SUM_COLUMNS), when asked for; None when not read.
    health_sums: pd.DataFrame | None = field(default=None)


def price_book_from(settings: Settings) -> PriceBook:
    pricing = settings.pricing
    overrides = {name: (m.on_demand, m.spot) for name, m in pricing.models.items()}
    return build_price_book(
        pricing.default_usd_per_gpu_hour, pricing.spot_discount, overrides, dict(pricing.nodes)
    )


def health_policy_from(settings: Settings) -> HealthPolicy:
    return settings.health.policy()


def load_health(engine: Engine, start_ts: int, end_ts: int) -> pd.DataFrame:
    """The hourly health roll-up of the hours that overlap ``[start_ts, end_ts)``, of the GPUs
    that can be other than healthy in them (``repository.units_with_health_events``): every
    row :func:`~gpuwatch.analytics.health.gpu_health` draws an entry from."""
    first, last = hour_window(start_ts, end_ts)
    units = repository.units_with_health_events(engine, first, last)
    return repository.load_health_hourly(engine, first, last, units)


def load_health_sums(
    engine: Engine, start_ts: int, end_ts: int, pods: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The health roll-up of the hours that overlap ``[start_ts, end_ts)``, summed per (unit,
    pod) in the store (``pods``: the pods' frame, if read)."""
    first, last = hour_window(start_ts, end_ts)
    return repository.load_health_sums(engine, first, last, pods)


def policy_from(settings: Settings) -> AnalyticsPolicy:
    return AnalyticsPolicy.from_mappings(
        settings.thresholds.model_dump(),
        settings.recommendations.model_dump(),
        {"cluster_provider": settings.cluster_provider},
    )


RESOLUTIONS = ("auto", "raw", "hourly")


def hour_window(start_ts: int, end_ts: int) -> tuple[int, int]:
    return start_ts - start_ts % HOUR_S, -(-end_ts // HOUR_S) * HOUR_S


def choose_resolution(
    engine: Engine, start_ts: int, end_ts: int, resolution: str, idle_util_pct: float
) -> str:
    """``raw`` or ``hourly`` for ``auto``: roll-ups when they match the idle threshold and
    cover the window, raw samples otherwise (docs/storage.md)."""
    if resolution not in RESOLUTIONS:
        raise ValueError(f"resolution must be one of {', '.join(RESOLUTIONS)}, not {resolution!r}")
    if resolution != "auto":
        return resolution
    first, last = hour_window(start_ts, end_ts)
    raw = repository.has_samples(engine, start_ts, end_ts)
    if raw and not repository.has_hourly(engine, first, last):
        return "raw"
    if raw and not repository_detail.has_detail(engine, first, last):
        log.warning(
            "the hourly roll-ups of this window lack the recommendation detail; reading raw "
            "samples instead. Run `gpuwatch db rollup` to add it."
        )
        return "raw"
    built_at = repository.rollup_idle_util_pct(engine)
    if built_at is not None and abs(built_at - idle_util_pct) > 1e-9:
        log.warning(
            "hourly roll-ups count idle time below %g%% utilization, the settings say %g%%; "
            "%s. Run `gpuwatch db rollup` to rebuild them at the new threshold.",
            built_at,
            idle_util_pct,
            "reading raw samples instead" if raw else "no raw samples are left for this window",
        )
        return "raw" if raw else "hourly"
    return "hourly"


def load_inputs(
    engine: Engine,
    start_ts: int,
    end_ts: int,
    *,
    resolution: str = "raw",
    idle_util_pct: float = 5.0,
    health: bool = False,
    unheld_per_day: bool = False,
) -> Inputs:
    """The frames costing, the weekly report and recommendations need (the samples without
    their health readings).

    ``resolution``: ``raw`` samples, ``hourly`` roll-ups (the window widened to whole hours),
    or ``auto`` (:func:`choose_resolution`). ``health``: also read the hourly health roll-up
    summed per (unit, pod) (:func:`load_health_sums`) for the health columns,
    ``investigate_efficiency`` and placement traffic. ``unheld_per_day``: with hourly
    roll-ups, read GPU time no pod held summed per UTC day where it can be
    (:func:`hourly_held_samples`): for figures that sum it over the window, not for those that
    need free GPUs hour by hour (stranded capacity).
    """
    chosen = choose_resolution(engine, start_ts, end_ts, resolution, idle_util_pct)
    if chosen == "hourly":
        start_ts, end_ts = hour_window(start_ts, end_ts)
    pods = repository.load_pods(engine)  # first: the other reads join its facts
    reads: dict[str, Callable[[], Any]] = {
        "gpus": lambda: repository.load_gpus(engine),
        "nodes": lambda: repository.load_nodes(engine),
    }
    if chosen == "hourly":
        hourly = hourly_held_samples if unheld_per_day else _hourly_samples
        reads["samples"] = lambda: hourly(engine, (start_ts, end_ts), pods)
        reads["detail"] = lambda: repository_detail.load_window_detail(engine, start_ts, end_ts)
    else:
        reads["samples"] = lambda: repository.load_samples(
            engine, start_ts, end_ts, health=False, pods=pods
        )
    if health:
        reads["health_sums"] = lambda: load_health_sums(engine, start_ts, end_ts, pods)
    got = _read_together(reads, READ_THREADS.get(engine.dialect.name, 1))
    return Inputs(
        start_ts=start_ts,
        end_ts=end_ts,
        samples=got["samples"],
        pods=pods,
        gpus=got["gpus"],
        nodes=got["nodes"],
        resolution=chosen,
        detail=got.get("detail"),
        health_sums=got.get("health_sums"),
    )


def _hourly_samples(engine: Engine, window: tuple[int, int], pods: pd.DataFrame) -> pd.DataFrame:
    return repository.load_hourly_samples(engine, *window, health=False, pods=pods)


def hourly_held_samples(
    engine: Engine, window: tuple[int, int], pods: pd.DataFrame
) -> pd.DataFrame:
    """The sample rows of the window ``[start_ts, end_ts)`` (whole hours): held GPU time by the
    hour, GPU time no pod held summed per (UTC day, unit) for the days whose sums are built
    (:func:`~gpuwatch.store.repository_daily.daily_samples`), except on units that node-level
    attribution may give to pods (:func:`~gpuwatch.analytics.costing.node_level_units`), read
    by the hour as it needs them. Costed, they give the same sums as the hourly rows alone (the
    cost model is linear in the summed seconds), and the same span of data."""
    sums, days = daily.read_built_sums(engine, *window)
    summed = repository_daily.daily_samples(engine, sums, pods)
    by_hour = node_level_units(summed, pods)
    unheld = summed[summed["pod_id"].isna().to_numpy() & ~summed["gpu_id"].isin(by_hour)]
    rows = repository_daily.hourly_samples_beside(engine, window, days, by_hour.tolist(), pods)
    if unheld.empty:
        return rows
    return pd.concat([rows, unheld], ignore_index=True)


#: Reads of :func:`load_inputs` run at once, per database dialect, each on its own connection.
#: PostgreSQL works on one read in its own process while Python turns another's rows into
#: arrays (a 2,000-GPU week: 3.5 s instead of 4.0-4.9 s). SQLite works inside this process, and
#: its reads on threads took 2.5 times the CPU time of the same reads one after another (8.4 s
#: instead of 4.5 s on 2 cores), so they run in turn (docs/performance.md).
READ_THREADS: dict[str, int] = {"postgresql": 3}


def _read_together(reads: dict[str, Callable[[], Any]], threads: int) -> dict[str, Any]:
    """Each read's result by name, on ``threads`` threads (1: in turn, on this one); the first
    failure is raised."""
    if threads <= 1:
        return {name: read() for name, read in reads.items()}
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="read") as pool:
        futures = {name: pool.submit(read) for name, read in reads.items()}
        return {name: future.result() for name, future in futures.items()}
