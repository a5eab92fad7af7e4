"""GPU time no pod held, read summed per UTC day for the report and ``recommend``
(``load_inputs(unheld_per_day=True)``): costed, the rows give the sums, the span of data and
the weekly report that the hourly rows alone give, on SQLite and PostgreSQL, with node-level
attribution, a day whose sums are not built, and days whose data starts and ends mid-day."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.summary import sample_measures
from gpuwatch.analytics.totals import data_span
from gpuwatch.config import Settings
from gpuwatch.report.inputs import hourly_held_samples, load_inputs, policy_from, price_book_from
from gpuwatch.report.weekly import HEADER, TEXT_COLUMNS, weekly_report
from gpuwatch.simulate.fleet import build_fleet
from gpuwatch.simulate.generate import generate
from gpuwatch.simulate.load import load_simulated
from gpuwatch.store import daily, repository
from gpuwatch.store.engine import make_engine, upgrade
from tests.support.node_level import strip_pod_labels_of_one_node

END_TS = 1_794_823_200  # Monday 2026-11-16 10:00 UTC
DAY_S, HOUR_S = 86_400, 3_600
START_TS = END_TS - 10 * DAY_S
DAYS = list(range(START_TS - START_TS % DAY_S + DAY_S, END_TS - END_TS % DAY_S, DAY_S))
WEEK = (DAYS[2], DAYS[2] + 7 * DAY_S)  # Monday 2026-11-09, every day of it finished
PENDING_DAY = DAYS[3]  # written after its sums were built: read by the hour
LATE_DAY = DAYS[4]  # no reading before 05:00
CUT_DAY = DAYS[6]  # no pod holds a GPU from 12:00 on
THRESHOLD = 0.05


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = f"sqlite:///{Path(tmp_path_factory.mktemp('unheld')) / 'store.db'}"
    else:
        server = str(request.getfixturevalue("postgres_server"))
        admin = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql("CREATE DATABASE gw_unheld_per_day")
        admin.dispose()
        url = f"{server}/gw_unheld_per_day"
    engine = make_engine(url)
    upgrade(engine)
    with engine.begin() as conn:
        load_simulated(conn, generate(build_fleet(seed=5), START_TS, END_TS, 1800))
    node_id = strip_pod_labels_of_one_node(engine, END_TS)
    _rewrite(engine, "hour_ts >= :lo AND hour_ts < :lo + 5 * 3600", LATE_DAY)
    # From noon: neither held time nor the hours of the node attributed at node level.
    unheld = "pod_id <> 0 OR gpu_id IN (SELECT id FROM gpus WHERE node_id = :node)"
    after_noon = f"hour_ts >= :lo + 12 * 3600 AND hour_ts < :lo + 86400 AND ({unheld})"
    _rewrite(engine, after_noon, CUT_DAY, node=node_id)
    with engine.begin() as conn:
        daily.invalidate(conn, [PENDING_DAY])
    yield engine
    engine.dispose()


def _rewrite(engine: Engine, where: str, day_ts: int, **params: int) -> None:
    """Delete hourly rows of a day and build its sums again, as a writer of the day would."""
    with engine.begin() as conn:
        sql = sa.text(f"DELETE FROM gpu_samples_hourly WHERE {where}")
        conn.execute(sql, {"lo": day_ts, **params})
        daily.invalidate(conn, [day_ts])
    daily.build_pending(engine, END_TS)


def _read(
    engine: Engine, window: tuple[int, int]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(pods, the rows with unheld time per day, the hourly rows) of the window."""
    pods = repository.load_pods(engine)
    got = hourly_held_samples(engine, window, pods)
    want = repository.load_hourly_samples(engine, *window, health=False, pods=pods)
    return pods, got, want


def _sums(samples: pd.DataFrame, pods: pd.DataFrame) -> pd.DataFrame:
    """The cost model's sums per (unit, pod after attribution, allocated)."""
    costed = prepare(samples, pods, price_book_from(Settings()))
    values = sample_measures(costed, THRESHOLD)
    keys = pd.DataFrame(
        {
            "gpu_id": costed["gpu_id"].to_numpy(dtype="int64"),
            "pod_id": costed["pod_id"].to_numpy(dtype="float64", na_value=-1.0),
            "allocated": costed[c.ALLOCATED].to_numpy(dtype=bool),
            "samples": costed["samples"].to_numpy(dtype="float64"),
            **{name: values[name] for name in c.SUM_COLUMNS},
        }
    )
    return keys.groupby(["gpu_id", "pod_id", "allocated"]).sum()


@pytest.mark.parametrize(
    "window",
    [
        (START_TS, END_TS),  # partial first and last days, the pending day, node-level units
        (DAYS[4], DAYS[8]),  # whole built days only
        (DAYS[5] + 7 * HOUR_S, DAYS[5] + 15 * HOUR_S),  # hours of one day: no day summed
    ],
)
def test_costed_rows_sum_as_the_hourly_rows_do(engine: Engine, window: tuple[int, int]) -> None:
    pods, got, want = _read(engine, window)
    got_sums, want_sums = _sums(got, pods), _sums(want, pods)
    assert list(got_sums.index) == list(want_sums.index)
    for name in got_sums.columns:
        np.testing.assert_allclose(
            got_sums[name], want_sums[name], rtol=1e-9, atol=1e-9, err_msg=name
        )
    assert want_sums[c.UNALLOCATED_COST_USD].sum() > 0 and want_sums[c.ALLOCATED_COST_USD].sum() > 0
    assert data_span(got, *window) == data_span(want, *window)
    whole_days = window[1] - window[0] > DAY_S
    assert (len(got) < len(want)) is whole_days  # summed rows stand for the unheld hours


def test_units_that_node_level_attribution_gives_to_pods_keep_their_hours(engine: Engine) -> None:
    pods, got, want = _read(engine, (DAYS[4], DAYS[8]))
    costed = prepare(got, pods, price_book_from(Settings()))
    by_node = costed.loc[costed["attribution"].astype(object).eq("node"), "gpu_id"].unique()
    assert len(by_node) > 0
    for rows in (got, want):
        assert rows["gpu_id"].isin(by_node).sum() > 0
    assert got["gpu_id"].isin(by_node).sum() == want["gpu_id"].isin(by_node).sum()


def test_a_day_without_built_sums_is_read_by_the_hour(engine: Engine) -> None:
    _, got, want = _read(engine, (DAYS[2], DAYS[5]))
    in_day = lambda rows: rows["ts"].between(PENDING_DAY, PENDING_DAY + DAY_S - 1)  # noqa: E731
    assert in_day(got).sum() == in_day(want).sum() > 0
    assert len(got[~in_day(got)]) < len(want[~in_day(want)])


def test_the_span_of_data_runs_from_the_first_to_the_last_reading_of_summed_days(
    engine: Engine,
) -> None:
    window = (LATE_DAY, CUT_DAY + DAY_S)
    _, got, _ = _read(engine, window)
    assert data_span(got, *window) == (LATE_DAY + 5 * HOUR_S, CUT_DAY + DAY_S)
    hourly = got[got["last_hour_ts"].isna()]
    assert hourly["ts"].max() == CUT_DAY + 11 * HOUR_S  # the span's end is no hourly row's


def test_the_weekly_report_is_the_hourly_rows_report(engine: Engine) -> None:
    settings = Settings()
    frames = []
    for per_day in (True, False):
        data = load_inputs(engine, *WEEK, resolution="hourly", health=True, unheld_per_day=per_day)
        frame = weekly_report(
            data.samples, data.pods, data.gpus, price_book_from(settings), policy_from(settings),
            WEEK[0], nodes=data.nodes, detail=data.detail, health_sums=data.health_sums,
        )  # fmt: skip
        frames.append(
            frame.sort_values(
                ["cluster", "namespace", "workload_kind", "workload", "gpu_model"]
            ).reset_index(drop=True)
        )
    got, want = frames
    assert len(got) == len(want) > 0
    assert (want["namespace"] == "__idle__").any() and (want["recommendation"] != "").any()
    for name in HEADER:
        if name in TEXT_COLUMNS:
            assert got[name].tolist() == want[name].tolist(), name
        else:  # rounded to the cent: a sum at half a cent may round either way
            g = got[name].astype("float64").to_numpy()
            w = want[name].astype("float64").to_numpy()
            np.testing.assert_allclose(g, w, rtol=0, atol=0.0101, err_msg=name)
