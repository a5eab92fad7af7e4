"""The simulated fleet and its frames: deterministic, realistic, showing every promised shape."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pytest

from gpuwatch.simulate.fleet import Fleet, build_fleet
from gpuwatch.simulate.generate import SimulatedData, generate, sample_at
from gpuwatch.simulate.patterns import day_of_week, hour_of_day
from gpuwatch.simulate.pods import pod_instances, pods_at

# Saturday 2026-11-14 00:00 UTC to Tuesday 2026-11-17 00:00 UTC: a weekend and a working day.
END_TS = int(datetime(2026, 11, 17, tzinfo=UTC).timestamp())
START_TS = END_TS - 3 * 86400
STEP_S = 600


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(7)


@pytest.fixture(scope="module")
def data(fleet: Fleet) -> SimulatedData:
    return generate(fleet, START_TS, END_TS, STEP_S)


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categoricals as plain objects, so frames built with different categories compare."""
    out = frame.copy()
    for column in out.columns:
        if isinstance(out[column].dtype, pd.CategoricalDtype):
            out[column] = out[column].astype(object).where(out[column].notna(), None)
    return out.reset_index(drop=True)


def _with_pods(data: SimulatedData) -> pd.DataFrame:
    """Samples joined with their pod's workload (unallocated rows keep NaN)."""
    pods = data.pods[["uid", "workload_name", "workload_kind", "node"]]
    samples = _plain(data.samples)
    return samples.merge(pods, left_on="pod_uid", right_on="uid", how="left")


def _workload(data: SimulatedData, name: str) -> pd.DataFrame:
    rows = _with_pods(data)
    part = rows[rows["workload_name"] == name]
    assert len(part) > 0, name
    return part


def test_same_seed_same_frames_and_other_seed_differs(data: SimulatedData) -> None:
    again = generate(build_fleet(7), START_TS, END_TS, STEP_S)
    for name in ("clusters", "nodes", "gpus", "namespaces", "pods", "samples"):
        assert getattr(data, name).equals(getattr(again, name)), name
    other = generate(build_fleet(8), START_TS, END_TS, STEP_S)
    assert set(other.gpus["uuid"]).isdisjoint(set(data.gpus["uuid"]))
    assert not np.allclose(
        other.samples["util_ratio"].to_numpy()[:1000], data.samples["util_ratio"].to_numpy()[:1000]
    )


@pytest.mark.parametrize(
    "ts",
    [
        START_TS,
        END_TS - STEP_S,
        int(datetime(2026, 11, 16, 5, tzinfo=UTC).timestamp()),  # during the exporter outage
        int(datetime(2026, 11, 16, 14, 10, tzinfo=UTC).timestamp()),  # working hours
    ],
)
def test_sample_at_equals_the_bulk_rows(fleet: Fleet, data: SimulatedData, ts: int) -> None:
    live = sample_at(fleet, ts, STEP_S)
    bulk = data.samples[data.samples["ts"] == ts]
    assert len(live) > 200
    pd.testing.assert_frame_equal(_plain(live), _plain(bulk), check_exact=True)


def test_samples_are_sane(data: SimulatedData) -> None:
    s = data.samples
    numeric = s.select_dtypes("number")
    assert not (numeric.abs() >= 1e18).any().any()
    assert s["util_ratio"].between(0.0, 1.0).all()
    assert (s["fb_used_mib"] <= s["fb_total_mib"]).all()
    assert (s["fb_used_mib"] >= 0).all()
    assert (s["ts"] % STEP_S == 0).all()
    assert s["ts"].between(START_TS, END_TS - 1).all()
    assert set(s["util_signal"].unique()) == {"prof_gr_engine_active", "dev_gpu_util"}
    keys = ["cluster", "uuid", "mig_gi_id", "slot", "ts"]
    assert not _plain(s).duplicated(keys).any()
    assert s["temp_c"].between(20, 100).all()
    assert set(s["xid"].unique()) <= {0, 13, 31}  # 13: hpo-trial every night; 79 on Wednesdays


def test_every_sampled_pod_exists_in_pods(data: SimulatedData) -> None:
    held = _plain(data.samples).dropna(subset=["pod"])
    keys = held[["cluster", "namespace", "pod", "pod_uid"]].drop_duplicates()
    pods = data.pods.rename(columns={"uid": "pod_uid"})
    joined = keys.merge(pods, on=["cluster", "namespace", "pod", "pod_uid"], how="left")
    assert len(keys) > 100
    assert joined["phase"].notna().all()
    assert (joined["node"].notna()).all()


def test_a_gpu_unit_is_held_by_one_pod_at_a_time(fleet: Fleet) -> None:
    intervals: dict[int, list[tuple[int, int]]] = {}
    for inst in pod_instances(fleet, START_TS - 14 * 86400, END_TS + 14 * 86400):
        for unit in inst.units:
            intervals.setdefault(unit, []).append((inst.started_ts, inst.finished_ts))
    shared = 0
    for spans in intervals.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
        shared += len(spans) > 1
    assert shared > 50  # units pass from pod to pod over time


def test_fleet_size_models_and_uuids(fleet: Fleet, data: SimulatedData) -> None:
    assert data.clusters["cluster"].tolist() == ["prod-us-east", "research-eu"]
    # the base fleet, hd0, hd1 (MIG), l10 (MPS), the Kueue pools (4 × 8 H100, 4 × 4 L40S)
    assert len(data.gpus) == 292 + 9 + 40 + 16 + 48
    models = set(data.gpus["model_name"])
    assert models == {
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA H100 80GB HBM3",
        "NVIDIA L4",
        "NVIDIA L40S",
        "Tesla T4",
    }
    pattern = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    assert all(pattern.match(u) for u in data.gpus["uuid"])
    assert set(data.nodes["capacity_type"]) == {"spot", "on_demand"}
    assert len(fleet.nodes) == len(data.nodes)


def test_node_labels_are_gpu_feature_discovery_labels(data: SimulatedData) -> None:
    for node in data.nodes.itertuples():
        labels = node.labels
        assert labels["nvidia.com/gpu.count"] == str(node.gpu_count)
        assert labels["nvidia.com/gpu.memory"] == str(node.gpu_memory_mib)
        assert labels["node.kubernetes.io/instance-type"] == node.instance_type
        assert labels["nvidia.com/mig.capable"] == str(node.mig_capable).lower()
        spot_markers = {
            labels.get("karpenter.sh/capacity-type") == "spot",
            labels.get("eks.amazonaws.com/capacityType") == "SPOT",
            labels.get("cloud.google.com/gke-spot") == "true",
            labels.get("cloud.google.com/gke-preemptible") == "true",
        }
        assert (True in spot_markers) == (node.capacity_type == "spot")
    products = {n["nvidia.com/gpu.product"] for n in data.nodes["labels"]}
    assert {"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4-SHARED"} <= products


def test_namespaces_and_teams(data: SimulatedData) -> None:
    assert len(data.namespaces) >= 12
    assert 4 <= data.namespaces["team"].nunique() <= 5
    alice = data.pods[data.pods["workload_name"] == "nb-alice"]
    assert set(alice["team"]) == {"search"}
    assert set(alice["labels"].map(lambda labels: labels["team"])) == {"search"}
    ns_team = data.namespaces.set_index("namespace")["team"]
    assert ns_team["notebooks"] != "search"


def test_owner_chains(data: SimulatedData) -> None:
    pods = data.pods
    deploy = pods[pods["workload_name"] == "search-ranker"].iloc[0]
    assert (deploy["workload_kind"], deploy["owner_kind"]) == ("Deployment", "ReplicaSet")
    assert re.fullmatch(r"search-ranker-[a-z0-9]{10}", deploy["owner_name"])
    assert re.fullmatch(re.escape(deploy["owner_name"]) + r"-[a-z0-9]{5}", deploy["pod"])
    nightly = pods[pods["workload_name"] == "nightly-embed"]
    assert set(nightly["workload_kind"]) == {"CronJob"} and set(nightly["owner_kind"]) == {"Job"}
    for job, created in zip(nightly["owner_name"], nightly["created_ts"], strict=True):
        assert job == f"nightly-embed-{created // 60}"
    sts = pods[pods["workload_name"] == "nb-bob"]
    assert set(sts["pod"]) == {"nb-bob-0"} and set(sts["owner_kind"]) == {"StatefulSet"}
    debug = pods[pods["workload_name"] == "gpu-debug-ivan"]
    assert set(debug["workload_kind"]) == {"Pod"} and debug["owner_kind"].isna().all()
    job = pods[pods["workload_name"] == "llm-pretrain"].iloc[0]
    assert job["owner_kind"] == "Job" and job["pod"].startswith(job["owner_name"] + "-")


def test_multi_gpu_training_leaves_most_gpus_idle(data: SimulatedData) -> None:
    for name, busy in (("llm-pretrain", 3), ("vit-finetune", 2)):
        rows = _workload(data, name)
        assert set(data.pods.loc[data.pods["workload_name"] == name, "gpu_count"]) == {8}
        for _, pod in rows.groupby("pod"):
            per_gpu = pod.groupby("uuid")["util_ratio"]
            idle_share = per_gpu.apply(lambda u: (u < 0.05).mean())
            assert (idle_share > 0.9).sum() == 8 - busy
            assert (per_gpu.median() > 0.5).sum() == busy


def test_inference_pinned_to_a100_is_under_ten_percent(data: SimulatedData) -> None:
    rows = _workload(data, "search-ranker")
    assert (rows["util_ratio"] < 0.10).all()
    gpus = data.gpus.set_index("uuid")["model_name"]
    assert set(gpus[rows["uuid"].unique()]) == {"NVIDIA A100-SXM4-80GB"}


def test_notebooks_busy_in_working_hours_idle_at_night_and_weekends(data: SimulatedData) -> None:
    rows = _with_pods(data)
    notebooks = rows[rows["workload_name"].isin(["nb-alice", "nb-bob", "nb-chen", "jupyter-gil"])]
    ts = notebooks["ts"].to_numpy()
    hour, weekday = hour_of_day(ts), day_of_week(ts) < 5
    work = notebooks[weekday & (hour >= 10) & (hour < 17)]
    quiet = notebooks[~weekday | (hour < 6) | (hour >= 20)]
    assert len(work) > 50 and len(quiet) > 200
    assert work["util_ratio"].mean() > 0.3
    assert quiet["util_ratio"].max() < 0.05
    # Memory stays allocated while idle: the notebook holds its GPU without using it.
    assert (quiet["fb_used_mib"] > 0.2 * quiet["fb_total_mib"]).all()


def test_efficient_training_and_near_oom(data: SimulatedData) -> None:
    train = _workload(data, "diffusion-train")
    assert train["util_ratio"].between(0.85, 0.95).all()
    assert (train["fb_used_mib"] >= 0.8 * train["fb_total_mib"]).all()
    oom = _workload(data, "vllm-llama70b")
    assert (oom["fb_used_mib"] >= 0.95 * oom["fb_total_mib"]).all()


def test_nightly_batch_runs_at_night_on_on_demand_nodes(data: SimulatedData) -> None:
    pods = data.pods[data.pods["workload_name"] == "nightly-embed"]
    started = pods["started_ts"].dropna().astype(int)
    assert len(started) >= 16
    assert set(started % 86400) == {3600}
    runs = (pods["finished_ts"] - pods["started_ts"]).dropna()
    assert runs.between(2 * 3600, 4 * 3600).all()
    capacity = data.nodes.set_index("node")["capacity_type"]
    assert set(capacity[pods["node"].dropna()]) == {"on_demand"}


def test_debug_pod_idles_for_days(fleet: Fleet, data: SimulatedData) -> None:
    rows = _workload(data, "gpu-debug-ivan")
    assert (rows["util_ratio"] < 0.01).all()
    lifetimes = [
        i.finished_ts - i.started_ts
        for i in pod_instances(fleet, START_TS, END_TS)
        if i.name == "gpu-debug-ivan"
    ]
    assert lifetimes and min(lifetimes) >= 6 * 86400


def test_mig_node_reports_profiles_and_prof_signal_only(data: SimulatedData) -> None:
    gpus = data.gpus
    mig = gpus[(gpus["mig_gi_id"] >= 0) & (gpus["sharing"] == "mig")]  # DRA MIG devices aside
    assert mig["node"].nunique() == 1
    assert set(mig["mig_profile"]) == {"1g.10gb", "3g.40gb"}
    node = data.nodes.set_index("node").loc[mig["node"].iloc[0]]
    assert node["mig_strategy"] == "mixed"
    rows = _plain(data.samples).merge(mig[["uuid", "mig_gi_id"]], on=["uuid", "mig_gi_id"])
    assert len(rows) > 0 and set(rows["util_signal"]) == {"prof_gr_engine_active"}
    assert set(rows["fb_total_mib"]) == {9856.0, 40192.0}
    assert rows["power_w"].isna().all()
    resources = set(data.pods["gpu_resource"])
    assert {"nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"} <= resources
    held = rows.dropna(subset=["pod"])
    assert 0 < held[["uuid", "mig_gi_id"]].drop_duplicates().shape[0] < len(mig)


def test_time_sliced_node_has_four_slots_per_gpu_some_unheld(data: SimulatedData) -> None:
    shared = data.gpus[data.gpus["sharing"] == "time-slice"]
    assert shared["node"].nunique() == 1 and set(shared["timeslice_replicas"]) == {4}
    assert all(sorted(slots) == [0, 1, 2, 3] for _, slots in shared.groupby("uuid")["slot"])
    rows = _plain(data.samples).merge(shared[["uuid", "slot"]], on=["uuid", "slot"])
    assert (rows.groupby(["uuid", "ts"]).size() == 4).all()
    holders = rows.groupby(["uuid", "slot"])["pod"].apply(lambda p: p.notna().any())
    assert holders.any() and not holders.all()
    pods = data.pods[data.pods["node"] == shared["node"].iloc[0]]
    assert set(pods["gpu_resource"]) == {"nvidia.com/gpu.shared"}
    device = rows.groupby(["uuid", "ts"])["util_ratio"].sum()
    assert device.max() <= 1.0


def test_label_styles_and_util_signals_per_node(data: SimulatedData) -> None:
    nodes = data.nodes
    assert (nodes["label_style"] == "exported").sum() == 1
    assert (nodes["label_style"] == "lowercase").sum() >= 1
    t4 = nodes[nodes["gpu_model"] == "Tesla T4"]
    assert set(t4["util_signal"]) == {"dev"}
    dev_uuids = data.gpus[data.gpus["node"].isin(nodes.loc[nodes["util_signal"] == "dev", "node"])]
    rows = data.samples[data.samples["uuid"].isin(dev_uuids["uuid"])]
    assert set(rows["util_signal"]) == {"dev_gpu_util"}
    percent = rows["util_ratio"] * 100
    assert np.allclose(percent, percent.round())


def test_exporter_outage_leaves_a_gap_without_samples(fleet: Fleet, data: SimulatedData) -> None:
    (outage,) = fleet.outages
    windows = outage.windows(START_TS, END_TS)
    assert len(windows) == 1
    begin, end = windows[0]
    assert end - begin >= 3 * 3600
    uuids = data.gpus.loc[data.gpus["node"] == outage.node, "uuid"]
    rows = data.samples[data.samples["uuid"].isin(uuids)]
    assert not rows["ts"].between(begin, end - 1).any()
    assert (rows["ts"] < begin).any() and (rows["ts"] >= end).any()
    assert len(rows) == len(uuids) * (
        len(range(START_TS, END_TS, STEP_S)) - (end - begin) // STEP_S
    )


def test_unallocated_capacity_and_pending_pods(data: SimulatedData) -> None:
    samples = data.samples
    whole = samples[(samples["mig_gi_id"] == -1) & (samples["slot"] == 0)]
    assert whole["pod"].isna().mean() > 0.05
    pods = data.pods
    waited = pods[(pods["started_ts"] - pods["created_ts"]).fillna(0) > 3600]
    # and the Kueue scenarios: a 4-GPU pod of a fragmented pool, two pods of a stalled gang
    assert set(waited["workload_name"]) == {"hpo-trial", "asr-finetune", "ddp-pretrain"}
    assert len(waited) >= 8


def test_pods_pending_at_the_end_have_no_node(fleet: Fleet) -> None:
    end = int(datetime(2026, 11, 16, 15, tzinfo=UTC).timestamp())
    frame = generate(fleet, end - 3600, end, 600).pods
    pending = frame[frame["phase"] == "Pending"]
    assert set(pending["workload_name"]) == {"hpo-trial", "asr-finetune"}
    assert pending["node"].isna().all() and pending["started_ts"].isna().all()
    running = frame[frame["phase"] == "Running"]
    assert running["node"].notna().all() and running["finished_ts"].isna().all()


def test_pods_at_an_instant_match_the_live_samples(fleet: Fleet) -> None:
    ts = int(datetime(2026, 11, 16, 14, tzinfo=UTC).timestamp())
    pods = pods_at(fleet, ts)
    live = _plain(sample_at(fleet, ts, STEP_S)).dropna(subset=["pod"])
    running = pods[pods["phase"] == "Running"]
    assert set(live["pod_uid"]) == set(running["uid"])
    assert (running["started_ts"] <= ts).all()
    pending = set(pods.loc[pods["phase"] == "Pending", "workload_name"])
    assert pending == {"hpo-trial", "asr-finetune"}
