"""How GPUs are handed out (contract section 7): DRA claim slots in DCGM pages, each unit's
mode and slots, DRA checks, and recommendations written as claim requests."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from sqlalchemy import Engine

from gpuwatch.analytics.build import pods_frame, samples_frame
from gpuwatch.analytics.claims import NO_POD, NO_SERIES, NO_UUID, claim_checks
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.summary import summarize
from gpuwatch.collectors import rows
from gpuwatch.collectors.claims import attribute_claims
from gpuwatch.collectors.dcgm import page_samples
from gpuwatch.collectors.dra_parse import DraDevice, DraState
from gpuwatch.collectors.kube_parse import KubeSnapshot
from gpuwatch.collectors.rows import NodeFacts, unit_sharing
from gpuwatch.collectors.slots import fill_free_slots
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.domain.pricing import build_price_book
from gpuwatch.store import writer

T0 = 1_763_251_200
CLAIM = {
    "dra_claim_name": "shared-gpu",
    "dra_claim_namespace": "ml",
    "dra_device_name": "gpu-0",
    "dra_driver_name": "gpu.nvidia.com",
    "dra_pool_name": "node-a",
}


def _series(uuid: str, value: str, **labels: str) -> dict[str, Any]:
    metric = {"UUID": uuid, "Hostname": "node-a", "modelName": "NVIDIA H100 80GB HBM3", **labels}
    return {"metric": metric, "values": [[T0, value]]}


def _page() -> Any:
    results = {
        "util_prof": [
            # one claim shared by two pods: one series per pod, the same reading
            _series("GPU-s", "0.4", pod="b-1", namespace="ml", **CLAIM),
            _series("GPU-s", "0.4", pod="a-0", namespace="ml", **CLAIM),
            # a claim held by one pod: a whole device
            _series("GPU-w", "0.9", pod="solo", namespace="ml", **{**CLAIM, "dra_claim_name": "w"}),
            # a time-slice slot of another GPU
            _series("GPU-t", "0.1", pod="nb", namespace="lab", vgpu="GPU-t::3"),
            _series("GPU-p", "0.0"),
        ]
    }
    return page_samples(results, LabelVariants(), 60)


def test_a_claim_shared_by_two_pods_gives_each_pod_a_slot() -> None:
    page = _page()
    units = page.units.set_index(["uuid", "slot"])
    assert units.loc[("GPU-s", 0), "shared_by"] == 2
    assert units.loc[("GPU-s", 1), "shared_by"] == 2
    assert bool(units.loc[("GPU-s", 0), "claimed"])
    assert units.loc[("GPU-w", 0), "shared_by"] == 1
    assert bool(units.loc[("GPU-w", 0), "claimed"])
    assert bool(units.loc[("GPU-t", 3), "vgpu"])
    assert not bool(units.loc[("GPU-p", 0), "claimed"])
    frame = page.to_frame().set_index(["uuid", "slot"])
    # slots follow the pods' names: a-0 first, b-1 second, whatever the series order
    assert frame.loc[("GPU-s", 0), "pod"] == "a-0"
    assert frame.loc[("GPU-s", 1), "pod"] == "b-1"
    assert frame.loc[("GPU-s", 1), "util_ratio"] == 0.4


DEVICE_PLUGIN_NODE = NodeFacts(1, None, "device-plugin")


def _unit(**facts: Any) -> dict[str, Any]:
    return {"mig_gi_id": -1, "shared_by": 1, "vgpu": False, "claimed": False, **facts}


def test_each_unit_says_how_it_is_handed_out_and_into_how_many_slots() -> None:
    assert unit_sharing(_unit(shared_by=3, claimed=True), DEVICE_PLUGIN_NODE) == ("dra", 3)
    assert unit_sharing(_unit(claimed=True), DEVICE_PLUGIN_NODE) == ("dra", 1)
    assert unit_sharing(_unit(), NodeFacts(1, None, "dra")) == ("dra", 1)
    assert unit_sharing(_unit(mig_gi_id=2), DEVICE_PLUGIN_NODE) == ("mig", 1)
    assert unit_sharing(_unit(vgpu=True), NodeFacts(4, None, "mps")) == ("mps", 4)
    assert unit_sharing(_unit(vgpu=True), NodeFacts(4, None, "time-slice")) == ("time-slice", 4)
    # a shared GPU whose exporter sees it whole is one unit: the whole GPU, one slot
    assert unit_sharing(_unit(), NodeFacts(4, None, "mps")) == ("mps", 1)
    assert unit_sharing(_unit(), DEVICE_PLUGIN_NODE) == ("device-plugin", 1)


def _devices() -> pd.DataFrame:
    base = {"cluster": "c1", "claim_namespace": "ml", "driver": "gpu.nvidia.com", "pool": "n1"}
    return pd.DataFrame(
        [
            {**base, "claim_name": "ok", "device": "gpu-0", "gpu_uuid": "GPU-0",
             "consumers": [["ml", "a", "u1"]]},
            {**base, "claim_name": "nouuid", "device": "gpu-1", "gpu_uuid": None,
             "consumers": [["ml", "b", "u2"]]},
            {**base, "claim_name": "unseen", "device": "gpu-2", "gpu_uuid": "GPU-2",
             "consumers": [["ml", "c", "u3"], ["ml", "d", "u4"]]},
            {**base, "claim_name": "unheld", "device": "gpu-3", "gpu_uuid": "GPU-3",
             "consumers": [["ml", "e", "u5"]]},
        ]
    )  # fmt: skip


def test_claim_checks_name_each_device_that_is_not_attributed() -> None:
    units = pd.DataFrame({"cluster": ["c1", "c1"], "gpu_uuid": ["GPU-0", "GPU-3"]})
    found = claim_checks(_devices(), units, frozenset({("c1", "GPU-0")}))
    assert found[["claim", "device", "pods", "problem"]].values.tolist() == [
        ["ml/nouuid", "gpu.nvidia.com/n1/gpu-1", "ml/b", NO_UUID],
        ["ml/unseen", "gpu.nvidia.com/n1/gpu-2", "ml/c, ml/d", NO_SERIES],
        ["ml/unheld", "gpu.nvidia.com/n1/gpu-3", "ml/e", NO_POD],
    ]


def test_claim_checks_of_no_device_are_empty() -> None:
    found = claim_checks(pd.DataFrame(), pd.DataFrame({"cluster": [], "gpu_uuid": []}), frozenset())
    assert found.empty
    assert list(found.columns) == ["cluster", "claim", "device", "gpu_uuid", "pods", "problem"]


def _sliced_page() -> Any:
    """A T4 of 4 time-slice replicas: pods on slots 0 and 2 at the first instant, slot 2 only
    at the second; the device-level series at both (it also names a pod: ignored)."""
    util = [
        {"metric": {"UUID": "GPU-t", "Hostname": "n3", "modelName": "Tesla T4", "vgpu": "GPU-t::0",
                    "pod": "nb-0", "namespace": "lab"}, "values": [[T0, "0.3"]]},
        {"metric": {"UUID": "GPU-t", "Hostname": "n3", "modelName": "Tesla T4", "vgpu": "GPU-t::2",
                    "pod": "nb-2", "namespace": "lab"}, "values": [[T0, "0.2"], [T0 + 60, "0.25"]]},
        {"metric": {"UUID": "GPU-t", "Hostname": "n3", "modelName": "Tesla T4", "pod": "nb-0",
                    "namespace": "lab"}, "values": [[T0, "0.5"], [T0 + 60, "0.25"]]},
    ]  # fmt: skip
    return page_samples({"util_prof": util}, LabelVariants(), 60, keep_device_slots=True)


def test_unheld_slots_of_a_shared_gpu_are_filled_from_its_device_series() -> None:
    page = fill_free_slots(_sliced_page(), {"n3": 4})
    frame = page.to_frame()
    got = sorted(
        (int(r.slot), int(r.ts) - T0, r.pod if isinstance(r.pod, str) else None, r.util_ratio)
        for r in frame.itertuples()
    )
    assert got == [
        (0, 0, "nb-0", 0.3), (0, 60, None, 0.0),
        (1, 0, None, 0.0), (1, 60, None, 0.0),
        (2, 0, "nb-2", 0.2), (2, 60, "nb-2", 0.25),
        (3, 0, None, 0.0), (3, 60, None, 0.0),
    ]  # fmt: skip
    assert page.units["vgpu"].all() and (page.units["slot"] >= 0).all()


def test_without_known_replicas_the_device_series_is_dropped() -> None:
    frame = fill_free_slots(_sliced_page(), {}).to_frame()
    assert sorted(zip(frame["slot"], frame["pod"], strict=True)) == [
        (0, "nb-0"),
        (2, "nb-2"),
        (2, "nb-2"),
    ]


def _device(name: str, uuid: str, profile: str | None, *pods: str) -> DraDevice:
    return DraDevice(
        "ml", f"claim-{name}", f"uid-{name}", "gpu", "gpu.nvidia.com", "node-a", name, "node-a",
        uuid, profile, None, None, None, "gpu.nvidia.com",
        tuple(("ml", pod, f"uid-{pod}") for pod in pods),
    )  # fmt: skip


def test_series_without_pod_labels_are_joined_to_the_claims_pod() -> None:
    """An exporter without DRA pod mapping: a claimed whole GPU and a claimed MIG instance go
    to their claims' pods; a device two pods share, and an unclaimed GPU, stay unattributed."""
    util = [
        _series("GPU-w", "0.9"),
        _series("GPU-m", "0.2", GPU_I_ID="3", GPU_I_PROFILE="1g.10gb"),
        _series("GPU-s", "0.4"),
        _series("GPU-p", "0.0"),
    ]
    page = page_samples({"util_prof": util}, LabelVariants(), 60)
    dra = DraState("v1", "", (
        _device("gpu-0", "GPU-w", None, "solo"),
        _device("gpu-1-mig", "GPU-m", "1g.10gb", "tiny"),
        _device("gpu-2", "GPU-s", None, "a-0", "b-1"),
    ))  # fmt: skip
    snap = KubeSnapshot([], [], [], frozenset(), {}, T0, dra)
    joined = attribute_claims(page, page.pairs(), snap)
    frame = joined.to_frame().set_index("uuid")
    assert frame.loc["GPU-w", "pod"] == "solo"
    assert frame.loc["GPU-m", "pod"] == "tiny"
    assert pd.isna(frame.loc["GPU-s", "pod"]) and pd.isna(frame.loc["GPU-p", "pod"])
    claimed = joined.units.set_index("uuid")["claimed"]
    assert claimed.to_dict() == {"GPU-m": True, "GPU-p": False, "GPU-s": False, "GPU-w": True}


def test_a_gpu_in_mig_mode_without_instances_is_capacity_nobody_can_use(
    migrated_engine: Engine,
) -> None:
    """MIG mode has no DCGM_FI_DEV_GPU_UTIL: a whole GPU seen on a node in MIG mode has no
    instance, so its readings count as utilization 0 (unallocated capacity at the full price),
    not as no data. On a node with MIG off, a reading without utilization stays no data."""
    power = [
        {"metric": {"UUID": uuid, "Hostname": node, "modelName": "NVIDIA H100 80GB HBM3"},
         "values": [[T0, "70"], [T0 + 60, "71"]]}
        for uuid, node in (("GPU-e", "n-mig"), ("GPU-d", "n-off"))
    ]  # fmt: skip
    page = page_samples({"power_w": power}, LabelVariants(), 60)
    with migrated_engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "c1")
        seen = {"first_seen_ts": T0, "last_seen_ts": T0}
        nodes = writer.write_nodes(conn, cluster, [
            {"name": "n-mig", "mig_config": "all-1g.10gb", **seen},
            {"name": "n-off", "mig_config": "all-disabled", **seen},
        ])  # fmt: skip
        facts = rows.node_facts(conn, cluster)
        units = rows.gpu_rows(page, page.pairs(), nodes, facts)
        ids = writer.write_gpus(conn, cluster, units)
        empty = rows.empty_mig_gpus(units, facts)
        idle = frozenset(ids[(units[n]["uuid"], -1, 0)] for n in empty)
        columns = rows.sample_columns(page, ids, {}, 60, None, idle)
    util = dict(zip(columns.gpu_id.tolist(), columns.util_ratio.tolist(), strict=True))
    assert idle == {ids[("GPU-e", -1, 0)]}
    assert util[ids[("GPU-e", -1, 0)]] == 0.0
    assert math.isnan(util[ids[("GPU-d", -1, 0)]])


def test_a_shared_gpu_seen_whole_becomes_its_slots_held_by_nobody() -> None:
    """No per-pod series (no --kubernetes-virtual-gpus): the GPU's one series names whichever
    pod won. On a node of 4 MPS replicas the GPU is 4 slots with the GPU's reading, none held,
    for node-level attribution to share among the node's pods; elsewhere it stays whole."""
    util = [
        {"metric": {"UUID": "GPU-m", "Hostname": "n-mps", "modelName": "NVIDIA L4",
                    "pod": "won-0", "namespace": "lab"}, "values": [[T0, "0.6"]]},
        {"metric": {"UUID": "GPU-w", "Hostname": "n-plain", "modelName": "NVIDIA L4",
                    "pod": "solo", "namespace": "lab"}, "values": [[T0, "0.3"]]},
    ]  # fmt: skip
    page = page_samples({"util_prof": util}, LabelVariants(), 60, keep_device_slots=True)
    filled = fill_free_slots(page, {"n-mps": 4})
    frame = filled.to_frame()
    got = sorted(
        (r.uuid, int(r.slot), r.pod if isinstance(r.pod, str) else None, r.util_ratio)
        for r in frame.itertuples()
    )
    assert got == [
        ("GPU-m", 0, None, 0.6), ("GPU-m", 1, None, 0.6), ("GPU-m", 2, None, 0.6),
        ("GPU-m", 3, None, 0.6), ("GPU-w", 0, "solo", 0.3),
    ]  # fmt: skip
    vgpu = filled.units.set_index(["uuid", "slot"])["vgpu"]
    assert vgpu[("GPU-m", 0)] and not vgpu[("GPU-w", 0)]


def test_pods_on_a_shared_gpu_seen_whole_take_slots_at_node_level() -> None:
    """Three pods of one slot each on a 4-replica MPS L4 whose slots carry the GPU's reading:
    each holds a quarter of the GPU, attributed at node level; the fourth slot is free."""
    samples = samples_frame(
        [{"gpu_id": slot + 1, "ts": T0 + i * 3600, "step_s": 3600, "util_ratio": 0.6,
          "node": "n-mps", "gpu_model": "NVIDIA L4", "gpu_uuid": "GPU-m", "slot": slot,
          "timeslice_replicas": 4, "allocation": "mps"}
         for slot in range(4) for i in range(2)]
    )  # fmt: skip
    pods = pods_frame(
        [{"pod_id": n, "pod": f"p-{n}", "namespace": "lab", "node": "n-mps", "gpu_count": 1,
          "started_ts": T0 - 60 + n} for n in (1, 2, 3)]
    )  # fmt: skip
    costed = prepare(samples, pods, build_price_book(2.0, 0.6, {}, {}))
    per_pod = summarize(costed, ["pod"], 0.05).set_index("pod")
    assert per_pod.loc[["p-1", "p-2", "p-3"], "allocated_gpu_hours"].tolist() == [0.5] * 3
    assert per_pod["unallocated_gpu_hours"].sum() == 0.5
    held = costed[costed["allocated"]]
    assert set(held["attribution"].astype(object)) == {"node"}
