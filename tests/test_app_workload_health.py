"""A workload page's efficiency reads the health rows of the GPUs the workload held, not the
whole fleet's, and shows what the whole fleet's rows would give."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from sqlalchemy import Engine

from gpuwatch.analytics.health import failing_since
from gpuwatch.app.data import DashboardData, Snapshot
from gpuwatch.app.views_gpu import WorkloadKey
from gpuwatch.app.views_health import efficiency_view, efficiency_view_of, workload_health_rows
from gpuwatch.app.window_health import health_window
from gpuwatch.config import Settings
from gpuwatch.store import repository
from tests.support.demo_fleet import DEMO_NOW_TS

NOW_TS = DEMO_NOW_TS


@pytest.fixture
def engine(demo_fleet: Engine) -> Engine:
    return demo_fleet


def _snap(engine: Engine) -> Snapshot:
    return DashboardData(engine, Settings(), background=False).current()


def _key(row: Any) -> WorkloadKey:
    kind, name = row.workload_kind, row.workload
    if pd.isna(name):
        kind, name = "Pod", row.pod
    return WorkloadKey(str(row.cluster), str(row.namespace), str(kind), str(name))


def _workloads(rows: pd.DataFrame) -> list[WorkloadKey]:
    held = rows[rows["pod_id"].notna()].drop_duplicates(["cluster", "namespace", "pod"])
    return sorted({_key(row) for row in held.itertuples()}, key=str)


def test_each_workload_reads_only_its_gpus_and_gets_the_fleet_read_figures(
    engine: Engine,
) -> None:
    snap = _snap(engine)
    fleet = health_window(snap, "30d")
    failing = failing_since(fleet)
    assert len(failing) > 0  # the fleet has failing GPUs: their onset must carry over
    keys = _workloads(fleet)
    assert len(keys) > 20
    for key in keys:
        rows = workload_health_rows(snap, "30d", key)
        assert len(rows) < len(fleet) / 4, key
        got = efficiency_view(snap, "30d", key)
        want = efficiency_view_of(fleet, snap.price_book, key, got.signals)
        pd.testing.assert_frame_equal(got.efficiency, want.efficiency, check_exact=False)
        pd.testing.assert_frame_equal(got.timeline, want.timeline, check_exact=False)


def test_a_failing_gpus_sibling_units_come_with_it(engine: Engine) -> None:
    """A failing event on one MIG instance or slot fails the whole GPU: the units read for a
    workload are every unit of the physical GPUs it held."""
    snap = _snap(engine)
    units = snap.units
    shared = units[units.duplicated(["cluster", "gpu_uuid"], keep=False)]
    one = int(shared["gpu_id"].iloc[0])
    uuid = shared["gpu_uuid"].iloc[0]
    siblings = sorted(units.loc[units["gpu_uuid"].eq(uuid), "gpu_id"].astype(int))
    assert len(siblings) > 1
    start, end = NOW_TS - 10 * 86_400, NOW_TS + 3600
    held = repository.load_health_hourly(engine, start, end, [one])
    pod_ids = held["pod_id"].dropna().astype(int).unique().tolist()
    assert pod_ids
    got = repository.units_held_by(engine, start, end, pod_ids[:1])
    assert set(siblings) <= set(got)
    assert repository.units_held_by(engine, start, end, []) == []
