"""A source announcing a much larger fleet is refused before it is stored; pages are sized by
the samples they hold. Against a real Prometheus whose fleet jumps from 4 to 24 GPUs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select

from gpuwatch.collectors.growth import (
    NewUnitLimit,
    UnitGrowthError,
    check_new_units,
    page_for_budget,
)
from gpuwatch.store.models import Gpu, GpuSample
from tests.support.cli import run_gpuwatch
from tests.support.prometheus import PrometheusProcess, Series, prometheus_with_blocks

pytestmark = pytest.mark.prometheus

T0 = 1_762_646_400  # 2025-11-09T00:00:00Z
HOUR = 3600
BASE_UUIDS = [f"GPU-base-{n:04d}" for n in range(4)]
EXTRA_UUIDS = [f"GPU-extra-{n:04d}" for n in range(20)]


def _when(ts: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _series(uuid: str, node: str, index: int, start: int, end: int) -> list[Series]:
    labels = {
        "UUID": uuid,
        "gpu": str(index),
        "modelName": "NVIDIA L4",
        "Hostname": node,
        "job": "dcgm-exporter",
        "instance": f"{node}:9400",
    }
    stamps = range(start, end, 60)
    return [
        Series("DCGM_FI_DEV_GPU_UTIL", labels, [(ts, 50.0) for ts in stamps]),
        Series("DCGM_FI_DEV_FB_USED", labels, [(ts, 1024.0) for ts in stamps]),
        Series("DCGM_FI_DEV_FB_FREE", labels, [(ts, 22000.0) for ts in stamps]),
    ]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    series = [
        s
        for n, uuid in enumerate(BASE_UUIDS)
        for s in _series(uuid, "node-a", n, T0, T0 + 3 * HOUR)
    ] + [
        s
        for n, uuid in enumerate(EXTRA_UUIDS)
        for s in _series(uuid, f"node-x{n // 8}", n % 8, T0 + 2 * HOUR, T0 + 3 * HOUR)
    ]
    with prometheus_with_blocks(series, tmp_path_factory.mktemp("growth")) as server:
        yield server


def _store(tmp_path: Path, prometheus: PrometheusProcess, **extra: str) -> dict[str, str]:
    env = {
        "GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'growth.db'}",
        "GPUWATCH_PROMETHEUS_URL": prometheus.url,
        "GPUWATCH_CLUSTER": "lab",
        "GPUWATCH_PROMETHEUS__MAX_NEW_UNITS_FLOOR": "8",
        **extra,
    }
    assert run_gpuwatch("db", "upgrade", env=env).returncode == 0
    return env


def _counts(env: dict[str, str]) -> tuple[int, int]:
    engine = create_engine(env["GPUWATCH_DATABASE_URL"])
    with engine.connect() as conn:
        units = conn.execute(select(func.count()).select_from(Gpu)).scalar_one()
        samples = conn.execute(select(func.count()).select_from(GpuSample)).scalar_one()
    engine.dispose()
    return int(units), int(samples)


def _collect(
    env: dict[str, str], start: int, end: int, *flags: str
) -> subprocess.CompletedProcess[str]:
    return run_gpuwatch(
        "collect", "--no-kubernetes", "--start", _when(start), "--end", _when(end), *flags, env=env
    )


def test_a_jump_in_gpu_units_is_refused_with_nothing_stored(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    env = _store(tmp_path, prometheus)
    first = _collect(env, T0, T0 + 2 * HOUR)
    assert first.returncode == 0, first.stderr
    assert _counts(env) == (4, 4 * 120)
    jump = _collect(env, T0 + 2 * HOUR, T0 + 3 * HOUR)
    assert jump.returncode == 1
    assert jump.stderr.strip() == (
        "gpuwatch: the page from 2025-11-09T02:00:00Z names 20 GPU units never seen in cluster "
        "lab (the store knows 4; at most 8 new ones per page): refused as an unexpected jump. If "
        "the fleet really grew, run `gpuwatch collect --accept-new-units` once, or raise "
        "prometheus.max_new_units_ratio (nothing of the unfinished page was written)"
    )
    assert _counts(env) == (4, 4 * 120)
    accepted = _collect(env, T0 + 2 * HOUR, T0 + 3 * HOUR, "--accept-new-units")
    assert accepted.returncode == 0, accepted.stderr
    assert _counts(env) == (24, 4 * 120 + 24 * 60)


def test_an_empty_store_takes_any_first_page(prometheus: PrometheusProcess, tmp_path: Path) -> None:
    env = _store(tmp_path, prometheus)
    result = _collect(env, T0 + 2 * HOUR, T0 + 3 * HOUR)
    assert result.returncode == 0, result.stderr
    assert _counts(env) == (24, 24 * 60)


def test_pages_are_shortened_to_the_samples_budget(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    env = _store(tmp_path, prometheus, GPUWATCH_PROMETHEUS__MAX_SAMPLES_PER_PAGE="120")
    # An empty store: Prometheus counts 4 series over the first page, so 120 // 4 = 30 steps
    # of 60 s per page, and one hour is two pages.
    first = _collect(env, T0, T0 + HOUR)
    assert first.returncode == 0, first.stderr
    assert "(2 pages)" in first.stdout
    # The store now knows its 4 units: the same sizing from the store.
    second = _collect(env, T0 + HOUR, T0 + 2 * HOUR)
    assert second.returncode == 0, second.stderr
    assert "(2 pages)" in second.stdout
    assert _counts(env) == (4, 4 * 120)


def test_a_first_collection_counts_the_fleet_in_prometheus(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    env = _store(tmp_path, prometheus, GPUWATCH_PROMETHEUS__MAX_SAMPLES_PER_PAGE="120")
    # 24 series from T0 + 2h: 120 // 24 = 5 steps per page, 12 pages for the hour.
    result = _collect(env, T0 + 2 * HOUR, T0 + 3 * HOUR)
    assert result.returncode == 0, result.stderr
    assert "(12 pages)" in result.stdout
    assert _counts(env) == (24, 24 * 60)


def test_new_unit_limit_by_hand() -> None:
    limit = NewUnitLimit(ratio=1.0, floor=8)
    assert limit.allowed(0) is None
    assert limit.allowed(4) == 8
    assert limit.allowed(100) == 100
    check_new_units({"a", "b"}, {"a", "b", *"cdefghij"}, limit, "lab", T0)  # 8 new: allowed
    with pytest.raises(UnitGrowthError, match="names 9 GPU units never seen"):
        check_new_units({"a", "b"}, {"a", *"cdefghijk"}, limit, "lab", T0)


@pytest.mark.parametrize(
    ("units", "max_samples", "page_s"),
    [(0, 10, 21_600), (2_000, 1_000_000, 21_600), (20_000, 1_000_000, 3_000), (10, 5, 60)],
)
def test_page_for_budget_by_hand(units: int, max_samples: int, page_s: int) -> None:
    assert page_for_budget(21_600, 60, units, max_samples) == page_s
