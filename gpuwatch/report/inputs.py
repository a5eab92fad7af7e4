"""What every analysis reads: the store's frames for a window, the price book and the policy.

Built from the settings once per command or request, then passed to the pure analytics.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from sqlalchemy import Engine

from gpuwatch.analytics.policy import AnalyticsPolicy
from gpuwatch.config import Settings
from gpuwatch.domain.pricing import PriceBook, build_price_book
from gpuwatch.store import repository


@dataclass(frozen=True)
class Inputs:
    """The store's frames for ``[start_ts, end_ts)``."""

    start_ts: int
    end_ts: int
    samples: pd.DataFrame
    pods: pd.DataFrame
    gpus: pd.DataFrame
    nodes: pd.DataFrame


def price_book_from(settings: Settings) -> PriceBook:
    pricing = settings.pricing
    overrides = {name: (m.on_demand, m.spot) for name, m in pricing.models.items()}
    return build_price_book(
        pricing.default_usd_per_gpu_hour, pricing.spot_discount, overrides, dict(pricing.nodes)
    )


def policy_from(settings: Settings) -> AnalyticsPolicy:
    return AnalyticsPolicy.from_mappings(
        settings.thresholds.model_dump(), settings.recommendations.model_dump()
    )


def load_inputs(engine: Engine, start_ts: int, end_ts: int) -> Inputs:
    """The frames costing, the weekly report and recommendations need (no health readings)."""
    return Inputs(
        start_ts=start_ts,
        end_ts=end_ts,
        samples=repository.load_samples(engine, start_ts, end_ts, health=False),
        pods=repository.load_pods(engine),
        gpus=repository.load_gpus(engine),
        nodes=repository.load_nodes(engine),
    )
