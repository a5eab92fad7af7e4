"""``gpuwatch queues`` and ``gpuwatch capacity`` on a real SQLite store, the store's readers
standing in with the worked example of docs/cost-model.md#scheduling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from gpuwatch.cli import commands_scheduling
from gpuwatch.cli.main import cli
from gpuwatch.domain.frames import GPU_COLUMNS, NODE_COLUMNS, empty_frame
from gpuwatch.report.inputs import Inputs
from gpuwatch.store import repository_scheduling
from tests.scheduling_example import END, T0, pods, queues, samples, workloads

WINDOW = ["--start", "2026-11-09T00:00:00Z", "--end", "2026-11-09T03:00:00Z"]


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "gpuwatch.yaml"
    config.write_text(f"database_url: sqlite:///{tmp_path / 'gw.db'}\n"
                      "pricing:\n  default_usd_per_gpu_hour: 1.0\n")  # fmt: skip
    env = {"GPUWATCH_CONFIG": str(config)}
    assert CliRunner().invoke(cli, ["db", "upgrade"], env=env).exit_code == 0
    return env


def _run(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, with_queues: bool,
         *args: str) -> Result:  # fmt: skip
    def inputs(engine: Any, start_ts: int, end_ts: int, **_: Any) -> Inputs:
        assert (start_ts, end_ts) == (T0, END)
        return Inputs(start_ts, end_ts, samples(), pods(), empty_frame(GPU_COLUMNS),
                      empty_frame(NODE_COLUMNS), resolution="hourly")  # fmt: skip

    table = queues() if with_queues else queues().iloc[0:0]
    monkeypatch.setattr(commands_scheduling, "load_inputs", inputs)
    monkeypatch.setattr(repository_scheduling, "load_queue_flavors", lambda engine: table)
    monkeypatch.setattr(repository_scheduling, "load_sched_workloads",
                        lambda engine, s, e: workloads())  # fmt: skip
    return CliRunner().invoke(cli, [*args, *WINDOW], env=env)


def test_queues_json(store: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    result = _run(store, monkeypatch, True, "queues", "--format", "json")
    assert result.exit_code == 0, result.output
    entries = json.loads(result.stdout)
    assert [e["queue"] for e in entries] == ["cq-a", "cq-b"]
    assert list(entries[0]) == [
        "cluster", "cohort", "queue", "flavor", "gpu_model", "nominal_gpus", "quota_gpu_hours",
        "allocated_gpu_hours", "busy_gpu_hours", "borrowed_gpu_hours", "lent_gpu_hours",
        "pending_gpu_hours", "stalled_gpu_hours", "idle_quota_gpu_hours", "idle_quota_usd",
    ]  # fmt: skip
    assert entries[0]["stalled_gpu_hours"] == 5.67
    assert (entries[1]["pending_gpu_hours"], entries[1]["idle_quota_usd"]) == (5.0, 3.0)


def test_queues_csv_and_table(store: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    csv_out = _run(store, monkeypatch, True, "queues", "--format", "csv")
    assert csv_out.exit_code == 0, csv_out.output
    lines = csv_out.stdout.splitlines()
    assert lines[0].startswith("cluster,cohort,queue,flavor,gpu_model,nominal_gpus")
    assert (
        lines[2]
        == "c1,co,cq-b,a100,NVIDIA Test GPU,1.00,3.00,0.00,0.00,0.00,0.00,5.00,0.00,3.00,3.00"
    )
    table = _run(store, monkeypatch, True, "queues")
    assert table.exit_code == 0 and "IDLE QUOTA $" in table.stdout and "cq-a" in table.stdout


def test_no_queues(store: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    table = _run(store, monkeypatch, False, "queues")
    assert (table.exit_code, table.stdout) == (0, "No queues with a GPU quota.\n")
    as_json = _run(store, monkeypatch, False, "queues", "--format", "json")
    assert (as_json.exit_code, json.loads(as_json.stdout)) == (0, [])


def test_capacity(store: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    result = _run(store, monkeypatch, True, "capacity", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"cluster": "c1", "gpu_model": "NVIDIA Test GPU", "free_gpu_hours": 6.0,
         "stranded_gpu_hours": 4.0, "stranded_cost_usd": 4.0, "largest_unplaceable_request": 2}
    ]  # fmt: skip
    csv_out = _run(store, monkeypatch, True, "capacity", "--format", "csv")
    assert csv_out.stdout.splitlines()[1] == "c1,NVIDIA Test GPU,6.00,4.00,4.00,2"


def test_bad_window_is_a_usage_error(store: dict[str, str]) -> None:
    result = CliRunner().invoke(cli, ["capacity", "--start", "nonsense"], env=store)
    assert result.exit_code == 2


def test_no_schema_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "gpuwatch.yaml"
    config.write_text(f"database_url: sqlite:///{tmp_path / 'none.db'}\n")
    result = CliRunner().invoke(cli, ["queues"], env={"GPUWATCH_CONFIG": str(config)})
    assert result.exit_code == 1
    assert "db upgrade" in result.stderr
