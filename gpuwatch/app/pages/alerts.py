"""Alerts: which gpuwatch alerts fire now (Prometheus' own, or evaluated over the stored
samples from the same definitions as the rules), and the rendered rules with the
PrometheusRule YAML to download."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import dash
import pandas as pd
import yaml
from dash import Input, Output, dcc, html

from gpuwatch.alerts.definitions import AlertDefinition, alert_table, span_text
from gpuwatch.alerts.evaluate import KINDS, Evaluation
from gpuwatch.alerts.live import LiveAlerts
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.render import (
    OPERATOR_FILE,
    PLAIN_FILE,
    render_rules,
    rule_params_from_settings,
)
from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.alert_links import places_of, subject_links
from gpuwatch.app.components import (
    NO_DATA_HINT,
    card,
    empty_state,
    html_table,
    records_of,
    section,
    shell,
)
from gpuwatch.app.context import page_context
from gpuwatch.app.data import DashboardData, Filters, Snapshot
from gpuwatch.app.server import data_source
from gpuwatch.app.views_store import LIVE_TTL_S, AlertStates, alert_states
from gpuwatch.config import Settings

PAGE, PATH, TITLE = "alerts", "/alerts", "Alerts"
#: Alert names are fixed (thresholds aside), so each alert's table is known before any page.
grid.register_tables("alerts-rules", *(f"alerts-{d.name}" for d in alert_table(RuleParams()).all()))

MAX_SUBJECTS = 50
_HEADINGS = {
    "alert": "Alert",
    "cluster": "Cluster",
    "node": "Node",
    "gpu_id": "GPU",
    "gpu": "GPU",
    "gpu_model": "GPU model",
    "modelName": "GPU model",
    "namespace": "Namespace",
    "pod": "Pod",
    "job": "Job",
    "instance": "Instance",
    "state": "State",
    "value": "Value",
    "active_since_ts": "Active since",
    "peak_util_ratio": "Peak utilization (%)",
    "mean_util_ratio": "Mean utilization (%)",
    "fb_used_ratio": "Memory used (%)",
    "temp_c": "Temperature (°C)",
    "xid": "XID code",
    "silent_gpu_units": "GPU units gone silent",
}
#: Columns holding a ratio, shown in percent.
_RATIOS = frozenset({"peak_util_ratio", "mean_util_ratio", "fb_used_ratio"})
#: The condition of each alert the store evaluates, in words, from its definition.
_CONDITIONS: dict[str, Callable[[AlertDefinition], str]] = {
    "GPUAllocatedIdle": lambda d: (
        f"held by a pod, no sample at or above {fmt.ratio_pct(d.threshold, 0)} "
        f"in the last {span_text(d.timing.window_s)}"
    ),
    "GPUNamespaceLowEfficiency": lambda d: (
        f"the namespace's held GPUs average below {fmt.ratio_pct(d.threshold, 0)} "
        f"over {span_text(d.timing.window_s)}"
    ),
    "GPUMemoryNearFull": lambda d: f"framebuffer used ≥ {fmt.ratio_pct(d.threshold, 0)}",
    "GPUHighTemperature": lambda d: f"temperature ≥ {d.threshold:g} °C",
    "GPUXidError": lambda d: f"a non-zero XID code in the last {span_text(d.timing.window_s)}",
    "GPUXidHardwareError": lambda d: (
        "an XID NVIDIA's catalogue lists as hardware or driver in the last "
        f"{span_text(d.timing.window_s)}"
    ),
    "GPUExporterDown": lambda d: (
        f"a node with samples in the last {span_text(d.timing.window_s)} has gone silent"
    ),
}


def condition_text(d: AlertDefinition) -> str:
    """The alert's condition and its ``for:``, as the page states it."""
    words = _CONDITIONS.get(d.name)
    text = words(d) if words else f"{d.severity}: see the rule"
    return f"{text}, for {d.timing.for_}" if d.timing.for_ else text


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
    if name == "active_since_ts":
        return fmt.when(value)
    if name in _RATIOS:
        return fmt.ratio_pct(value, 1)
    if isinstance(value, float):
        return fmt.number(value, 1)
    return fmt.text(value)


def subjects_table(name: str, frame: pd.DataFrame, snap: Snapshot) -> Any:
    """The alert's subjects; nodes, GPUs and pods link to their pages (pods to their workload)."""
    rows = records_of(frame.head(MAX_SUBJECTS).astype(object))
    at = places_of(snap, rows)
    for row in rows:
        row["_links"] = subject_links(snap, Filters(), row, at)
    names = [n for n in frame.columns if n not in ("pod_id", "alert")]
    columns = [(_HEADINGS.get(n, n), lambda r, n=n: _linked(n, r)) for n in names]
    table = html_table(f"alerts-{name}", columns, rows)
    return grid.exportable(table, grid.page_export(f"alert-{name}", name, snap, Filters()))


def _linked(name: str, row: dict[str, Any]) -> Any:
    link = row["_links"].get(name)
    if link is None:
        return _cell(name, row[name])
    return dcc.Link(link.text, href=link.href, className="gw-link")


def _alert_block(
    d: AlertDefinition, subjects: pd.DataFrame, note: str, snap: Snapshot
) -> tuple[Any, Any]:
    firing = int(subjects["state"].eq("firing").sum())
    pending = len(subjects) - firing
    counts = f"{firing} firing, {pending} pending"
    details = html.Details(
        [html.Summary(f"{d.name}: {counts}"), subjects_table(d.name, subjects, snap)],
        className="gw-details",
        open=len(subjects) > 0,
    )
    headline = card(d.name, fmt.number(firing), f"{note} ({pending} pending)", f"cond-{d.name}")
    return headline, details


def _blocks(blocks: list[tuple[Any, Any]]) -> list[Any]:
    cards = [c for c, _ in blocks]
    return [html.Div(cards, className="gw-cards", id="alerts-conditions"), *[d for _, d in blocks]]


def stored_section(
    evaluations: tuple[Evaluation, ...] | list[Evaluation], snap: Snapshot
) -> list[Any]:
    return _blocks(
        [
            _alert_block(e.definition, e.subjects, condition_text(e.definition), snap)
            for e in evaluations
        ]
    )


def live_section(
    live: LiveAlerts, definitions: tuple[AlertDefinition, ...], snap: Snapshot
) -> list[Any]:
    blocks = []
    for d in definitions:
        if d.name not in live.loaded:
            continue
        subjects = live.alerts[live.alerts["alert"].eq(d.name)]
        shown = [n for n in subjects.columns if n in ("state", "value") or subjects[n].ne("").any()]
        blocks.append(_alert_block(d, subjects[shown], condition_text(d), snap))
    return _blocks(blocks)


def prometheus_only(definitions: tuple[AlertDefinition, ...]) -> list[str]:
    """The alerts the store does not evaluate (their readings are not in the stored samples,
    or they need kube-state-metrics or prices): only Prometheus shows them."""
    return [d.name for d in definitions if d.name not in KINDS]


def states_section(states: AlertStates, snap: Snapshot) -> list[Any]:
    if states.live is not None:
        return live_section(states.live, states.definitions, snap)
    return stored_section(states.stored, snap)


def alerts_now(data: DashboardData, snap: Snapshot, now_s: float) -> Any:
    """The "Alerts now" section, built once per data version (and per :data:`LIVE_TTL_S` of
    Prometheus' own alerts) and kept in the snapshot's memo: its subject tables with their
    links are a few thousand components, 0.4-0.7 s to build at 2,000 GPUs."""
    states = alert_states(data, snap, now_s)
    key = ("alerts_now",) if states.live is None else ("alerts_now", int(now_s // LIVE_TTL_S))
    return snap.memo(key, lambda: _alerts_now(states, snap))


def _alerts_now(states: AlertStates, snap: Snapshot) -> Any:
    note = states.note
    if states.live is None:
        note += (
            f" At the last stored sample ({fmt.when(snap.marker.last_ts)}), with the rules' "
            "windows and for: durations. Only Prometheus evaluates the other rules: "
            f"{', '.join(prometheus_only(states.definitions))}."
        )
    if states.live is None and snap.empty:
        met: list[Any] = [empty_state(PAGE, "No GPU samples stored yet", NO_DATA_HINT)]
    else:
        met = states_section(states, snap)
    return section("Alerts now", *met, note=note)


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
    rules = grid.exportable(rules, grid.page_export("alert-rules", "Alert rules", snap, Filters()))
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
    return [
        alerts_now(data, snap, time.time()),
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
    """The stored alerts' section, built ahead of the first visit (Prometheus' own alerts are
    asked when a visit needs them)."""
    if not snap.empty and not data.settings.prometheus.url_is_set:
        alerts_now(data, snap, time.time())


dash.register_page(  # type: ignore[no-untyped-call]
    __name__, path=PATH, name=TITLE, title="gpuwatch · Alerts", order=6, layout=layout
)
