"""The dashboard's data layer: roll-ups and views equal what the analytics compute directly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import Engine

from gpuwatch.analytics import columns as c
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.demand import pending_gpu_timeseries
from gpuwatch.analytics.recommend import recommend
from gpuwatch.analytics.summary import capacity_timeseries, summarize, unit_coverage
from gpuwatch.app import rollup, views, views_heatmap
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.config import Settings
from gpuwatch.report.inputs import load_inputs, policy_from, price_book_from
from gpuwatch.store.engine import make_engine

NOW_TS = 1_794_823_200  # a Monday 12:00 UTC


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    path = Path(tmp_path_factory.mktemp("fleet")) / "fleet.db"
    build_demo_database(path, days=3, step_s=900, seed=7, now_ts=NOW_TS)
    engine = make_engine(f"sqlite:///{path}")
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def snap(engine: Engine) -> Snapshot:
    return DashboardData(engine, Settings(), background=False).current()


def _costed(engine: Engine, snap: Snapshot, f: Filters) -> tuple[pd.DataFrame, int, int]:
    start, end = views.window_bounds(snap, f)
    inputs = load_inputs(engine, start, end)
    costed = prepare(inputs.samples, inputs.pods, price_book_from(Settings()))
    for attr, column in (
        ("cluster", "cluster"),
        ("model", "gpu_model"),
        ("team", "team"),
        ("namespace", "namespace"),
    ):
        value = getattr(f, attr)
        if value is not None:
            costed = costed[costed[column].astype(object).eq(value).to_numpy(dtype=bool)]
    return costed, start, end


FILTERS = [
    Filters(),
    Filters(window="24h"),
    Filters(cluster="prod-us-east", window="3d"),
    Filters(team="ml-platform"),
    Filters(model="NVIDIA L4", window="3d"),
]


@pytest.mark.parametrize("f", FILTERS, ids=lambda f: str(f.query()) or "default")
def test_headline_equals_the_analytics(engine: Engine, snap: Snapshot, f: Filters) -> None:
    costed, start, end = _costed(engine, snap, f)
    total = summarize(costed, [], Settings().thresholds.idle_util_pct / 100).iloc[0]
    h = views.headline(snap, f)
    assert h.window_start_ts == start and h.window_end_ts == end
    assert h.capacity_gpu_hours > 0
    assert h.capacity_gpu_hours == pytest.approx(total[c.CAPACITY_GPU_HOURS], rel=1e-9)
    assert h.allocated_gpu_hours == pytest.approx(total[c.ALLOCATED_GPU_HOURS], rel=1e-9)
    assert h.efficiency_pct == pytest.approx(total[c.EFFICIENCY_PCT], rel=1e-9)
    assert h.total_cost_usd == pytest.approx(total[c.CAPACITY_COST_USD], rel=1e-9)
    assert h.idle_cost_usd == pytest.approx(total[c.IDLE_COST_USD], rel=1e-9)
    assert h.unallocated_cost_usd == pytest.approx(
        total[c.UNALLOCATED_COST_USD], rel=1e-9, abs=1e-9
    )
    assert h.gpu_units == costed.loc[costed[c.GPU_HOURS] > 0, "gpu_id"].nunique()


def test_coverage_equals_unit_coverage(engine: Engine, snap: Snapshot) -> None:
    f = Filters(window="3d")
    costed, start, end = _costed(engine, snap, f)
    expected = unit_coverage(costed, load_inputs(engine, start, end).gpus, start, end)
    ratio = expected[c.DATA_HOURS].sum() / expected[c.OBSERVED_HOURS].sum()
    assert views.headline(snap, f).coverage_ratio == pytest.approx(ratio, rel=1e-9)
    assert 0.5 < ratio <= 1.0


#: The demo's workloads spread over more nodes than their GPUs need: distill-eval (8 × 1 H100 on
#: hb0-hb3), frame-embed (4 × 1 L40S, one on each of s0-s3), asr-eval (2 × 1 L40S on s0, s1).
SCATTERED = [
    ("llm-training", "distill-eval", 4.0, 1),
    ("speech", "asr-eval", 2.0, 1),
    ("vision-prod", "frame-embed", 4.0, 1),
]
DISTILL_EVIDENCE = {
    "nodes_used_p95": 4.0,
    "nodes_needed": 1,
    "gpus": 8,
    "gpus_per_node": 8,
    "spread_gpu_hours": 264.0,
}


def _placement(recs: pd.DataFrame) -> list[tuple[str, str, float, int]]:
    rows = recs[recs["kind"] == "consolidate_placement"]
    return sorted(
        (r.namespace, r.workload, r.evidence["nodes_used_p95"], r.evidence["nodes_needed"])
        for r in rows.itertuples()
    )


@pytest.mark.parametrize("window", ["3d", "14d"])
def test_recommendations_and_savings_equal_recommend(
    engine: Engine, snap: Snapshot, window: str
) -> None:
    f = Filters(window=window)
    start, end = views.window_bounds(snap, f)
    settings = Settings()
    # as `gpuwatch recommend` reads the window: hourly roll-ups where the store has them
    inputs = load_inputs(
        engine,
        start,
        end,
        resolution="auto",
        idle_util_pct=settings.thresholds.idle_util_pct,
        health=True,
    )
    assert inputs.resolution == "hourly"
    # as `gpuwatch recommend` clips its window: to the first sample's hour and the data's end
    first = int(inputs.samples["ts"].min())
    last = int((inputs.samples["ts"] + inputs.samples["step_s"]).max())
    assert first - start == (11 * 86400 if window == "14d" else 0)  # 3 days of data
    assert last == end
    expected = recommend(
        inputs.samples,
        inputs.pods,
        price_book_from(settings),
        policy_from(settings),
        first,
        last,
        gpus=inputs.gpus,
        nodes=inputs.nodes,
        detail=inputs.detail,
        health_sums=inputs.health_sums,
    )
    got = views.recommendations(snap, f)
    assert len(got) == len(expected) > 0
    pd.testing.assert_frame_equal(got.drop(columns="evidence"), expected.drop(columns="evidence"))
    # consolidate_placement on both: the jobs spread over more nodes than their GPUs need
    # (docs/simulation.md), the same evidence from the same window
    assert _placement(got) == _placement(expected) == SCATTERED
    distill = got[(got["workload"] == "distill-eval") & (got["kind"] == "consolidate_placement")]
    evidence = distill.iloc[0]["evidence"]
    # 8 × 1 H100 on 4 nodes of 8 H100 (1 needed), every sample of its 3 nights of
    # 22:30-09:30 in the demo's 3 days: 8 GPUs × 33 h spread
    assert {k: evidence[k] for k in DISTILL_EVIDENCE} == DISTILL_EVIDENCE
    best = expected.groupby(list(c.WORKLOAD_KEYS))["est_monthly_savings_usd"].max().sum()
    h = views.headline(snap, f)
    assert h.monthly_savings_usd == pytest.approx(best, rel=1e-9)
    assert h.data_hours == (last - first) / 3600


def test_team_breakdown_equals_summarize(engine: Engine, snap: Snapshot) -> None:
    f = Filters(window="3d")
    costed, _, _ = _costed(engine, snap, f)
    expected = summarize(costed, ["team"], 0.05).dropna(subset=["team"]).set_index("team")
    got = views.breakdown(snap, f, ("team",)).set_index("team")
    assert sorted(got.index) == sorted(expected.index)
    for team in expected.index:
        for name in (c.ALLOCATED_GPU_HOURS, c.IDLE_COST_USD, c.UNUSED_COST_USD, c.EFFICIENCY_PCT):
            assert got.loc[team, name] == pytest.approx(expected.loc[team, name], rel=1e-9)


def test_capacity_series_matches_capacity_timeseries(engine: Engine, snap: Snapshot) -> None:
    f = Filters(window="24h")
    costed, _, _ = _costed(engine, snap, f)
    expected = capacity_timeseries(costed, 3600).set_index(c.BUCKET_TS)
    got = views.capacity_series(snap, f).set_index(c.BUCKET_TS)
    full = expected.index[:-1]  # the last hour is partial: the view divides by its real length
    np.testing.assert_allclose(got.loc[full, c.CAPACITY_GPUS], expected.loc[full, c.CAPACITY_GPUS])
    np.testing.assert_allclose(got.loc[full, c.USED_GPUS], expected.loc[full, c.USED_GPUS])


def test_pending_series_equals_the_analytics(snap: Snapshot) -> None:
    start, end = views.window_bounds(snap, Filters(window="3d"))
    expected = pending_gpu_timeseries(snap.pods, start, end, 3600)
    instants = np.arange(start, end, 3600)
    for cluster in snap.pods["cluster"].unique():
        pods = snap.pods[snap.pods["cluster"].eq(cluster)]
        got = rollup.pending_series(pods, instants).set_index(c.BUCKET_TS)
        want = expected[expected["cluster"].eq(cluster)].set_index(c.BUCKET_TS)
        assert got.loc[want.index, c.PENDING_GPUS].tolist() == want[c.PENDING_GPUS].tolist()
        assert got.drop(want.index)[c.PENDING_GPUS].eq(0).all()


def test_pending_series_counts_the_waiting_rule() -> None:
    pods = pd.DataFrame(
        {
            "created_ts": pd.array([0, 100, 50, None], dtype="Int64"),
            "started_ts": pd.array([200, None, 40, None], dtype="Int64"),
            "finished_ts": pd.array([None, 300, None, None], dtype="Int64"),
            "gpu_count": [2, 1, 4, 8],
        }
    )
    out = rollup.pending_series(pods, np.array([0, 99, 100, 199, 200, 299, 300]))
    # pod 3 started before it was created (never waits); pod 4 has no instants: always waits
    assert out[c.PENDING_GPUS].tolist() == [10, 10, 11, 11, 9, 9, 8]
    assert out[c.PENDING_PODS].tolist() == [2, 2, 3, 3, 2, 2, 1]


def test_hour_gaps_count_missing_samples_per_hour() -> None:
    hour = 1_800_000_000 - 1_800_000_000 % 3600
    units = pd.DataFrame(
        {
            "gpu_id": [1, 2, 3],
            "first_seen_ts": [hour, hour + 1800, hour],
            "last_seen_ts": [hour + 4 * 3600 - 600, hour + 2 * 3600 - 600, hour + 3600 - 600],
        }
    )
    # unit 1: 6 samples per full hour at 600 s; hour 1 has 4, hour 2 none, hour 3 full
    # unit 2: starts mid-hour (3 samples expected there), complete; unit 3: complete
    hourly = pd.DataFrame(
        {
            "gpu_id": [1, 1, 1, 2, 2, 3],
            "ts": [hour, hour + 3600, hour + 3 * 3600, hour, hour + 3600, hour],
            "samples": [6, 4, 6, 3, 6, 6],
            "step_s": [3600, 2400, 3600, 1800, 3600, 3600],
        }
    )
    steps = rollup.unit_steps(hourly)
    assert steps.to_dict() == {1: 600, 2: 600, 3: 600}
    gaps = rollup.hour_gaps(hourly, units, steps, hour, hour + 5 * 3600)
    assert gaps.values.tolist() == [[1, hour + 3600, 1200], [1, hour + 7200, 3600]]
    runs = rollup.gap_runs(gaps)
    assert runs.values.tolist() == [[1, 4800]]  # two incomplete hours in a row: one gap


def test_gap_runs_split_at_complete_hours() -> None:
    gaps = pd.DataFrame(
        {"gpu_id": [5, 5, 5, 6], "hour_ts": [0, 3600, 10800, 0], "missing_s": [60, 120, 60, 30]}
    )
    assert rollup.gap_runs(gaps).values.tolist() == [[5, 180], [5, 60], [6, 30]]


def test_heatmap_is_downsampled_to_screen_width(snap: Snapshot) -> None:
    hm = views_heatmap.heatmap(snap, Filters(window="30d"), max_columns=50)
    assert hm.z.shape[1] <= 50
    assert hm.z.shape[0] == len(views.unit_ids(snap, Filters(window="30d")))
    assert np.nanmax(hm.z) <= 100.0 and np.nanmin(hm.z) >= 0.0
    assert hm.column_s % 3600 == 0


def test_above_the_unit_rows_the_fleet_heatmap_has_a_row_per_node(
    snap: Snapshot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(views_heatmap, "MAX_UNIT_ROWS", 10)
    f = Filters(window="3d")
    hm = views_heatmap.heatmap(snap, f, max_columns=7)  # a memo key of its own
    units = snap.units[snap.units["gpu_id"].isin(views.unit_ids(snap, f))]
    counts = units.groupby(["cluster", "node"]).size()
    assert hm.by_node and len(units) > 10
    assert hm.units[["cluster", "node"]].values.tolist() == [list(k) for k in counts.index]
    assert hm.units["gpu_units"].tolist() == counts.tolist()
    # Each cell: the node's units' utilization weighted by their data hours, in the column.
    start = max(views.window_bounds(snap, f)[0], snap.span_start_ts)
    rows = views.hourly_rows(snap, f)
    rows = rows[rows["gpu_id"].isin(units["gpu_id"])]
    cells = (
        pd.DataFrame(
            {
                "cluster": rows["cluster"].astype(str),
                "node": rows["node"].astype(str),
                "col": (rows["ts"] - start) // hm.column_s,
                "data": rows[c.DATA_HOURS],
                "used": rows[c.DATA_HOURS] * rows[c.UTIL],
            }
        )
        .groupby(["cluster", "node", "col"])
        .sum()
    )
    assert len(cells) > 3 * len(counts)
    row = {key: i for i, key in enumerate(counts.index)}
    for (cluster, node, col), cell in cells.iterrows():
        expected = 100.0 * cell["used"] / cell["data"] if cell["data"] > 0 else np.nan
        np.testing.assert_allclose(hm.z[row[(cluster, node)], int(col)], expected, rtol=1e-9)
    per_unit = views_heatmap.heatmap(snap, f, node=tuple(counts.index[0]), max_columns=7)
    assert not per_unit.by_node  # a node's page keeps a row per unit


def test_filters_round_trip_through_the_query() -> None:
    f = Filters(cluster="a b", team="t&x", window="14d")
    assert Filters.from_query(f.query()) == f
    assert Filters.from_query({"window": "bogus", "team": ["x", "y"]}) == Filters(team="x")
    assert f.href("/gpu", id=3) == "/gpu?id=3&cluster=a+b&team=t%26x&window=14d"


def test_memo_is_per_snapshot_and_bounded(snap: Snapshot) -> None:
    calls = []
    for i in range(300):
        snap.memo(("probe", i), lambda i=i: calls.append(i))
    snap.memo(("probe", 299), lambda: calls.append(-1))
    assert -1 not in calls and len(calls) == 300
    snap.memo(("probe", 0), lambda: calls.append(-2))
    assert calls[-1] == -2  # evicted long ago, computed again


def test_snapshot_of_an_empty_store(tmp_path: Path) -> None:
    from gpuwatch.store.engine import upgrade

    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    upgrade(engine)
    snap = DashboardData(engine, Settings(), background=False).current()
    assert snap.empty and views.hourly_rows(snap, Filters()).empty
    assert views.data_window(snap, "7d") is None
    assert snap.marker.last_ts is None
    rows = views.cost_rows(snap, Filters())
    assert rows.empty and {"day_ts", "gpu_id", "pod_id", *rollup.COST_SUMS} <= set(rows.columns)
    assert views.gpu_rows(snap, Filters()).empty and views.coverage(snap, Filters()).empty
    assert views.headline(snap, Filters()).total_cost_usd == 0
    engine.dispose()
