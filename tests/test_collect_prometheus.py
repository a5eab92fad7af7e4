"""``gpuwatch collect`` against a real Prometheus: a week of DCGM data in every label variant.

The data comes from :mod:`tests.support.dcgm_fixture`, imported into Prometheus's TSDB by
``promtool tsdb create-blocks-from openmetrics``; the collector runs its real queries over HTTP.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.collectors.collect import Window, collect
from gpuwatch.collectors.prometheus import PrometheusError, PrometheusSource
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.report.weekly import iso_week_bounds
from gpuwatch.store import writer
from tests.support import dcgm_fixture as fx
from tests.support.cli import run_gpuwatch
from tests.support.prometheus import PrometheusProcess, prometheus_with_blocks

START, _ = iso_week_bounds("2026-W46")
END = START + 7 * 86400
PAGE_S = 12 * 3600

pytestmark = pytest.mark.prometheus


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    folder = tmp_path_factory.mktemp("dcgm-prometheus")
    with prometheus_with_blocks(fx.series(START, END), folder) as server:
        yield server


def _source(url: str, retries: int = 1) -> PrometheusSource:
    return PrometheusSource(url, Catalogue(), retries=retries, backoff_s=0.01)


def _collect(engine: Engine, url: str, start: int = START, end: int = END) -> Any:
    window = Window(start, end, fx.STEP_S, PAGE_S)
    return collect(engine, "lab", window, _source(url), None, LabelVariants(), now_ts=END)


def _rows(engine: Engine) -> dict[tuple[str, int, int], dict[str, Any]]:
    sql = sa.text(
        "SELECT g.uuid, g.mig_gi_id, s.ts, s.util_ratio, s.util_signal, s.fb_used_mib,"
        " s.fb_total_mib, s.temp_c, s.xid, p.namespace, p.name AS pod, n.name AS node"
        " FROM gpu_samples s JOIN gpus g ON g.id = s.gpu_id"
        " LEFT JOIN pods p ON p.id = s.pod_id LEFT JOIN nodes n ON n.id = g.node_id"
    )
    with engine.connect() as conn:
        return {(r.uuid, r.mig_gi_id, r.ts): dict(r._mapping) for r in conn.execute(sql)}


@pytest.fixture(scope="module")
def collected(prometheus: PrometheusProcess, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    from gpuwatch.store.engine import make_engine, upgrade

    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('store') / 'gw.db'}")
    upgrade(engine)
    _collect(engine, prometheus.url)
    return engine


def test_exactly_one_sample_per_unit_per_step_where_data_exists(collected: Engine) -> None:
    rows = _rows(collected)
    for unit in fx.units():
        stored = sorted(ts for (uuid, gi, ts) in rows if (uuid, gi) == (unit.uuid, unit.gi))
        assert stored == fx.expected_grid(START, END, unit), unit.uuid
    expected = sum(len(fx.expected_grid(START, END, u)) for u in fx.units())
    assert len(rows) == expected


def test_values_pods_and_signal_per_label_variant(collected: Engine) -> None:
    rows = _rows(collected)
    for unit in fx.units():
        for ts in fx.expected_grid(START, END, unit)[:200]:
            row = rows[(unit.uuid, unit.gi, ts)]
            source_ts = ts - fx.STEP_S if unit.offset_s else ts
            util, signal = fx.util_value(unit, source_ts)
            if fx.util_sentinel(unit, source_ts):
                assert row["util_ratio"] is None, "a blank sentinel reading must be missing"
                assert row["util_signal"] is None
            else:
                assert row["util_ratio"] == pytest.approx(util), (unit.uuid, ts)
                assert row["util_signal"] == {"prof_gr_engine_active": 1, "dev_gpu_util": 2}[signal]
            assert (row["namespace"], row["pod"]) == (unit.namespace, unit.pod), unit.uuid
            assert row["node"] == unit.node
            assert row["fb_used_mib"] == fx.fb_used(unit, source_ts)
            assert row["fb_total_mib"] == fx.fb_total(unit)


def test_xid_codes_are_stored_where_reported_and_nothing_where_zero(collected: Engine) -> None:
    rows = _rows(collected)
    unit = next(u for u in fx.units() if u.node == "gpu-node-a" and u.gpu == 5)
    grid = fx.expected_grid(START, END, unit)
    source = {ts: ts - fx.STEP_S if unit.offset_s else ts for ts in grid}
    codes = {ts: rows[(unit.uuid, unit.gi, ts)]["xid"] for ts in grid}
    reported = [ts for ts in grid if (source[ts] // fx.STEP_S) % 500 == 0]
    assert reported, "the fixture reports XID 79 now and then"
    assert {codes[ts] for ts in reported} == {79}
    assert {codes[ts] for ts in grid if ts not in reported} == {None}
    assert {r["xid"] for (uuid, _, _), r in rows.items() if uuid != unit.uuid} == {None}


def test_exporter_outage_is_no_data_not_idle(collected: Engine) -> None:
    rows = _rows(collected)
    gap = [ts for ts in range(START, END, fx.STEP_S) if fx.outage(ts, START)]
    assert gap, "the fixture has an outage"
    for unit in (u for u in fx.units() if u.node == "gpu-node-d"):
        assert not [ts for ts in gap if (unit.uuid, unit.gi, ts) in rows]


def test_exported_labels_attribute_the_holder_and_never_the_exporter(collected: Engine) -> None:
    with collected.connect() as conn:
        names = {r[0] for r in conn.execute(sa.text("SELECT name FROM pods"))}
    assert "notebook-alice-0" in names
    assert "nvidia-dcgm-exporter-b7x2k" not in names
    unheld = [r for k, r in _rows(collected).items() if k[0] == "GPU-b0000003"]
    assert unheld and all(r["pod"] is None for r in unheld)


def test_mig_instances_are_their_own_units_without_a_whole_gpu_row(collected: Engine) -> None:
    with collected.connect() as conn:
        units = conn.execute(
            sa.text(
                "SELECT mig_gi_id, mig_profile FROM gpus WHERE uuid = 'GPU-c0000000' ORDER BY 1"
            )
        ).all()
    assert [tuple(u) for u in units] == [(1, "3g.40gb"), (2, "2g.20gb"), (3, "1g.10gb")]


def test_a_second_run_changes_nothing(collected: Engine, prometheus: PrometheusProcess) -> None:
    before = _rows(collected)
    with collected.connect() as conn:
        counts = [
            conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar()
            for t in ("pods", "gpus", "nodes")
        ]
    stats = _collect(collected, prometheus.url)
    assert stats.samples == len(before)
    assert _rows(collected) == before
    with collected.connect() as conn:
        again = [
            conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar()
            for t in ("pods", "gpus", "nodes")
        ]
    assert again == counts


@pytest.mark.postgres
def test_collects_the_same_into_postgresql(
    prometheus: PrometheusProcess, postgres_url: str, collected: Engine
) -> None:
    from gpuwatch.store.engine import make_engine, upgrade

    engine = make_engine(postgres_url)
    upgrade(engine)
    day = START + 86400
    _collect(engine, prometheus.url, START, day)
    _collect(engine, prometheus.url, START, day)
    expected = {k: v for k, v in _rows(collected).items() if k[2] < day}
    assert _rows(engine) == expected


def test_real_answers_are_read_fast_and_as_their_json_says(prometheus: PrometheusProcess) -> None:
    import numpy as np
    import requests

    from gpuwatch.collectors import promjson

    for query in Catalogue().queries(fx.STEP_S).values():
        params = {"query": query, "start": START, "end": START + 86400, "step": f"{fx.STEP_S}s"}
        body = requests.get(
            f"{prometheus.url}/api/v1/query_range", params=params, timeout=60,
            headers={"Accept-Encoding": "identity"},
        ).content  # fmt: skip
        assert promjson._scan(body) is not None, "Prometheus's own layout takes the fast path"
        fast, full = promjson.decode(body), promjson._decode_slow(body)
        assert fast.labels == full.labels
        assert np.array_equal(fast.counts, full.counts)
        assert np.array_equal(fast.ts, full.ts)
        assert np.array_equal(fast.values, full.values, equal_nan=True)


class StopAfter:
    """A source that stops the real Prometheus once ``pages`` pages were fetched."""

    def __init__(self, source: PrometheusSource, server: PrometheusProcess, pages: int) -> None:
        self.source, self.server, self.pages = source, server, pages

    def fetch_page(self, start_ts: int, end_ts: int, step_s: int) -> dict[str, list[Any]]:
        if self.pages == 0:
            self.server.stop()
        self.pages -= 1
        return self.source.fetch_page(start_ts, end_ts, step_s)


def test_prometheus_stopping_mid_window_loses_nothing(
    prometheus: PrometheusProcess, sqlite_url: str, collected: Engine
) -> None:
    from gpuwatch.store.engine import make_engine, upgrade

    # A second server on the same data, so the shared one stays up for other tests.
    server = PrometheusProcess(prometheus.tsdb.parent / "copy")
    subprocess.run(["cp", "-a", str(prometheus.tsdb), str(server.tsdb)], check=True)
    server.start()
    engine = make_engine(sqlite_url)
    upgrade(engine)
    window = Window(START, START + 2 * 86400, fx.STEP_S, PAGE_S)
    flaky = StopAfter(_source(server.url), server, pages=2)
    with pytest.raises(
        PrometheusError,
        match=r"^Prometheus at .* failed a range query after 2 attempts: connection refused$",
    ):
        collect(engine, "lab", window, flaky, None, LabelVariants(), now_ts=END)
    with engine.connect() as conn:
        cluster = writer.ensure_cluster(conn, "lab")
        assert writer.read_watermark(conn, cluster, "prometheus") == START + 2 * PAGE_S
        latest = conn.execute(sa.text("SELECT max(ts) FROM gpu_samples")).scalar_one()
    assert START + PAGE_S <= latest < START + 2 * PAGE_S
    server.start()
    try:
        resumed = Window(START + 2 * PAGE_S, START + 2 * 86400, fx.STEP_S, PAGE_S)
        collect(engine, "lab", resumed, _source(server.url), None, LabelVariants(), now_ts=END)
    finally:
        server.stop()
    expected = {k: v for k, v in _rows(collected).items() if k[2] < START + 2 * 86400}
    assert _rows(engine) == expected


def test_cli_collect_window_then_resume(prometheus: PrometheusProcess, tmp_path: Path) -> None:
    env = {
        "GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
        "GPUWATCH_PROMETHEUS_URL": prometheus.url,
        "GPUWATCH_CLUSTER": "lab",
    }
    assert run_gpuwatch("db", "upgrade", env=env).returncode == 0
    first = run_gpuwatch("collect", "--no-kubernetes", "--start", "2026-11-09T00:00:00Z",
                 "--end", "2026-11-09T06:00:00Z", env=env)  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "from 2026-11-09T00:00:00Z to 2026-11-09T06:00:00Z" in first.stdout
    resumed = run_gpuwatch("collect", "--no-kubernetes", "--end", "2026-11-09T08:00:00Z", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "from 2026-11-09T06:00:00Z to 2026-11-09T08:00:00Z" in resumed.stdout


def test_cli_unreachable_prometheus_is_one_line_exit_1(tmp_path: Path) -> None:
    from tests.support.postgres import free_port

    env = {
        "GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'down.db'}",
        "GPUWATCH_PROMETHEUS_URL": f"http://127.0.0.1:{free_port()}",
        "GPUWATCH_PROMETHEUS__RETRIES": "1",
    }
    assert run_gpuwatch("db", "upgrade", env=env).returncode == 0
    result = run_gpuwatch("collect", "--no-kubernetes", "--start", "2h", env=env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gpuwatch: Prometheus at http://127.0.0.1:")
    assert "connection refused" in lines[0]
    assert "nothing of the unfinished page was written" in lines[0]


def test_follow_stops_cleanly_on_sigterm_after_the_current_page(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    import signal

    from gpuwatch.store.engine import make_engine
    from tests.support.prometheus import wait_until

    db = tmp_path / "follow.db"
    env = {
        "GPUWATCH_DATABASE_URL": f"sqlite:///{db}",
        "GPUWATCH_PROMETHEUS_URL": prometheus.url,
        "GPUWATCH_PROMETHEUS__PAGE": "1h",
        "GPUWATCH_CLUSTER": "lab",
    }
    assert run_gpuwatch("db", "upgrade", env=env).returncode == 0
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuwatch", "collect", "--follow", "--interval", "1s",
         "--no-kubernetes", "--start", "2026-11-09T00:00:00Z"],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    engine = make_engine(f"sqlite:///{db}")

    def watermark() -> int | None:
        with engine.connect() as conn:
            return writer.read_watermark(conn, writer.ensure_cluster(conn, "lab"), "prometheus")

    try:
        wait_until(lambda: (watermark() or 0) >= START + 3600, "the first page", timeout_s=120)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert out.startswith("collected ")
    mark = watermark()
    assert mark is not None
    assert (mark - START) % 3600 == 0, "the watermark stops on a page boundary"
    with engine.connect() as conn:
        latest = conn.execute(sa.text("SELECT max(ts) FROM gpu_samples")).scalar_one()
    assert latest < mark, "nothing past the last complete page"
