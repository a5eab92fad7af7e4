"""DCGM series from Prometheus → one row per GPU unit and grid instant (pure, no I/O).

Input is what ``/api/v1/query_range`` returns for each query of :mod:`gpuwatch.collectors.promql`,
per field::

    [{"metric": {"__name__": "...", "UUID": "GPU-8f…", "gpu": "1",
                 "modelName": "NVIDIA L40S", "Hostname": "node-a",
                 "exported_pod": "train-0", "exported_namespace": "ml",
                 "pod": "dcgm-exporter-x2x", "namespace": "gpu-operator",
                 "instance": "10.0.0.7:9400"},
      "values": [[1763251200, "0.41"], [1763251260, "0.43"]]}]

Label variants are absorbed here: the configured label schema gives, per fact, the labels to try
in order (``exported_pod`` before ``pod``, ``UUID`` before ``uuid``, ...). For the pod, the choice
is made per exporter (scrape target and node): when any series of an exporter carries the preferred
``exported_*`` label, that exporter's plain ``pod``/``namespace`` name the exporter itself and are
ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.collectors.promql import FIELDS
from gpuwatch.domain.labels import LabelVariants

#: Plausible range of each field; readings outside (blank sentinels ~9.2e18, negatives, NaN,
#: infinities, averages that include a sentinel) become missing, never data.
BOUNDS: dict[str, tuple[float, float]] = {
    "util_prof": (0.0, 1.0001),
    "util_dev_pct": (0.0, 100.01),
    "fb_used_mib": (0.0, 1e8),
    "fb_used_last_mib": (0.0, 1e8),
    "fb_free_mib": (0.0, 1e8),
    "fb_reserved_mib": (0.0, 1e8),
    "power_w": (0.0, 1e5),
    "temp_c": (-50.0, 300.0),
    "xid": (0.0, 1e6),
}
#: Fields whose series decide a sample's pod attribution, in order of preference.
ATTRIBUTION_ORDER = ("util_prof", "util_dev_pct", "fb_used_mib")
UNIT_KEY = ["uuid", "mig_gi_id", "slot"]
SIGNAL_PROF = "prof_gr_engine_active"
SIGNAL_DEV = "dev_gpu_util"
OUTPUT_COLUMNS = [
    *UNIT_KEY,
    "ts",
    "node",
    "model_name",
    "mig_profile",
    "gpu_index",
    "device",
    "namespace",
    "pod",
    "container",
    "label_style",
    "util_ratio",
    "util_signal",
    "fb_used_mib",
    "fb_total_mib",
    "power_w",
    "temp_c",
    "xid",
]


def _first(labels: Mapping[str, str], names: Sequence[str]) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


#: One exporter as seen through its series: (job, instance, node). The node is part of it
#: because one scrape target can carry several exporters' series (federation, aggregation).
Target = tuple[str, str, str]


def _target(labels: Mapping[str, str], variants: LabelVariants) -> Target:
    node = _first(labels, variants.hostname) or ""
    return labels.get("job", ""), labels.get("instance", ""), node


def pod_label_choice(
    results: Mapping[str, Sequence[Mapping[str, Any]]], variants: LabelVariants
) -> dict[Target, int]:
    """Per exporter, the index in ``variants.pod`` of the most preferred pod label it uses."""
    choice: dict[Target, int] = {}
    for series_list in results.values():
        for series in series_list:
            labels = series["metric"]
            target = _target(labels, variants)
            for index, name in enumerate(variants.pod):
                if labels.get(name):
                    choice[target] = min(index, choice.get(target, index))
                    break
    return choice


def _slot(labels: Mapping[str, str]) -> int:
    raw = labels.get("vgpu", "")
    if not raw:
        return 0
    match = re.search(r"(\d+)$", raw)
    return int(match.group(1)) if match else 0


def series_identity(
    labels: Mapping[str, str], variants: LabelVariants, pod_index: int | None
) -> dict[str, Any] | None:
    """The GPU unit and attribution a series' labels describe; None without a GPU UUID."""
    uuid = _first(labels, variants.uuid)
    if not uuid:
        return None
    gi = labels.get("GPU_I_ID", "")
    attributed: dict[str, str | None] = {"pod": None, "namespace": None, "container": None}
    if pod_index is not None:
        for fact in ("pod", "namespace", "container"):
            names: tuple[str, ...] = getattr(variants, fact)
            name = names[min(pod_index, len(names) - 1)]
            attributed[fact] = labels.get(name) or None
    if attributed["pod"] is None:
        attributed["namespace"] = attributed["container"] = None
    hostname_label = next((n for n in variants.hostname if labels.get(n)), None)
    style = "exported" if pod_index == 0 and len(variants.pod) > 1 else "standard"
    if hostname_label and hostname_label != variants.hostname[0]:
        style += "+" + hostname_label
    return {
        "uuid": uuid,
        "mig_gi_id": int(gi) if gi.isdigit() else -1,
        "slot": _slot(labels),
        "has_vgpu": bool(labels.get("vgpu")),
        "node": labels.get(hostname_label) if hostname_label else None,
        "model_name": labels.get("modelName") or None,
        "mig_profile": labels.get("GPU_I_PROFILE") or None,
        "gpu_index": int(labels["gpu"]) if labels.get("gpu", "").isdigit() else None,
        "device": labels.get("device") or None,
        "label_style": style,
        **attributed,
    }


def _field_frame(
    name: str,
    series_list: Sequence[Mapping[str, Any]],
    variants: LabelVariants,
    choice: Mapping[Target, int],
    step_s: int,
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Long rows (series, ts, value) of one field, and the identity of each of its series."""
    identities: list[dict[str, Any]] = []
    chunks: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    for series in series_list:
        identity = series_identity(
            series["metric"], variants, choice.get(_target(series["metric"], variants))
        )
        if identity is None or not series.get("values"):
            continue
        values = np.asarray(series["values"], dtype=float).reshape(-1, 2)
        chunks.append(values)
        owners.append(np.full(len(values), len(identities), dtype=np.int64))
        identities.append(identity)
    if not chunks:
        return pd.DataFrame({"series": [], "ts": [], name: []}), identities
    stacked = np.concatenate(chunks)
    low, high = BOUNDS[name]
    value = stacked[:, 1]
    value = np.where((value >= low) & (value <= high), value, np.nan)
    ts = np.rint(stacked[:, 0]).astype(np.int64)
    frame = pd.DataFrame({"series": np.concatenate(owners), "ts": ts - ts % step_s, name: value})
    return frame, identities


def _units(frame: pd.DataFrame, identities: list[dict[str, Any]], offset: int) -> pd.DataFrame:
    ident = pd.DataFrame(identities)
    ident.index = ident.index + offset
    return frame.assign(series=frame["series"] + offset).join(ident, on="series")


def _drop_shadowed(frame: pd.DataFrame) -> pd.DataFrame:
    """Drop whole-GPU rows of MIG-partitioned GPUs and device rows of GPUs with per-pod vGPUs."""
    mig = set(frame.loc[frame["mig_gi_id"] >= 0, "uuid"])
    vgpu = set(frame.loc[frame["has_vgpu"], "uuid"])
    shadowed = (frame["uuid"].isin(mig) & (frame["mig_gi_id"] < 0)) | (
        frame["uuid"].isin(vgpu) & ~frame["has_vgpu"]
    )
    return frame.loc[~shadowed]


def _attribution(long: pd.DataFrame) -> pd.DataFrame:
    """Per unit and ts, the identity of the most authoritative series (util first)."""
    rank = {name: i for i, name in enumerate(ATTRIBUTION_ORDER)}
    ordered = long.assign(
        _rank=long["field"].map(rank).fillna(len(rank)),
        _has_pod=long["pod"].isna(),
    ).sort_values(["_rank", "_has_pod", "series"], kind="stable")
    keep = [*UNIT_KEY, "ts", "node", "model_name", "mig_profile", "gpu_index", "device",
            "namespace", "pod", "container", "label_style"]  # fmt: skip
    return ordered.drop_duplicates([*UNIT_KEY, "ts"])[keep]


def _values(long: pd.DataFrame) -> pd.DataFrame:
    wide = long.pivot_table(
        index=[*UNIT_KEY, "ts"], columns="field", values="value", aggfunc="max", dropna=False
    )
    for item in FIELDS:
        if item.field not in wide.columns:
            wide[item.field] = np.nan
    return wide


def _derive(frame: pd.DataFrame) -> pd.DataFrame:
    prof, dev = frame["util_prof"], frame["util_dev_pct"] / 100.0
    frame["util_ratio"] = prof.where(prof.notna(), dev).clip(0.0, 1.0)
    signal = pd.Series(None, index=frame.index, dtype=object)
    signal[dev.notna()] = SIGNAL_DEV
    signal[prof.notna()] = SIGNAL_PROF
    frame["util_signal"] = signal
    reserved = frame["fb_reserved_mib"].fillna(0.0)
    # used + free + reserved of one and the same reading (the last of the step)
    frame["fb_total_mib"] = frame["fb_used_last_mib"] + frame["fb_free_mib"] + reserved
    return frame


def samples_from_results(
    results: Mapping[str, Sequence[Mapping[str, Any]]],
    variants: LabelVariants,
    step_s: int,
) -> pd.DataFrame:
    """One row per GPU unit and grid instant, with the columns of :data:`OUTPUT_COLUMNS`.

    ``util_ratio`` is ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` where the unit exports it, else
    ``DCGM_FI_DEV_GPU_UTIL / 100``; ``util_signal`` says which. A unit/instant with no reading of
    any field does not appear (no data).
    """
    choice = pod_label_choice(results, variants)
    parts: list[pd.DataFrame] = []
    offset = 0
    for name, series_list in results.items():
        frame, identities = _field_frame(name, series_list, variants, choice, step_s)
        if identities:
            long = _units(frame.rename(columns={name: "value"}), identities, offset)
            parts.append(long.assign(field=name))
            offset += len(identities)
    if not parts:
        return pd.DataFrame(columns=OUTPUT_COLUMNS)
    long = _drop_shadowed(pd.concat(parts, ignore_index=True))
    wide = _values(long).join(_attribution(long).set_index([*UNIT_KEY, "ts"]))
    wide = _derive(wide.reset_index())
    has_reading = wide[[f.field for f in FIELDS]].notna().any(axis=1)
    return wide.loc[has_reading, OUTPUT_COLUMNS].reset_index(drop=True)
