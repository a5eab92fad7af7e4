"""Two real ``gpuwatch collect --follow`` processes on one store, against a real Prometheus
serving the simulated DCGM fleet: one leads, the other waits; the leader is killed (SIGKILL)
mid-window and the other takes over; the store ends with every (GPU unit, step) exactly once.

On SQLite the survivor takes over once the dead leader's lease expires (``collect.lease_ttl``,
3 s here); on PostgreSQL as soon as the leader's connection, and its advisory lock, is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from gpuwatch.cli.lease_guard import Leadership, LeaseStop
from gpuwatch.collectors.collect import Window, collect
from gpuwatch.collectors.prometheus import PrometheusSource
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.domain.durations import rfc3339
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.store.engine import make_engine, upgrade
from gpuwatch.store.lease import Lease
from tests.support import dcgm_fixture as fx
from tests.support.cli import run_gpuwatch
from tests.support.prometheus import PrometheusProcess, prometheus_with_blocks, wait_until

pytestmark = pytest.mark.prometheus

REPO = Path(__file__).resolve().parents[1]
HOUR_S = 3600
DEADLINE_S = 300.0


@dataclass(frozen=True)
class Fleet:
    prometheus: PrometheusProcess
    start_ts: int
    end_ts: int


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Eight hours of the fixture fleet, ending an hour or two before now (``--follow``
    collects up to now, so the window must be recent)."""
    now_ts = int(datetime.now(UTC).timestamp())
    end_ts = now_ts - now_ts % HOUR_S - HOUR_S
    start_ts = end_ts - 8 * HOUR_S
    folder = tmp_path_factory.mktemp("lease-fleet")
    with prometheus_with_blocks(fx.series(start_ts, end_ts), folder) as server:
        yield Fleet(server, start_ts, end_ts)


def _config(folder: Path, url: str, prometheus: str) -> Path:
    path = folder / "gpuwatch.yaml"
    settings = {
        "cluster": "lab",
        "database_url": url,
        "prometheus": {"url": prometheus, "step": "60s", "page": "5m"},
        "collect": {"lease_ttl": "3s", "lease_poll": "1s"},
    }
    path.write_text(yaml.safe_dump(settings))
    return path


def _replica(config: Path, holder: str, folder: Path) -> subprocess.Popen[str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "GPUWATCH_COLLECT__HOLDER": holder}
    args = ["--config", str(config), "collect", "--follow", "--interval", "2s", "--no-kubernetes"]
    return subprocess.Popen(
        [sys.executable, "-m", "gpuwatch", *args],
        stdout=(folder / f"{holder}.out").open("w"),
        stderr=(folder / f"{holder}.err").open("w"),
        text=True,
        env=env,
    )


def _scalar(engine: sa.Engine, sql: str) -> object:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql)).scalar()


def _watermark(engine: sa.Engine) -> int:
    mark = _scalar(engine, "SELECT watermark_ts FROM collection_state WHERE source = 'prometheus'")
    return int(mark) if isinstance(mark, int) else 0


def _per_unit(engine: sa.Engine) -> dict[tuple[str, int], int]:
    sql = (
        "SELECT g.uuid, g.mig_gi_id, count(*) FROM gpu_samples s "
        "JOIN gpus g ON g.id = s.gpu_id GROUP BY g.uuid, g.mig_gi_id"
    )
    with engine.connect() as conn:
        return {(str(u), int(gi)): int(n) for u, gi, n in conn.execute(sa.text(sql))}


def _expected(fleet: Fleet) -> dict[tuple[str, int], int]:
    """One sample per unit per raw reading (node-b's land on the next step, all before now)."""
    units = fx.units()
    return {(u.uuid, u.gi): len(list(fx.grid(fleet.start_ts, fleet.end_ts, u))) for u in units}


def _stop(process: subprocess.Popen[str]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
    return int(process.returncode)


def _failover(fleet: Fleet, url: str, folder: Path) -> None:
    config = _config(folder, url, fleet.prometheus.url)
    assert run_gpuwatch("--config", str(config), "db", "upgrade", env={}).returncode == 0
    seed_end = fleet.start_ts + HOUR_S
    seeded = run_gpuwatch("--config", str(config), "collect", "--no-kubernetes",
                          "--start", rfc3339(fleet.start_ts), "--end", rfc3339(seed_end),
                          env={})  # fmt: skip
    assert seeded.returncode == 0, seeded.stderr
    engine = make_engine(url)
    replicas = {name: _replica(config, name, folder) for name in ("replica-a", "replica-b")}
    try:
        # The leader has written some pages of the window, and not all of them.
        wait_until(lambda: _watermark(engine) >= seed_end + HOUR_S, "the leader's pages",
                   DEADLINE_S)  # fmt: skip
        leader = str(_scalar(engine, "SELECT holder FROM leases WHERE name = 'collect:lab'"))
        survivor = next(name for name in replicas if name != leader)
        replicas[leader].kill()
        replicas[leader].wait(timeout=30)
        assert _watermark(engine) < fleet.end_ts, "the leader finished before it was killed"
        expected = _expected(fleet)
        total = sum(expected.values())
        wait_until(lambda: _scalar(engine, "SELECT count(*) FROM gpu_samples") == total,
                   "the survivor's pages", DEADLINE_S)  # fmt: skip
        holder = _scalar(engine, "SELECT holder FROM leases WHERE name = 'collect:lab'")
        assert holder == survivor
        assert _per_unit(engine) == expected
        assert _stop(replicas[survivor]) == 0
    finally:
        for process in replicas.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        engine.dispose()
    said = (folder / f"{survivor}.err").read_text()
    assert f"collect: waiting: {leader} collects cluster lab (lease until " in said
    assert said.count("collect: waiting:") == 1, said
    assert f"collect: leading: {survivor} collects cluster lab" in said


def test_sqlite_the_survivor_takes_over_and_nothing_is_lost_or_doubled(
    fleet: Fleet, tmp_path: Path
) -> None:
    _failover(fleet, f"sqlite:///{tmp_path / 'lease.db'}", tmp_path)


@pytest.mark.postgres
def test_postgres_the_survivor_takes_over_and_nothing_is_lost_or_doubled(
    fleet: Fleet, postgres_url: str, tmp_path: Path
) -> None:
    _failover(fleet, postgres_url, tmp_path)


def test_a_leader_that_lost_the_lease_stops_before_its_next_page(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'lost.db'}")
    upgrade(engine)
    lead = Leadership(Lease(engine, "collect:lab", "replica-a", 45), "cluster lab", 1.0,
                      lambda: fleet.end_ts)  # fmt: skip
    assert lead.take().held
    stop = LeaseStop()
    stop.gate = lead.keep

    def taken_after_two_pages(done: int, _total: int, _samples: int) -> None:
        if done == 2:  # another replica took the lease (as if this one had stalled past it)
            with engine.begin() as conn:
                conn.execute(
                    sa.text("UPDATE leases SET holder = 'replica-b', expires_ts = :until"),
                    {"until": fleet.end_ts + HOUR_S},
                )

    window = Window(fleet.start_ts, fleet.start_ts + 2 * HOUR_S, fx.STEP_S, 600)
    source = PrometheusSource(fleet.prometheus.url, Catalogue())
    stats = collect(engine, "lab", window, source, None, LabelVariants(), fleet.end_ts,
                    progress=taken_after_two_pages, stop=stop)  # fmt: skip
    assert stats.pages == 2
    assert _watermark(engine) == fleet.start_ts + 1200
    assert lead.lost and not stop.is_set()
    said = capsys.readouterr().err
    assert "collect: lost the lease: replica-b collects cluster lab (lease until " in said
    engine.dispose()


def test_a_one_shot_collect_refuses_while_another_replica_holds_the_lease(
    fleet: Fleet, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'held.db'}"
    config = _config(tmp_path, url, fleet.prometheus.url)
    assert run_gpuwatch("--config", str(config), "db", "upgrade", env={}).returncode == 0
    engine = make_engine(url)
    now_ts = int(datetime.now(UTC).timestamp())
    assert Lease(engine, "collect:lab", "replica-z", 3600).acquire(now_ts).held
    window = ["--start", rfc3339(fleet.start_ts), "--end", rfc3339(fleet.start_ts + HOUR_S)]
    refused = run_gpuwatch("--config", str(config), "collect", "--no-kubernetes", *window, env={})
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "gpuwatch: another collector holds the lease: replica-z collects cluster lab (lease until "
    )
    assert _scalar(engine, "SELECT count(*) FROM gpu_samples") == 0
    forced = run_gpuwatch("--config", str(config), "collect", "--no-kubernetes", "--ignore-lease",
                          *window, env={})  # fmt: skip
    assert forced.returncode == 0, forced.stderr
    # 17 units × 60 steps, less the first step of node-b's 4 (scraped after the instant).
    assert _scalar(engine, "SELECT count(*) FROM gpu_samples") == 13 * 60 + 4 * 59
    listed = run_gpuwatch("--config", str(config), "db", "leases", env={})
    assert listed.returncode == 0
    assert listed.stdout.startswith("collect:lab: replica-z, held until ")
    engine.dispose()
