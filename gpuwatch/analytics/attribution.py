"""Node-level attribution: pods to GPUs on nodes whose DCGM series carry no pod labels.

When none of a node's samples carries a pod but the pods frame shows GPU pods running there,
each sample time's running pods (oldest start first) take the node's units (lowest id first),
as many as they request; those samples get the pod, ``attribution = node`` and the node's mean
utilization at that time (docs/cost-model.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

NODE_ATTRIBUTION = "node"
_POD_FIELDS = ("namespace", "pod", "workload_kind", "workload", "team")


def _unit_nodes(samples: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """The distinct (cluster, node) of the units of ``samples``'s ``rows``, in the order they
    first appear. Cluster and node are facts of the unit (``gpu_id``), so one row per unit
    tells them: far fewer strings to compare than one per sample."""
    _, first = np.unique(samples["gpu_id"].to_numpy(dtype="int64")[rows], return_index=True)
    return samples.iloc[rows[np.sort(first)]][["cluster", "node"]].drop_duplicates()


def candidate_nodes(samples: pd.DataFrame, pods: pd.DataFrame) -> list[tuple[str, str]]:
    """(cluster, node) of the nodes whose samples carry no pod while GPU pods ran there."""
    labelled = _unit_nodes(samples, np.flatnonzero(samples["pod"].notna().to_numpy()))
    seen = _unit_nodes(samples, np.arange(len(samples)))
    running = pods.loc[pods["gpu_count"].gt(0) & pods["started_ts"].notna() & pods["node"].notna()]
    hosts = set(running[["cluster", "node"]].itertuples(index=False, name=None))
    done = set(labelled.itertuples(index=False, name=None))
    return [
        (str(cl), str(nd))
        for cl, nd in seen.itertuples(index=False, name=None)
        if (cl, nd) in hosts and (cl, nd) not in done and nd
    ]


def _segments(node_pods: pd.DataFrame, first_ts: int, last_ts: int) -> np.ndarray:
    """Instants where the set of running pods may change, covering ``[first_ts, last_ts]``."""
    events = pd.concat([node_pods["started_ts"], node_pods["finished_ts"]]).dropna()
    inner = events[(events > first_ts) & (events <= last_ts)].astype("int64")
    return np.unique(np.concatenate([[first_ts], inner.to_numpy(), [last_ts + 1]]))


def _assignments(node_pods: pd.DataFrame, units: np.ndarray, bounds: np.ndarray) -> pd.DataFrame:
    """Rows ``(segment, gpu_id, pod_id)``: which pod holds which unit in each segment."""
    ordered = node_pods.sort_values(["started_ts", "pod_id"])
    started = ordered["started_ts"].to_numpy(dtype="int64")
    finished = ordered["finished_ts"].to_numpy(dtype="float64", na_value=np.inf)
    counts = ordered["gpu_count"].to_numpy(dtype="int64")
    ids = ordered["pod_id"].to_numpy(dtype="int64")
    rows: list[tuple[int, int, int]] = []
    for seg, start in enumerate(bounds[:-1]):
        active = (started <= start) & (finished > start)
        holders = np.repeat(ids[active], counts[active])[: len(units)]
        rows.extend((seg, int(u), int(p)) for u, p in zip(units, holders, strict=False))
    return pd.DataFrame(rows, columns=["segment", "gpu_id", "pod_id"], dtype="int64")


def _attribute_node(
    samples: pd.DataFrame, rows: pd.Index, node_pods: pd.DataFrame
) -> pd.DataFrame | None:
    sub = samples.loc[rows, ["gpu_id", "ts", "util_ratio"]]
    bounds = _segments(node_pods, int(sub["ts"].min()), int(sub["ts"].max()))
    units = np.sort(sub["gpu_id"].unique())
    plan = _assignments(node_pods, units, bounds)
    if plan.empty:
        return None
    keyed = pd.DataFrame(
        {
            "row": rows,
            "gpu_id": sub["gpu_id"].to_numpy(),
            "segment": np.searchsorted(bounds, sub["ts"].to_numpy(), side="right") - 1,
            "node_util": sub.groupby("ts")["util_ratio"].transform("mean").to_numpy(),
        }
    )
    return keyed.merge(plan, on=["segment", "gpu_id"], how="inner")


def attribute_node_level(samples: pd.DataFrame, pods: pd.DataFrame) -> pd.DataFrame:
    """Samples with node-level attribution applied where DCGM carries no pod labels."""
    if samples.empty or pods.empty:
        return samples
    found: list[pd.DataFrame] = []
    for cluster, node in candidate_nodes(samples, pods):
        rows = samples.index[samples["cluster"].eq(cluster) & samples["node"].eq(node)]
        node_pods = pods[pods["cluster"].eq(cluster) & pods["node"].eq(node)]
        node_pods = node_pods[node_pods["gpu_count"].gt(0) & node_pods["started_ts"].notna()]
        held = _attribute_node(samples, rows, node_pods)
        if held is not None:
            found.append(held)
    if not found:
        return samples
    held = pd.concat(found, ignore_index=True)
    facts = pods.set_index("pod_id")
    out = samples.copy()
    index = pd.Index(held["row"])
    pod_ids = held["pod_id"].to_numpy()
    out.loc[index, "pod_id"] = pod_ids
    for name in _POD_FIELDS:
        out.loc[index, name] = facts.loc[pod_ids, name].to_numpy()
    out.loc[index, "pod_gpu_count"] = facts.loc[pod_ids, "gpu_count"].to_numpy()
    out.loc[index, "attribution"] = NODE_ATTRIBUTION
    out.loc[index, "util_ratio"] = held["node_util"].to_numpy()
    return out
