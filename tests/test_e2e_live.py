"""The whole pipeline, live: ``gpuwatch simulate exporter`` and ``gpuwatch simulate apiserver``
as processes, a real Prometheus scraping every node's exporter each second and evaluating the
shipped alert rules, then ``gpuwatch collect`` into SQLite, checked against the simulation."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
import yaml
from click.testing import CliRunner

from gpuwatch.analytics.costing import prepare
from gpuwatch.cli.main import cli
from gpuwatch.domain.allocation import DRA
from gpuwatch.domain.pricing import build_price_book
from gpuwatch.simulate.exposition import is_blank
from gpuwatch.simulate.fleet import Fleet, GpuUnit, build_fleet
from gpuwatch.simulate.generate import sample_at
from gpuwatch.simulate.pods import pod_instances, pods_frame
from gpuwatch.store import repository, repository_scheduling
from gpuwatch.store.engine import make_engine
from tests.support.binaries import require_binary
from tests.support.prometheus import PrometheusProcess, wait_until

pytestmark = pytest.mark.prometheus

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "alerts" / "gpuwatch-rules.plain.yaml"
CLUSTER = "prod-us-east"
SEED = 7
STEP_S = 3
SCRAPES = 20  # per node target, at one a second, before collecting
_SIGNALS = {"prof_gr_engine_active": 1, "dev_gpu_util": 2}


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def _spawn(folder: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuwatch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=folder,
        env=_env(),
    )


def _first_line(process: subprocess.Popen[str], timeout_s: float = 30.0) -> str:
    """The line a server prints once it listens; fails with its stderr if it exits instead."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    line = process.stdout.readline() if ready else ""
    if not line:
        process.kill()
        _, err = process.communicate(timeout=10)
        raise AssertionError(f"{process.args} printed nothing; stderr: {err[-2000:]}")
    return line.strip()


def _stop(process: subprocess.Popen[str]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    return int(process.returncode)


def _query(prometheus: PrometheusProcess, promql: str) -> list[dict[str, Any]]:
    url = f"{prometheus.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def _api(prometheus: PrometheusProcess, path: str) -> Any:
    with urllib.request.urlopen(f"{prometheus.url}{path}", timeout=10) as response:
        return json.load(response)["data"]


@dataclass
class Live:
    folder: Path
    prometheus: PrometheusProcess
    exporter_url: str
    kubeconfig: Path
    started_ts: int


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    require_binary("prometheus", "prometheus")
    folder = tmp_path_factory.mktemp("live")
    kubeconfig = folder / "kubeconfig"
    processes = [
        _spawn(folder, "simulate", "exporter", "--port", "0", "--cluster", CLUSTER),
        _spawn(folder, "simulate", "apiserver", "--port", "0", "--kubeconfig", str(kubeconfig)),
    ]
    prometheus: PrometheusProcess | None = None
    try:
        found = re.search(r"(http://\S+)/metrics", _first_line(processes[0]))
        assert found, "the exporter names its URL"
        assert "kubeconfig" in _first_line(processes[1]) and kubeconfig.is_file()
        exporter_url = found[1]
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [
                {
                    "job_name": "dcgm-exporter",
                    "http_sd_configs": [{"url": f"{exporter_url}/targets"}],
                }
            ],
        }
        started = int(time.time())
        prometheus = PrometheusProcess(folder / "tsdb", config=yaml.safe_dump(config)).start()
        yield Live(folder, prometheus, exporter_url, kubeconfig, started)
    finally:
        if prometheus is not None:
            prometheus.stop()
        codes = [_stop(p) for p in processes]
    assert codes == [0, 0], "SIGTERM stops the simulators cleanly"


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(SEED)


def test_prometheus_scrapes_every_node_as_a_healthy_target(live: Live, fleet: Fleet) -> None:
    nodes = {n.name for n in fleet.nodes if n.cluster == CLUSTER}
    now = int(time.time())
    down = {o.node for o in fleet.outages if o.cluster == CLUSTER and o.windows(now - 60, now + 60)}

    def scraped() -> bool:
        targets = _api(live.prometheus, "/api/v1/targets")["activeTargets"]
        return {t["labels"]["instance"] for t in targets if t["health"] == "up"} == nodes - down

    wait_until(scraped, "every node's exporter scraped", timeout_s=20)
    for target in _api(live.prometheus, "/api/v1/targets")["activeTargets"]:
        if target["labels"]["instance"] not in down:
            assert target["lastError"] == "", target


def test_a_busy_port_is_one_line_exit_1(live: Live) -> None:
    port = live.exporter_url.rsplit(":", 1)[1]
    result = CliRunner().invoke(cli, ["simulate", "exporter", "--port", port])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == ["gpuwatch: cannot serve: Address already in use"]


@pytest.mark.parametrize("command", ["exporter", "apiserver"])
def test_simulate_help(command: str) -> None:
    result = CliRunner().invoke(cli, ["simulate", command, "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--host", "--port", "--seed", "--cluster"):
        assert option in result.output


def test_an_unknown_cluster_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["simulate", "apiserver", "--cluster", "nope"])
    assert result.exit_code == 2
    assert "'nope' is not one of 'prod-us-east', 'research-eu'" in result.stderr


@pytest.fixture(scope="module")
def collected(live: Live) -> tuple[sa.Engine, int, int]:
    """Run ``gpuwatch collect`` over the scraped window; the store, and the window."""
    db = f"sqlite:///{live.folder / 'gpuwatch.db'}"
    env = _env(
        GPUWATCH_DATABASE_URL=db,
        GPUWATCH_PROMETHEUS_URL=live.prometheus.url,
        GPUWATCH_PROMETHEUS_STEP=f"{STEP_S}s",
        GPUWATCH_CLUSTER=CLUSTER,
        GPUWATCH_KUBECONFIG=str(live.kubeconfig),
    )
    upgrade = subprocess.Popen(
        [sys.executable, "-m", "gpuwatch", "db", "upgrade"],
        env=env, cwd=live.folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def enough() -> bool:
        counts = _query(live.prometheus, 'count_over_time(up{job="dcgm-exporter"}[1m])')
        return len(counts) > 0 and min(float(c["value"][1]) for c in counts) >= SCRAPES

    wait_until(enough, f"{SCRAPES} scrapes of every target", timeout_s=45, interval_s=0.5)
    assert upgrade.wait(timeout=60) == 0, upgrade.stderr.read() if upgrade.stderr else ""
    start = -(-live.started_ts // STEP_S) * STEP_S + STEP_S
    end = int(time.time()) // STEP_S * STEP_S

    def when(ts: int) -> str:
        return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    result = subprocess.run(
        [sys.executable, "-m", "gpuwatch", "collect", "--start", when(start), "--end", when(end)],
        capture_output=True, text=True, env=env, cwd=live.folder, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"from {when(start)} to {when(end)}" in result.stdout
    (live.folder / "collect.out").write_text(result.stdout, encoding="utf-8")
    return make_engine(db), start, end


def _stored(engine: sa.Engine) -> pd.DataFrame:
    sql = (
        "SELECT g.uuid, g.mig_gi_id, g.slot, g.mig_profile, g.memory_total_mib, n.name AS node,"
        " s.ts, s.util_ratio, s.util_signal, s.fb_used_mib, s.fb_total_mib, s.power_w, s.temp_c,"
        " s.xid, p.namespace, p.name AS pod, p.workload_kind, p.workload_name, p.team"
        " FROM gpu_samples s JOIN gpus g ON g.id = s.gpu_id"
        " LEFT JOIN pods p ON p.id = s.pod_id LEFT JOIN nodes n ON n.id = g.node_id"
    )
    with engine.connect() as conn:
        return pd.read_sql_query(sa.text(sql), conn)


@pytest.fixture(scope="module")
def stored(collected: tuple[sa.Engine, int, int]) -> pd.DataFrame:
    frame = _stored(collected[0])
    assert len(frame) > 500
    return frame


@pytest.fixture(scope="module")
def truth(fleet: Fleet, collected: tuple[sa.Engine, int, int]) -> pd.DataFrame:
    """``sample_at`` for every second the collected window's scrapes could have rendered, with
    ``second`` and, per row, whether DCGM blanked its utilization then."""
    _, start, end = collected
    units = _units(fleet)
    frames = []
    for second in range(start - STEP_S, end + 2):
        frame = sample_at(fleet, second)
        frame = frame[frame["cluster"] == CLUSTER].astype({"uuid": str, "pod": object})
        keys = zip(frame["uuid"], frame["mig_gi_id"], frame["slot"], strict=True)
        frame["blank"] = [is_blank(units[key], second) for key in keys]
        frames.append(frame.assign(second=second))
    return pd.concat(frames, ignore_index=True)


def _units(fleet: Fleet) -> dict[tuple[str, int, int], GpuUnit]:
    return {(u.uuid, u.mig_gi_id, u.slot): u for u in fleet.units if u.cluster == CLUSTER}


def _device_slots(frame: pd.DataFrame, units: dict[tuple[str, int, int], GpuUnit]) -> pd.DataFrame:
    keys = frame[["uuid", "mig_gi_id", "slot"]].itertuples(index=False, name=None)
    shared = [units[key].sharing == DRA and units[key].timeslice_replicas > 1 for key in keys]
    return frame.assign(device_slot=frame["slot"].where(~pd.Series(shared, index=frame.index), 0))


def test_samples_match_the_simulation(
    stored: pd.DataFrame, truth: pd.DataFrame, fleet: Fleet
) -> None:
    """Each stored sample at grid instant t against what the exporter rendered in (t - step, t]
    (a scrape's value comes from the second the exporter answered, at most a second later)."""
    units = _units(fleet)
    keys = ["uuid", "mig_gi_id", "slot"]
    nodes = [units[key].node for key in stored[keys].itertuples(index=False, name=None)]
    assert list(stored["node"]) == nodes, "hostnames (node or exporter pod) map to the node"
    offsets = pd.DataFrame({"offset": range(-STEP_S, 2)})
    wanted = stored.reset_index(names="sample").merge(offsets, how="cross")
    wanted["second"] = wanted["ts"] + wanted["offset"]
    # A claim shared by k pods: the exporter names the pods, not their slots (the collector
    # gives them slots in name order), so its slots are matched as one device.
    match = ["uuid", "mig_gi_id", "device_slot", "second"]
    wanted, expected = _device_slots(wanted, units), _device_slots(truth, units)
    seen = wanted[["sample", *match]].merge(expected, on=match)
    by_sample = seen.groupby("sample")
    util = by_sample["util_ratio"].agg(["min", "max"])
    used = by_sample["fb_used_mib"].agg(["min", "max"])
    holders = by_sample["pod"].agg(lambda pods: {p if isinstance(p, str) else None for p in pods})
    assert len(util) == len(stored)
    for index, row in stored.iterrows():
        assert (row["pod"] if isinstance(row["pod"], str) else None) in holders[index], index
        assert used.at[index, "min"] <= row["fb_used_mib"] <= used.at[index, "max"], index
        if not pd.isna(row["util_ratio"]):
            assert util.at[index, "min"] - 1e-9 <= row["util_ratio"] <= util.at[index, "max"] + 1e-9
    blank = stored["util_ratio"].isna()
    assert blank.any(), "blank sentinel readings reached the collector and were dropped"
    assert by_sample["blank"].any()[blank].all(), "missing only where DCGM blanked a reading"
    signals = by_sample["util_signal"].first().astype(str).map(_SIGNALS)
    assert (stored.loc[~blank, "util_signal"] == signals[~blank]).all()
    assert stored[["util_ratio", "fb_used_mib", "fb_total_mib", "power_w"]].max().max() < 1e6
    assert stored["temp_c"].between(20, 100).all()
    assert stored["xid"].isna().all(), "no XID error: nothing stored (missing reads as 0)"


def test_prometheus_stored_the_sentinels_the_store_dropped(
    live: Live, stored: pd.DataFrame
) -> None:
    """Prometheus holds the blank sentinels of the collected window; the store, missing values."""
    assert stored["util_ratio"].isna().any()  # the window holds blank readings (as NULL)
    metrics = "DCGM_FI_PROF_GR_ENGINE_ACTIVE|DCGM_FI_DEV_GPU_UTIL"
    sentinels = _query(live.prometheus, f'max_over_time({{__name__=~"{metrics}"}}[10m]) > 9e18')
    assert sentinels


def test_every_live_node_and_unit_is_collected(
    stored: pd.DataFrame, fleet: Fleet, collected: tuple[sa.Engine, int, int]
) -> None:
    _, start, end = collected
    down = {o.node for o in fleet.outages if o.windows(start - STEP_S, end)}
    expected = {n.name for n in fleet.nodes if n.cluster == CLUSTER} - down
    assert set(stored["node"]) == expected
    assert not any(str(node).startswith("nvidia-dcgm-exporter") for node in stored["node"])


def test_pods_carry_their_workloads_and_teams(
    stored: pd.DataFrame, fleet: Fleet, collected: tuple[sa.Engine, int, int]
) -> None:
    _, start, end = collected
    frame = pods_frame(fleet, pod_instances(fleet, start - STEP_S, end + 2), end)
    expected = {}
    for row in frame[frame["cluster"] == CLUSTER].to_dict("records"):
        name = row["owner_name"] if row["workload_kind"] == "Job" else row["workload_name"]
        expected[(row["namespace"], row["pod"])] = (row["workload_kind"], name, row["team"])
    held = stored.dropna(subset=["pod"])
    pods = held[["namespace", "pod", "workload_kind", "workload_name", "team"]].drop_duplicates()
    assert len(pods) > 50
    for row in pods.itertuples():
        key = (row.namespace, row.pod)
        assert (row.workload_kind, row.workload_name, row.team) == expected[key], key
    kinds = set(pods["workload_kind"])
    assert {"Deployment", "StatefulSet"} <= kinds
    teams = dict(zip(pods["pod"], pods["team"], strict=True))
    assert teams["nb-alice-0"] == "search", "the pod's team label beats its namespace's"
    assert "gpu-operator" not in set(pods["namespace"])


def test_the_exported_label_node_attributes_holders_not_the_exporter(
    stored: pd.DataFrame, fleet: Fleet
) -> None:
    node = next(n for n in fleet.nodes if n.cluster == CLUSTER and n.label_style == "exported")
    mine = stored[stored["node"] == node.name]
    assert not mine.empty
    assert set(mine["workload_name"].dropna()) == {"search-ranker", "embedding-api", "nb-alice"}
    unheld = [u.uuid for u in fleet.units if u.node == node.name and u.gpu_index == 7]
    assert mine[mine["uuid"].isin(unheld)]["pod"].isna().all()


def test_mig_instances_and_time_slices_are_units(stored: pd.DataFrame, fleet: Fleet) -> None:
    mig = stored[stored["mig_gi_id"] >= 0]
    expected = {(u.uuid, u.mig_gi_id) for u in fleet.units if u.cluster == CLUSTER}
    expected = {key for key in expected if key[1] >= 0}
    assert set(zip(mig["uuid"], mig["mig_gi_id"], strict=True)) == expected
    assert set(mig["mig_profile"]) == {"1g.10gb", "3g.40gb"}
    assert (mig["util_signal"].dropna() == 1).all()
    nominal = mig["mig_profile"].map({"1g.10gb": 9856.0, "3g.40gb": 40192.0})
    # used + free: used is the step's maximum and free its last reading, so within a step whose
    # use swings the sum may exceed the instance's memory by that swing
    assert (mig["memory_total_mib"] >= nominal).all()
    assert (mig["memory_total_mib"] <= nominal * 1.05).all()
    slots = stored[stored["slot"] > 0]
    assert not slots.empty
    # time-sliced T4s, the MPS L4s, and the second pod of the DRA claim two pods share
    shared = {"asr-small", "ocr-lite", "intent-router", "face-blur", "embedder-shared"}
    assert set(slots["workload_name"].dropna()) <= shared
    for workload, memory in (("asr-small", 15360.0), ("intent-router", 23034.0)):
        held = slots[slots["workload_name"] == workload]
        assert (held["fb_total_mib"] == memory).all(), "shared GPUs' memory from the node"


def test_alert_rules_evaluate_without_errors_on_live_data(live: Live) -> None:
    document = yaml.safe_load(RULES.read_text())
    names = [r.get("alert") or r.get("record") for g in document["groups"] for r in g["rules"]]

    def rules() -> list[dict[str, Any]]:
        groups = _api(live.prometheus, "/api/v1/rules")["groups"]
        return [rule for group in groups for rule in group["rules"]]

    def evaluated() -> bool:
        found = rules()
        return len(found) == len(names) and all(
            not r["lastEvaluation"].startswith("0001-") for r in found
        )

    wait_until(evaluated, "every rule evaluated", timeout_s=20)
    for rule in rules():
        assert rule["health"] == "ok" and not rule.get("lastError"), rule
    util = _query(live.prometheus, "gpuwatch:gpu_util:ratio")
    assert util, "the utilization recording rule sees the exporter's series"
    assert not any(s["metric"].get("namespace") == "gpu-operator" for s in util)
    assert not any(s["metric"].get("pod", "").startswith("nvidia-dcgm") for s in util)


# How GPUs are handed out: DRA claims, MPS, MIG, time-slicing (contract sections 3 and 7) ------


def test_collect_says_claims_were_read(live: Live, collected: tuple[sa.Engine, int, int]) -> None:
    out = (live.folder / "collect.out").read_text(encoding="utf-8")
    assert "DRA attribution on (resource.k8s.io/v1)" in out


def test_collect_reads_kueue_quotas_and_queued_work(
    live: Live, collected: tuple[sa.Engine, int, int]
) -> None:
    out = (live.folder / "collect.out").read_text(encoding="utf-8")
    assert "Kueue on (kueue.x-k8s.io/v1beta1)" in out
    quotas = repository_scheduling.load_queue_flavors(collected[0])
    # the fleet's cohort (docs/simulation.md): three ClusterQueues, research on two flavors
    assert sorted(zip(quotas["queue"], quotas["flavor"], quotas["nominal_gpus"], strict=True)) == [
        ("inference", "l40s", 8.0), ("research", "h100", 8.0), ("research", "l40s", 4.0),
        ("training", "h100", 32.0),
    ]  # fmt: skip
    assert set(quotas["cohort"]) == {"gpu-pool"}


def _when(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _costed(collected: tuple[sa.Engine, int, int]) -> pd.DataFrame:
    engine, start, end = collected
    samples = repository.load_samples(engine, start, end + STEP_S)
    return prepare(samples, repository.load_pods(engine), build_price_book(2.0, 0.6, {}, {}))


def test_claimed_gpus_are_held_by_their_pods(collected: tuple[sa.Engine, int, int]) -> None:
    costed = _costed(collected)
    claimed = costed[costed["allocation"].astype(object).eq(DRA)]
    held = claimed[claimed["allocated"]]
    assert not held.empty
    pods = repository.load_pods(collected[0]).set_index("pod_id")
    holders = pods.loc[held["pod_id"].astype(int).unique()]
    # listed by the API with their owners, holding GPUs through claims: never DCGM-only
    assert set(holders["allocation"]) == {DRA}
    assert not holders["dcgm_only"].any()
    assert set(holders["gpu_resource"]) == {"gpu.nvidia.com", "mig.nvidia.com"}
    assert {"semantic-cache", "embedder-shared", "asr-streaming", "llm-mini"} <= set(
        holders["workload"]
    )


def test_each_gpu_adds_up_to_one_gpu_however_it_is_split(
    collected: tuple[sa.Engine, int, int],
) -> None:
    """At every instant where all units of a physical GPU have a reading, their GPU-equivalent
    hours add up to the step: MIG instances g/7, MPS and time-slice slots 1/R, a claim shared
    by 2 pods 1/2 each."""
    costed = _costed(collected)
    units = repository.load_gpus(collected[0]).groupby("gpu_uuid").size()
    per = costed[costed["data_hours"] > 0].groupby(["gpu_uuid", "ts"], observed=True)
    sums = per.agg(units=("gpu_id", "nunique"), hours=("gpu_hours", "sum")).reset_index()
    whole = sums[sums["units"].to_numpy() == units.reindex(sums["gpu_uuid"]).to_numpy()]
    assert len(whole) > 100
    off = whole[~np.isclose(whole["hours"], STEP_S / 3600, rtol=1e-9)]
    assert off.empty, off.head().to_string()
    modes = set(costed["allocation"].astype(object))
    assert modes == {"device-plugin", "mig", "time-slice", "mps", "dra"}


def test_shared_gpus_pay_their_share(collected: tuple[sa.Engine, int, int]) -> None:
    costed = _costed(collected)
    step_h = STEP_S / 3600
    first = costed[costed["data_hours"] > 0].drop_duplicates("gpu_id")
    by_mode = first.groupby(first["allocation"].astype(object))
    mps = by_mode.get_group("mps")
    assert np.allclose(mps["gpu_hours"], step_h / 4, rtol=1e-9)
    shared_claim = first[(first["allocation"] == DRA) & (first["timeslice_replicas"] == 2)]
    assert len(shared_claim) == 2 and shared_claim["gpu_uuid"].nunique() == 1
    assert np.allclose(shared_claim["gpu_hours"], step_h / 2, rtol=1e-9)
    mig = by_mode.get_group("mig")
    shares = mig["mig_profile"].astype(object).map({"1g.10gb": 1 / 7, "3g.40gb": 3 / 7})
    assert np.allclose(mig["gpu_hours"], step_h * shares.to_numpy(), rtol=1e-9)


def test_without_access_to_claims_collection_goes_on_and_says_why(
    live: Live, collected: tuple[sa.Engine, int, int]
) -> None:
    _, start, end = collected
    kubeconfig = live.folder / "forbidding.kubeconfig"
    server = _spawn(live.folder, "simulate", "apiserver", "--port", "0", "--forbid-dra",
                    "--kubeconfig", str(kubeconfig))  # fmt: skip
    try:
        assert "kubeconfig" in _first_line(server)
        db = f"sqlite:///{live.folder / 'forbidden.db'}"
        env = _env(GPUWATCH_DATABASE_URL=db, GPUWATCH_PROMETHEUS_URL=live.prometheus.url,
                   GPUWATCH_PROMETHEUS_STEP=f"{STEP_S}s", GPUWATCH_CLUSTER=CLUSTER,
                   GPUWATCH_KUBECONFIG=str(kubeconfig))  # fmt: skip
        run = [sys.executable, "-m", "gpuwatch"]
        subprocess.run([*run, "db", "upgrade"], env=env, cwd=live.folder, check=True,
                       capture_output=True, timeout=60)  # fmt: skip
        window = ["--start", _when(start), "--end", _when(end)]
        result = subprocess.run(
            [*run, "collect", *window],
            env=env, cwd=live.folder, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        assert _stop(server) == 0
    assert result.returncode == 0, result.stderr
    assert "DRA attribution off: forbidden" in result.stdout
    engine = make_engine(db)
    pods = repository.load_pods(engine)
    assert not pods.empty and pods["allocation"].isna().all()
    # the GPUs claimed pods hold stay theirs, as pods known from DCGM only (no owner, no claim)
    costed = _costed((engine, start, end))
    semantic = costed[costed["pod"].astype(object).str.startswith("semantic-cache-").fillna(False)]
    assert not semantic.empty and semantic["allocated"].all()
    assert set(semantic["attribution"].astype(object)) == {"dcgm-only"}
    with engine.connect() as conn:
        detail = conn.execute(
            sa.text("SELECT detail FROM collection_state WHERE source = 'kubernetes'")
        ).scalar_one()
    assert "forbidden" in json.loads(detail)["dra"]
