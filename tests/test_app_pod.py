"""The Pod page: its phases drawn from its records, its cost the sum of its hours, its links."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest
from dash import Dash

from gpuwatch.app.data import Filters
from gpuwatch.app.figures_pod import phase_figure, phase_segments
from gpuwatch.app.server import data_source
from gpuwatch.app.views import hourly_rows, workloads
from gpuwatch.app.views_pod import PodKey, pod_cost, pod_records
from gpuwatch.domain.frames import NO_POD
from tests.support.dash_app import demo_app
from tests.test_app_pages import by_id

NOW_TS = 1_794_823_200
H = 3600


def _records(rows: list[dict[str, Any]]) -> pd.DataFrame:
    base = {"created_ts": None, "started_ts": None, "finished_ts": None, "node": "n1"}
    return pd.DataFrame([base | row for row in rows]).astype(
        {"created_ts": "Int64", "started_ts": "Int64", "finished_ts": "Int64"}
    )


def test_each_incarnation_is_pending_then_running_until_it_finished_or_the_data_ends() -> None:
    records = _records(
        [
            {"created_ts": 10 * H, "started_ts": 11 * H, "node": "n2"},  # still running
            {"created_ts": 0, "started_ts": 2 * H, "finished_ts": 5 * H},
            {"created_ts": 6 * H, "finished_ts": 7 * H, "node": None},  # never started
        ]
    )
    assert phase_segments(records, end_ts=12 * H) == [
        ("#1 n1", "Pending", 0, 2 * H),
        ("#1 n1", "Running", 2 * H, 5 * H),
        ("#2 unscheduled", "Pending", 6 * H, 7 * H),
        ("#3 n2", "Pending", 10 * H, 11 * H),
        ("#3 n2", "Running", 11 * H, 12 * H),
    ]
    figure = phase_figure(records, end_ts=12 * H)
    running = next(t for t in figure["data"] if t["name"] == "Running")
    assert running["base"] == ["1970-01-01T02:00:00Z", "1970-01-01T11:00:00Z"]
    assert running["x"] == [3 * H * 1000, H * 1000]  # milliseconds on a date axis


def test_nothing_before_the_end_of_the_data_is_nothing_drawn() -> None:
    records = _records([{"created_ts": 20 * H}])
    assert phase_segments(records, end_ts=12 * H) == []
    assert phase_figure(records, end_ts=12 * H)["data"] == []


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    with demo_app(tmp_path_factory.mktemp("pod"), seed=5) as dash_app:
        yield dash_app


def test_a_workloads_pods_cost_what_the_workload_costs(app: Dash) -> None:
    snap = data_source().data.current()
    f = Filters(window="24h")
    table = workloads(snap, f).iloc[0]  # the workload with the largest idle cost
    pods = snap.pods[
        snap.pods["workload"].astype(object).eq(table["workload"])
        & snap.pods["namespace"].astype(object).eq(table["namespace"])
        & snap.pods["cluster"].astype(object).eq(table["cluster"])
    ]
    keys = {PodKey(str(r.cluster), str(r.namespace), str(r.pod)) for r in pods.itertuples()}
    assert sum(pod_cost(snap, f, k).allocated_cost_usd for k in keys) == pytest.approx(
        float(table["allocated_cost_usd"])
    )


def test_the_page_links_its_owner_and_gpus(app: Dash) -> None:
    snap = data_source().data.current()
    held = set(hourly_rows(snap, Filters(window="30d"))["pod_id"].astype(int)) - {NO_POD}
    pod = snap.pods[snap.pods["pod_id"].isin(held)].iloc[0]
    key = PodKey(str(pod["cluster"]), str(pod["namespace"]), str(pod["pod"]))
    assert not pod_records(snap, key).empty
    pod_page = importlib.import_module("gpuwatch.app.pages.pod")
    layout = pod_page.layout(cluster=key.cluster, namespace=key.namespace, name=key.name)
    owner = by_id(layout, "pod-owner")["props"]
    assert owner["href"].startswith(
        f"/workload?cluster={key.cluster}&namespace={key.namespace}&kind="
    )
    rows = by_id(layout, "pod-gpus")["props"]["rowData"]
    assert rows and all(row["href"].startswith("/gpu?uuid=GPU-") for row in rows)
    unknown = pod_page.layout(cluster=key.cluster, namespace=key.namespace, name="no-such-pod")
    assert by_id(unknown, "pod-empty")
