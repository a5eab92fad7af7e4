"""The gpuwatch alerts a Prometheus evaluates right now, from its rules API.

``GET /api/v1/rules?type=alert`` (Prometheus, Thanos Query and Ruler, Mimir) lists the alerting
rules the server has loaded, each with its firing and pending alerts: the same states and labels
as the ``ALERTS`` series, plus whether gpuwatch's rules are loaded at all. :func:`parse_rules` is
pure; :func:`fetch_rules` is the request.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd
import requests

RULES_PATH = "/api/v1/rules"
#: Labels shown for an alert's subject, where it carries them.
SUBJECT_LABELS = ("namespace", "pod", "node", "gpu", "modelName", "job", "instance")
LIVE_COLUMNS = ("alert", *SUBJECT_LABELS, "state", "value", "active_since_ts")


class LiveAlertsError(Exception):
    """Prometheus did not answer the rules API; one line for the page."""


@dataclass(frozen=True)
class LiveAlerts:
    """gpuwatch's alerting rules as one Prometheus holds them.

    ``loaded``: the names among gpuwatch's that the server has loaded. ``alerts``: one row per
    firing or pending alert of those rules (:data:`LIVE_COLUMNS`).
    """

    loaded: frozenset[str]
    alerts: pd.DataFrame


def _instant(text: Any) -> float:
    if not isinstance(text, str) or not text:
        return float("nan")
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return float("nan")


def _value(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def parse_rules(answer: Mapping[str, Any], names: Collection[str]) -> LiveAlerts:
    """The alerts of the rules named ``names`` in a rules API answer."""
    loaded: set[str] = set()
    rows: list[dict[str, Any]] = []
    for group in answer.get("data", {}).get("groups", []) or []:
        for rule in group.get("rules", []) or []:
            name = rule.get("name")
            if rule.get("type") != "alerting" or name not in names:
                continue
            loaded.add(name)
            for alert in rule.get("alerts", []) or []:
                labels = alert.get("labels", {}) or {}
                rows.append(
                    {
                        "alert": name,
                        **{key: labels.get(key, "") for key in SUBJECT_LABELS},
                        "state": alert.get("state", ""),
                        "value": _value(alert.get("value")),
                        "active_since_ts": _instant(alert.get("activeAt")),
                    }
                )
    frame = pd.DataFrame(rows, columns=list(LIVE_COLUMNS))
    frame = frame.sort_values(["alert", "state", *SUBJECT_LABELS], kind="stable")
    return LiveAlerts(frozenset(loaded), frame.reset_index(drop=True))


def fetch_rules(url: str, session: requests.Session, timeout_s: float) -> dict[str, Any]:
    """The rules API's answer, asked through ``session`` (its headers, authentication and TLS
    trust); :class:`LiveAlertsError` when there is none."""
    try:
        response = session.get(f"{url}{RULES_PATH}", params={"type": "alert"}, timeout=timeout_s)
    except requests.exceptions.Timeout:
        raise LiveAlertsError(f"{url} did not answer within {timeout_s:g}s") from None
    except requests.exceptions.RequestException:
        raise LiveAlertsError(f"cannot connect to {url}") from None
    if response.status_code != 200:
        raise LiveAlertsError(f"{url}{RULES_PATH} answered HTTP {response.status_code}")
    try:
        answer = response.json()
    except ValueError:
        raise LiveAlertsError(f"{url}{RULES_PATH} did not answer JSON") from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise LiveAlertsError(f"{url}{RULES_PATH} did not answer with rules")
    return answer
