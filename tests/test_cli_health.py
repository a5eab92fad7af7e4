"""``gpuwatch health`` (contract section 7) on a real SQLite store: the window read in whole
hours, the entries of the worked example in every format, errors and exit statuses.

The hourly health roll-up is served by a stand-in for the store's reader that records the
window it is asked for and answers the worked example of docs/cost-model.md."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner, Result

from gpuwatch.cli.main import cli
from gpuwatch.store import repository
from tests.health_rows import END, H0, example

START_ARG = "2025-11-17T00:20:00Z"  # read from 00:00, the hour it falls in
END_ARG = "2025-11-17T02:30:00Z"  # to 03:00

KEYS = [
    "cluster", "node", "gpu_uuid", "gpu_model", "state", "reasons", "first_seen", "last_seen",
    "state_hours", "allocated_cost_while_failing_usd", "pods",
]  # fmt: skip


class Reader:
    """Stands in for ``repository.load_health_hourly``."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.windows: list[tuple[int, int]] = []

    def __call__(
        self, engine: Any, start_ts: int, end_ts: int, gpu_ids: list[int] | None = None
    ) -> pd.DataFrame:
        self.windows.append((start_ts, end_ts))
        ts = self.frame["ts"]
        return self.frame[(ts >= start_ts) & (ts < end_ts)]


def _store(tmp_path: Path, n1: str = "n1", n2: str = "n2") -> dict[str, str]:
    """A store at the current schema; n1's GPUs cost $4 an hour, n2's $3."""
    config = tmp_path / "gpuwatch.yaml"
    database = f"database_url: sqlite:///{tmp_path / 'gw.db'}\n"
    config.write_text(database + f"pricing:\n  nodes: {{{n1}: 4.0, {n2}: 3.0}}\n")
    env = {"GPUWATCH_CONFIG": str(config)}
    upgraded = CliRunner().invoke(cli, ["db", "upgrade"], env=env)
    assert upgraded.exit_code == 0, upgraded.output
    return env


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    return _store(tmp_path)


def _run(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, frame: pd.DataFrame,
         *args: str) -> tuple[Result, Reader]:  # fmt: skip
    reader = Reader(frame)
    monkeypatch.setattr(repository, "load_health_hourly", reader, raising=False)
    result = CliRunner().invoke(cli, ["health", "--start", START_ARG, "--end", END_ARG, *args],
                                env=env)  # fmt: skip
    return result, reader


def test_json_entries_of_the_worked_example(
    store: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    result, reader = _run(store, monkeypatch, example(), "--format", "json")
    assert result.exit_code == 0, result.output
    assert reader.windows == [(H0, END)]
    entries = json.loads(result.stdout)
    assert [list(e) for e in entries] == [KEYS] * 4
    assert [e["gpu_uuid"] for e in entries] == ["GPU-1", "GPU-3", "GPU-2", "GPU-4"]
    assert entries[0] == {
        "cluster": "c1", "node": "n1", "gpu_uuid": "GPU-1", "gpu_model": "NVIDIA A100-SXM4-80GB",
        "state": "failing", "reasons": ["xid:79"], "first_seen": "2025-11-17T01:15:00Z",
        "last_seen": "2025-11-17T02:59:00Z", "state_hours": 1.75,
        "allocated_cost_while_failing_usd": 7.0, "pods": ["train-0"],
    }  # fmt: skip
    assert entries[2]["reasons"] == ["thermal_throttle"]
    assert entries[3]["state_hours"] == 1.0


def test_csv_has_the_contract_keys_and_neutralises_text(
    store: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = example()
    frame.loc[frame["gpu_uuid"] == "GPU-3", "gpu_model"] = "=HYPERLINK(1)"
    result, _ = _run(store, monkeypatch, frame, "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == ",".join(KEYS)
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert rows[0] == {
        "cluster": "c1", "node": "n1", "gpu_uuid": "GPU-1", "gpu_model": "NVIDIA A100-SXM4-80GB",
        "state": "failing", "reasons": "xid:79", "first_seen": "2025-11-17T01:15:00Z",
        "last_seen": "2025-11-17T02:59:00Z", "state_hours": "1.75",
        "allocated_cost_while_failing_usd": "7.00", "pods": "train-0",
    }  # fmt: skip
    assert rows[1]["gpu_model"] == "'=HYPERLINK(1)"


def test_table_fits_120_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long = {n: f"ip-10-0-12-{n[1]}.eu-west-1.compute.internal" for n in ("n1", "n2")}
    frame = example()
    frame["node"] = frame["node"].map(long).astype("string")
    frame["gpu_uuid"] = frame["gpu_uuid"] + "-5fd3a1b4-9c2e-4f1a-8d7b-0123456789ab"
    result, _ = _run(_store(tmp_path, long["n1"], long["n2"]), monkeypatch, frame)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120
    assert lines[0].split() == ["NODE", "GPU", "MODEL", "STATE", "REASONS", "SINCE", "(UTC)",
                                "HOURS", "FAILING", "$", "PODS"]  # fmt: skip
    assert lines[1].split()[3:] == ["failing", "xid:79", "11-17", "01:15", "1.75", "7.00",
                                    "train-0"]  # fmt: skip
    assert lines[-2:] == [
        "4 GPUs not healthy (1 failing, 1 app_error, 2 degraded), "
        "2025-11-17T00:00:00Z to 2025-11-17T03:00:00Z",
        "$7.00 paid for allocated GPU-hours on failing GPUs",
    ]


def test_a_healthy_window(store: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    healthy = example().iloc[0:1]
    result, _ = _run(store, monkeypatch, healthy)
    assert result.stdout == (
        "No GPU was unhealthy from 2025-11-17T00:00:00Z to 2025-11-17T03:00:00Z.\n"
    )
    result, _ = _run(store, monkeypatch, healthy, "--format", "json")
    assert result.stdout == "[]\n"
    result, _ = _run(store, monkeypatch, healthy, "--format", "csv")
    assert result.stdout == ",".join(KEYS) + "\n"


def test_bad_windows_are_usage_errors(store: dict[str, str]) -> None:
    backwards = CliRunner().invoke(
        cli, ["health", "--start", END_ARG, "--end", START_ARG], env=store
    )
    assert backwards.exit_code == 2
    assert "--end must be after --start" in backwards.output
    garbled = CliRunner().invoke(cli, ["health", "--start", "last tuesday"], env=store)
    assert garbled.exit_code == 2
    assert "Invalid value" in garbled.output


def test_a_store_without_schema_is_a_runtime_failure(tmp_path: Path) -> None:
    (tmp_path / "empty.db").touch()
    env = {"GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'empty.db'}"}
    result = CliRunner().invoke(cli, ["health"], env=env)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"gpuwatch: the database sqlite:///{tmp_path}/empty.db has no gpuwatch schema yet: "
        "run `gpuwatch db upgrade`"
    )


# -- end to end: samples with health readings written, rolled up and read back -------------

H100 = "NVIDIA H100 80GB HBM3"


def _write_fleet(url: str) -> None:
    """Three H100s for two hours of one-minute samples from H0. GPU-1 is held by the Job ``a``
    and reports XID 79 from 01:15; GPU-2 is held by nobody and thermally throttled for the
    first 30 minutes; GPU-3, held by nobody, has clock readings and no event."""
    import numpy as np

    from gpuwatch.store import rollup, writer
    from gpuwatch.store.engine import make_engine

    ts = np.arange(H0, H0 + 7200, 60)
    n = len(ts)
    engine = make_engine(url)
    with engine.begin() as conn:
        cluster = writer.ensure_cluster(conn, "prod")
        gpus = writer.write_gpus(conn, cluster, [
            {"uuid": f"GPU-{i}", "mig_gi_id": -1, "slot": 0, "model_name": H100,
             "timeslice_replicas": 1, "first_seen_ts": H0, "last_seen_ts": H0 + 7140}
            for i in (1, 2, 3)
        ])  # fmt: skip
        pods = writer.write_pods(conn, cluster, [
            {"namespace": "ml", "name": "a", "uid": "uid-a", "workload_kind": "Job",
             "workload_name": "a", "team": "ml", "gpu_count": 1, "labels": {},
             "last_seen_ts": H0 + 7140}
        ])  # fmt: skip
        (pod,) = pods.values()
        xid = np.where(ts >= H0 + 4500, 79.0, 0.0)
        events = np.where(ts < H0 + 1800, 0x20, 0x0).astype(float)
        for uuid, pod_id, health, codes in (
            ("GPU-1", float(pod), {}, xid),
            ("GPU-2", np.nan, {"clock_events": events}, np.zeros(n)),
            ("GPU-3", np.nan, {"clock_events": np.zeros(n)}, np.zeros(n)),
        ):
            writer.write_samples(conn, writer.SampleColumns(  # type: ignore[call-arg, unused-ignore]
                np.full(n, gpus[(uuid, -1, 0)]), ts, np.full(n, 60), np.full(n, pod_id),
                np.full(n, 0.9), np.full(n, 1.0), np.full(n, 1000.0), np.full(n, 81920.0),
                np.full(n, 300.0), np.full(n, 50.0), codes, health=health,
            ))  # fmt: skip
        rollup.roll_up(conn, H0, H0 + 7200)
    engine.dispose()


def test_end_to_end_through_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "gpuwatch.yaml"
    url = f"sqlite:///{tmp_path / 'gw.db'}"
    config.write_text(
        f'database_url: {url}\npricing:\n  models:\n    "{H100}": {{on_demand: 4.0}}\n'
    )
    env = {"GPUWATCH_CONFIG": str(config)}
    assert CliRunner().invoke(cli, ["db", "upgrade"], env=env).exit_code == 0
    _write_fleet(url)
    read: list[str] = []
    load = repository.load_health_hourly

    def recorded(*args: Any) -> pd.DataFrame:
        frame = load(*args)
        read.extend(frame["gpu_uuid"].astype(str))
        return frame

    monkeypatch.setattr(repository, "load_health_hourly", recorded)
    args = ["health", "--start", "2025-11-17T00:00:00Z", "--end", "2025-11-17T02:00:00Z"]
    result = CliRunner().invoke(cli, [*args, "--format", "json"], env=env)
    assert result.exit_code == 0, result.output
    assert set(read) == {"GPU-1", "GPU-2"}  # GPU-3 has no event: its rows are not read
    entries = {e["gpu_uuid"]: e for e in json.loads(result.stdout)}
    assert entries["GPU-1"]["state"] == "failing"
    assert entries["GPU-1"]["reasons"] == ["xid:79"]
    assert entries["GPU-1"]["first_seen"] == "2025-11-17T01:15:00Z"
    assert entries["GPU-1"]["state_hours"] == 0.75  # 01:15 to 02:00
    assert entries["GPU-1"]["allocated_cost_while_failing_usd"] == 3.0  # 0.75 h × $4
    assert entries["GPU-1"]["pods"] == ["a"]
    assert entries["GPU-2"]["state"] == "degraded"  # 30 of 120 minutes: 25 % ≥ 10 %
    assert entries["GPU-2"]["reasons"] == ["thermal_throttle"]
    assert (entries["GPU-2"]["state_hours"], entries["GPU-2"]["pods"]) == (1.0, [])
    weekly = CliRunner().invoke(cli, ["report", "weekly", "--week", "2025-W47"], env=env)
    assert weekly.exit_code == 0, weekly.output
    row = next(r for r in csv.DictReader(io.StringIO(weekly.stdout)) if r["workload"] == "a")
    assert (row["failing_gpu_hours"], row["failing_cost_usd"]) == ("0.75", "3.00")
    assert row["throttled_gpu_hours"] == ""  # no clock-event readings on GPU-1
