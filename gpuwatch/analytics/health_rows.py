"""Rows of the hourly health roll-up made ready for the health and efficiency analytics
(docs/cost-model.md#health-and-efficiency).

:func:`prepare` drops pods that hold no GPU and adds GPU-equivalent hours, the unit price and the
allocation flag, as :func:`gpuwatch.analytics.costing.prepare` does for samples;
:func:`failing_since` finds each physical GPU's first failing event and :func:`with_failing` the
seconds of a row that fall after it.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    frame = drop_gpuless_pods(health.reset_index(drop=True), None).copy(deep=False)
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
    out = frame.copy(deep=False)
    if len(since) == 0 or out.empty:
        out[FAIL_SINCE_TS] = np.nan
        out[FAIL_S] = 0.0
        return out
    levels = [since.index.get_level_values(i).astype(str) for i in range(2)]
    since = pd.Series(since.to_numpy(dtype="float64"), index=pd.MultiIndex.from_arrays(levels))
    onset = np.full(len(out), np.nan)
    maybe = out["gpu_uuid"].astype(str).isin(set(levels[1])).to_numpy()
    if maybe.any():
        picked = out.loc[maybe, list(GPU_KEY)]
        rows = pd.MultiIndex.from_arrays([picked[k].astype(str).to_numpy() for k in GPU_KEY])
        onset[maybe] = since.reindex(rows).to_numpy(dtype="float64")
    hour_end = out["ts"].to_numpy(dtype="float64") + HOUR_S
    data_s = np.nan_to_num(_floats(out, "data_s"))
    seconds = np.clip(np.minimum(data_s, hour_end - onset), 0.0, None)
    out[FAIL_SINCE_TS] = onset
    out[FAIL_S] = np.where(np.isnan(onset), 0.0, seconds)
    return out


@dataclass(frozen=True)
class Groups:
    """Rows grouped once: each row's group ``codes`` (0 … n − 1, in order of first appearance)
    and the ``keys`` of each group, so that every sum is one :func:`numpy.bincount`."""

    codes: np.ndarray
    keys: pd.DataFrame

    @property
    def n(self) -> int:
        return len(self.keys)

    def sum(self, values: np.ndarray) -> np.ndarray:
        """Σ of ``values`` per group."""
        return np.bincount(self.codes, weights=values, minlength=self.n)


def group_rows(frame: pd.DataFrame, keys: list[str]) -> Groups:
    """The rows of ``frame`` grouped by ``keys`` (missing values form groups of their own)."""
    codes = frame.groupby(keys, dropna=False, sort=False, observed=True).ngroup()
    codes_np = codes.to_numpy(dtype="int64")
    _, first = np.unique(codes_np, return_index=True)
    return Groups(codes_np, frame[keys].iloc[first].reset_index(drop=True))
