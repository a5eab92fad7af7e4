"""Totals every surface shows, defined once (docs/cost-model.md, "Totals and monthly figures").

The CLI, the weekly CSV and the dashboard read these, so that the same window gives the same
numbers everywhere:

- :func:`potential_savings_usd`: the monthly savings of a set of recommendations. A workload's
  suggestions are alternatives (use spot *or* a smaller MIG slice), so only its largest counts.
- :func:`data_span` and :func:`hours_with_data`: the part of a window the samples cover. Monthly
  figures divide a window's dollars by its hours with data, never by the hours of a window that
  starts before the first sample or ends after the last one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c

#: Hours in the month monthly figures are quoted for (365 × 24 ÷ 12).
HOURS_PER_MONTH = 730.0
SAVINGS = "est_monthly_savings_usd"


def potential_savings_usd(recommendations: pd.DataFrame) -> float:
    """Σ over workloads of the workload's largest ``est_monthly_savings_usd``.

    A workload is a (cluster, namespace, workload_kind, workload, gpu_model); missing key
    values form their own workload. Any frame with those columns and the savings works (the
    recommendations, or the weekly report's rows, which already hold one per workload).
    """
    if recommendations.empty:
        return 0.0
    keys = list(c.WORKLOAD_KEYS)
    frame = recommendations[[*keys, SAVINGS]].astype(dict.fromkeys(keys, object))
    frame = frame.astype({SAVINGS: "float64"})
    largest = frame.groupby(keys, dropna=False, sort=False)[SAVINGS].max()
    return float(largest.sum())


def data_span(
    samples: pd.DataFrame, start_ts: int | None = None, end_ts: int | None = None
) -> tuple[int, int] | None:
    """``[first sample ts, last sample ts + its step)`` of the samples in ``[start_ts, end_ts)``,
    clipped to that window; ``None`` when no sample lies in it.

    Works on raw samples and on hourly roll-up rows alike (there ``ts`` is the hour and
    ``step_s`` its seconds with data, so the span ends where the last hour's data ends, for
    a unit sampled from the start of that hour).
    """
    ts = samples["ts"].to_numpy(dtype="int64")
    ends = ts + samples["step_s"].to_numpy(dtype="int64")
    inside = np.ones(len(ts), dtype=bool)
    if start_ts is not None:
        inside &= ts >= start_ts
    if end_ts is not None:
        inside &= ts < end_ts
    if not inside.any():
        return None
    first, last = int(ts[inside].min()), int(ends[inside].max())
    if start_ts is not None:
        first = max(first, start_ts)
    if end_ts is not None:
        last = min(last, end_ts)
    return first, last


def hours_with_data(samples: pd.DataFrame, start_ts: int, end_ts: int) -> float:
    """Hours of ``[start_ts, end_ts)`` that its samples cover (:func:`data_span`); 0 without."""
    span = data_span(samples, start_ts, end_ts)
    return 0.0 if span is None else (span[1] - span[0]) / 3600.0


def monthly_basis(hours: float) -> str:
    """How a monthly figure was extrapolated, in words every surface uses."""
    shown = f"{hours:,.1f}".removesuffix(".0")
    return f"per {HOURS_PER_MONTH:g} h from {shown} h of data"
