"""The data tables' pure parts: column definitions, rounding, and what an export says of itself."""

from __future__ import annotations

import math

import pytest

from gpuwatch.app import grid
from gpuwatch.app.data import Filters


def test_money_is_dollars_with_two_decimals_and_exports_the_number() -> None:
    spec = grid.money_column("idle_cost_usd").definition()
    assert spec["headerName"] == "Idle cost ($)"
    assert spec["valueFormatter"] == {
        "function": "params.value == null ? '' : d3.format('$,.2f')(params.value)"
    }
    assert spec["useValueFormatterForExport"] is False  # the CSV holds 1234.5, not "$1,234.50"
    assert spec["context"] == {"total": True}
    assert spec["filter"] == "agNumberColumnFilter"


def test_numbers_keep_their_digits_and_only_marked_columns_are_totalled() -> None:
    pct = grid.number_column("efficiency_pct").definition()
    assert pct["valueFormatter"]["function"].endswith("d3.format(',.1f')(params.value)")
    assert pct["context"] == {"total": False}
    hours = grid.number_column("idle_gpu_hours", digits=2, total=True).definition()
    assert hours["context"] == {"total": True}


def test_a_name_column_is_a_pinned_link() -> None:
    spec = grid.text_column("team", link=grid.HREF, pinned=True).definition()
    assert spec == {
        "field": "team",
        "headerName": "Team",
        "filter": "agTextColumnFilter",
        "cellRenderer": "GwLink",
        "cellRendererParams": {"hrefField": "href"},
        "pinned": "left",
        "lockPinned": True,
    }


def test_rows_round_to_their_column_and_blank_what_is_missing() -> None:
    columns = [
        grid.text_column("team"),
        grid.number_column("util_pct", digits=1),
        grid.money_column("cost_usd"),
    ]
    rows = grid.rows_for(
        [
            {"team": "a", "util_pct": 12.345, "cost_usd": 1234.5678, "href": "/x"},
            {"team": None, "util_pct": math.nan, "cost_usd": -0.001},
            {"team": math.nan, "util_pct": math.inf, "cost_usd": "n/a"},
        ],
        columns,
    )
    assert rows == [
        {"team": "a", "util_pct": 12.3, "cost_usd": 1234.57, "href": "/x"},
        {"team": "", "util_pct": None, "cost_usd": 0.0},
        {"team": "", "util_pct": None, "cost_usd": None},
    ]
    assert math.copysign(1.0, rows[1]["cost_usd"]) == 1.0  # never "-$0.00"


@pytest.mark.parametrize(
    ("filters", "name"),
    [
        ({}, "gpuwatch-teams-7d.csv"),
        ({"cluster": "prod-us", "team": "ml platform"},
         "gpuwatch-teams-7d-cluster-prod-us-team-ml_platform.csv"),
        ({"namespace": "../../etc"}, "gpuwatch-teams-7d-namespace-.._.._etc.csv"),
        ({"team": "√"}, "gpuwatch-teams-7d-team-_.csv"),
    ],
)  # fmt: skip
def test_the_file_name_carries_window_and_filters_safely(
    filters: dict[str, str], name: str
) -> None:
    assert grid.export_file_name("teams", "7d", filters) == name
    assert "/" not in name


def test_the_first_line_says_what_window_and_filters_the_file_holds() -> None:
    line = grid.export_comment("Teams", "7d (a to b)", {"cluster": "c1", "team": "x\ny"})
    assert line == "# gpuwatch Teams; window 7d (a to b); filters: cluster=c1; team=x y"
    assert grid.export_comment("Nodes", "24h", {}) == (
        "# gpuwatch Nodes; window 24h; filters: none"
    )


def test_export_params_name_the_file_and_leave_the_totals_row_out() -> None:
    export = grid.Export("nodes", "Nodes", "3d", "3d (s to e)", {"cluster": "c1"})
    assert export.params() == {
        "fileName": "gpuwatch-nodes-3d-cluster-c1.csv",
        "prependContent": "# gpuwatch Nodes; window 3d (s to e); filters: cluster=c1",
        "skipPinnedBottom": True,
        "processCellCallback": {
            "function": 'gwNeutralise(params.value, ["=", "+", "-", "@", "\\t", "\\r"])'
        },
    }


def test_a_page_export_states_the_window_in_utc_and_only_real_filters() -> None:
    class Snap:
        end_ts = 1_794_823_200  # 2026-11-16 10:00 UTC

    export = grid.page_export("teams", "Teams", Snap(), Filters(team="t", window="24h"))  # type: ignore[arg-type]
    assert export.window_text == "24h (2026-11-15 10:00 UTC to 2026-11-16 10:00 UTC)"
    assert dict(export.filters) == {"team": "t"}
    assert grid.page_export("teams", "Teams", Snap(), Filters()).params()["fileName"] == (  # type: ignore[arg-type]
        "gpuwatch-teams-7d.csv"
    )
