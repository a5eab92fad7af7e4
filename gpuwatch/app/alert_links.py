"""Where an alert's subject leads: its node's page, its GPU's page, its namespace's workloads,
its pod's page.

An alert evaluated over the store names its GPU unit and pod by store id (``gpu_id``,
``pod_id``) and its node with its cluster; one from Prometheus names them by label
(``node``, ``namespace``, ``pod``, ``gpu`` the device index) and no cluster. A label is
linked only where the store names exactly one thing by it: a node or namespace name on one
cluster, a pod name in a namespace on one cluster. Nothing is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


_UNIT_FACTS = ["gpu_uuid", "mig_profile", "slot", "timeslice_replicas"]


@dataclass(frozen=True)
class Places:
    """Where the names of alert subjects lead, looked up once per table of subjects
    (:func:`places_of`): each name's clusters, each pod id's (cluster, namespace), each unit's
    label facts."""

    node_clusters: dict[str, set[str]]
    namespace_clusters: dict[str, set[str]]
    pod_clusters: dict[tuple[str, str], set[str]]
    pod_places: dict[int, set[tuple[str, str]]]
    units: dict[int, tuple[Any, ...]]


def _sets(frame: pd.DataFrame, key: list[str], value: list[str]) -> dict[Any, set[Any]]:
    """Per distinct ``key`` (one column: its value; several: a tuple) of ``frame``'s rows with
    every key present, the set of ``value`` (likewise)."""
    rows = frame[key + value].astype(object).dropna(subset=key).drop_duplicates()
    out: dict[Any, set[Any]] = {}
    for row in rows.itertuples(index=False, name=None):
        k = row[0] if len(key) == 1 else row[: len(key)]
        v = row[len(key)] if len(value) == 1 else row[len(key) :]
        out.setdefault(k, set()).add(v)
    return out


def places_of(snap: Snapshot, rows: Sequence[Mapping[str, Any]] | None = None) -> Places:
    """The places of the snapshot's units and pods that ``rows`` can name (all without
    ``rows``): by id, by node or namespace (all of their rows: a name must name one thing), by
    pod name."""
    units, pods = snap.units, snap.pods
    if rows is not None:

        def named(column: str) -> list[str]:
            return [t for t in (_text(r.get(column)) for r in rows) if t is not None]

        def ids(column: str) -> list[int]:
            return [int(v) for r in rows if (v := r.get(column)) is not None and not pd.isna(v)]

        on_unit = units["gpu_id"].isin(ids("gpu_id")) | units["node"].isin(named("node"))
        units = units[on_unit.to_numpy(dtype=bool)]
        by = pods["pod_id"].isin(ids("pod_id")) | pods["pod"].isin(named("pod"))
        pods = pods[(by | pods["namespace"].isin(named("namespace"))).to_numpy(dtype=bool)]
    once = units.drop_duplicates("gpu_id", keep=False)  # a unit the id names alone
    return Places(
        node_clusters=_sets(units, ["node"], ["cluster"]),
        namespace_clusters=_sets(pods, ["namespace"], ["cluster"]),
        pod_clusters=_sets(pods, ["namespace", "pod"], ["cluster"]),
        pod_places=_sets(pods, ["pod_id"], ["cluster", "namespace"]),
        units={int(r[0]): r[1:] for r in once[["gpu_id", *_UNIT_FACTS]].itertuples(False, None)},
    )


def _only(values: set[Any] | None) -> Any:
    """The one member of ``values``; None for none or several."""
    return next(iter(values)) if values is not None and len(values) == 1 else None


def node_link(snap: Snapshot, f: Filters, row: Mapping[str, Any], at: Places) -> Link | None:
    node = _text(row.get("node"))
    if node is None:
        return None
    cluster = _text(row.get("cluster")) or _only(at.node_clusters.get(node))
    if cluster is None:
        return None
    return Link(node, f.with_(cluster=str(cluster)).href("/node", name=node))


def gpu_link(snap: Snapshot, f: Filters, row: Mapping[str, Any], at: Places) -> Link | None:
    gpu_id = row.get("gpu_id")
    if gpu_id is None or pd.isna(gpu_id):
        return None
    unit = at.units.get(int(gpu_id))
    if unit is None:
        return None
    return Link(unit_label(*unit), gpu_href(f, snap, int(gpu_id)))


def _pod_place(at: Places, row: Mapping[str, Any]) -> tuple[str, str] | None:
    """The cluster and namespace of the pod a row names: by store id, else the one cluster
    where a pod of that name ran in that namespace."""
    pod_id = row.get("pod_id")
    if pod_id is not None and not pd.isna(pod_id):
        place = _only(at.pod_places.get(int(pod_id)))
        return None if place is None else (str(place[0]), str(place[1]))
    namespace, pod = _text(row.get("namespace")), _text(row.get("pod"))
    if namespace is None or pod is None:
        return None
    clusters = at.pod_clusters.get((namespace, pod), set())
    cluster = _text(row.get("cluster"))
    if cluster is not None:
        clusters = clusters & {cluster}
    found = _only(clusters)
    return None if found is None else (str(found), namespace)


def pod_link(snap: Snapshot, f: Filters, row: Mapping[str, Any], at: Places) -> Link | None:
    """The pod, linked to its Pod page."""
    pod, place = _text(row.get("pod")), _pod_place(at, row)
    if pod is None or place is None:
        return None
    return Link(pod, pod_href(f, place[0], place[1], pod))


def namespace_link(snap: Snapshot, f: Filters, row: Mapping[str, Any], at: Places) -> Link | None:
    """The namespace, linked to the Workloads page narrowed to it (and its cluster)."""
    namespace = _text(row.get("namespace"))
    if namespace is None:
        return None
    cluster = _text(row.get("cluster")) or _only(at.namespace_clusters.get(namespace))
    if cluster is None:
        return None
    href = f.with_(cluster=str(cluster), namespace=namespace).href("/workloads")
    return Link(namespace, href)


#: The subject columns that link, and how.
LINKS = {"node": node_link, "gpu_id": gpu_link, "namespace": namespace_link, "pod": pod_link}


def subject_links(
    snap: Snapshot, f: Filters, row: Mapping[str, Any], at: Places | None = None
) -> dict[str, Link]:
    """The links of one alert subject's row, by column (``at``: where to look names up, by
    default the whole snapshot)."""
    at = at or places_of(snap)
    found = {name: link(snap, f, row, at) for name, link in LINKS.items() if name in row}
    return {name: link for name, link in found.items() if link is not None}
