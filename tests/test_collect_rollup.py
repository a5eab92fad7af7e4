"""A collection writes the hourly roll-ups of its samples in the same transaction."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.collectors.collect import CollectStats, Window, collect
from gpuwatch.collectors.prometheus import PrometheusSource
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.report.weekly import iso_week_bounds
from gpuwatch.store.engine import make_engine, upgrade
from tests.support import dcgm_fixture as fx
from tests.support.prometheus import PrometheusProcess, prometheus_with_blocks

START, _ = iso_week_bounds("2026-W46")
END = START + 2 * 86400
# Pages that do not fall on hours: each hour is written by two pages, in two transactions.
PAGE_S = 5 * 3600 + 30 * 60

pytestmark = pytest.mark.prometheus

TOTALS = (
    "SELECT count(*), sum(CASE WHEN util_ratio IS NULL THEN 0 ELSE step_s END), "
    "sum(CASE WHEN pod_id IS NULL THEN 0 ELSE 1 END) FROM gpu_samples"
)
HOURLY_TOTALS = (
    "SELECT sum(samples), sum(data_s), sum(CASE WHEN pod_id = 0 THEN 0 ELSE samples END) "
    "FROM gpu_samples_hourly"
)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    folder = tmp_path_factory.mktemp("dcgm-rollup")
    with prometheus_with_blocks(fx.series(START, END), folder) as server:
        yield server


def _collect(engine: Engine, url: str, start: int, end: int) -> CollectStats:
    source = PrometheusSource(url, Catalogue(), retries=1, backoff_s=0.01)
    window = Window(start, end, fx.STEP_S, PAGE_S)
    return collect(engine, "lab", window, source, None, LabelVariants(), now_ts=END)


def _totals(engine: Engine) -> tuple[tuple[int, ...], tuple[int, ...]]:
    with engine.connect() as conn:
        raw = tuple(int(v or 0) for v in conn.execute(sa.text(TOTALS)).one())
        hourly = tuple(int(v or 0) for v in conn.execute(sa.text(HOURLY_TOTALS)).one())
    return raw, hourly


def test_rollups_match_the_samples_after_every_collection(
    prometheus: PrometheusProcess, store_url: str
) -> None:
    engine = make_engine(store_url)
    upgrade(engine)
    stats = _collect(engine, prometheus.url, START, START + 86400)
    # What the whole window named, over its 5 pages: the fixture's 17 GPU units (8 A100, 4 L40S,
    # 3 MIG instances, 2 T4) and the 7 pods holding them.
    assert (stats.pages, stats.gpu_units, stats.pods) == (5, 17, 7)
    first_raw, first_hourly = _totals(engine)
    assert first_raw[0] > 0 and first_raw == first_hourly
    _collect(engine, prometheus.url, START + 86400 - 7200, END)  # overlaps the first run
    raw, hourly = _totals(engine)
    assert raw[0] > first_raw[0] and raw == hourly
    engine.dispose()
