"""The alerts evaluated over stored samples, from the same definitions as the rules: the six
core ones and ``GPUXidHardwareError``, whose readings the stored samples carry; only
Prometheus evaluates the others.

Pure: samples in (shaped as :data:`gpuwatch.domain.frames.SAMPLE_COLUMNS`; a sample is held
when it names a pod outside the exporter's namespaces), subjects out. One function per alert
kind reads its condition at every rule evaluation instant of a grid; :func:`evaluate` then
applies ``for:``. The semantics are those Prometheus 2.x gives the rendered rules:

- a range ``[w]`` evaluated at ``t`` holds the samples with ``t - w <= ts <= t``;
- an instant selector at ``t`` reads a GPU's latest sample with ``t - LOOKBACK_S <= ts <= t``
  (a stored sample stands for its whole step: where the step is longer, it reaches that far);
- an alert fires at ``T`` when its condition held at every evaluation from ``T - for`` to ``T``
  (evaluations every ``interval_s``, counted back from ``T``), and is pending when it holds at
  ``T`` but not yet that long.

Differences that follow from what the store keeps: no staleness markers and no ``up`` series
(a silent exporter is seen once its last sample leaves the lookback), one holder per GPU unit and
sample, and namespace means taken over every stored sample rather than one per evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.alerts.definitions import (
    EVALUATION_INTERVAL_S,
    LOOKBACK_S,
    AlertDefinition,
    AlertTable,
)
from gpuwatch.domain.frames import NO_POD
from gpuwatch.domain.health import FAILING_XIDS

#: What a subject of a per-GPU alert is shown with.
GPU_COLUMNS = ("cluster", "node", "gpu_id", "gpu_model", "namespace", "pod")
HELD = "held"
#: How long after its instant a sample is still a GPU's latest reading.
REACH = "reach_s"
#: Columns of a condition's frame besides the subject's: the instant and the compared value.
T, VALUE = "t", "value"

Condition = Callable[[pd.DataFrame, AlertDefinition, np.ndarray], pd.DataFrame]


@dataclass(frozen=True)
class Evaluation:
    """One alert's subjects at ``at_ts``: ``state`` is ``firing`` or ``pending``; ``value`` is
    what the condition compares (named ``value_name``, in the threshold's unit)."""

    definition: AlertDefinition
    value_name: str
    subjects: pd.DataFrame

    @property
    def firing(self) -> pd.DataFrame:
        return self.subjects[self.subjects["state"].eq("firing")]

    @property
    def pending(self) -> pd.DataFrame:
        return self.subjects[self.subjects["state"].eq("pending")]


def prepare_samples(samples: pd.DataFrame, exporter_namespaces: Sequence[str] = ()) -> pd.DataFrame:
    """Samples ordered by instant, with ``held``: the sample names a pod, outside
    ``exporter_namespaces`` (the exporter never holds a GPU). Holder columns are cleared on
    samples not held, and ``pod_id`` is :data:`NO_POD` there."""
    frame = samples.sort_values("ts", kind="stable").reset_index(drop=True)
    pod = frame["pod"].astype(object)
    namespace = frame["namespace"].astype(object)
    held = pod.notna() & pod.ne("") & namespace.notna() & ~namespace.isin(exporter_namespaces)
    held_values = held.to_numpy(dtype=bool)
    frame[HELD] = held_values
    frame["pod"] = pod.where(held_values, None)
    frame["namespace"] = namespace.where(held_values, None)
    pod_ids = pd.to_numeric(frame["pod_id"], errors="coerce").to_numpy(dtype="float64")
    frame["pod_id"] = np.where(held_values & ~np.isnan(pod_ids), pod_ids, NO_POD).astype("int64")
    steps = frame["step_s"] if "step_s" in frame else pd.Series(0, index=frame.index)
    frame[REACH] = np.maximum(steps.fillna(0).to_numpy(dtype="int64"), LOOKBACK_S)
    return frame


def evaluation_grid(at_ts: int, for_s: int, interval_s: int = EVALUATION_INTERVAL_S) -> np.ndarray:
    """The evaluation instants that decide whether an alert fires at ``at_ts``, newest first:
    back to the last one at or before ``at_ts - for_s``."""
    steps = math.ceil(for_s / interval_s)
    return at_ts - interval_s * np.arange(steps + 1, dtype="int64")


def _bounds(frame: pd.DataFrame, start: int, end: int) -> slice:
    """Rows with ``start <= ts <= end`` of a frame ordered by ``ts``."""
    ts = frame["ts"].to_numpy()
    return slice(
        int(np.searchsorted(ts, start, side="left")), int(np.searchsorted(ts, end, side="right"))
    )


def _current(frame: pd.DataFrame, t: int) -> pd.DataFrame:
    """The samples still current at ``t``: at most their reach (the lookback) old."""
    reach = int(frame[REACH].max()) if len(frame) else LOOKBACK_S
    recent = frame.iloc[_bounds(frame, t - reach, t)]
    return recent[(t - recent["ts"]).le(recent[REACH]).to_numpy(dtype=bool)]


def _latest(frame: pd.DataFrame, t: int) -> pd.DataFrame:
    """Each GPU unit's latest sample that is still current at ``t``."""
    return _current(frame, t).drop_duplicates("gpu_id", keep="last")


def _gpu_rows(frame: pd.DataFrame, value: pd.Series | np.ndarray, t: int) -> pd.DataFrame:
    out = frame[[*GPU_COLUMNS, "pod_id"]].astype({"cluster": object, "node": object}).copy()
    out[VALUE] = np.asarray(value, dtype="float64")
    out[T] = t
    return out


def allocated_idle(samples: pd.DataFrame, d: AlertDefinition, grid: np.ndarray) -> pd.DataFrame:
    """``GPUAllocatedIdle``: a pod holds the GPU now, and no sample of the GPU (whoever held
    it) reached the threshold in the window; the value is that pod's peak in the window."""
    readings = samples[samples["util_ratio"].notna()]
    parts = []
    for t in grid.tolist():
        window = readings.iloc[_bounds(readings, t - d.timing.window_s, t)]
        gpu_peak = window.groupby("gpu_id")["util_ratio"].max()
        now = _latest(readings, t)
        now = now[now[HELD].to_numpy(dtype=bool)]
        now = now[now["gpu_id"].map(gpu_peak).lt(d.threshold).to_numpy(dtype=bool)]
        pod_peak = window.groupby(["gpu_id", "pod_id"])["util_ratio"].max()
        keys = pd.MultiIndex.from_arrays([now["gpu_id"], now["pod_id"]])
        parts.append(_gpu_rows(now, pod_peak.reindex(keys).to_numpy(), t))
    return _concat(parts)


def namespace_low_efficiency(
    samples: pd.DataFrame, d: AlertDefinition, grid: np.ndarray
) -> pd.DataFrame:
    """``GPUNamespaceLowEfficiency``: the mean utilization ratio of the namespace's held samples
    in the window is below the threshold, and the namespace held GPUs already ``history`` ago."""
    held = samples[samples[HELD].to_numpy(dtype=bool) & samples["util_ratio"].notna().to_numpy()]
    per_ts = (
        held.astype({"cluster": object, "namespace": object})
        .groupby(["ts", "cluster", "namespace"], sort=True)["util_ratio"]
        .agg(["sum", "count"])
        .reset_index()
    )
    parts = []
    for t in grid.tolist():
        window = per_ts.iloc[_bounds(per_ts, t - d.timing.window_s, t)]
        g = window.groupby(["cluster", "namespace"], sort=True)
        mean = g["sum"].sum() / g["count"].sum()
        early = g["ts"].min() <= t - d.timing.history_s
        met = mean[(mean < d.threshold) & early]
        rows = met.rename(VALUE).reset_index()
        rows[T] = t
        parts.append(rows)
    return _concat(parts)


def _latest_gauge(
    samples: pd.DataFrame,
    grid: np.ndarray,
    reading: Callable[[pd.DataFrame], pd.Series],
    meets: Callable[[pd.Series], pd.Series],
) -> pd.DataFrame:
    parts = []
    for t in grid.tolist():
        now = _latest(samples, t)
        value = reading(now)
        keep = meets(value).fillna(False).to_numpy(dtype=bool)
        parts.append(_gpu_rows(now[keep], value[keep], t))
    return _concat(parts)


def memory_near_full(samples: pd.DataFrame, d: AlertDefinition, grid: np.ndarray) -> pd.DataFrame:
    """``GPUMemoryNearFull``: the latest framebuffer used ÷ total is at or above the threshold."""
    known = samples[samples["fb_used_mib"].notna() & samples["fb_total_mib"].gt(0)]

    def ratio(now: pd.DataFrame) -> pd.Series:
        used = now["fb_used_mib"].astype("float64")
        return used / now["fb_total_mib"].astype("float64")

    return _latest_gauge(known, grid, ratio, lambda v: v.ge(d.threshold))


def high_temperature(samples: pd.DataFrame, d: AlertDefinition, grid: np.ndarray) -> pd.DataFrame:
    """``GPUHighTemperature``: the latest temperature is at or above the threshold (°C)."""
    known = samples[samples["temp_c"].notna()]

    def temp(now: pd.DataFrame) -> pd.Series:
        return now["temp_c"].astype("float64")

    return _latest_gauge(known, grid, temp, lambda v: v.ge(d.threshold))


def _highest_code(known: pd.DataFrame, d: AlertDefinition, grid: np.ndarray) -> pd.DataFrame:
    """Per GPU and holder, the highest XID code among ``known`` samples in the window."""
    parts = []
    for t in grid.tolist():
        window = known.iloc[_bounds(known, t - d.timing.window_s, t)]
        code = window.groupby(["gpu_id", "pod_id"])["xid"].transform("max").astype("float64")
        last = window.assign(code=code).drop_duplicates(["gpu_id", "pod_id"], keep="last")
        last = last[last["code"].gt(d.threshold).to_numpy(dtype=bool)]
        parts.append(_gpu_rows(last, last["code"], t))
    return _concat(parts)


def xid_error(samples: pd.DataFrame, d: AlertDefinition, grid: np.ndarray) -> pd.DataFrame:
    """``GPUXidError``: the highest XID code of a GPU and holder in the window is above the
    threshold; the value is that code."""
    return _highest_code(samples[samples["xid"].notna()], d, grid)


def xid_hardware_error(samples: pd.DataFrame, d: AlertDefinition, grid: np.ndarray) -> pd.DataFrame:
    """``GPUXidHardwareError``: a GPU and holder had an XID of the catalogue's hardware or
    driver class (:data:`~gpuwatch.domain.health.FAILING_XIDS`) in the window; the value is
    the highest such code (the rule fires once per code)."""
    failing = samples["xid"].isin(FAILING_XIDS).fillna(False).to_numpy(dtype=bool)
    return _highest_code(samples[failing], d, grid)


def exporter_down(samples: pd.DataFrame, d: AlertDefinition, grid: np.ndarray) -> pd.DataFrame:
    """``GPUExporterDown``: a node whose GPU units sent samples in the window has none in the
    lookback; the value is how many units it sent samples for."""
    parts = []
    for t in grid.tolist():
        window = samples.iloc[_bounds(samples, t - d.timing.window_s, t)]
        nodes = window.assign(cluster=window["cluster"].astype(object), node=window["node"])
        g = nodes.groupby(["cluster", "node"], sort=True, dropna=False)
        units = g["gpu_id"].nunique()
        current = _current(window, t)
        heard = pd.MultiIndex.from_arrays([current["cluster"].astype(object), current["node"]])
        silent = ~units.index.isin(heard)
        met = units[silent & (units > d.threshold).to_numpy()].astype("float64")
        rows = met.rename(VALUE).reset_index()
        rows[T] = t
        parts.append(rows)
    return _concat(parts)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[T, VALUE])


@dataclass(frozen=True)
class Kind:
    """How one alert kind is read from the store: its condition, subject key and value name."""

    condition: Condition
    keys: tuple[str, ...]
    value_name: str


GPU_KEY = ("gpu_id", "pod_id")
KINDS: dict[str, Kind] = {
    "GPUAllocatedIdle": Kind(allocated_idle, GPU_KEY, "peak_util_ratio"),
    "GPUNamespaceLowEfficiency": Kind(
        namespace_low_efficiency, ("cluster", "namespace"), "mean_util_ratio"
    ),
    "GPUMemoryNearFull": Kind(memory_near_full, GPU_KEY, "fb_used_ratio"),
    "GPUHighTemperature": Kind(high_temperature, GPU_KEY, "temp_c"),
    "GPUXidError": Kind(xid_error, GPU_KEY, "xid"),
    "GPUExporterDown": Kind(exporter_down, ("cluster", "node"), "silent_gpu_units"),
    "GPUXidHardwareError": Kind(xid_hardware_error, GPU_KEY, "xid"),
}


def evaluate(
    kind: Kind,
    d: AlertDefinition,
    samples: pd.DataFrame,
    at_ts: int,
    interval_s: int = EVALUATION_INTERVAL_S,
) -> Evaluation:
    """The subjects of one alert at ``at_ts``: firing where the condition held at every
    evaluation back to ``at_ts - for``, pending where it holds at ``at_ts`` only so far."""
    grid = evaluation_grid(at_ts, d.timing.for_s, interval_s)
    meets = kind.condition(samples, d, grid)
    keys = list(kind.keys)
    if meets.empty:
        empty = pd.DataFrame(columns=[*keys, kind.value_name, "state"])
        return Evaluation(d, kind.value_name, empty)
    held_at = meets.groupby(keys, sort=False)[T].nunique()
    now = meets[meets[T].eq(at_ts).to_numpy(dtype=bool)].drop(columns=[T])
    count = held_at.reindex(pd.MultiIndex.from_frame(now[keys])).to_numpy()
    state = np.where(count >= len(grid), "firing", "pending")
    subjects = now.assign(state=state).sort_values([*keys], kind="stable").reset_index(drop=True)
    return Evaluation(d, kind.value_name, subjects.rename(columns={VALUE: kind.value_name}))


def evaluate_core(
    samples: pd.DataFrame,
    table: AlertTable,
    at_ts: int,
    exporter_namespaces: Sequence[str] = (),
    interval_s: int = EVALUATION_INTERVAL_S,
) -> list[Evaluation]:
    """Every alert the store can evaluate, in the rule file's order, at ``at_ts``."""
    prepared = prepare_samples(samples, exporter_namespaces)
    return [
        evaluate(KINDS[d.name], d, prepared, at_ts, interval_s)
        for d in table.all()
        if d.name in KINDS
    ]


def samples_span_s(table: AlertTable, interval_s: int = EVALUATION_INTERVAL_S) -> int:
    """Seconds of samples before the evaluation instant that :func:`evaluate_core` reads."""
    reach = [
        d.timing.window_s + math.ceil(d.timing.for_s / interval_s) * interval_s
        for d in table.all()
        if d.name in KINDS
    ]
    return max(reach) + LOOKBACK_S
