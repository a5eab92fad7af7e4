"""Turning a Kubernetes snapshot and a page of DCGM samples into store rows."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from sqlalchemy import Connection, select

from gpuwatch.collectors.kube_parse import KubeSnapshot
from gpuwatch.collectors.page import HEALTH_VALUE_COLUMNS, SIGNALS, UNIT_KEY, PageSamples
from gpuwatch.domain.allocation import DEVICE_PLUGIN, DRA, MIG, TIME_SLICE
from gpuwatch.domain.labels import UNASSIGNED_TEAM
from gpuwatch.domain.pricing import builtin_prices
from gpuwatch.store.models import UTIL_SIGNALS, Namespace, Node, Pod
from gpuwatch.store.writer import SampleColumns, id_map, table_of, write_pods

_SIGNAL_CODES = {name: code for code, name in UTIL_SIGNALS.items()}


def node_rows(snap: KubeSnapshot) -> list[dict[str, Any]]:
    return [
        {**node, "first_seen_ts": snap.taken_ts, "last_seen_ts": snap.taken_ts}
        for node in snap.nodes
    ]


def namespace_rows(snap: KubeSnapshot) -> list[dict[str, Any]]:
    return [{**ns, "last_seen_ts": snap.taken_ts} for ns in snap.namespaces]


def pod_rows(snap: KubeSnapshot, node_ids: Mapping[str, int]) -> list[dict[str, Any]]:
    out = []
    for pod in snap.gpu_pods:
        row = {key: value for key, value in pod.items() if key != "node_name"}
        row["node_id"] = node_ids.get(pod.get("node_name") or "")
        row["last_seen_ts"] = snap.taken_ts
        out.append(row)
    return out


def queue_flavor_rows(snap: KubeSnapshot) -> list[dict[str, Any]]:
    """GPU quotas as last seen at the snapshot's instant, existing since the queue's creation
    (the snapshot's instant when the API gave none, or a later one)."""
    taken = snap.taken_ts
    return [
        {
            **row,
            "first_seen_ts": min(row.get("first_seen_ts") or taken, taken),
            "last_seen_ts": taken,
        }
        for row in snap.sched.queue_flavors
    ]


def sched_workload_rows(snap: KubeSnapshot) -> list[dict[str, Any]]:
    """Kueue Workloads and Volcano PodGroups asking for GPUs, seen at the snapshot's instant."""
    return [{**row, "last_seen_ts": snap.taken_ts} for row in snap.sched.workloads]


def resolve_nodes(page: PageSamples, snap: KubeSnapshot | None) -> PageSamples:
    """Map an exporter pod's name (``Hostname`` without ``NODE_NAME``) to its node's name."""
    nodes = page.series["node"].fillna("")
    if snap is not None:
        known = {node["name"] for node in snap.nodes}
        nodes = nodes.map(lambda n: n if n in known else snap.pod_nodes.get(n, n))
    return page.with_nodes(nodes)


def dcgm_node_rows(conn: Connection, cluster_id: int, pairs: pd.DataFrame) -> list[dict[str, Any]]:
    """Nodes named by DCGM but unknown to the store (no Kubernetes facts): minimal rows.

    ``pairs`` is :meth:`PageSamples.pairs` of the page.
    """
    known = {key[0] for key in id_map(conn, Node, cluster_id, ("name",))}
    fresh = pairs[(pairs["node"] != "") & ~pairs["node"].isin(known)]
    if fresh.empty:
        return []
    nodes = fresh.groupby("node", sort=True).agg(
        gpu_count=("uuid", "nunique"),
        mig_gi_max=("mig_gi_id", "max"),
        first_seen_ts=("first_ts", "min"),
        last_seen_ts=("last_ts", "max"),
    )
    # The model most samples name (the first in name order among equals).
    models = fresh.dropna(subset=["model_name"]).groupby(["node", "model_name"])["rows"].sum()
    ranked = models.reset_index().sort_values(
        ["node", "rows", "model_name"], ascending=[True, False, True]
    )
    model = ranked.drop_duplicates("node").set_index("node")["model_name"]
    return [
        {
            "name": str(name),
            "gpu_model": _text(model.get(name)),
            "gpu_count": int(row.gpu_count),
            "capacity_type": "on_demand",
            "mig_capable": bool(row.mig_gi_max >= 0),
            "timeslice_replicas": 1,
            "labels": {},
            "first_seen_ts": int(row.first_seen_ts),
            "last_seen_ts": int(row.last_seen_ts),
        }
        for name, row in nodes.iterrows()
    ]


class NodeFacts(NamedTuple):
    """What the store knows of a node that decides how its GPU units are read."""

    replicas: int
    memory_mib: float | None
    sharing: str
    #: MIG mode is on (GFD's ``nvidia.com/mig.config`` names a layout, not ``all-disabled``).
    mig_enabled: bool = False


def node_facts(conn: Connection, cluster_id: int) -> dict[int, NodeFacts]:
    """Per node id: time-slice/MPS replicas, GPU memory (MiB), how it hands out GPUs, and
    whether MIG mode is on."""
    t = table_of(Node)
    stmt = select(
        t.c.id, t.c.timeslice_replicas, t.c.gpu_memory_mib, t.c.gpu_sharing, t.c.mig_config
    ).where(t.c.cluster_id == cluster_id)
    return {
        int(r[0]): NodeFacts(
            int(r[1] or 1),
            None if r[2] is None else float(r[2]),
            r[3] or DEVICE_PLUGIN,
            r[4] is not None and r[4] != MIG_DISABLED,
        )
        for r in conn.execute(stmt)
    }


def slot_replicas(conn: Connection, cluster_id: int) -> dict[str, int]:
    """Node name → the time-slice or MPS replicas of its GPUs, for nodes that share them."""
    table = table_of(Node)
    stmt = select(table.c.name, table.c.timeslice_replicas).where(
        table.c.cluster_id == cluster_id, table.c.timeslice_replicas > 1
    )
    return {str(name): int(replicas) for name, replicas in conn.execute(stmt)}


def empty_mig_gpus(units: list[dict[str, Any]], facts: Mapping[int, NodeFacts]) -> set[int]:
    """Positions in ``units`` (rows of :func:`gpu_rows`) of whole GPUs on nodes in MIG mode
    (``facts``: :func:`node_facts`): a GPU seen whole there has no MIG instance, so nothing can
    run on it."""
    on = {node for node, fact in facts.items() if fact.mig_enabled}
    return {n for n, u in enumerate(units) if int(u["mig_gi_id"]) < 0 and u["node_id"] in on}


def unit_sharing(unit: Mapping[Any, Any], node: NodeFacts) -> tuple[str, int]:
    """How a unit is handed out and the slots its GPU (or MIG instance) is split into.

    A device a claim shares among k pods: ``dra``, k. A ``vgpu`` slot: the node's time-slice
    or MPS mode, its replicas. Otherwise the unit is the whole GPU or MIG instance DCGM sees
    (1 slot): ``dra`` on a DRA node or when a claim holds it, else ``mig`` for an instance,
    else the node's mode (a shared GPU whose exporter has no per-pod series is seen whole).
    """
    replicas, mode = node.replicas, node.sharing
    if int(unit["shared_by"]) > 1:
        return DRA, int(unit["shared_by"])
    if bool(unit["vgpu"]):
        return (mode if mode not in (DEVICE_PLUGIN, DRA) else TIME_SLICE), max(replicas, 1)
    if mode == DRA or bool(unit["claimed"]):
        return DRA, 1
    return (MIG if int(unit["mig_gi_id"]) >= 0 else mode), 1


_NO_NODE = NodeFacts(1, None, DEVICE_PLUGIN)
#: GFD's ``nvidia.com/mig.config`` when MIG mode is off.
MIG_DISABLED = "all-disabled"


@functools.cache
def _memory_by_alias() -> dict[str, float]:
    """Lower-cased model alias → memory of the first built-in model of that alias that has one
    (the table ships with the package: read once)."""
    memory: dict[str, float] = {}
    for price in builtin_prices().values():
        if price.memory_mib:
            for alias in price.aliases:
                memory.setdefault(alias.lower(), float(price.memory_mib))
    return memory


def _model_memory_mib(model: object) -> float | None:
    if not isinstance(model, str):
        return None
    return _memory_by_alias().get(model.strip().lower())


def _unit_facts(page: PageSamples, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per unit: its last node, the last known index, device, model and profile, the largest
    framebuffer total and the first and last instants (rows in ``units`` order)."""
    ordered = pairs.sort_values(["unit", "last_ts"], kind="stable")
    facts = ordered.groupby("unit", sort=True).agg(
        node=("node", "last"),
        gpu_index=("gpu_index", "last"),
        device=("device", "last"),
        model_name=("model_name", "last"),
        mig_profile=("mig_profile", "last"),
        first_seen_ts=("first_ts", "min"),
        last_seen_ts=("last_ts", "max"),
    )
    memory = pd.Series(page.values["fb_total_mib"]).groupby(page.unit).max()
    return page.units.join(facts).assign(memory_total_mib=memory)


def gpu_rows(
    page: PageSamples,
    pairs: pd.DataFrame,
    node_ids: Mapping[str, int],
    facts: Mapping[int, NodeFacts],
) -> list[dict[str, Any]]:
    """One row per GPU unit of the page (``facts``: :func:`node_facts` by node id); memory total
    from DCGM, else the node, else the model."""
    out: list[dict[str, Any]] = []
    for unit in _unit_facts(page, pairs).to_dict("records"):
        gi = int(unit["mig_gi_id"])
        node_id = node_ids.get(unit["node"]) if unit["node"] else None
        node = facts.get(node_id, _NO_NODE) if node_id else _NO_NODE
        sharing, replicas = unit_sharing(unit, node)
        node_memory = node.memory_mib
        memory = unit["memory_total_mib"]
        if pd.isna(memory):
            memory = nominal_memory_mib(gi, node_memory, unit["model_name"])
        out.append(
            {
                "uuid": unit["uuid"],
                "mig_gi_id": gi,
                "slot": int(unit["slot"]),
                "node_id": node_id,
                "gpu_index": None if pd.isna(unit["gpu_index"]) else int(unit["gpu_index"]),
                "device": _text(unit["device"]),
                "model_name": _text(unit["model_name"]),
                "mig_profile": _text(unit["mig_profile"]),
                "timeslice_replicas": replicas,
                "sharing": sharing,
                "memory_total_mib": None if memory is None or pd.isna(memory) else float(memory),
                "first_seen_ts": int(unit["first_seen_ts"]),
                "last_seen_ts": int(unit["last_seen_ts"]),
            }
        )
    return out


def nominal_memory_mib(gi: int, node_memory: float | None, model: object) -> float | None:
    """A whole GPU's memory as the node's label, else the model's size, says (None for a MIG
    instance): what samples without a framebuffer reading of their own are given."""
    if gi >= 0:
        return None
    if node_memory is not None and not pd.isna(node_memory):
        return float(node_memory)
    return _model_memory_mib(model)


def nominal_memory(
    units: list[dict[str, Any]], facts: Mapping[int, NodeFacts]
) -> dict[tuple[Any, ...], float | None]:
    """Per unit key (uuid, GPU instance, slot) of ``gpu_rows``: :func:`nominal_memory_mib`."""
    return {
        (u["uuid"], u["mig_gi_id"], u["slot"]): nominal_memory_mib(
            int(u["mig_gi_id"]),
            facts.get(u["node_id"], _NO_NODE).memory_mib if u["node_id"] else None,
            u["model_name"],
        )
        for u in units
    }


def _idle_util(page: PageSamples, gpu: np.ndarray, idle_gpus: frozenset[int]) -> np.ndarray:
    util: np.ndarray = page.values["util_ratio"]
    if not idle_gpus:
        return util
    empty = np.isin(gpu, np.fromiter(idle_gpus, dtype=np.int64)) & np.isnan(util)
    return np.where(empty, 0.0, util)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _stored_pods(conn: Connection, cluster_id: int) -> dict[tuple[str, str], int]:
    """(namespace, name) → the pod row to attribute to: an API-seen uid over a DCGM-only one,
    the most recently created first."""
    table = table_of(Pod)
    stmt = (
        select(table.c.namespace, table.c.name, table.c.id)
        .where(table.c.cluster_id == cluster_id)
        .order_by((table.c.uid == "").desc(), table.c.created_ts.asc().nulls_first(), table.c.id)
    )
    return {(r[0], r[1]): int(r[2]) for r in conn.execute(stmt)}


def _namespace_teams(conn: Connection, cluster_id: int) -> dict[str, str]:
    table = table_of(Namespace)
    stmt = select(table.c.name, table.c.team).where(table.c.cluster_id == cluster_id)
    return {str(r[0]): str(r[1]) for r in conn.execute(stmt) if r[1]}


def pod_ids(
    conn: Connection,
    cluster_id: int,
    page: PageSamples,
    pairs: pd.DataFrame,
    snap: KubeSnapshot | None,
) -> dict[tuple[str, str], int]:
    """(namespace, pod) named by the page's samples → pod id; pods never seen in the API get a
    row of their own (kind ``Pod``); pods the API shows requesting no GPU hold none.

    In the order the page's rows first name them (``pairs`` is :meth:`PageSamples.pairs`).
    """
    named = pairs.loc[pairs["pod"].notna(), ["namespace", "pod"]].drop_duplicates()
    pairs_named = [(str(ns), str(pod)) for ns, pod in named.itertuples(index=False)]
    excluded = snap.non_gpu_pods if snap is not None else frozenset()
    found = [pair for pair in pairs_named if pair not in excluded]
    stored = _stored_pods(conn, cluster_id)
    missing = [pair for pair in found if pair not in stored]
    if missing:
        teams = _namespace_teams(conn, cluster_id)
        last = int(page.ts.max())
        write_pods(conn, cluster_id, [_dcgm_only_pod(ns, pod, teams, last) for ns, pod in missing])
        stored = _stored_pods(conn, cluster_id)
    return {pair: stored[pair] for pair in found}


def _dcgm_only_pod(namespace: str, pod: str, teams: Mapping[str, str], ts: int) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "name": pod,
        "uid": "",
        "phase": None,
        "workload_kind": "Pod",
        "workload_name": pod,
        "team": teams.get(namespace, UNASSIGNED_TEAM),
        "gpu_resource": None,
        "gpu_count": 0,
        "labels": {},
        "last_seen_ts": ts,
    }


def sample_columns(
    page: PageSamples,
    gpu_ids: Mapping[tuple[Any, ...], int],
    pod_map: Mapping[tuple[str, str], int],
    step_s: int,
    memory_by_gpu: Mapping[int, float | None] | None = None,
    idle_gpus: frozenset[int] = frozenset(),
) -> SampleColumns:
    """The page's rows as the columns of :data:`gpuwatch.store.writer.SAMPLE_FIELDS`, with the
    efficiency and health readings the page has (``health``; the others are NULL).

    ``idle_gpus``: store ids of GPUs in MIG mode without instances (:func:`empty_mig_gpus`):
    a reading of theirs without utilization (MIG mode has no ``DCGM_FI_DEV_GPU_UTIL``) is
    utilization 0 with no signal, so the GPU counts as capacity nobody can use, never as
    no data."""
    unit_gpu = np.array(
        [gpu_ids[(u, int(g), int(s))] for u, g, s in page.units[UNIT_KEY].itertuples(index=False)],
        dtype=np.int64,
    )
    series = page.series
    series_pod = np.array(
        [
            pod_map.get((ns, pod), np.nan) if isinstance(pod, str) else np.nan
            for ns, pod in zip(series["namespace"], series["pod"], strict=True)
        ],
        dtype=np.float64,
    )
    total = page.values["fb_total_mib"]
    if memory_by_gpu:
        fallback = np.array([memory_by_gpu.get(int(g)) or np.nan for g in unit_gpu.tolist()])
        total = np.where(np.isnan(total), fallback[page.unit], total)
    signal_codes = np.array(
        [np.nan if name is None else _SIGNAL_CODES[name] for name in SIGNALS], dtype=np.float64
    )
    return SampleColumns(
        gpu_id=unit_gpu[page.unit],
        ts=page.ts,
        step_s=np.full(len(page), step_s, dtype=np.int64),
        pod_id=series_pod[page.source],
        util_ratio=_idle_util(page, unit_gpu[page.unit], idle_gpus),
        util_signal=signal_codes[page.util_signal],
        fb_used_mib=page.values["fb_used_mib"],
        fb_total_mib=total,
        power_w=page.values["power_w"],
        temp_c=page.values["temp_c"],
        xid=np.trunc(page.values["xid"]),
        health={name: page.values[name] for name in HEALTH_VALUE_COLUMNS if name in page.values},
    )
