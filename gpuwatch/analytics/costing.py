"""Prices per GPU unit and the costed samples frame (docs/cost-model.md).

:func:`prepare` is the one entry point: it drops pods that hold no GPU, attributes at node level
where DCGM carries no pod labels, and adds hours, the unit price and the allocation flag.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.attribution import attribute_node_level, candidate_nodes
from gpuwatch.domain.allocation import gpu_share
from gpuwatch.domain.durations import HOUR_S
from gpuwatch.domain.frames import DCGM_ONLY_ATTRIBUTION
from gpuwatch.domain.pricing import PriceBook

#: Pod identity columns of a sample, cleared when a sample is not held by a pod.
POD_IDENTITY = (
    "pod_id",
    "namespace",
    "pod",
    "workload_kind",
    "workload",
    "team",
    "pod_gpu_count",
    "attribution",
)
#: Text columns that are facts of the GPU unit (``gpu_id``) and of the pod (``pod_id``).
UNIT_TEXT = ("cluster", "node", "gpu_uuid", "mig_profile", "gpu_model", "capacity_type")
POD_TEXT = ("namespace", "pod", "workload_kind", "workload", "team")
_UNIT_FACTS = ["gpu_id", "node", "gpu_model", "capacity_type", "mig_profile", "timeslice_replicas"]


def unit_shares(units: pd.DataFrame) -> pd.Series:
    """Each unit's share of its physical GPU (:func:`gpuwatch.domain.allocation.gpu_share`),
    indexed by ``gpu_id`` (any frame with the unit facts)."""
    facts = units[_UNIT_FACTS].drop_duplicates("gpu_id")
    values = [
        gpu_share(mig, model, replicas)
        for _, _, model, _, mig, replicas in facts.itertuples(index=False)
    ]
    return pd.Series(values, index=facts["gpu_id"].to_numpy(), dtype="float64")


def unit_prices(units: pd.DataFrame, price_book: PriceBook) -> pd.Series:
    """$ per GPU-hour of each unit's physical GPU, indexed by ``gpu_id`` (any frame with the
    unit facts). A unit's own hours are GPU-equivalent (:func:`unit_shares`), so its cost is
    hours × this price."""
    facts = units[_UNIT_FACTS].drop_duplicates("gpu_id")
    values = [
        price_book.usd_per_gpu_hour(
            None if model is pd.NA else model,
            "" if cap is pd.NA else cap,
            None if node is pd.NA else node,
        )
        for _, node, model, cap, _, _ in facts.itertuples(index=False)
    ]
    return pd.Series(values, index=facts["gpu_id"].to_numpy(), dtype="float64")


def _clear_identity(frame: pd.DataFrame, mask: pd.Series) -> pd.DataFrame:
    if not bool(mask.any()):
        return frame
    frame = frame.copy()
    for name in POD_IDENTITY:
        frame.loc[mask, name] = pd.NA
    return frame


def drop_gpuless_pods(samples: pd.DataFrame, pods: pd.DataFrame | None) -> pd.DataFrame:
    """Samples of pods that the Kubernetes API shows requesting no GPU (the exporter's own, for
    one) become unallocated. A pod known from DCGM only holds the GPUs its series name."""
    dcgm_only = samples["attribution"].astype(object).eq(DCGM_ONLY_ATTRIBUTION)
    mask = samples["pod_gpu_count"].fillna(-1).eq(0) & ~dcgm_only
    if pods is not None and len(pods):
        listed = pods[~pods["dcgm_only"].fillna(False).astype(bool)]
        gpuless = listed.loc[listed["gpu_count"].eq(0), "pod_id"]
        mask |= samples["pod_id"].isin(gpuless).fillna(False).astype(bool)
    return _clear_identity(samples, mask)


def node_level_units(samples: pd.DataFrame, pods: pd.DataFrame) -> np.ndarray:
    """``gpu_id`` of the units that node-level attribution may give to pods (their node's
    samples carry no pod while GPU pods ran there): :func:`prepare` needs their samples by
    time, where the other units' can be summed over any span first."""
    if samples.empty or pods.empty:
        return np.zeros(0, dtype="int64")
    nodes = candidate_nodes(drop_gpuless_pods(samples, pods), pods)
    if not nodes:
        return np.zeros(0, dtype="int64")
    keys = pd.MultiIndex.from_arrays(
        [samples["cluster"].astype(object), samples["node"].astype(object)]
    )
    on_node = keys.isin(nodes)
    return np.unique(samples.loc[on_node, "gpu_id"].to_numpy(dtype="int64"))


def cost_samples(samples: pd.DataFrame, price_book: PriceBook) -> pd.DataFrame:
    """Samples with ``data_hours``, ``gpu_hours``, ``usd_per_hour`` and ``allocated`` added.

    ``data_hours`` is ``step_s / 3600`` where the sample has a utilization reading and 0 where
    it has none (no data); ``gpu_hours`` is that × the unit's share of its GPU (GPU-equivalent
    hours, contract section 3); ``usd_per_hour`` is the price of the whole GPU, so that cost is
    ``gpu_hours × usd_per_hour``. ``util_ratio`` is clipped to 0–1 and 0 where missing.
    """
    frame = samples.copy()
    util = frame["util_ratio"].to_numpy(dtype="float64", na_value=np.nan)
    has_data = ~np.isnan(util)
    frame[c.UTIL] = np.clip(np.nan_to_num(util, nan=0.0), 0.0, 1.0)
    data_hours = np.where(has_data, frame["step_s"].to_numpy(dtype="float64") / HOUR_S, 0.0)
    ids = frame["gpu_id"]
    frame[c.DATA_HOURS] = data_hours
    frame[c.GPU_HOURS] = data_hours * ids.map(unit_shares(frame)).to_numpy(dtype="float64")
    frame[c.USD_PER_HOUR] = ids.map(unit_prices(frame, price_book)).to_numpy(dtype="float64")
    frame[c.ALLOCATED] = frame["pod"].notna().to_numpy() & frame["pod"].ne("").fillna(False)
    missing = frame[c.ALLOCATED] & frame["workload"].isna()
    if bool(missing.any()):
        frame.loc[missing, "workload_kind"] = "Pod"
        frame.loc[missing, "workload"] = frame.loc[missing, "pod"]
    return categorize(frame)


def _categorical_by(frame: pd.DataFrame, names: tuple[str, ...], key: str) -> bool:
    """Recode ``names`` as categoricals through ``key`` (they must be facts of the key)."""
    codes, _ = pd.factorize(frame[key], use_na_sentinel=True)
    keyless = codes < 0
    if bool((keyless & frame[names[0]].notna().to_numpy()).any()):
        return False
    uniques, first = np.unique(codes, return_index=True)
    first = first[uniques >= 0]
    for name in names:
        small = pd.Categorical(frame[name].to_numpy(dtype=object)[first])
        lookup = np.append(small.codes, -1)  # the last entry serves rows without a key
        full = lookup[np.where(keyless, len(first), codes)]
        frame[name] = pd.Categorical.from_codes(full, categories=small.categories)
    return True


def categorize(frame: pd.DataFrame) -> pd.DataFrame:
    """Text columns as categoricals, so that grouping millions of samples stays fast."""
    _categorical_by(frame, UNIT_TEXT, "gpu_id")
    if "allocation" in frame.columns:  # the unit's, or ``dra`` for a pod holding it by claim
        frame["allocation"] = frame["allocation"].astype("category")
    if not _categorical_by(frame, POD_TEXT, "pod_id"):
        for name in POD_TEXT:
            frame[name] = frame[name].astype("category")
    return frame


def prepare(
    samples: pd.DataFrame, pods: pd.DataFrame | None, price_book: PriceBook
) -> pd.DataFrame:
    """Raw samples to costed samples: GPU-less pods dropped, node-level attribution, prices."""
    cleaned = drop_gpuless_pods(samples.reset_index(drop=True), pods)
    if pods is not None:
        cleaned = attribute_node_level(cleaned, pods)
    return cost_samples(cleaned, price_book)
