"""The demo store holds the simulated Kueue and Volcano quotas, queued work and the pods' queues
and gangs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine

from gpuwatch.simulate.fleet import build_fleet
from gpuwatch.simulate.generate import generate
from gpuwatch.simulate.load import load_simulated
from gpuwatch.store.engine import make_engine, upgrade
from gpuwatch.store.repository_pods import load_pods
from gpuwatch.store.repository_scheduling import load_queue_flavors, load_sched_workloads


def _ts(day: int, hour: int) -> int:
    return int(datetime(2026, 11, day, hour, tzinfo=UTC).timestamp())


def _store(tmp_path: Path, end_ts: int) -> Engine:
    """A migrated SQLite store holding the day before ``end_ts`` at hourly samples."""
    engine = make_engine(f"sqlite:///{tmp_path / 'demo.db'}")
    upgrade(engine)
    with engine.begin() as conn:
        load_simulated(conn, generate(build_fleet(7), end_ts - 86400, end_ts, 3600))
    return engine


def _rows(frame: pd.DataFrame, prefix: str) -> pd.DataFrame:
    return frame[frame["name"].str.startswith(prefix)].sort_values("created_ts")


def test_quotas_and_waiting_work_land_in_the_store(tmp_path: Path) -> None:
    end = _ts(16, 20)
    engine = _store(tmp_path, end)
    every_quota = load_queue_flavors(engine)
    quotas = every_quota[every_quota["kind"] == "kueue"]
    got = quotas[["queue", "flavor", "gpu_model", "nominal_gpus", "lending_limit_gpus"]]
    assert got.astype(object).where(got.notna(), None).values.tolist() == [
        ["inference", "l40s", "NVIDIA L40S", 8.0, 0.0],
        ["research", "h100", "NVIDIA H100 80GB HBM3", 8.0, None],
        ["research", "l40s", "NVIDIA L40S", 4.0, None],
        ["training", "h100", "NVIDIA H100 80GB HBM3", 32.0, None],
    ]
    assert set(quotas["cohort"]) == {"gpu-pool"} and set(quotas["cluster"]) == {"prod-us-east"}
    volcano = every_quota[every_quota["kind"] == "volcano"]
    got = volcano[["cluster", "queue", "cohort", "flavor", "nominal_gpus", "borrowing_limit_gpus"]]
    assert got.values.tolist() == [["research-eu", "research-batch", "root", "", 4.0, 0.0]]
    assert volcano["gpu_model"].isna().all()
    workloads = load_sched_workloads(engine, end - 86400, end)
    evals = _rows(workloads, "job-asr-eval")
    assert evals["state"].tolist() == ["finished", "pending"]
    waiting = evals.iloc[1]
    assert (waiting["created_ts"], waiting["queue"], waiting["gpus_requested"]) == (
        _ts(16, 17),
        "research",
        2.0,
    )
    assert pd.isna(waiting["admitted_ts"]) and pd.isna(waiting["flavor"])
    assert evals.iloc[0]["admitted_ts"] == _ts(16, 4) and evals.iloc[0]["flavor"] == "l40s"
    gangs = _rows(workloads, "job-ddp-pretrain")
    assert gangs[["state", "gpus_requested", "pod_count", "owner_kind"]].values.tolist() == [
        ["finished", 32.0, 8, "Job"],  # yesterday 10:00-22:00
        ["admitted", 32.0, 8, "Job"],  # today's, running at 20:00
    ]
    # Volcano's PodGroup of today's gang (10:00-16:00): yesterday's had finished before 20:00
    groups = workloads[workloads["kind"] == "volcano"]
    assert len(groups) == 1
    group = groups.iloc[0]
    assert group["name"].startswith("ddp-finetune-") and group["owner_name"] == group["name"]
    assert (group["cluster"], group["namespace"], group["queue"], group["state"]) == (
        "research-eu",
        "nlp-research",
        "research-batch",
        "finished",
    )
    assert (group["gpus_requested"], group["pod_count"], group["owner_kind"]) == (
        4.0,
        4,
        "PodGroup",
    )
    assert (group["created_ts"], group["admitted_ts"]) == (_ts(16, 10), _ts(16, 10))
    assert pd.isna(group["finished_ts"]) and group["last_seen_ts"] == end
    engine.dispose()


def test_pending_pods_and_gangs_land_in_the_store(tmp_path: Path) -> None:
    engine = _store(tmp_path, _ts(16, 12))
    pods = load_pods(engine)
    gang = pods[pods["workload"] == "ddp-pretrain"]
    assert len(gang) == 8 + 8  # yesterday's run and today's
    today = gang[gang["created_ts"] == _ts(16, 10)]
    assert today["phase"].value_counts().to_dict() == {"Running": 6, "Pending": 2}
    assert today.loc[today["phase"] == "Pending", "started_ts"].isna().all()
    assert set(today["queue"]) == {"training"} and set(today["gang_kind"]) == {"kueue"}
    assert set(today["gang_size"]) == {8} and today["gang_name"].nunique() == 1
    waiting = pods[(pods["workload"] == "asr-finetune") & (pods["phase"] == "Pending")]
    assert waiting[["created_ts", "gpu_count", "queue"]].values.tolist() == [
        [_ts(16, 9), 4, "research"]
    ]
    gangs = pods[pods["gang_kind"] == "volcano"]
    assert len(gangs) == 4 + 4  # yesterday's 10:00-16:00 and today's, running at 12:00
    assert set(gangs["namespace"]) == {"nlp-research"} and set(gangs["queue"]) == {"research-batch"}
    assert set(gangs["gang_size"]) == {4} and gangs["gang_name"].nunique() == 2
    running = gangs[gangs["created_ts"] == _ts(16, 10)]
    assert set(running["phase"]) == {"Running"} and set(running["gpu_count"]) == {1}
    assert all(pod.startswith(f"{running['gang_name'].iloc[0]}-") for pod in running["pod"])
    plain = pods[pods["workload"] == "vision-train-sweep"]
    assert set(plain["gang_kind"]) == {"job"} and set(plain["queue"].isna()) == {True}
    engine.dispose()
