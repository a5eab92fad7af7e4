"""Savings: every recommendation of the window, sortable and filterable, with its evidence and
a CSV download (the same CSV as ``gpuwatch recommend --format csv`` over the window)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

import dash
import pandas as pd
from dash import Input, Output, State, dcc, html

from gpuwatch.analytics.explain import EvidenceKeys
from gpuwatch.analytics.kinds import KIND_FACTS, PRICING, WASTE, group_savings_usd, kinds_of
from gpuwatch.analytics.render import render_csv
from gpuwatch.analytics.totals import best_per_workload, monthly_basis, potential_savings_usd
from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import card, no_data, records_of, section, shell
from gpuwatch.app.context import page_context
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.evidence import (
    column_digits,
    column_heading,
    column_number,
    evidence_columns,
    rest_text,
)
from gpuwatch.app.links import workload_href
from gpuwatch.app.server import data_source
from gpuwatch.app.urls import URL_ID
from gpuwatch.app.views import (
    RECOMMENDATIONS,
    data_hours,
    options,
    recommendations,
    window_recommendations,
)
from gpuwatch.domain.words import counted

PAGE, PATH, TITLE = "savings", "/savings", "Savings"

COLUMNS = [
    grid.text_column("workload", link=grid.HREF, pinned=True),
    grid.text_column("namespace"),
    grid.text_column("cluster"),
    grid.text_column("team"),
    grid.text_column("gpu_model"),
    grid.text_column("kind"),
    grid.text_column("current"),
    grid.text_column("suggested"),
    grid.text_column("confidence"),
    grid.money_column("est_monthly_savings_usd", total=False),
    grid.text_column("effort"),
    grid.text_column("risk"),
]
#: The two groups of saving kinds, each with its cards (docs/recommendations.md).
GROUPS = (
    (WASTE, "Waste: GPUs held and not used", "reclaim idle first; capacity goes back to the fleet"),
    (PRICING, "Pricing: the same GPU time, bought cheaper", "the workload keeps what it uses"),
)
_TEXT = [col.key for col in COLUMNS if col.kind == "text"]
grid.register("savings-table")


def columns(keys: EvidenceKeys) -> list[grid.Column]:
    """The table's columns: the recommendation, then its evidence with units in the headings
    (p95 util %, p99 memory GiB, busy GPUs, hours observed), then the rest of it as text."""
    shown = [
        grid.number_column(key, column_heading(key), column_digits(key))
        for key in evidence_columns(keys)
    ]
    return [*COLUMNS, *shown, grid.wrapped_column("evidence", "more evidence")]


def records(recs: pd.DataFrame, f: Filters, keys: EvidenceKeys) -> list[dict[str, Any]]:
    """One row per recommendation, its main evidence as numbers, the rest as a line of text,
    linked to its workload."""
    rows = []
    shown = evidence_columns(keys)
    for rec in records_of(recs):
        row: dict[str, Any] = {n: fmt.text(rec[n]) for n in _TEXT if n in rec}
        for key in shown:
            row[key] = column_number(key, rec["evidence"])
        row["evidence"] = rest_text(rec["evidence"], shown)
        facts = KIND_FACTS.get(str(rec["kind"]))
        row["effort"] = facts.effort if facts else ""
        row["risk"] = facts.risk if facts else ""
        row["est_monthly_savings_usd"] = round(float(rec["est_monthly_savings_usd"]), 2)
        row[grid.HREF] = workload_href(f, rec)
        rows.append(row)
    return rows


def download_csv(n_clicks: int | None, search: str | None) -> Any:
    """The CSV of the recommendations under the URL's filters."""
    if not n_clicks:
        return dash.no_update
    f = Filters.from_query(dict(parse_qsl((search or "").lstrip("?"))))
    snap = data_source().data.current()
    frame = recommendations(snap, f)
    return {
        "content": render_csv(frame),
        "filename": f"gpuwatch-recommendations-{f.window}.csv",
        "type": "text/csv",
    }


dash.callback(
    Output("savings-download", "data"),
    Input("savings-download-button", "n_clicks"),
    State(URL_ID, "search"),
    prevent_initial_call=True,
)(download_csv)


def group_cards(recs: pd.DataFrame, basis: str) -> list[Any]:
    """Per group (waste, then pricing): its total and a card per kind present, in rank order."""
    parts: list[Any] = []
    for group, title, note in GROUPS:
        kinds = [k for k in kinds_of(group) if recs["kind"].eq(k).any()]
        cards = [
            card(
                kind,
                fmt.usd(recs.loc[recs["kind"].eq(kind), "est_monthly_savings_usd"].sum()),
                f"{counted(int(recs['kind'].eq(kind).sum()), 'suggestion')}; risk "
                f"{KIND_FACTS[kind].risk.split(':')[0]}",
                f"kind-{kind}",
            )
            for kind in kinds
        ]
        total = card(
            f"{group.capitalize()} / month",
            fmt.usd(group_savings_usd(recs, group)),
            f"largest {group} suggestion per workload, {basis}",
            group,
        )
        parts.append(
            html.Div(
                [
                    html.H3(title),
                    html.P(note, className="gw-note"),
                    html.Div([total, *cards], className="gw-cards"),
                ],
                className="gw-group",
                id=f"savings-{group}",
            )
        )
    return parts


def body(snap: Snapshot, f: Filters) -> list[Any]:
    recs = recommendations(snap, f)
    best = best_per_workload(recs)
    basis = monthly_basis(data_hours(snap, f.window))
    keys = EvidenceKeys.of(snap.policy)
    summary = [
        card(
            "Potential savings / month",
            fmt.usd(potential_savings_usd(recs)),
            f"largest recommendation per workload, {basis}",
            "total",
        ),
        card("Recommendations", fmt.number(len(recs)), f"for {len(best)} workloads", "count"),
        card(
            "High confidence",
            fmt.number(int(recs["confidence"].eq("high").sum())),
            "≥ 168 h observed with pod-level attribution",
            "high",
        ),
    ]
    table = grid.grid(
        "savings-table",
        columns(keys),
        records(recs, f, keys),
        grid.page_export("savings", "Savings", snap, f),
    )
    actions = html.Div(
        [
            html.Button(
                "Download recommend CSV", id="savings-download-button", className="gw-button"
            ),
            dcc.Download(id="savings-download"),
        ],
        className="gw-actions",
    )
    note = (
        "Kinds overlap (a workload may be told to use spot and to use fewer GPUs): each total "
        "counts the largest saving per workload, so waste and pricing do not add up to the "
        f"total. Savings are {basis} in this window. Effort and risk per kind: "
        "docs/recommendations.md. Type in the row under the headings to filter. The same "
        "suggestions as `gpuwatch recommend` over the window."
    )
    return [
        html.Div(summary, className="gw-cards", id="savings-cards"),
        *group_cards(recs, basis),
        section("Recommendations", actions, table, note=note),
    ]


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    if snap.empty:
        return no_data(PAGE, PATH, TITLE, f, snap)
    return shell(PAGE, PATH, TITLE, f, snap, options(snap, f), body(snap, f))


def warm(data: DashboardData, snap: Snapshot) -> None:
    """The default view's recommendations, and those of the windows pages asked for in the
    last minutes (``data.ASKED_KEEP_S``); other windows' are computed when first asked."""
    if snap.empty:
        return
    body(snap, Filters())
    for window in snap.asked_of(RECOMMENDATIONS):
        window_recommendations(snap, str(window))


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Savings", order=4, layout=layout
)
