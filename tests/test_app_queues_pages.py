"""The Queues page, the Overview's scheduling cards and the team page's queues, on a store with
a cohort, a waiting Workload and a stalled gang (tests/browser/queue_store.py): 12 GPU-hours of
quota idle while the cohort's work waited, $48.00; the gang ``jobset/qa-train`` held 3 GPU-hours
($12.00) while a sibling waited. And on the same fleet without queues."""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dash import Dash

from gpuwatch.app.data import DashboardData, Filters
from gpuwatch.app.views_queues import SchedulingTotals
from gpuwatch.cli.commands_demo import build_demo_database
from gpuwatch.store.engine import make_engine
from tests.browser.queue_store import QueuedFleet, add_queues, drop_queues, settings_for
from tests.test_app_gpu_health_pages import by_id, rows_of, text, walk
from tests.test_app_queues import example, pods

NOW_TS = 1_794_823_200  # 2026-11-16 10:00 UTC: the demo's data ends at this hour


@pytest.fixture(scope="module")
def fleet_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(tmp_path_factory.mktemp("fleet")) / "fleet.db"
    build_demo_database(path, days=3, step_s=900, seed=7, now_ts=NOW_TS)
    return path


@pytest.fixture(scope="module")
def queued(fleet_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, QueuedFleet]:
    path = Path(tmp_path_factory.mktemp("queued")) / "fleet.db"
    shutil.copyfile(fleet_path, path)
    return path, add_queues(path)


def serve(path: Path, fleet: QueuedFleet | None) -> Iterator[Dash]:
    engine = make_engine(f"sqlite:///{path}")
    settings = settings_for(fleet) if fleet is not None else settings_for_none()
    data = DashboardData(engine, settings, background=False)
    from gpuwatch.app.server import create_app

    dash_app = create_app(engine, settings, data=data, warm=False)
    with dash_app.server.app_context():
        yield dash_app
    engine.dispose()


def settings_for_none() -> Any:
    from gpuwatch.config import Settings

    return Settings()


@pytest.fixture(scope="module")
def app(queued: tuple[Path, QueuedFleet]) -> Iterator[Dash]:
    yield from serve(*queued)


def page(name: str) -> Any:
    return importlib.import_module(f"gpuwatch.app.pages.{name}")


def cells(table: dict[str, Any] | None) -> list[list[str]]:
    return [[text(cell) if cell["props"].get("children") else "" for cell in row]
            for row in rows_of(table)]  # fmt: skip


def test_queues_page_shows_the_idle_quota_and_the_stalled_gang(
    app: Dash, queued: tuple[Path, QueuedFleet]
) -> None:
    _, fleet = queued
    layout = page("queues").layout()
    assert text(by_id(layout, "card-queues-idle-quota")).startswith("Idle quota $48.00 ")
    assert text(by_id(layout, "card-queues-pending")).startswith("Pending work 6.0 GPU·h ")
    assert text(by_id(layout, "card-queues-stalled")) == (
        "Stalled gangs $12.00 3.0 GPU·h held by 1 gangs while a sibling waited"
    )
    idle, wait = cells(by_id(layout, "queues-table"))
    assert idle == [
        "qa-idle", "prod-us-east", "qa-cohort", "a100", "NVIDIA A100-SXM4-80GB", "4.0", "12.0",
        "0.0", "0.0", "0.0", "0.0", "0.0", "0.0", "12.0", "$48.00",
    ]  # fmt: skip
    assert wait[0] == "qa-wait" and wait[11] == "6.0" and wait[-1] == "$0.00"
    (gang,) = cells(by_id(layout, "queues-gangs"))
    assert gang[0] == "jobset qa-train"
    assert gang[1:5] == [fleet.workload, fleet.namespace, "prod-us-east", fleet.team]
    # stalled from the first of the three hours to the end of the data (still waiting)
    assert gang[6:] == ["2", "2026-11-16 07:00 UTC", "2026-11-16 10:00 UTC", "3.0", "$12.00"]
    links = [
        n["props"]["href"] for n in walk(by_id(layout, "queues-table")) if "href" in n["props"]
    ]
    assert links == ["/queues?queue=qa-idle&cluster=prod-us-east",
                     "/queues?queue=qa-wait&cluster=prod-us-east"]  # fmt: skip
    chart = by_id(layout, "queues-chart-0")
    assert chart is not None
    quota = chart["props"]["figure"]["data"][0]
    assert quota["name"] == "quota (nominal)"
    assert quota["y"][-3:] == [4.0, 4.0, 4.0]
    assert by_id(layout, "queues-none") is None
    assert by_id(layout, "nav-queues") is not None


def test_one_queue_narrows_the_page(app: Dash) -> None:
    layout = page("queues").layout(queue="qa-wait", cluster="prod-us-east")
    (row,) = cells(by_id(layout, "queues-table"))
    assert row[0] == "qa-wait"
    assert text(by_id(layout, "queues-gangs-none")).startswith("No gang held GPUs")


def test_a_store_without_queues_says_so(fleet_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "fleet.db"
    shutil.copyfile(fleet_path, path)
    drop_queues(path)
    for _ in serve(path, None):
        layout = page("queues").layout()
        assert text(by_id(layout, "queues-none")).startswith("No queues: the store holds no Kueue")
        assert by_id(layout, "queues-table") is None
        assert by_id(layout, "queues-chart-0") is None
        assert by_id(layout, "queues-capacity") is not None
        overview = page("overview").layout()
        assert text(by_id(overview, "card-stalled-gangs")).startswith("Stalled gangs $0.00 ")


def test_overview_cards_link_to_the_queues_page(app: Dash) -> None:
    layout = page("overview").layout(window="24h")
    card = by_id(layout, "card-stalled-gangs")
    assert text(card) == "Stalled gangs $12.00 3.0 GPU·h held by 1 gangs while a sibling waited"
    assert [n["props"].get("href") for n in walk(card) if "href" in n["props"]] == [
        "/queues?window=24h"
    ]
    stranded = by_id(layout, "card-stranded")
    # the fleet's L40S pool (docs/simulation.md): 4 free GPUs, one per node, 09:00-16:00 while a
    # 4-GPU pod waits: 4 × 7 = 28 GPU-h at the L40S price
    assert text(stranded).startswith("Stranded capacity 28.0 GPU·h $52.11 of free GPUs")


def test_team_page_links_to_the_queues_its_namespaces_submit_to(
    app: Dash, queued: tuple[Path, QueuedFleet]
) -> None:
    _, fleet = queued
    layout = page("teams").layout()
    (row,) = cells(by_id(layout, "teams-queues"))
    assert row == [fleet.team, "prod-us-east", fleet.namespace, "qa-wait"]
    links = [n["props"].get("href") for n in walk(by_id(layout, "teams-queues"))]
    assert "/queues?queue=qa-wait&cluster=prod-us-east" in links


def test_cards_and_capacity_of_a_hand_built_view(app: Dash) -> None:
    from gpuwatch.app.views_queues import queues_view_of

    queues = page("queues")
    view = queues_view_of(example(), pods(), Filters())
    assert text(by_id(queues.cards(view), "card-queues-stranded")) == (
        "Stranded capacity 4.0 GPU·h $16.00 of free GPUs no waiting pod fit"
    )
    first, second = (queues.consolidate_hint(r, view.moves) for r in
                     view.capacity.to_dict("records"))  # fmt: skip
    assert first == (
        "A pod asking for 4 GPUs fit the free GPUs but no single node. Consolidate: move "
        "1 GPUs' pods off n1."
    )
    assert second == "None needed: every waiting pod that fit the free GPUs found a node."
    overview = page("overview").scheduling_cards(
        SchedulingTotals(3.0, 12.0, 1, 4.0, 16.0), Filters(team="team-b")
    )
    stranded = by_id(overview, "card-stranded")
    assert text(stranded) == (
        "Stranded capacity 4.0 GPU·h $16.00 of free GPUs too scattered for waiting pods"
    )
    assert [n["props"].get("href") for n in walk(stranded) if "href" in n["props"]] == [
        "/queues?team=team-b"
    ]


REGISTERED = """
import sys
from dash import page_registry
from gpuwatch.app.data import DashboardData
from gpuwatch.app.server import create_app
from gpuwatch.config import Settings
from gpuwatch.store.engine import make_engine

engine = make_engine(sys.argv[1])
settings = Settings()
create_app(engine, settings, data=DashboardData(engine, settings, background=False), warm=False)
print([p["path"] for p in page_registry.values() if p["path"] == "/queues"])
"""


def test_the_page_is_registered(queued: tuple[Path, QueuedFleet]) -> None:
    # Dash hands its registrations to the first app that starts in a process: read them in a
    # process of its own.
    run = subprocess.run(
        [sys.executable, "-c", REGISTERED, f"sqlite:///{queued[0]}"],
        capture_output=True, text=True, check=True, cwd=Path(__file__).parent.parent,
    )  # fmt: skip
    assert ast.literal_eval(run.stdout.strip().splitlines()[-1]) == ["/queues"]
