"""The Alerts page's "Alerts now" section on a store with a failing GPU
(tests/browser/health_store.py): built once per data version, then served from the snapshot's
memo, and built again for new data."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import plotly.utils
import pytest
from dash import Dash

from gpuwatch.app.data import DashboardData
from gpuwatch.app.server import create_app
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.store.engine import make_engine
from tests.browser.health_store import FailingGpu, add_failing_gpu, settings_for
from tests.test_app_gpu_health_pages import NOW_TS, by_id, page, text


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FailingGpu]:
    path = Path(tmp_path_factory.mktemp("alerts")) / "fleet.db"
    build_demo_database(path, days=3, step_s=900, seed=7, now_ts=NOW_TS)
    return path, add_failing_gpu(path)


@pytest.fixture()
def data(failing: tuple[Path, FailingGpu]) -> Iterator[DashboardData]:
    path, gpu = failing
    engine = make_engine(f"sqlite:///{path}")
    settings = settings_for(gpu)
    source = DashboardData(engine, settings, background=False)
    dash_app: Dash = create_app(engine, settings, data=source, warm=False)
    with dash_app.server.app_context():
        yield source
    engine.dispose()


def _json(layout: Any) -> str:
    return json.dumps(layout, cls=plotly.utils.PlotlyJSONEncoder, sort_keys=True)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    alerts = page("alerts")
    built: list[int] = []
    build = alerts.states_section

    def counting(states: Any, snap: Any) -> Any:
        built.append(1)
        return build(states, snap)

    monkeypatch.setattr(alerts, "states_section", counting)
    return built


def test_the_alerts_now_section_is_built_once_per_data_version(
    data: DashboardData, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _counting(monkeypatch)
    first = page("alerts").layout()
    second = page("alerts").layout()
    assert len(built) == 1
    assert _json(first) == _json(second)
    table = by_id(first, "alerts-GPUHighTemperature")
    assert table is not None and table["type"] == "Table"
    (_head, body) = table["props"]["children"]
    assert len(body["props"]["children"]) == 7  # the demo's hot GPUs, all firing
    assert text(by_id(first, "card-cond-GPUHighTemperature")).startswith("GPUHighTemperature 7 ")


def test_the_warm_up_builds_the_section_and_new_data_builds_it_again(
    data: DashboardData, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _counting(monkeypatch)
    snap = data.current()
    page("alerts").warm(data, snap)
    assert len(built) == 1
    page("alerts").layout()
    assert len(built) == 1
    fresh = DashboardData(data.engine, data.settings, background=False).current()
    assert fresh is not snap
    page("alerts").alerts_now(data, fresh, float(NOW_TS))
    assert len(built) == 2
