"""Hostile series never stop a collection: a real Prometheus serves valid GPUs next to series
whose labels do not fit the store, and (through a proxy that breaks its answers) malformed values.

The same rows are stored on SQLite and PostgreSQL; the bad series are counted and named.
"""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from sqlalchemy import Engine

from gpuwatch.cli.main import cli
from gpuwatch.collectors.collect import CollectStats, Window, collect
from gpuwatch.collectors.prometheus import PrometheusError, PrometheusSource
from gpuwatch.collectors.promql import FIELDS, Catalogue
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.store.engine import make_engine, upgrade
from tests.support.prometheus import PrometheusProcess, Series, prometheus_with_blocks

pytestmark = pytest.mark.prometheus

START = 1_763_251_200  # 2025-11-16T00:00:00Z, on the hour
STEP_S = 60
END = START + 2 * 3600
INSTANTS = (END - START) // STEP_S
LONG_UUID = "GPU-" + "a" * 296
LONG_MODEL = "M" * 300
LONG_POD = "p" * 300
VALID = ("GPU-ok-0", "GPU-ok-1", "GPU-ok-2", "GPU-long-model")
#: Per reason, the series (one per metric of each hostile GPU) counted under it.
EXPECTED_ISSUES = {
    "UUID longer than 64 characters": 2,
    "modelName cut to 128 characters": 2,
    "pod longer than 253 characters": 2,
    "no GPU UUID label": 1,
}


def _gpu(uuid: str | None, model: str = "NVIDIA L4", pod: str = "train-0") -> list[Series]:
    labels = {"Hostname": "node-a", "gpu": "0", "modelName": model, "exported_pod": pod}
    labels |= {"exported_namespace": "ml", "instance": "10.0.0.7:9400", "job": "dcgm"}
    if uuid is not None:
        labels["UUID"] = uuid
    points = [START + n * STEP_S for n in range(INSTANTS)]
    util = Series("DCGM_FI_DEV_GPU_UTIL", labels, [(ts, 40.0) for ts in points])
    memory = Series("DCGM_FI_DEV_FB_USED", labels, [(ts, 1000.0) for ts in points])
    return [util] if uuid is None else [util, memory]


def _series() -> list[Series]:
    out = [s for n in range(3) for s in _gpu(f"GPU-ok-{n}", pod=f"train-{n}")]
    out += _gpu(LONG_UUID) + _gpu("GPU-long-model", model=LONG_MODEL)
    return out + _gpu("GPU-long-pod", pod=LONG_POD) + _gpu(None)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    with prometheus_with_blocks(_series(), tmp_path_factory.mktemp("hostile")) as server:
        yield server


class Proxy:
    """Forwards ``/api/v1/*`` to Prometheus; records each range answer's series and points and
    may rewrite the answer (``rewrite``) on its way back."""

    def __init__(self, upstream: str, rewrite: Callable[[dict[str, Any]], None] | None = None):
        self.upstream, self.rewrite = upstream, rewrite
        self.answers: list[tuple[str, int, int]] = []  # (query, series, points)
        self.spans: list[tuple[str, int, int]] = []  # (query, start, end) of each range request
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with urllib.request.urlopen(proxy.upstream + self.path, timeout=30) as answer:
                    body = answer.read()
                if "/query_range" in self.path:
                    params = parse_qs(urlsplit(self.path).query)
                    query = params["query"][0]
                    proxy.spans.append((query, int(params["start"][0]), int(params["end"][0])))
                    body = proxy.record(query, body)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def record(self, query: str, body: bytes) -> bytes:
        answer = orjson.loads(body)
        result = answer["data"]["result"]
        self.answers.append((query, len(result), sum(len(s["values"]) for s in result)))
        if self.rewrite is None:
            return body
        self.rewrite(answer)
        return orjson.dumps(answer)

    def __enter__(self) -> Proxy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _collect(engine: Engine, url: str, **limits: int) -> CollectStats:
    source = PrometheusSource(url, Catalogue(), retries=0, backoff_s=0.01, **limits)
    window = Window(START, END, STEP_S, 3600)
    return collect(engine, "lab", window, source, None, LabelVariants(), now_ts=END)


def _stored(engine: Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        gpus = conn.execute(sa.text("SELECT uuid, model_name FROM gpus ORDER BY uuid")).all()
        per_gpu = conn.execute(
            sa.text(
                "SELECT g.uuid, count(*), min(s.util_ratio), max(s.fb_used_mib) FROM gpu_samples s"
                " JOIN gpus g ON g.id = s.gpu_id GROUP BY g.uuid ORDER BY g.uuid"
            )
        ).all()
        pods = conn.execute(sa.text("SELECT name FROM pods ORDER BY name")).scalars().all()
    return {"gpus": [tuple(r) for r in gpus], "samples": [tuple(r) for r in per_gpu], "pods": pods}


def test_bad_series_are_skipped_or_cut_and_the_valid_gpus_stored(
    prometheus: PrometheusProcess, migrated_engine: Engine
) -> None:
    stats = _collect(migrated_engine, prometheus.url)
    assert stats.issues.counts() == EXPECTED_ISSUES
    stored = _stored(migrated_engine)
    # The same rows on SQLite and PostgreSQL: the model name is cut to its column's length.
    models = {"GPU-long-model": "M" * 128}
    assert stored["gpus"] == [(uuid, models.get(uuid, "NVIDIA L4")) for uuid in sorted(VALID)]
    assert stored["samples"] == [(uuid, INSTANTS, 0.4, 1000.0) for uuid in sorted(VALID)]
    assert stored["pods"] == ["train-0", "train-1", "train-2"]
    with migrated_engine.connect() as conn:
        detail = conn.execute(sa.text("SELECT detail FROM collection_state")).scalar_one()
    detail = detail if isinstance(detail, dict) else orjson.loads(detail)
    assert detail["series_skipped"] == EXPECTED_ISSUES


def test_the_warning_counts_and_names_the_bad_series(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'gw.db'}"
    upgrade(make_engine(url))
    env = {"GPUWATCH_DATABASE_URL": url, "GPUWATCH_PROMETHEUS_URL": prometheus.url}
    when = [datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for ts in (START, END)]
    args = ["collect", "--no-kubernetes", "--start", when[0], "--end", when[1]]
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 0, result.output
    assert f"collected {4 * INSTANTS:,} samples of 4 GPU units" in result.output
    lines = [line for line in result.output.splitlines() if "warning" in line]
    assert len(lines) == len(EXPECTED_ISSUES)
    uuid_line = next(line for line in lines if "UUID longer than 64" in line)
    assert uuid_line.startswith("gpuwatch: warning: 2 series: UUID longer than 64 characters")
    assert "UUID='GPU-aaaaaaaaaaaaaaaaaaaa" in uuid_line
    assert "Traceback" not in result.output


def _break_values(answer: dict[str, Any]) -> None:
    """GPU-ok-1's answer: a value that is no number, a null and a point without its value."""
    for series in answer["data"]["result"]:
        if series["metric"].get("UUID") == "GPU-ok-1" and len(series["values"]) >= 3:
            series["values"][0][1] = "abc"
            series["values"][1][1] = None
            series["values"][2] = series["values"][2][:1]


def test_no_capacity_instant_is_read_after_the_page(
    prometheus: PrometheusProcess, migrated_engine: Engine
) -> None:
    """The used and free memory are separate requests: a reading of an instant after the page
    (in the future of a collection up to now) could change between them as scrapes land."""
    with Proxy(prometheus.url) as proxy:
        _collect(migrated_engine, proxy.url, max_samples=10**9)
    capacity = {Catalogue().capacity_queries(STEP_S)[f.field] for f in FIELDS if f.capacity}
    page_ends = (START + 3600 - STEP_S, END - STEP_S)  # the two one-hour pages' last instants
    spans = sorted((start, end) for query, start, end in proxy.spans if query in capacity)
    # per capacity field: the 15-minute instants of each page, then the page's last instant
    assert spans == sorted(
        [(START, START + 2700), (page_ends[0], page_ends[0])] * 3
        + [(START + 3600, START + 6300), (page_ends[1], page_ends[1])] * 3
    )
    assert max(end for _, _, end in proxy.spans) == END - STEP_S


def test_malformed_values_are_counted_per_series_and_skipped(
    prometheus: PrometheusProcess, migrated_engine: Engine
) -> None:
    with Proxy(prometheus.url, _break_values) as proxy:
        # One request per field and page (no split): the points broken are those of the page.
        stats = _collect(migrated_engine, proxy.url, max_samples=10**9)
    # GPU-ok-1's two series (utilization, framebuffer used), in three queries (utilization,
    # the step's largest framebuffer, the capacity grid's last one), in two one-hour pages.
    malformed = "malformed values (not a number, null or missing) skipped"
    assert stats.issues.counts() == {malformed: 2, **EXPECTED_ISSUES}
    assert stats.issues.bad_points == 3 * 3 * 2
    # one request per field and page, and one more per capacity field at the page's last
    # instant (an hour's last minute is not on the 15-minute capacity grid)
    capacity = sum(1 for f in FIELDS if f.capacity)
    assert len(proxy.answers) == (len(FIELDS) + capacity) * 2
    samples = dict((uuid, count) for uuid, count, *_ in _stored(migrated_engine)["samples"])
    # The first three instants of each page lost both readings; the rest are stored.
    assert samples["GPU-ok-1"] == INSTANTS - 3 * 2
    assert samples["GPU-ok-0"] == INSTANTS


def test_requests_are_sized_by_the_samples_budget(
    prometheus: PrometheusProcess, migrated_engine: Engine
) -> None:
    with Proxy(prometheus.url) as proxy:
        _collect(migrated_engine, proxy.url, max_series=10, max_samples=70)
    util = [a for a in proxy.answers if "DCGM_FI_DEV_GPU_UTIL" in a[0]]
    assert all(points <= 70 for _, _, points in proxy.answers)
    # 7 series of utilization: 70 // 10 = 7 instants a request before an answer says how
    # many series there are, 70 // 7 = 10 after; 60 instants a page, two pages.
    assert len(util) >= 2 * (60 // 10)
    assert max(points for _, _, points in util) == 70
    expected = [(uuid, INSTANTS, 0.4, 1000.0) for uuid in sorted(VALID)]
    assert _stored(migrated_engine)["samples"] == expected


def test_a_page_over_max_series_is_refused_and_nothing_stored(
    prometheus: PrometheusProcess, migrated_engine: Engine
) -> None:
    with pytest.raises(PrometheusError) as failure:
        _collect(migrated_engine, prometheus.url, max_series=5)
    message = str(failure.value)
    assert "answered 7 series of util_dev_pct" in message
    assert "more than prometheus.max_series (5)" in message
    assert "\n" not in message
    with migrated_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM gpu_samples")).scalar_one() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM collection_state")).scalar_one() == 0


def test_the_refusal_is_one_line_through_the_cli(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'gw.db'}"
    upgrade(make_engine(url))
    config = tmp_path / "gpuwatch.yaml"
    settings = f"database_url: {url}\nprometheus:\n  url: {prometheus.url}\n  max_series: 5\n"
    config.write_text(settings)
    when = [datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for ts in (START, END)]
    args = ["--config", str(config), "collect", "--no-kubernetes", "--start", when[0]]
    result = CliRunner().invoke(cli, [*args, "--end", when[1]])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("gpuwatch: Prometheus at ")
    assert "7 series of util_dev_pct" in line and "prometheus.max_series (5)" in line


def test_the_data_health_page_shows_the_skipped_series(
    prometheus: PrometheusProcess, sqlite_url: str
) -> None:
    import importlib
    import json

    import plotly.utils

    from gpuwatch.app.data import DashboardData
    from gpuwatch.app.server import create_app
    from gpuwatch.config import Settings

    engine = make_engine(sqlite_url)
    upgrade(engine)
    _collect(engine, prometheus.url)
    settings = Settings()
    data = DashboardData(engine, settings, background=False)
    app = create_app(engine, settings, data=data, warm=False)
    with app.server.app_context():
        layout = importlib.import_module("gpuwatch.app.pages.health").layout()
    rendered = json.dumps(layout, cls=plotly.utils.PlotlyJSONEncoder)
    engine.dispose()
    assert "Series skipped or changed" in rendered
    expected = (
        "2 UUID longer than 64 characters; 2 modelName cut to 128 characters; "
        "2 pod longer than 253 characters; 1 no GPU UUID label"
    )
    assert expected in rendered
