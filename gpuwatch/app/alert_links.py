"""Where an alert's subject leads: its node's page, its GPU's page, its namespace's workloads,
its pod's page.

An alert evaluated over the store names its GPU unit and pod by store id (``gpu_id``,
``pod_id``) and its node with its cluster; one from Prometheus names them by label
(``node``, ``namespace``, ``pod``, ``gpu`` the device index) and no cluster. A label is
linked only where the store names exactly one thing by it: a node or namespace name on one
cluster, a pod name in a namespace on one cluster. Nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.links import gpu_href
from gpuwatch.app.views_gpu import unit_label
from gpuwatch.app.views_pod import pod_href


@dataclass(frozen=True)
class Link:
    text: str
    href: str


def _text(value: Any) -> str | None:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    text = str(value).strip()
    return text or None


def _one(frame: pd.DataFrame) -> pd.Series | None:
    return frame.iloc[0] if len(frame) == 1 else None


def _only_cluster(frame: pd.DataFrame, column: str, value: str) -> str | None:
    """The cluster of the rows whose ``column`` is ``value``, if they all are on one (Prometheus
    names no cluster); None for none or several."""
    clusters = frame.loc[frame[column].astype(object).eq(value), "cluster"].astype(object)
    names = clusters.unique()
    return str(names[0]) if len(names) == 1 else None


def node_link(snap: Snapshot, f: Filters, row: Mapping[str, Any]) -> Link | None:
    node = _text(row.get("node"))
    if node is None:
        return None
    cluster = _text(row.get("cluster")) or _only_cluster(snap.units, "node", node)
    if cluster is None:
        return None
    return Link(node, f.with_(cluster=cluster).href("/node", name=node))


def gpu_link(snap: Snapshot, f: Filters, row: Mapping[str, Any]) -> Link | None:
    gpu_id = row.get("gpu_id")
    if gpu_id is None or pd.isna(gpu_id):
        return None
    unit = _one(snap.units[snap.units["gpu_id"].eq(int(gpu_id))])
    if unit is None:
        return None
    label = unit_label(
        unit["gpu_uuid"], unit["mig_profile"], unit["slot"], unit["timeslice_replicas"]
    )
    return Link(label, gpu_href(f, snap, int(gpu_id)))


def _pod_place(snap: Snapshot, row: Mapping[str, Any]) -> tuple[str, str] | None:
    """The cluster and namespace of the pod a row names: by store id, else the one cluster
    where a pod of that name ran in that namespace."""
    pods = snap.pods
    pod_id = row.get("pod_id")
    if pod_id is not None and not pd.isna(pod_id):
        same = pods["pod_id"].eq(int(pod_id))
    else:
        namespace, pod = _text(row.get("namespace")), _text(row.get("pod"))
        if namespace is None or pod is None:
            return None
        same = pods["namespace"].astype(object).eq(namespace) & pods["pod"].astype(object).eq(pod)
        cluster = _text(row.get("cluster"))
        if cluster is not None:
            same &= pods["cluster"].astype(object).eq(cluster)
    places = pods.loc[same.to_numpy(dtype=bool), ["cluster", "namespace"]].astype(object)
    found = places.drop_duplicates()
    return (str(found.iloc[0, 0]), str(found.iloc[0, 1])) if len(found) == 1 else None


def pod_link(snap: Snapshot, f: Filters, row: Mapping[str, Any]) -> Link | None:
    """The pod, linked to its Pod page."""
    pod, place = _text(row.get("pod")), _pod_place(snap, row)
    if pod is None or place is None:
        return None
    return Link(pod, pod_href(f, place[0], place[1], pod))


def namespace_link(snap: Snapshot, f: Filters, row: Mapping[str, Any]) -> Link | None:
    """The namespace, linked to the Workloads page narrowed to it (and its cluster)."""
    namespace = _text(row.get("namespace"))
    if namespace is None:
        return None
    cluster = _text(row.get("cluster")) or _only_cluster(snap.pods, "namespace", namespace)
    if cluster is None:
        return None
    return Link(namespace, f.with_(cluster=cluster, namespace=namespace).href("/workloads"))


#: The subject columns that link, and how.
LINKS = {"node": node_link, "gpu_id": gpu_link, "namespace": namespace_link, "pod": pod_link}


def subject_links(snap: Snapshot, f: Filters, row: Mapping[str, Any]) -> dict[str, Link]:
    """The links of one alert subject's row, by column."""
    found = {name: link(snap, f, row) for name, link in LINKS.items() if name in row}
    return {name: link for name, link in found.items() if link is not None}
