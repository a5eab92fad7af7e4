"""Pages that only append to an hour merge their roll-ups into the stored rows instead of rolling
up the hour again from the table; every roll-up table ends as rolling up from the samples gives.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.collectors.collect import Window, collect
from gpuwatch.collectors.prometheus import PrometheusSource
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.domain.frames import NO_POD
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.report.weekly import iso_week_bounds
from gpuwatch.store import rollup, rollup_append, rollup_health
from gpuwatch.store.engine import make_engine, upgrade
from tests import test_collect_health as health
from tests.support import dcgm_fixture as fx
from tests.support.prometheus import PrometheusProcess, Series, prometheus_with_blocks

START, _ = iso_week_bounds("2026-W46")
END = START + 2 * 3600
FIRST_END = START + 30 * 60  # one page: half of the first hour
MINUTES_END = START + 90 * 60  # then minute by minute, into the second hour

TABLES = {
    "gpu_samples_hourly": "hour_ts, gpu_id, pod_id",
    "gpu_health_hourly": "hour_ts, gpu_id, pod_id",
    "pod_samples_hourly": "hour_ts, pod_id",
    "workload_samples_hourly": "hour_ts, cluster_id, namespace, workload_kind, workload_name, "
    "gpu_model",
}


LATE_TS = START + 45 * 60  # inside the minute pages: after FIRST_END, before MINUTES_END


def _late_health() -> list[Series]:
    """The fixture fleet, where a held and a free GPU report SM clocks (a health reading) only
    from :data:`LATE_TS` on: their hour's health rows must count the samples before it too."""
    late = [u for u in fx.units() if u.node == "gpu-node-a" and u.gpu in (0, 6)]
    clocks = [
        Series(
            "DCGM_FI_DEV_SM_CLOCK", fx.labels(u), [(t, 1410.0) for t in fx.grid(LATE_TS, END, u)]
        )
        for u in late
    ]
    return [*fx.series(START, END), *clocks]


@pytest.fixture(scope="module", params=["pods", "health", "late"])
def fleet(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, PrometheusProcess]]:
    """The fixture fleet (pods, workloads, blank readings, a late node), the health fleet of
    tests/test_collect_health.py (every efficiency and health field, XIDs, error counters), or
    the fixture fleet where two GPUs gain a first health reading in the middle of an hour."""
    if request.param == "pods":
        series = fx.series(START, END)
    elif request.param == "late":
        series = _late_health()
    else:
        series = [*health._h100(), *health._t4(), *health._others()]
    folder = tmp_path_factory.mktemp(f"dcgm-append-{request.param}")
    with prometheus_with_blocks(series, folder) as server:
        yield request.param, server


def _rows(engine: Engine) -> dict[str, list[tuple[object, ...]]]:
    with engine.connect() as conn:
        return {
            table: [tuple(r) for r in conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY {k}"))]
            for table, k in TABLES.items()
        }


def _exact(row: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(None if isinstance(v, float) else v for v in row)


def _floats(row: tuple[object, ...]) -> list[float]:
    return [v for v in row if isinstance(v, float)]


def test_minute_pages_merge_into_the_stored_hour_as_a_whole_roll_up_would(
    fleet: tuple[str, PrometheusProcess], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, prometheus = fleet
    engine = make_engine(store_url)
    upgrade(engine)
    source = PrometheusSource(prometheus.url, Catalogue(), retries=3, backoff_s=0.5)
    first = Window(START, FIRST_END, fx.STEP_S, 2 * 3600)
    collect(engine, "lab", first, source, None, LabelVariants(), now_ts=END)
    whole_hours: list[int] = []
    roll_up = rollup.roll_up

    def counted(conn: sa.Connection, start_ts: int, end_ts: int) -> int:
        whole_hours.append(start_ts)
        return roll_up(conn, start_ts, end_ts)

    monkeypatch.setattr(rollup, "roll_up", counted)
    minutes = Window(FIRST_END, MINUTES_END, fx.STEP_S, fx.STEP_S)
    stats = collect(engine, "lab", minutes, source, None, LabelVariants(), now_ts=END)
    assert stats.pages == 60
    # No minute rolled its hour up again from the table: each merged into the stored rows.
    assert whole_hours == []
    merged = _rows(engine)
    filled = list(TABLES)
    if name == "pods":  # no health reading, and its one XID falls outside this window
        filled.remove("gpu_health_hourly")
    assert [t for t in TABLES if merged[t]] == filled
    if name == "late":  # each late GPU's hour counts the 60 one-minute samples of its unit
        with engine.connect() as conn:
            late = conn.execute(
                sa.text(
                    "SELECT g.uuid, CASE WHEN h.pod_id = :free THEN 'free' ELSE 'held' END, "
                    "h.data_s, h.first_ts "
                    "FROM gpu_health_hourly h JOIN gpus g ON g.id = h.gpu_id "
                    "WHERE h.hour_ts = :hour ORDER BY g.uuid"
                ),
                {"hour": START, "free": NO_POD},
            ).all()
        assert [tuple(r) for r in late] == [
            ("GPU-a0000000", "held", 3600, START),
            ("GPU-a0000006", "free", 3600, START),
        ]
    with engine.begin() as conn:
        rollup.roll_up(conn, START, MINUTES_END)
    whole = _rows(engine)
    for table in TABLES:
        assert [_exact(row) for row in merged[table]] == [_exact(row) for row in whole[table]]
        # Sums of float readings differ only in the order of their terms.
        floats = [_floats(row) for row in merged[table]]
        assert floats == [pytest.approx(_floats(row), rel=1e-12) for row in whole[table]]
    engine.dispose()


def test_rows_merge_by_key_sums_add_extremes_ignore_null() -> None:
    keys = ("hour_ts", "gpu_id", "pod_id")
    rules = {"n": "sum", "mean_sum": "sum_or_null", "errors": "capped", "top": "max", "low": "min"}
    nan = np.nan
    old = {
        "hour_ts": np.array([3600, 3600]),
        "gpu_id": np.array([1, 2]),
        "pod_id": np.array([7, 0]),
        "n": np.array([5, 2]),
        "mean_sum": np.array([nan, 4.0]),
        "errors": np.array([2**31 - 10, nan]),
        "top": np.array([0.5, nan]),
        "low": np.array([3605, 3600]),
    }
    new = {
        "hour_ts": np.array([3600, 3600]),
        "gpu_id": np.array([1, 3]),
        "pod_id": np.array([7, 0]),
        "n": np.array([1, 1]),
        "mean_sum": np.array([nan, 2.5]),
        "errors": np.array([20, nan]),
        "top": np.array([nan, 0.9]),
        "low": np.array([3660, 3660]),
    }
    out = rollup_append.merge_columns(old, new, keys, rules)
    assert out["gpu_id"].tolist() == [1, 2, 3]
    assert out["n"].tolist() == [6, 2, 1]
    assert np.isnan(out["mean_sum"][0]) and out["mean_sum"][1:].tolist() == [4.0, 2.5]
    assert out["errors"][0] == 2**31 - 1 and np.isnan(out["errors"][1:]).all()
    assert out["top"].tolist()[0] == 0.5 and np.isnan(out["top"][1]) and out["top"][2] == 0.9
    assert out["low"].tolist() == [3605, 3600, 3660]


def test_units_whose_stored_samples_had_no_health_reading_are_rolled_up_from_the_table() -> None:
    def rows(*keys: tuple[int, int, int]) -> dict[str, np.ndarray]:
        return {name: np.array([k[i] for k in keys]) for i, name in enumerate(rollup.HOURLY_KEYS)}

    hourly = rows((3600, 1, 7), (3600, 2, 0), (3600, 4, 9))
    health = rows((3600, 1, 7))
    assert rollup_append.gained_health(hourly, health, rows((3600, 1, 7))).tolist() == []
    assert rollup_append.gained_health(hourly, health, rows((3600, 3, 0))).tolist() == []  # new
    gained = rollup_append.gained_health(
        hourly, health, rows((3600, 4, 9), (3600, 1, 7), (3600, 2, 0))
    )
    assert gained.tolist() == [2, 4]


def test_every_roll_up_column_has_a_merge_rule() -> None:
    hourly_columns = [c.strip() for c in rollup._COLUMNS.split(",")]
    assert [*rollup.HOURLY_KEYS, *rollup.HOURLY_RULES] == hourly_columns
    assert [*rollup_health.KEYS, *rollup_health.MERGE_RULES] == list(rollup_health.COLUMNS)
    assert set(rollup.HOURLY_RULES.values()) | set(rollup_health.MERGE_RULES.values()) <= set(
        rollup_append.RULES
    )
