"""Overview: what the fleet is, how much of it is held, and how much of that is used."""

from __future__ import annotations

from datetime import UTC, datetime

import dash
import pandas as pd
import plotly.graph_objects as go
from dash import dcc, html

from gpuwatch.app.server import data_source
from gpuwatch.store import repository

dash.register_page(__name__, path="/", name="Overview", order=0)  # type: ignore[no-untyped-call]


def _when(ts: int | None) -> str:
    return "-" if ts is None else datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def hourly_frame(samples: pd.DataFrame) -> pd.DataFrame:
    """GPU units with data, held by a pod, and busy-equivalent, per hour (averages)."""
    if samples.empty:
        return pd.DataFrame(columns=["hour", "with_data", "allocated", "used"])
    frame = samples.assign(
        hour=pd.to_datetime(samples["ts"] - samples["ts"] % 3600, unit="s", utc=True),
        allocated=samples["pod_id"].notna().astype(float),
        used=samples["util_ratio"].fillna(0) * samples["pod_id"].notna(),
    )
    per_ts = frame.groupby(["hour", "ts"]).agg(
        with_data=("gpu_id", "size"), allocated=("allocated", "sum"), used=("used", "sum")
    )
    return per_ts.groupby("hour").mean().reset_index()


def utilization_figure(hourly: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for column, label in (
        ("with_data", "GPUs reporting"),
        ("allocated", "held by pods"),
        ("used", "busy (util-weighted)"),
    ):
        fig.add_scatter(x=hourly["hour"], y=hourly[column], name=label, mode="lines")
    fig.update_layout(
        title="Fleet: reporting vs held vs busy GPUs (hourly mean)",
        yaxis_title="GPUs",
        xaxis_title="time (UTC)",
        margin={"l": 50, "r": 20, "t": 50, "b": 40},
        legend={"orientation": "h"},
    )
    return fig


def layout(**_query: str) -> html.Div:
    source = data_source()
    stats = repository.summary(source.engine)
    if stats.samples == 0 or stats.last_ts is None:
        return html.Div(
            [
                html.H1("Overview"),
                html.P("No data yet: run `gpuwatch collect` (or `gpuwatch demo`)."),
            ],
            id="overview-empty",
        )
    start = stats.last_ts - 7 * 86400
    hourly = hourly_frame(repository.load_samples(source.engine, start, stats.last_ts + 1))
    cards = [
        ("Clusters", f"{stats.clusters}"),
        ("Nodes", f"{stats.nodes}"),
        ("GPU units", f"{stats.gpu_units}"),
        ("Samples", f"{stats.samples:,}"),
        ("Data from", _when(stats.first_ts)),
        ("Data to", _when(stats.last_ts)),
    ]
    return html.Div(
        [
            html.H1("Overview"),
            html.Div(
                [
                    html.Div(
                        [html.Div(v, className="gw-card-value"), html.Div(k)], className="gw-card"
                    )
                    for k, v in cards
                ],
                className="gw-cards",
                id="overview-cards",
            ),
            dcc.Graph(id="overview-utilization", figure=utilization_figure(hourly)),
        ]
    )
