"""Grafana's dashboard JSON model, from plain panel and dashboard descriptions.

Pure: :func:`dashboard_json` turns a :class:`Dashboard` into the JSON model Grafana imports and
provisions (schema version 39: Grafana 10.4 and later). The panels themselves, built from the
recording rules, are in :mod:`gpuwatch.alerts.grafana`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 39
TAG = "gpuwatch"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_LABEL_VALUES = re.compile(r"^label_values\((?P<expr>.+),\s*(?P<label>[a-zA-Z_]\w*)\)$", re.S)

Steps = tuple[tuple[str, float | None], ...]
GREEN: Steps = (("green", None),)


@dataclass(frozen=True)
class Query:
    """One panel query; ``legend`` names its series, or its column in a table."""

    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # stat | timeseries | table
    queries: tuple[Query, ...]
    description: str
    unit: str = "short"
    width: int = 12
    height: int = 8
    stacked: bool = False
    legend: bool = True
    #: Threshold steps ``(color, from value)``; the first step starts at ``None``.
    steps: Steps = GREEN


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class Variable:
    """A multi-value template variable over ``label_values(selector, label)``."""

    name: str
    title: str
    selector: str
    label: str

    @property
    def query(self) -> str:
        return f"label_values({self.selector}, {self.label})"


@dataclass(frozen=True)
class Dashboard:
    file: str
    uid: str
    title: str
    description: str
    variables: tuple[Variable, ...]
    rows: tuple[Row, ...]


def _target(query: Query, ref_id: str, kind: str) -> dict[str, Any]:
    instant = kind == "table"
    target: dict[str, Any] = {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": query.expr,
        "instant": instant,
        "legendFormat": "__auto" if instant or not query.legend else query.legend,
        "range": not instant,
        "refId": ref_id,
    }
    if instant:
        target["format"] = "table"
    return target


def _field_config(panel: Panel) -> dict[str, Any]:
    steps = [{"color": color, "value": value} for color, value in panel.steps]
    defaults: dict[str, Any] = {
        "color": {"mode": "palette-classic" if panel.kind == "timeseries" else "thresholds"},
        "min": 0,
        "thresholds": {"mode": "absolute", "steps": steps},
        "unit": panel.unit,
    }
    if panel.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "fillOpacity": 30 if panel.stacked else 0,
            "lineWidth": 1,
            "showPoints": "never",
            "spanNulls": False,
            "stacking": {"group": "A", "mode": "normal" if panel.stacked else "none"},
            "thresholdsStyle": {"mode": "line" if len(steps) > 1 else "off"},
        }
    return {"defaults": defaults, "overrides": []}


def _options(panel: Panel) -> dict[str, Any]:
    if panel.kind == "stat":
        return {
            "colorMode": "value",
            "graphMode": "area",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": "auto",
        }
    if panel.kind == "table":
        return {"cellHeight": "sm", "showHeader": True}
    legend = {"calcs": ["mean", "max"], "displayMode": "table", "placement": "right"}
    return {
        "legend": {**legend, "showLegend": panel.legend},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }


def _transformations(panel: Panel) -> list[dict[str, Any]]:
    if panel.kind != "table":
        return []
    names = {f"Value #{chr(65 + i)}": q.legend for i, q in enumerate(panel.queries)}
    if len(panel.queries) == 1:
        names = {"Value": panel.queries[0].legend}
    organize = {"excludeByName": {"Time": True}, "renameByName": names}
    return [{"id": "merge", "options": {}}, {"id": "organize", "options": organize}]


def _panel(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    return {
        "datasource": DATASOURCE,
        "description": panel.description,
        "fieldConfig": _field_config(panel),
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "id": panel_id,
        "options": _options(panel),
        "targets": [_target(q, chr(65 + i), panel.kind) for i, q in enumerate(panel.queries)],
        "title": panel.title,
        "transformations": _transformations(panel),
        "type": panel.kind,
    }


def _layout(rows: tuple[Row, ...]) -> list[dict[str, Any]]:
    """Rows one under the other; panels left to right, wrapping at Grafana's 24 columns."""
    out: list[dict[str, Any]] = []
    y = 0
    for row in rows:
        out.append(
            {
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "id": len(out) + 1,
                "panels": [],
                "title": row.title,
                "type": "row",
            }
        )
        y, x, line_h = y + 1, 0, 0
        for panel in row.panels:
            if x + panel.width > 24:
                y, x, line_h = y + line_h, 0, 0
            out.append(_panel(panel, len(out) + 1, x, y))
            x, line_h = x + panel.width, max(line_h, panel.height)
        y += line_h
    return out


_DATASOURCE_VARIABLE: dict[str, Any] = {
    "current": {},
    "hide": 0,
    "includeAll": False,
    "label": "Data source",
    "multi": False,
    "name": "datasource",
    "options": [],
    "query": "prometheus",
    "refresh": 1,
    "regex": "",
    "type": "datasource",
}


def _variable(variable: Variable) -> dict[str, Any]:
    return {
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "datasource": DATASOURCE,
        "definition": variable.query,
        "hide": 0,
        "includeAll": True,
        "label": variable.title,
        "multi": True,
        "name": variable.name,
        "options": [],
        "query": {"query": variable.query, "refId": "StandardVariableQuery"},
        "refresh": 2,
        "regex": "",
        "sort": 1,
        "type": "query",
    }


def dashboard_json(board: Dashboard) -> dict[str, Any]:
    """The Grafana JSON model of one dashboard."""
    link = {
        "asDropdown": False,
        "includeVars": True,
        "keepTime": True,
        "tags": [TAG],
        "title": "gpuwatch",
        "type": "dashboards",
    }
    return {
        "annotations": {"list": []},
        "description": board.description,
        "editable": True,
        "graphTooltip": 1,
        "id": None,
        "links": [link],
        "panels": _layout(board.rows),
        "refresh": "1m",
        "schemaVersion": SCHEMA_VERSION,
        "tags": [TAG],
        "templating": {"list": [_DATASOURCE_VARIABLE, *map(_variable, board.variables)]},
        "time": {"from": "now-24h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": board.title,
        "uid": board.uid,
        "version": 1,
    }


def render_json(boards: Sequence[Dashboard]) -> dict[str, str]:
    """File name → dashboard JSON text (stable: same dashboards, same text)."""
    return {
        board.file: json.dumps(dashboard_json(board), indent=2, ensure_ascii=False) + "\n"
        for board in boards
    }


def panel_queries(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(panel title, PromQL)`` of every query of a dashboard JSON model, in order."""
    return [
        (panel["title"], target["expr"])
        for panel in document["panels"]
        for target in panel.get("targets", [])
    ]


def variable_queries(document: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Template variable → ``(PromQL selector, label)`` of its ``label_values`` query."""
    found = {}
    for variable in document["templating"]["list"]:
        if variable["type"] == "query":
            match = _LABEL_VALUES.match(variable["definition"])
            if match is None:
                raise ValueError(f"variable {variable['name']} is not a label_values query")
            found[variable["name"]] = (match["expr"], match["label"])
    return found


def write_dashboards(out_dir: Path | str, files: Mapping[str, str]) -> list[Path]:
    """Write rendered dashboards into ``out_dir`` (created if missing); returns the paths."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in sorted(files):
        path = folder / name
        path.write_text(files[name], encoding="utf-8")
        written.append(path)
    return written
