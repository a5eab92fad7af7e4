"""Totals every surface shows, defined once (docs/cost-model.md#potential-savings).

The CLI, the weekly CSV and the dashboard read these, so that the same window gives the same
numbers everywhere:

- :func:`potential_savings_usd`: the monthly savings of a set of recommendations. A workload's
  suggestions are alternatives (give the GPU back, *or* a MIG slice, *or* a cheaper model):
  their savings overlap, so only its largest counts.
- :func:`data_span` and :func:`hours_with_data`: the hours a window's samples cover. Monthly
  figures divide a window's dollars by its hours with data, never by the hours of a window that
  starts before the first sample or ends after the last one. Spans are whole hours, so raw
  samples and hourly roll-ups of the same data give the same span.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.frames import LAST_HOUR_TS

#: Hours in the month monthly figures are quoted for (365 × 24 ÷ 12).
HOURS_PER_MONTH = 730.0
SAVINGS = "est_monthly_savings_usd"


def best_per_workload(recs: pd.DataFrame) -> pd.DataFrame:
    """Per workload (cluster, namespace, kind, name, GPU model): its largest-saving row, in the
    order of ``recs`` among equal savings; columns: the keys, ``team``, ``kind`` and savings."""
    keys = list(c.WORKLOAD_KEYS)
    if recs.empty:
        return pd.DataFrame(columns=[*keys, "team", "kind", SAVINGS])
    ordered = recs.sort_values(SAVINGS, ascending=False, kind="stable")
    best = ordered.drop_duplicates(keys, keep="first")
    return best[[*keys, "team", "kind", SAVINGS]].reset_index(drop=True)


def potential_savings_usd(recs: pd.DataFrame) -> float:
    """Σ over workloads of the largest ``est_monthly_savings_usd`` among their suggestions
    (any frame with the workload keys and the savings: recommendations, weekly report rows)."""
    if recs.empty:
        return 0.0
    keys = list(c.WORKLOAD_KEYS)
    frame = recs[[*keys, SAVINGS]].astype(dict.fromkeys(keys, object))
    largest = frame.astype({SAVINGS: "float64"}).groupby(keys, dropna=False, sort=False)[SAVINGS]
    return float(largest.max().sum())


def data_span(
    samples: pd.DataFrame, start_ts: int | None = None, end_ts: int | None = None
) -> tuple[int, int] | None:
    """``[start of the first hour with a sample, end of the last one)`` of the samples in
    ``[start_ts, end_ts)``; ``None`` when no sample lies in it. Raw samples and hourly roll-up
    rows (``ts`` the hour) of the same data give the same span; so do rows that sum several
    hours, which carry the hour of their last reading (:data:`~gpuwatch.domain.frames.
    LAST_HOUR_TS`)."""
    ts = samples["ts"].to_numpy(dtype="int64")
    inside = np.ones(len(ts), dtype=bool)
    if start_ts is not None:
        inside &= ts >= start_ts
    if end_ts is not None:
        inside &= ts < end_ts
    if not inside.any():
        return None
    first, last = int(ts[inside].min()), int(ts[inside].max())
    if LAST_HOUR_TS in samples.columns:
        lasts = samples[LAST_HOUR_TS].to_numpy(dtype="float64", na_value=np.nan)[inside]
        if not np.isnan(lasts).all():
            last = max(last, int(np.nanmax(lasts)))
    return first - first % HOUR_S, last - last % HOUR_S + HOUR_S


def hours_with_data(samples: pd.DataFrame, start_ts: int, end_ts: int) -> float:
    """Hours of ``[start_ts, end_ts)`` that its samples cover (:func:`data_span`); 0 without."""
    span = data_span(samples, start_ts, end_ts)
    return 0.0 if span is None else (span[1] - span[0]) / HOUR_S


def monthly_basis(hours: float) -> str:
    """How a monthly figure was extrapolated, in words every surface uses."""
    shown = f"{hours:,.1f}".removesuffix(".0")
    return f"per {HOURS_PER_MONTH:g} h from {shown} h of data"
