"""``collect`` against a real VictoriaMetrics, beside a real Prometheus holding the same series:
the same store from either; the tenant and the bearer token reach the server; an answer that
stays partial is retried, reported and not written.

Both servers are fed :mod:`tests.support.dcgm_fixture` (two days, an exporter outage included):
Prometheus as TSDB blocks, VictoriaMetrics through its Prometheus text import. A recording proxy
(:mod:`tests.support.recording_proxy`) in front of VictoriaMetrics shows what reached it, and
rewrites answers to make them partial.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.collectors.collect import SOURCE_PROMETHEUS, CollectStats, Window, collect
from gpuwatch.collectors.prometheus import PrometheusSource
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.config.http import HttpOptions
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.report.weekly import iso_week_bounds
from gpuwatch.store import writer
from gpuwatch.store.engine import make_engine, upgrade
from tests.support import dcgm_fixture as fx
from tests.support.cli import run_gpuwatch
from tests.support.prometheus import PrometheusProcess, Series, prometheus_with_blocks
from tests.support.recording_proxy import RecordingProxy
from tests.support.victoria import VictoriaProcess, victoria_with

START, _ = iso_week_bounds("2026-W46")
END = START + 2 * 86400
PAGE_S = 12 * 3600

pytestmark = pytest.mark.prometheus


@pytest.fixture(scope="module")
def series() -> list[Series]:
    return fx.series(START, END)


@pytest.fixture(scope="module")
def prometheus(
    series: list[Series], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusProcess]:
    with prometheus_with_blocks(series, tmp_path_factory.mktemp("prom")) as server:
        yield server


@pytest.fixture(scope="module")
def victoria(
    series: list[Series], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VictoriaProcess]:
    with victoria_with(series, tmp_path_factory.mktemp("vm")) as server:
        yield server


def new_store(folder: Path) -> Engine:
    folder.mkdir()
    engine = make_engine(f"sqlite:///{folder / 'gw.db'}")
    upgrade(engine)
    return engine


def collect_from(
    engine: Engine, source: PrometheusSource, start: int = START, end: int = END
) -> CollectStats:
    window = Window(start, end, fx.STEP_S, PAGE_S)
    return collect(engine, "lab", window, source, None, LabelVariants(), now_ts=END)


def source(url: str, retries: int = 1, **kwargs: Any) -> PrometheusSource:
    return PrometheusSource(url, Catalogue(), retries=retries, backoff_s=0.01, **kwargs)


def stored_rows(engine: Engine, table: str) -> list[tuple[Any, ...]]:
    """Every row of ``table`` with its GPU and pod named (store ids differ between stores)."""
    with engine.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns(table)}
        gpu = "JOIN gpus g ON g.id = s.gpu_id" if "gpu_id" in columns else ""
        pod = "LEFT JOIN pods p ON p.id = s.pod_id" if "pod_id" in columns else ""
        names = ["s.*"]
        names += ["g.uuid AS gpu_uuid", "g.mig_gi_id AS gpu_gi"] if gpu else []
        names += ["p.namespace AS pod_ns", "p.name AS pod_name"] if pod else []
        sql = f"SELECT {', '.join(names)} FROM {table} s {gpu} {pod}"
        rows = [dict(row._mapping) for row in conn.execute(sa.text(sql))]
    ids = ("gpu_id", "pod_id", "cluster_id")
    out = [tuple(v for k, v in sorted(r.items()) if k not in ids) for r in rows]
    return sorted(out, key=repr)


def test_victoria_metrics_and_prometheus_give_the_same_store(
    prometheus: PrometheusProcess, victoria: VictoriaProcess, tmp_path: Path
) -> None:
    from_prometheus = new_store(tmp_path / "p")
    from_victoria = new_store(tmp_path / "v")
    collect_from(from_prometheus, source(prometheus.url))
    stats = collect_from(from_victoria, source(victoria.url))
    assert stats.pages == 4
    samples = stored_rows(from_victoria, "gpu_samples")
    # Every unit at every step where it has data, as the fixture says.
    assert len(samples) == sum(len(fx.expected_grid(START, END, u)) for u in fx.units())
    assert samples == stored_rows(from_prometheus, "gpu_samples")
    for table in (
        "gpu_samples_hourly",
        "pod_samples_hourly",
        "workload_samples_hourly",
        "gpu_health_hourly",
    ):
        hourly = stored_rows(from_victoria, table)
        assert hourly, table
        assert hourly == stored_rows(from_prometheus, table), table


def _samples_at_or_after(engine: Engine, ts: int) -> int:
    with engine.connect() as conn:
        sql = sa.text("SELECT count(*) FROM gpu_samples WHERE ts >= :ts")
        return int(conn.execute(sql, {"ts": ts}).scalar_one())


def _prometheus_state(engine: Engine) -> tuple[int | None, dict[str, Any]]:
    with engine.connect() as conn:
        cluster_id = writer.ensure_cluster(conn, "lab")
        mark = writer.read_watermark(conn, cluster_id, SOURCE_PROMETHEUS)
        sql = sa.text("SELECT detail FROM collection_state WHERE source = 'prometheus'")
        detail = conn.execute(sql).scalar_one()
    return mark, detail if isinstance(detail, dict) else orjson.loads(detail)


def _health_page(engine: Engine) -> str:
    """The Data health page of the store, rendered as the dashboard sends it."""
    import importlib
    import json

    import plotly.utils

    from gpuwatch.app.data import DashboardData
    from gpuwatch.app.server import create_app
    from gpuwatch.config import Settings

    settings = Settings()
    data = DashboardData(engine, settings, background=False)
    app = create_app(engine, settings, data=data, warm=False)
    with app.server.app_context():
        layout = importlib.import_module("gpuwatch.app.pages.health").layout()
    return json.dumps(layout, cls=plotly.utils.PlotlyJSONEncoder)


def test_the_tenant_bearer_token_and_headers_reach_the_server(
    victoria: VictoriaProcess, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("tok-3e1f\n")
    config = tmp_path / "gpuwatch.yaml"
    with RecordingProxy(victoria.url) as proxy:
        config.write_text(
            f"cluster: lab\ndatabase_url: sqlite:///{tmp_path / 'cli.db'}\nprometheus:\n"
            f"  url: {proxy.url}\n  tenant: team-a\n  bearer_token_file: {token}\n"
            "  headers:\n    X-Team: gpu\n"
        )
        env = {"GPUWATCH_CONFIG": str(config)}
        assert run_gpuwatch("db", "upgrade", env=env).returncode == 0
        done = run_gpuwatch("collect", "--no-kubernetes", "--start", "2026-11-09T00:00:00Z",
                            "--end", "2026-11-09T02:00:00Z", env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "tok-3e1f" not in done.stdout + done.stderr
    paths = {seen.path for seen in proxy.seen}
    assert {"/api/v1/query", "/api/v1/query_range"} <= paths
    for seen in proxy.seen:
        assert seen.headers.get("X-Scope-OrgID") == "team-a", seen.path
        assert seen.headers.get("Authorization") == "Bearer tok-3e1f", seen.path
        assert seen.headers.get("X-Team") == "gpu", seen.path


def test_basic_auth_reaches_the_server(victoria: VictoriaProcess, tmp_path: Path) -> None:
    http = HttpOptions(basic_auth=("gpuwatch", "pa55"))
    with RecordingProxy(victoria.url) as proxy:
        stats = collect_from(new_store(tmp_path / "s"), source(proxy.url, http=http),
                             START, START + 3600)  # fmt: skip
    assert stats.samples > 0
    assert proxy.seen
    # base64("gpuwatch:pa55")
    assert {seen.headers.get("Authorization") for seen in proxy.seen} == {
        "Basic Z3B1d2F0Y2g6cGE1NQ=="
    }


def _warn(body: bytes) -> bytes:
    assert body.endswith(b"}")
    return body[:-1] + b',"warnings":["store gpu-store-2 is unavailable"]}'


def _is_partial(body: bytes) -> bytes:
    head = b'{"status":"success",'
    assert body.startswith(head)
    return head + b'"isPartial":true,' + body[len(head) :]


@pytest.mark.parametrize(
    ("rewrite", "warning"),
    [
        (_warn, "store gpu-store-2 is unavailable"),
        (_is_partial, "the answer is partial (isPartial)"),
    ],
)
def test_an_answer_that_stays_partial_is_retried_reported_and_not_written(
    victoria: VictoriaProcess, tmp_path: Path, rewrite: Any, warning: str
) -> None:
    second = START + 2 * 3600

    def partial_from_the_second_page(path: str, query: dict[str, str], body: bytes) -> bytes:
        late = path == "/api/v1/query_range" and int(query["start"]) >= second
        return rewrite(body) if late else body

    engine = new_store(tmp_path / "s")
    window = Window(START, START + 4 * 3600, fx.STEP_S, 2 * 3600)
    with RecordingProxy(victoria.url, partial_from_the_second_page) as proxy:
        src = source(proxy.url, retries=2)
        stats = collect(engine, "lab", window, src, None, LabelVariants(), now_ts=END)
        assert stats.pages == 1
        assert stats.partial is not None
        assert stats.partial.warnings == (warning,)
        assert stats.partial.page_start_ts == second
        assert stats.partial.attempts == 3
        assert warning in stats.partial.describe()
        # The second page's first request was asked three times; of the others only the one
        # sent ahead of its answer was (its retries may still be under way).
        late = [
            tuple(sorted(s.query.items()))
            for s in proxy.requests_to("/api/v1/query_range")
            if int(s.query["start"]) >= second
        ]
        assert late.count(late[0]) == 3
        assert len(set(late)) <= 2
        assert _samples_at_or_after(engine, second) == 0
        mark, detail = _prometheus_state(engine)
        assert mark == second
        assert detail["partial"] == {"page_start_ts": second, "warnings": [warning], "seen_ts": END}
        assert (
            f"2026-11-11 00:00 UTC: the page from 2026-11-09 02:00 UTC was not written ({warning})"
        ) in _health_page(engine)

        proxy.rewrite = None  # the store is back: the next round collects the page
        again = collect(engine, "lab", Window(second, START + 4 * 3600, fx.STEP_S, 2 * 3600),
                        src, None, LabelVariants(), now_ts=END + 60)  # fmt: skip
    assert again.partial is None
    assert again.pages == 1
    assert _samples_at_or_after(engine, second) == again.samples > 0
    mark, detail = _prometheus_state(engine)
    assert mark == START + 4 * 3600
    assert detail["partial"]["seen_ts"] == END  # the last partial answer is still shown


def test_an_answer_partial_once_is_asked_again_and_stored(
    victoria: VictoriaProcess, tmp_path: Path
) -> None:
    answered: set[tuple[tuple[str, str], ...]] = set()

    def partial_the_first_time(path: str, query: dict[str, str], body: bytes) -> bytes:
        key = tuple(sorted(query.items()))
        if path != "/api/v1/query_range" or key in answered:
            return body
        answered.add(key)
        return _warn(body)

    engine = new_store(tmp_path / "s")
    with RecordingProxy(victoria.url, partial_the_first_time) as proxy:
        stats = collect_from(engine, source(proxy.url, retries=1), START, START + 3600)
    assert stats.partial is None
    assert stats.samples == sum(len(fx.expected_grid(START, START + 3600, u)) for u in fx.units())
    ranges = proxy.requests_to("/api/v1/query_range")
    assert len(ranges) == 2 * len(answered)


def test_collect_reports_a_partial_page(victoria: VictoriaProcess, tmp_path: Path) -> None:
    def always_partial(path: str, query: dict[str, str], body: bytes) -> bytes:
        return _warn(body) if path == "/api/v1/query_range" else body

    with RecordingProxy(victoria.url, always_partial) as proxy:
        env = {
            "GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}",
            "GPUWATCH_PROMETHEUS_URL": proxy.url,
            "GPUWATCH_PROMETHEUS__RETRIES": "1",
            "GPUWATCH_CLUSTER": "lab",
        }
        assert run_gpuwatch("db", "upgrade", env=env).returncode == 0
        done = run_gpuwatch("collect", "--no-kubernetes", "--start", "2026-11-09T00:00:00Z",
                            "--end", "2026-11-09T02:00:00Z", env=env)  # fmt: skip
    assert done.returncode == 1, done.stderr  # a one-shot backfill with a gap fails
    assert "collected 0 samples" in done.stdout
    assert "nothing new to collect" not in done.stderr
    assert (
        "answered partial data for the page from 2026-11-09T00:00:00Z (2 attempts): "
        "store gpu-store-2 is unavailable; that page and those after it were not written"
    ) in done.stderr


@pytest.mark.parametrize(
    ("settings", "secret"),
    [
        ("  bearer_token: tok-77a1\n", "tok-77a1"),
        ("  basic_auth:\n    username: gw\n    password: pw-9c3e\n", "pw-9c3e"),
    ],
)
def test_config_show_masks_the_token_and_the_password(
    tmp_path: Path, settings: str, secret: str
) -> None:
    config = tmp_path / "gpuwatch.yaml"
    config.write_text(f"prometheus:\n  tenant: team-a\n{settings}")
    shown = run_gpuwatch("--config", str(config), "config", "show", env={})
    assert shown.returncode == 0, shown.stderr
    assert "team-a" in shown.stdout
    assert secret not in shown.stdout + shown.stderr


def test_a_missing_ca_file_names_the_key_and_the_file(tmp_path: Path) -> None:
    config = tmp_path / "gpuwatch.yaml"
    config.write_text(f"prometheus:\n  tls_ca_file: {tmp_path / 'ca.pem'}\n")
    checked = run_gpuwatch("--config", str(config), "config", "check", env={})
    assert checked.returncode == 2
    assert f"prometheus.tls_ca_file in config file {config}" in checked.stderr
    assert f"{tmp_path / 'ca.pem'} is not a file" in checked.stderr
