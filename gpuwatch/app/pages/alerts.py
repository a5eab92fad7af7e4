"""Alerts: the rendered rules (with the PrometheusRule YAML to download) and which conditions
the stored data meets at its last sample."""

from __future__ import annotations

from typing import Any

import dash
import pandas as pd
import yaml
from dash import Input, Output, dcc, html

from gpuwatch.alerts.render import (
    OPERATOR_FILE,
    PLAIN_FILE,
    render_rules,
    rule_params_from_settings,
)
from gpuwatch.app import format as fmt
from gpuwatch.app.components import NO_DATA_HINT, card, empty_state, html_table, section, shell
from gpuwatch.app.context import page_context
from gpuwatch.app.data import DashboardData, Snapshot
from gpuwatch.app.server import data_source
from gpuwatch.app.views_store import Condition, alert_conditions
from gpuwatch.config import Settings

PAGE, PATH, TITLE = "alerts", "/alerts", "Alerts"
MAX_SUBJECTS = 50
_HEADINGS = {
    "cluster": "Cluster",
    "node": "Node",
    "gpu_id": "GPU",
    "gpu_model": "GPU model",
    "namespace": "Namespace",
    "pod": "Pod",
    "max_util_pct": "Peak utilization (%)",
    "mean_util_pct": "Mean utilization (%)",
    "gpu_units": "GPU units",
    "memory_used_pct": "Memory used (%)",
    "temp_c": "Temperature (°C)",
    "xid": "XID code",
    "last_sample_ts": "Last sample",
}


def rule_files(settings: Settings) -> dict[str, str]:
    return render_rules(rule_params_from_settings(settings))


def rule_rows(settings: Settings) -> list[dict[str, Any]]:
    """The alerts of the rendered PrometheusRule: name, severity, for, summary."""
    document = yaml.safe_load(rule_files(settings)[OPERATOR_FILE])
    rows = []
    for group in document["spec"]["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                rows.append(
                    {
                        "alert": rule["alert"],
                        "severity": rule.get("labels", {}).get("severity", ""),
                        "for": rule.get("for", "0s"),
                        "summary": rule.get("annotations", {}).get("summary", ""),
                    }
                )
    return rows


def rules_download(n_clicks: int | None, name: str) -> Any:
    """One rule file as ``gpuwatch alerts render`` writes it, for a dcc.Download."""
    if not n_clicks:
        return dash.no_update
    return {
        "content": rule_files(data_source().settings)[name],
        "filename": name,
        "type": "application/yaml",
    }


def download_operator(n_clicks: int | None) -> Any:
    return rules_download(n_clicks, OPERATOR_FILE)


def download_plain(n_clicks: int | None) -> Any:
    return rules_download(n_clicks, PLAIN_FILE)


for _button, _target, _handler in (
    ("alerts-download-button", "alerts-download", download_operator),
    ("alerts-download-plain-button", "alerts-download-plain", download_plain),
):
    dash.callback(Output(_target, "data"), Input(_button, "n_clicks"), prevent_initial_call=True)(
        _handler
    )


def _cell(name: str, value: Any) -> str:
    if name == "last_sample_ts":
        return fmt.when(value)
    if isinstance(value, float):
        return fmt.number(value, 1)
    return fmt.text(value)


def subjects_table(condition: Condition) -> Any:
    frame: pd.DataFrame = condition.subjects.head(MAX_SUBJECTS)
    columns = [(_HEADINGS.get(n, n), lambda r, n=n: _cell(n, r[n])) for n in frame.columns]
    return html_table(f"alerts-{condition.alert}", columns, frame.astype(object).to_dict("records"))


def conditions_section(conditions: list[Condition]) -> list[Any]:
    cards = [
        card(cond.alert, fmt.number(len(cond.subjects)), cond.condition, f"cond-{cond.alert}")
        for cond in conditions
    ]
    details = [
        html.Details(
            [html.Summary(f"{cond.alert}: {len(cond.subjects)} met"), subjects_table(cond)],
            className="gw-details",
            open=len(cond.subjects) > 0,
        )
        for cond in conditions
    ]
    return [html.Div(cards, className="gw-cards", id="alerts-conditions"), *details]


def body(data: DashboardData, snap: Snapshot) -> list[Any]:
    rows = snap.memo(("rule_rows",), lambda: rule_rows(data.settings))
    rules = html_table(
        "alerts-rules",
        [
            ("Alert", lambda r: r["alert"]),
            ("Severity", lambda r: r["severity"]),
            ("For", lambda r: r["for"]),
            ("Summary", lambda r: r["summary"]),
        ],
        rows,
    )
    actions = html.Div(
        [
            html.Button(
                "Download PrometheusRule YAML", id="alerts-download-button", className="gw-button"
            ),
            html.Button(
                "Download plain rule file",
                id="alerts-download-plain-button",
                className="gw-button gw-button-secondary",
            ),
            dcc.Download(id="alerts-download"),
            dcc.Download(id="alerts-download-plain"),
        ],
        className="gw-actions",
    )
    note = (
        f"At the last stored sample ({fmt.when(snap.marker.last_ts)}), from the samples of "
        "the last 6 hours; Prometheus evaluates the same conditions live, with their `for:` "
        "durations."
    )
    if snap.empty:
        met: list[Any] = [empty_state(PAGE, "No GPU samples stored yet", NO_DATA_HINT)]
    else:
        met = conditions_section(alert_conditions(data, snap))
    return [
        section("Conditions met in the stored data", *met, note=note),
        section(
            f"Rendered rules ({len(rows)} alerts)",
            actions,
            rules,
            note="From this configuration's thresholds and label schema, as "
            "`gpuwatch alerts render` writes them.",
        ),
    ]


def layout(**query: Any) -> html.Div:
    ctx = page_context(query)
    snap, f = ctx.snap, ctx.filters
    return shell(PAGE, PATH, TITLE, f, snap, None, body(ctx.source.data, snap), filters=False)


def warm(data: DashboardData, snap: Snapshot) -> None:
    if not snap.empty:
        alert_conditions(data, snap)


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Alerts", order=6, layout=layout
)
