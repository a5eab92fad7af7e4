"""A collection writes the hourly roll-ups of its samples in the same transaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
from tests.support.prometheus import PrometheusProcess, Series, prometheus_with_blocks

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
    # Retries as in production: a request slowed past its timeout on a loaded machine is asked
    # again rather than failing the test.
    source = PrometheusSource(url, Catalogue(), retries=3, backoff_s=0.5)
    window = Window(start, end, fx.STEP_S, PAGE_S)
    return collect(engine, "lab", window, source, None, LabelVariants(), now_ts=END)


def _daily(engine: Engine) -> tuple[list[int], tuple[int, ...]]:
    """The days whose daily sums are current, and the same totals over those sums."""
    with engine.connect() as conn:
        built = "SELECT day_ts FROM gpu_daily_state WHERE built_version = version ORDER BY 1"
        days = [int(r[0]) for r in conn.execute(sa.text(built))]
        sums = HOURLY_TOTALS.replace("gpu_samples_hourly", "gpu_samples_daily")
        totals = tuple(int(v or 0) for v in conn.execute(sa.text(sums)).one())
    return days, totals


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
    assert _daily(engine) == ([START], first_hourly)  # the collected day is finished: built
    _collect(engine, prometheus.url, START + 86400 - 7200, END)  # overlaps the first run
    raw, hourly = _totals(engine)
    assert raw[0] > first_raw[0] and raw == hourly
    assert _daily(engine) == ([START, START + 86400], hourly)  # the first day built again
    engine.dispose()


SAMPLE_ROWS = (
    "SELECT g.uuid, g.mig_gi_id, g.slot, s.ts, s.step_s, p.namespace, p.name, s.util_ratio, "
    "s.util_signal, s.fb_used_mib, s.fb_total_mib, s.power_w, s.temp_c, s.xid "
    "FROM gpu_samples s JOIN gpus g ON g.id = s.gpu_id LEFT JOIN pods p ON p.id = s.pod_id "
    "ORDER BY g.uuid, g.mig_gi_id, g.slot, s.ts"
)
UNIT_ROWS = (
    "SELECT uuid, mig_gi_id, slot, gpu_index, device, model_name, mig_profile, "
    "memory_total_mib FROM gpus ORDER BY uuid, mig_gi_id, slot"
)
POD_ROWS = (
    "SELECT namespace, name, uid, gpu_count, workload_kind FROM pods ORDER BY namespace, name"
)


def _stored(engine: Engine) -> tuple[list[tuple[object, ...]], ...]:
    with engine.connect() as conn:
        return tuple(
            [tuple(row) for row in conn.execute(sa.text(sql))]
            for sql in (SAMPLE_ROWS, UNIT_ROWS, POD_ROWS)
        )


def _collected(url: str, prometheus: PrometheusProcess, pieces: list[tuple[int, int, int]]) -> Any:
    engine = make_engine(url)
    upgrade(engine)
    source = PrometheusSource(prometheus.url, Catalogue(), retries=1, backoff_s=0.01)
    for start, end, page_s in pieces:
        collect(engine, "lab", Window(start, end, fx.STEP_S, page_s), source, None,
                LabelVariants(), now_ts=END)  # fmt: skip
    stored = _stored(engine)
    engine.dispose()
    return stored


CHANGE_TS = START + 5 * 3600 + 37 * 60 + 30  # the GPU's free memory drops (off every grid)


def _changing_total() -> list[Series]:
    """One A100 held by a pod, sampled every minute, whose framebuffer total changes once
    (free memory 80,000 MiB, then 40,000 MiB)."""
    unit = fx.Unit("gpu-node-z", "GPU-z0000000", 0, "NVIDIA A100-SXM4-80GB",
                   namespace="ml", pod="train-z-0")  # fmt: skip
    stamps = list(range(START + 4 * 3600, START + 9 * 3600, 60))
    labels = fx.labels(unit)
    free = [80000.0 if t < CHANGE_TS else 40000.0 for t in stamps]
    return [
        Series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, [(t, 0.5) for t in stamps]),
        Series("DCGM_FI_DEV_FB_USED", labels, [(t, 1000.0) for t in stamps]),
        Series("DCGM_FI_DEV_FB_FREE", labels, list(zip(stamps, free, strict=True))),
    ]


@pytest.fixture(scope="module")
def changing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    folder = tmp_path_factory.mktemp("changing-total")
    with prometheus_with_blocks(_changing_total(), folder) as server:
        yield server


@pytest.mark.parametrize("source", ["fleet", "changing total"])
def test_stored_rows_do_not_depend_on_page_length_or_collection_order(
    prometheus: PrometheusProcess, changing: PrometheusProcess, tmp_path: Path, source: str
) -> None:
    """The same window collected with pages of 2, 7 and 20 minutes, in one go or in pieces
    (in any order), stores the same rows, byte for byte; also for a GPU whose framebuffer
    total changes inside the window."""
    server = prometheus if source == "fleet" else changing
    start = START + 5 * 3600 + 7 * 60  # off the 15-minute capacity grid
    end = start + 2 * 3600
    mid = start + 53 * 60
    runs = {
        "2 min": [(start, end, 120)],
        "7 min": [(start, end, 420)],
        "20 min": [(start, end, 1200)],
        "pieces, later first": [(mid, end, 420), (start, mid, 1200)],
    }
    stored = {
        name: _collected(f"sqlite:///{tmp_path / f'{i}.db'}", server, pieces)
        for i, (name, pieces) in enumerate(runs.items())
    }
    reference = stored["2 min"]
    units, pods = (17, 7) if source == "fleet" else (1, 1)
    assert len(reference[0]) > 100 and (len(reference[1]), len(reference[2])) == (units, pods)
    totals = {row[10] for row in reference[0]}
    # the fleet's totals are read; the changing GPU's both show (81,000 then 41,000 MiB)
    assert None not in totals and (source == "fleet" or totals == {81000.0, 41000.0})
    for name, rows in stored.items():
        for table, got, want in zip(("samples", "units", "pods"), rows, reference, strict=True):
            assert got == want, f"{table} differ with {name}"
