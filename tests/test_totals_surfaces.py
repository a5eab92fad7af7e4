"""Every surface shows the same totals for the same window: the weekly CSV (as a spreadsheet
adds it up), `gpuwatch recommend`, and the dashboard's cards, all read from one small store whose
numbers are worked out by hand below."""

from __future__ import annotations

import csv
import importlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.utils
import pytest
from click.testing import CliRunner
from dash import Dash

from gpuwatch.app.data import DashboardData, Filters
from gpuwatch.app.server import create_app
from gpuwatch.cli.main import cli
from gpuwatch.config import Settings
from gpuwatch.simulate.generate import SimulatedData
from gpuwatch.simulate.load import load_simulated
from gpuwatch.store.engine import make_engine, upgrade

WEEK = "2026-W46"
WEEK_START = 1_794_182_400  # Monday 2026-11-09 00:00 UTC
START = WEEK_START + 86400  # data from Tuesday 00:00 UTC ...
HOURS = 30  # ... for 30 hours, one sample an hour: to Wednesday 06:00 UTC
NS = ("ml", "lab")
MODEL = "NVIDIA Test GPU"  # not in the price table: the default $2.00 per GPU-hour

# By hand, at $2.00/h a GPU and $1.00/h a slot of the GPU time-sliced in 2:
#   train-0 (Job train) holds gpu-a at 0 % utilization: 30 h × $2 = $60 allocated, all idle
#   nb-0 (bare pod) holds slot 0 of gpu-c at 50 %:      30 h × $1 = $30 allocated, not idle
#   gpu-b (unheld, 30 % busy) and slot 1 of gpu-c:    30 × $2 + 30 × $1 = $90 unallocated
# "Idle" is allocated below the threshold (5 %): $60, never the unallocated $90.
IDLE_USD = 60.0
UNALLOCATED_USD = 90.0
ALLOCATED_USD = 90.0
# train's largest saving is reclaim_idle, all of its cost: $60 over the 30 hours with data,
# × 730 h = $1,460 a month (its use_spot alternative, 60 % of it, is not added on top).
SAVINGS_USD = 60.0 / 30 * 730


def _node(node: str, gpus: int, replicas: int) -> dict[str, Any]:
    return {"cluster": "c1", "node": node, "gpu_model": MODEL, "gpu_count": gpus,
            "gpu_memory_mib": 16384, "capacity_type": "on_demand", "instance_type": "test",
            "mig_capable": False, "mig_strategy": None, "mig_config": None,
            "timeslice_replicas": replicas, "labels": {}}  # fmt: skip


def _gpu(node: str, uuid: str, index: int, slot: int, replicas: int) -> dict[str, Any]:
    return {"cluster": "c1", "node": node, "uuid": uuid, "mig_gi_id": -1, "slot": slot,
            "gpu_index": index, "device": f"nvidia{index}", "model_name": MODEL,
            "mig_profile": None, "timeslice_replicas": replicas,
            "memory_total_mib": 16384}  # fmt: skip


def _pod(name: str, uid: str, node: str, namespace: str, kind: str, workload: str,
         resource: str) -> dict[str, Any]:  # fmt: skip
    return {"cluster": "c1", "namespace": namespace, "pod": name, "uid": uid, "node": node,
            "phase": "Running", "workload_kind": kind, "workload_name": workload,
            "team": "research", "gpu_resource": resource, "gpu_count": 1, "labels": {},
            "owner_kind": kind, "owner_name": workload, "created_ts": START,
            "started_ts": START, "finished_ts": None}  # fmt: skip


def _samples(uuid: str, slot: int, util: float, pod_uid: str | None) -> list[dict[str, Any]]:
    return [
        {"cluster": "c1", "uuid": uuid, "mig_gi_id": -1, "slot": slot,
         "ts": START + h * 3600, "step_s": 3600, "pod_uid": pod_uid, "util_ratio": util,
         "util_signal": "prof_gr_engine_active", "fb_used_mib": 1000.0,
         "fb_total_mib": 16384.0, "power_w": 100.0, "temp_c": 40.0, "xid": 0}
        for h in range(HOURS)
    ]  # fmt: skip


def fleet() -> SimulatedData:
    samples = [
        *_samples("GPU-a", 0, 0.0, "uid-train"),
        *_samples("GPU-b", 0, 0.3, None),
        *_samples("GPU-c", 0, 0.5, "uid-nb"),
        *_samples("GPU-c", 1, 0.5, None),
    ]
    return SimulatedData(
        start_ts=START,
        end_ts=START + HOURS * 3600,
        step_s=3600,
        clusters=pd.DataFrame({"cluster": ["c1"]}),
        nodes=pd.DataFrame([_node("n1", 2, 1), _node("n2", 1, 2)]),
        gpus=pd.DataFrame(
            [
                _gpu("n1", "GPU-a", 0, 0, 1),
                _gpu("n1", "GPU-b", 1, 0, 1),
                _gpu("n2", "GPU-c", 0, 0, 2),
                _gpu("n2", "GPU-c", 0, 1, 2),
            ]
        ),
        namespaces=pd.DataFrame(
            [{"cluster": "c1", "namespace": n, "team": "research", "labels": {}} for n in NS]
        ),
        pods=pd.DataFrame(
            [
                _pod("train-0", "uid-train", "n1", "ml", "Job", "train", "nvidia.com/gpu"),
                _pod("nb-0", "uid-nb", "n2", "lab", "Pod", "nb-0", "nvidia.com/gpu.shared"),
            ]
        ),
        samples=pd.DataFrame(samples),
    )


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = Path(tmp_path_factory.mktemp("totals")) / "totals.db"
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    with engine.begin() as conn:
        load_simulated(conn, fleet())
    engine.dispose()
    return f"sqlite:///{path}"


def run_cli(url: str, *args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env={"GPUWATCH_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def weekly_rows(store_url: str) -> list[dict[str, str]]:
    text = run_cli(store_url, "report", "weekly", "--week", WEEK)
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def app(store_url: str) -> Iterator[Dash]:
    engine = make_engine(store_url)
    settings = Settings()
    data = DashboardData(engine, settings, background=False)
    dash_app = create_app(engine, settings, data=data, warm=False)
    with dash_app.server.app_context():
        yield dash_app
    engine.dispose()


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from _nodes(item)
    elif isinstance(node, dict) and "props" in node and "type" in node:
        yield node
        for value in node["props"].values():
            yield from _nodes(value)


def card(page: str, key: str, **query: str) -> tuple[str, str]:
    """A card's value and note on a page of the dashboard."""
    layout = importlib.import_module(f"gpuwatch.app.pages.{page}").layout(**query)
    tree = list(_nodes(json.loads(json.dumps(layout, cls=plotly.utils.PlotlyJSONEncoder))))
    found = [n for n in tree if n["props"].get("id") == f"card-{key}"]
    assert found, f"no card {key} on {page}"
    children = [c["props"]["children"] for c in found[0]["props"]["children"]]
    return str(children[1]), str(children[2])


def subtitle(page: str) -> str:
    layout = importlib.import_module(f"gpuwatch.app.pages.{page}").layout()
    tree = list(_nodes(json.loads(json.dumps(layout, cls=plotly.utils.PlotlyJSONEncoder))))
    return str(next(n for n in tree if "gw-subtitle" in str(n["props"].get("className"))))


def column_sum(rows: list[dict[str, str]], name: str) -> float:
    return round(sum(float(row[name]) for row in rows), 2)


def test_spreadsheet_sums_of_the_weekly_csv_are_the_fleet_totals(
    weekly_rows: list[dict[str, str]],
) -> None:
    assert column_sum(weekly_rows, "idle_cost_usd") == IDLE_USD
    assert column_sum(weekly_rows, "unallocated_cost_usd") == UNALLOCATED_USD
    assert column_sum(weekly_rows, "allocated_cost_usd") == ALLOCATED_USD
    unallocated = {r["workload"]: r for r in weekly_rows if r["namespace"] == "__idle__"}
    assert sorted(unallocated) == ["n1", "n2"]
    assert unallocated["n2"]["allocation"] == "time-slice"
    assert unallocated["n1"]["allocation"] == "device-plugin"
    assert {r["idle_cost_usd"] for r in unallocated.values()} == {"0.00"}


def test_dashboard_idle_and_unallocated_cards_equal_the_csv_sums(
    app: Dash, weekly_rows: list[dict[str, str]]
) -> None:
    idle = f"${column_sum(weekly_rows, 'idle_cost_usd'):.2f}"
    unallocated = f"${column_sum(weekly_rows, 'unallocated_cost_usd'):.2f}"
    assert idle == "$60.00" and unallocated == "$90.00"
    # the Overview's 7-day window holds the same 30 hours as the report's week
    assert card("overview", "idle-cost")[0] == idle
    assert card("overview", "unallocated-cost")[0] == unallocated
    assert card("reports", "idle", week=WEEK)[0] == idle
    assert card("reports", "unallocated", week=WEEK)[0] == unallocated
    assert card("overview", "total-cost")[0] == "$180"


def test_potential_savings_are_the_same_on_every_surface(
    app: Dash, store_url: str, weekly_rows: list[dict[str, str]]
) -> None:
    assert f"{SAVINGS_USD:,.2f}" == "1,460.00"
    table = run_cli(
        store_url, "recommend", "--start", "2026-11-09T00:00:00Z", "--end", "2026-11-16T00:00:00Z"
    )
    assert table.rstrip().splitlines()[-2:] == [
        "potential savings $1,460.00 per month (the largest recommendation per workload, "
        "per 730 h from 30 h of data:",
        "  2026-11-10 00:00 UTC to 2026-11-11 06:00 UTC)",
    ]
    assert column_sum(weekly_rows, "est_monthly_savings_usd") == SAVINGS_USD
    basis = "per 730 h from 30 h of data"
    for page, key, query in (
        ("overview", "savings", {}),
        ("savings", "total", {}),
        ("reports", "savings", {"week": WEEK}),
    ):
        value, note = card(page, key, **query)
        assert value == "$1,460", page
        assert basis in note, page


def test_a_window_starting_before_the_data_is_labelled_with_the_data_span(app: Dash) -> None:
    assert (
        "Window: 7 days, with data from 2026-11-10 00:00 UTC to 2026-11-11 06:00 UTC only (30 h)"
        in subtitle("overview")
    )


def _shown(flags: list[str]) -> str:
    """``--team x --namespace y`` as the echo names it: ``team=x, namespace=y``."""
    pairs = zip(flags[::2], flags[1::2], strict=True)
    return ", ".join(f"{flag.removeprefix('--')}={value}" for flag, value in pairs)


def run_cli_both(url: str, *args: str) -> tuple[str, str]:
    """Standard output and standard error of one command on the store."""
    result = CliRunner().invoke(cli, list(args), env={"GPUWATCH_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def test_report_weekly_echoes_week_rows_and_the_csv_sums(store_url: str) -> None:
    _, said = run_cli_both(store_url, "report", "weekly", "--week", WEEK)
    assert said == (
        "report weekly 2026-W46 (2026-11-09 00:00 UTC to 2026-11-16 00:00 UTC): 4 rows "
        "(2 workload rows); allocated $90.00, idle $60.00, unallocated $90.00; "
        "potential savings $1,460.00 per month\n"
    )


@pytest.mark.parametrize(
    ("scope", "rows", "echo"),
    [
        (["--namespace", "ml"], [("ml", "train")], "1 row (1 workload row); allocated $60.00, "
         "idle $60.00, unallocated $0.00; potential savings $1,460.00 per month"),
        # unallocated capacity belongs to no team: a team's rows are its workloads only
        (["--team", "research"], [("ml", "train"), ("lab", "nb-0")], "2 rows (2 workload rows); "
         "allocated $90.00, idle $60.00, unallocated $0.00; potential savings $1,460.00 per month"),
        (["--namespace", "__idle__"], [("__idle__", "n1"), ("__idle__", "n2")], "2 rows "
         "(0 workload rows); allocated $0.00, idle $0.00, unallocated $90.00; potential savings "
         "$0.00 per month"),
        (["--cluster", "c1", "--namespace", "lab"], [("lab", "nb-0")], "1 row (1 workload row); "
         "allocated $30.00, idle $0.00, unallocated $0.00; potential savings $0.00 per month"),
        (["--cluster", "c2"], [], "0 rows (0 workload rows); allocated $0.00, idle $0.00, "
         "unallocated $0.00; potential savings $0.00 per month"),
    ],
)  # fmt: skip
def test_report_weekly_keeps_the_rows_of_its_scope(
    store_url: str, weekly_rows: list[dict[str, str]], scope: list[str], rows: list[Any], echo: str
) -> None:
    text, said = run_cli_both(store_url, "report", "weekly", "--week", WEEK, *scope)
    kept = list(csv.DictReader(io.StringIO(text)))
    assert [(r["namespace"], r["workload"]) for r in kept] == rows
    # the kept rows are the whole report's rows, unchanged
    assert kept == [r for r in weekly_rows if (r["namespace"], r["workload"]) in rows]
    shown = _shown(scope)
    assert said == f"report weekly 2026-W46 (2026-11-09 00:00 UTC to 2026-11-16 00:00 UTC, " \
        f"{shown}): {echo}\n"  # fmt: skip


@pytest.mark.parametrize(
    ("scope", "workloads"),
    [([], ["train"]), (["--namespace", "ml"], ["train"]), (["--team", "research"], ["train"]),
     (["--namespace", "lab"], []), (["--cluster", "c2"], [])],
)  # fmt: skip
def test_recommend_keeps_the_rows_of_its_scope_and_echoes_the_window(
    store_url: str, scope: list[str], workloads: list[str]
) -> None:
    window = ["--start", "2026-11-09T00:00:00Z", "--end", "2026-11-16T00:00:00Z"]
    text, said = run_cli_both(store_url, "recommend", *window, *scope, "--format", "json")
    assert [r["workload"] for r in json.loads(text)] == workloads
    lines = said.splitlines()
    shown = _shown(scope)
    assert lines[0] == "recommend: window 2026-11-09 00:00 UTC to 2026-11-16 00:00 UTC" + (
        f"; showing {shown}" if shown else ""
    )
    count = len(workloads)
    assert lines[1] == (
        f"recommend: {count} recommendation{'' if count == 1 else 's'} for {count} "
        f"workload{'' if count == 1 else 's'}"
    )
    saving = "1,460.00" if workloads else "0.00"
    assert lines[2].startswith(f"recommend: potential savings ${saving} per month")


def test_savings_page_shows_waste_and_pricing_apart(app: Dash) -> None:
    # train's reclaim_idle ranks first: its other saving kinds are left out, so no pricing
    assert card("savings", "waste")[0] == "$1,460"
    assert card("savings", "kind-reclaim_idle") == ("$1,460", "1 suggestion; risk low")
    assert card("savings", "pricing")[0] == "$0.00"
    assert card("savings", "total")[0] == "$1,460"


def _rec(workload: str, kind: str, usd: float) -> dict[str, Any]:
    return {"cluster": "c1", "namespace": "ml", "team": "t", "workload_kind": "Job",
            "workload": workload, "gpu_model": "m", "kind": kind, "current": "",
            "suggested": "", "confidence": "low", "evidence": {},
            "est_monthly_savings_usd": usd, "allocation": "device-plugin"}  # fmt: skip


def test_group_cards_per_kind_in_rank_order(app: Dash) -> None:
    savings = importlib.import_module("gpuwatch.app.pages.savings")
    recs = pd.DataFrame(
        [_rec("a", "use_mig", 200.0), _rec("a", "reclaim_idle", 300.0),
         _rec("b", "reclaim_idle", 10.0), _rec("a", "use_spot", 500.0),
         _rec("c", "memory_risk", 0.0)]
    )  # fmt: skip
    groups = json.loads(
        json.dumps(savings.group_cards(recs, "b"), cls=plotly.utils.PlotlyJSONEncoder)
    )
    shown = {
        group["props"]["id"]: [
            (c["props"]["id"], *(part["props"]["children"] for part in c["props"]["children"]))
            for c in group["props"]["children"][2]["props"]["children"]
        ]
        for group in groups
    }
    assert shown == {
        "savings-waste": [
            ("card-waste", "Waste / month", "$310", "largest waste suggestion per workload, b"),
            ("card-kind-reclaim_idle", "reclaim_idle", "$310", "2 suggestions; risk low"),
            ("card-kind-use_mig", "use_mig", "$200", "1 suggestion; risk medium"),
        ],
        "savings-pricing": [
            (
                "card-pricing",
                "Pricing / month",
                "$500",
                "largest pricing suggestion per workload, b",
            ),
            ("card-kind-use_spot", "use_spot", "$500", "1 suggestion; risk high"),
        ],
    }


def test_savings_rows_show_evidence_as_numbers_in_their_units(app: Dash) -> None:
    from gpuwatch.analytics.explain import EvidenceKeys
    from gpuwatch.analytics.policy import AnalyticsPolicy

    savings = importlib.import_module("gpuwatch.app.pages.savings")
    rec = _rec("a", "use_mig", 200.0) | {
        "evidence": {"p95_util_pct": 12.345, "p99_memory_mib": 74570.0, "busy_gpus_p95": 2,
                     "hours_observed": 168.04, "pods": 3, "idle_fraction": 0.25}
    }  # fmt: skip
    keys = EvidenceKeys.of(AnalyticsPolicy())
    (row,) = savings.records(pd.DataFrame([rec]), Filters(), keys)
    assert {k: row[k] for k in ("p95_util_pct", "p99_memory_mib", "busy_gpus_p95")} == {
        "p95_util_pct": 12.3,
        "p99_memory_mib": 72.8,  # 74,570 MiB / 1,024
        "busy_gpus_p95": 2.0,
    }
    assert row["hours_observed"] == 168.0
    assert row["evidence"] == "pods 3; idle share 25 %"
    headings = [col.title for col in savings.columns(keys)][-5:]
    assert headings == [
        "p95 util (%)", "p99 memory (GiB)", "busy GPUs p95", "hours observed (h)", "more evidence",
    ]  # fmt: skip
