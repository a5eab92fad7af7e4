"""The Alerts page asks Prometheus' rules API when ``prometheus.url`` is configured."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
import requests

from gpuwatch.alerts.live import LiveAlertsError, fetch_rules, parse_rules
from gpuwatch.app import views_store
from gpuwatch.app.views_store import _live
from gpuwatch.config import load_settings
from gpuwatch.config.http import HttpOptions
from gpuwatch.config.sections import PrometheusSettings

#: A rules API answer as Prometheus 2.x writes it: gpuwatch's group with one firing and one
#: pending alert, a rule of someone else's, and a recording rule.
ANSWER: dict[str, Any] = {
    "status": "success",
    "data": {
        "groups": [
            {
                "name": "gpuwatch",
                "rules": [
                    {"type": "recording", "name": "gpuwatch:gpu_util:ratio", "query": "..."},
                    {
                        "type": "alerting",
                        "name": "GPUAllocatedIdle",
                        "state": "firing",
                        "alerts": [
                            {
                                "labels": {
                                    "alertname": "GPUAllocatedIdle",
                                    "gpu": "GPU-1",
                                    "namespace": "ml",
                                    "pod": "trainer-0",
                                    "node": "gpu-node-1",
                                    "severity": "warning",
                                },
                                "state": "firing",
                                "activeAt": "2026-11-16T10:00:00Z",
                                "value": "1e-02",
                            },
                            {
                                "labels": {"gpu": "GPU-2", "namespace": "ml", "pod": "t-1"},
                                "state": "pending",
                                "activeAt": "2026-11-16T10:30:00.5Z",
                                "value": "0",
                            },
                        ],
                    },
                    {"type": "alerting", "name": "GPUXidError", "state": "inactive", "alerts": []},
                ],
            },
            {
                "name": "other",
                "rules": [
                    {"type": "alerting", "name": "NodeDown", "alerts": [{"state": "firing"}]}
                ],
            },
        ]
    },
}
NAMES = frozenset({"GPUAllocatedIdle", "GPUXidError", "GPUHighTemperature"})


def test_parse_keeps_gpuwatch_alerts_only() -> None:
    live = parse_rules(ANSWER, NAMES)
    assert live.loaded == {"GPUAllocatedIdle", "GPUXidError"}
    rows = live.alerts.to_dict("records")
    assert [(r["alert"], r["pod"], r["state"]) for r in rows] == [
        ("GPUAllocatedIdle", "trainer-0", "firing"),
        ("GPUAllocatedIdle", "t-1", "pending"),
    ]
    assert rows[0]["value"] == 0.01
    assert rows[0]["node"] == "gpu-node-1"
    # 2026-11-16T10:00:00Z in epoch seconds (`date -u -d 2026-11-16T10:00:00Z +%s`).
    assert rows[0]["active_since_ts"] == 1_794_823_200
    assert rows[1]["active_since_ts"] == 1_794_825_000.5


def test_parse_of_a_server_without_the_rules() -> None:
    live = parse_rules({"status": "success", "data": {"groups": []}}, NAMES)
    assert live.loaded == frozenset()
    assert live.alerts.empty


class _Handler(BaseHTTPRequestHandler):
    body = b""
    status = 200
    seen: list[str] = []  # noqa: RUF012

    def do_GET(self) -> None:
        tenant = self.headers.get("X-Scope-OrgID")
        line = f"{self.path} {self.headers.get('Authorization')}"
        type(self).seen.append(line + (f" tenant={tenant}" if tenant else ""))
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("Handler", (_Handler,), {"body": json.dumps(ANSWER).encode(), "seen": []})
    httpd = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()
    httpd.server_close()


def test_fetch_sends_headers_and_reads_the_answer(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    answer = fetch_rules(url, HttpOptions(bearer_token="x").session(), 5)
    assert parse_rules(answer, NAMES).loaded == {"GPUAllocatedIdle", "GPUXidError"}
    assert handler.seen == ["/api/v1/rules?type=alert Bearer x"]


def test_the_dashboard_asks_with_the_collector_s_tenant_and_authentication(
    server: tuple[str, type[_Handler]],
) -> None:
    url, handler = server
    prometheus = PrometheusSettings(url=url, tenant="gpu-team", bearer_token="t0k")
    states = _live(SimpleNamespace(settings=SimpleNamespace(prometheus=prometheus)), NAMES)
    assert not isinstance(states, str), states
    assert states.loaded == {"GPUAllocatedIdle", "GPUXidError"}
    assert handler.seen == ["/api/v1/rules?type=alert Bearer t0k tenant=gpu-team"]


def test_fetch_errors_are_one_line(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.status = 503
    with pytest.raises(LiveAlertsError, match=r"api/v1/rules answered HTTP 503$"):
        fetch_rules(url, requests.Session(), 5)
    handler.status, handler.body = 200, b"<html>"
    with pytest.raises(LiveAlertsError, match="did not answer JSON"):
        fetch_rules(url, requests.Session(), 5)
    with pytest.raises(LiveAlertsError, match=r"cannot connect to http://127\.0\.0\.1:9$"):
        fetch_rules("http://127.0.0.1:9", requests.Session(), 5)


def test_url_is_set_only_when_configured() -> None:
    assert not load_settings(environ={}).prometheus.url_is_set
    env = {"GPUWATCH_PROMETHEUS_URL": "http://prom:9090"}
    assert load_settings(environ=env).prometheus.url_is_set
    overrides = {"prometheus": {"url": "http://127.0.0.1:9090"}}
    assert load_settings(environ={}, overrides=overrides).prometheus.url_is_set


class _Snap:
    """Just what :func:`alert_states` reads of a snapshot when it asks Prometheus."""

    def memo(self, key: object, compute: Any, *, pin: bool = False) -> Any:
        return compute()


class _Data:
    def __init__(self, url: str | None) -> None:
        env = {"GPUWATCH_PROMETHEUS_URL": url} if url else {}
        self.settings = load_settings(environ=env)


def test_page_states_come_from_prometheus_when_it_has_the_rules(
    server: tuple[str, type[_Handler]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, handler = server
    monkeypatch.setattr(views_store, "stored_alerts", lambda data, snap: ["from the store"])
    states = views_store.alert_states(_Data(url), _Snap(), 0.0)  # type: ignore[arg-type]
    assert states.live is not None
    assert states.note == f"As Prometheus at {url} evaluates gpuwatch's rules now."
    assert set(states.live.alerts["pod"]) == {"trainer-0", "t-1"}
    handler.body = json.dumps({"status": "success", "data": {"groups": []}}).encode()
    states = views_store.alert_states(_Data(url), _Snap(), 0.0)  # type: ignore[arg-type]
    assert states.live is None
    assert states.stored == ("from the store",)
    assert (
        states.note == f"Evaluated from the stored samples ({url} has not loaded gpuwatch's rules)."
    )
    states = views_store.alert_states(_Data(None), _Snap(), 0.0)  # type: ignore[arg-type]
    assert states.note == "Evaluated from the stored samples (no prometheus.url is configured)."
    assert len(handler.seen) == 2
