"""Rows of the hourly health roll-up made ready for the health and efficiency analytics
(docs/cost-model.md#health-and-efficiency).

:func:`prepare` drops pods that hold no GPU and adds GPU-equivalent hours, the unit price and the
allocation flag, as :func:`gpuwatch.analytics.costing.prepare` does for samples;
:func:`failing_since` finds each physical GPU's first failing event and :func:`with_failing` the
seconds of a row that fall after it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import drop_gpuless_pods, unit_prices, unit_shares
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.pricing import PriceBook

#: A physical GPU: an event on any of its units (MIG instance, slot) is the GPU's.
GPU_KEY: tuple[str, str] = ("cluster", "gpu_uuid")
#: Added by :func:`prepare`: the unit's share of its physical GPU.
SHARE = "share"
#: Added by :func:`with_failing`: the instant the row's GPU started failing (NaN: not failing)
#: and the row's seconds from then on.
FAIL_SINCE_TS = "fail_since_ts"
FAIL_S = "fail_s"


def _floats(frame: pd.DataFrame, name: str) -> np.ndarray:
    return frame[name].to_numpy(dtype="float64", na_value=np.nan)


def divide(num: np.ndarray, den: np.ndarray, fill: float = 0.0) -> np.ndarray:
    """``num / den`` where ``den`` > 0, else ``fill``."""
    out = np.full(len(num), fill, dtype="float64")
    np.divide(num, den, where=den > 0, out=out)
    return out


def prepare(health: pd.DataFrame, price_book: PriceBook | None = None) -> pd.DataFrame:
    """HEALTH_COLUMNS rows with ``share``, ``gpu_hours`` (data_s / 3600 × share), ``allocated``
    and, given a price book, ``usd_per_hour`` (the whole GPU's price) added. Rows of pods that
    request no GPU are unallocated; an allocated row without a workload is its own ``Pod``."""
    frame = drop_gpuless_pods(health.reset_index(drop=True), None).copy()
    ids = frame["gpu_id"]
    share = ids.map(unit_shares(frame)).to_numpy(dtype="float64")
    frame[SHARE] = share
    frame[c.GPU_HOURS] = np.nan_to_num(_floats(frame, "data_s")) / HOUR_S * share
    if price_book is not None:
        prices = ids.map(unit_prices(frame, price_book)).to_numpy(dtype="float64")
        frame[c.USD_PER_HOUR] = prices
    pod = frame["pod"].astype("string")
    frame[c.ALLOCATED] = (pod.notna() & pod.ne("")).fillna(False).to_numpy(dtype=bool)
    missing = frame[c.ALLOCATED] & frame["workload"].isna()
    if bool(missing.any()):
        frame.loc[missing, "workload_kind"] = "Pod"
        frame.loc[missing, "workload"] = frame.loc[missing, "pod"]
    return frame


def failing_event_ts(health: pd.DataFrame) -> pd.Series:
    """Each row's failing event instant: ``fail_first_ts``, else the row's ``first_ts`` where a
    DBE, a row-remap failure or a failing XID is counted without an instant; NaN: none."""
    first = _floats(health, "fail_first_ts")
    flagged = (
        (np.nan_to_num(_floats(health, "ecc_dbe")) > 0)
        | (np.nan_to_num(_floats(health, "row_remap_failure")) > 0)
        | ~np.isnan(_floats(health, "fail_xid"))
    )
    fallback = np.where(flagged, _floats(health, "first_ts"), np.nan)
    return pd.Series(np.where(np.isnan(first), fallback, first), index=health.index)


def failing_since(health: pd.DataFrame) -> pd.Series:
    """Epoch seconds of each physical GPU's first failing event in the frame, indexed by
    (cluster, gpu_uuid); GPUs that never failed are absent."""
    event = failing_event_ts(health)
    rows = health.loc[event.notna().to_numpy(), list(GPU_KEY)].assign(ts=event.dropna())
    if rows.empty:
        index = pd.MultiIndex.from_arrays([[], []], names=list(GPU_KEY))
        return pd.Series([], index=index, dtype="float64", name=FAIL_SINCE_TS)
    keys = [rows[k].astype(str) for k in GPU_KEY]
    return rows["ts"].groupby(keys).min().rename(FAIL_SINCE_TS)


def with_failing(frame: pd.DataFrame, since: pd.Series | None = None) -> pd.DataFrame:
    """Rows with ``fail_since_ts`` (their GPU's first failing event, from ``since`` or else the
    frame's own events) and ``fail_s``: the row's seconds while its GPU was failing. The hour
    of the event counts from that instant, ``min(data_s, hour_end − event)``; later hours
    count whole, earlier ones not at all."""
    since = failing_since(frame) if since is None else since
    out = frame.copy()
    if len(since) == 0 or out.empty:
        out[FAIL_SINCE_TS] = np.nan
        out[FAIL_S] = 0.0
        return out
    since = since.copy()
    since.index = pd.MultiIndex.from_arrays(
        [since.index.get_level_values(i).astype(str) for i in range(2)]
    )
    rows = pd.MultiIndex.from_arrays([out[k].astype(str).to_numpy() for k in GPU_KEY])
    onset = since.reindex(rows).to_numpy(dtype="float64")
    hour_end = out["ts"].to_numpy(dtype="float64") + HOUR_S
    data_s = np.nan_to_num(_floats(out, "data_s"))
    seconds = np.clip(np.minimum(data_s, hour_end - onset), 0.0, None)
    out[FAIL_SINCE_TS] = onset
    out[FAIL_S] = np.where(np.isnan(onset), 0.0, seconds)
    return out


def ratio_mean_pct(
    frame: pd.DataFrame, keys: list[str], active: str, data: str, weight: str = c.GPU_HOURS
) -> pd.Series:
    """GPU-hour weighted mean × 100 of each row's ratio ``active / data`` over the rows with the
    reading (``data`` > 0), per group of ``keys``; NaN where no row has it."""
    data_s = np.nan_to_num(_floats(frame, data))
    has = data_s > 0
    ratio = divide(np.nan_to_num(_floats(frame, active)), data_s)
    w = np.where(has, frame[weight].to_numpy(dtype="float64"), 0.0)
    parts = pd.DataFrame({"num": w * ratio, "den": w, "has": has.astype("int64")})
    for k in keys:
        parts[k] = frame[k].to_numpy()
    sums = parts.groupby(keys, dropna=False, sort=False, observed=True)[["num", "den", "has"]].sum()
    mean = 100.0 * sums["num"] / sums["den"].where(sums["den"] > 0)
    return mean.where(sums["has"] > 0)
