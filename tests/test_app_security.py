"""The dashboard as `gpuwatch serve` serves it (waitress, a real process): security headers on
every response, 404 without a traceback for probing requests, no development routes, and the
optional authentication (basic, trusted proxy) with an open, empty health probe."""

from __future__ import annotations

import base64
import hashlib
import http.client
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuwatch.cli.main import cli
from gpuwatch.store.engine import make_engine, upgrade
from tests.support.postgres import free_port
from tests.support.prometheus import wait_until

PASSWORD = "c0rrect-h0rse:batt€ry"
PAGES = [
    "/",
    "/teams",
    "/cost",
    "/workloads",
    "/gpus",
    "/savings",
    "/reports",
    "/alerts",
    "/health",
]
PROBES = [
    "/_dash-component-suites/dash/../../etc/passwd",
    "/_dash-component-suites/dash/%2e%2e/%2e%2e/etc/passwd",
    "/_dash-component-suites/dash/..%2f..%2f..%2fetc%2fpasswd",
    "/_dash-component-suites/dash/deps/../../../../../../etc/passwd",
    "/_dash-component-suites/os/path.py",
    "/_dash-component-suites/gpuwatch/config/__init__.py",
    "/_dash-component-suites/no_such_package/x.js",
    "/_dash-component-suites/dash/no-such-file.js",
    "/_dash-component-suites/dash/",
    "/assets/../../gpuwatch.db",
]


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Server:
    port: int
    log: Path
    #: The ``gpuwatch serve`` process.
    pid: int = 0

    def get(self, path: str, headers: dict[str, str] | None = None) -> Reply:
        """``GET path`` exactly as written (no normalisation of ``..`` or escapes)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            found = {k.lower(): v for k, v in response.getheaders()}
            return Reply(response.status, found, response.read())
        finally:
            conn.close()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def _healthy(server: Server, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        pytest.fail(f"gpuwatch serve exited with {process.returncode}: {server.log_text()}")
    try:
        return server.get("/healthz").status == 200
    except OSError:
        return False


@contextmanager
def serving(
    folder: Path, extra_env: dict[str, str], extra_args: tuple[str, ...] = ()
) -> Iterator[Server]:
    """``gpuwatch serve`` on an empty migrated SQLite store, its stderr in a file."""
    db = folder / "gpuwatch.db"
    if not db.exists():
        engine = make_engine(f"sqlite:///{db}")
        upgrade(engine)
        engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}
    env |= {"GPUWATCH_DATABASE_URL": f"sqlite:///{db}", **extra_env}
    server = Server(free_port(), folder / f"serve-{len(list(folder.glob('*.log')))}.log")
    with server.log.open("wb") as log:
        args = ["serve", "--host", "127.0.0.1", "--port", str(server.port), *extra_args]
        process = subprocess.Popen(
            [sys.executable, "-m", "gpuwatch", *args],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: _healthy(server, process), "gpuwatch serve", 120)
        yield replace(server, pid=process.pid)
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("serve-open"), {}) as server:
        yield server


def _directives(policy: str) -> dict[str, list[str]]:
    parts = [p.split() for p in policy.split(";") if p.strip()]
    return {p[0]: p[1:] for p in parts}


def _inline_script_hashes(html: str) -> set[str]:
    """sha256 of every executable inline ``<script>`` of a page, as CSP names them."""
    found = set()
    html = re.sub(r"<!--.*?-->", "", html, flags=re.S)
    for attrs, body in re.findall(r"<script([^>]*)>(.*?)</script>", html, flags=re.S):
        if "src=" in attrs or "application/json" in attrs:
            continue
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        found.add(f"'sha256-{digest}'")
    return found


def test_every_response_carries_the_security_headers(open_server: Server) -> None:
    paths = [*PAGES, "/_dash-layout", "/_dash-dependencies", "/healthz", PROBES[0]]
    for path in paths:
        reply = open_server.get(path)
        assert reply.status in (200, 404), path
        assert reply.headers["x-frame-options"] == "DENY", path
        assert reply.headers["x-content-type-options"] == "nosniff", path
        assert reply.headers["referrer-policy"] == "no-referrer", path
        policy = _directives(reply.headers["content-security-policy"])
        assert policy["frame-ancestors"] == ["'none'"], path
        assert policy["default-src"] == ["'self'"], path
        assert policy["object-src"] == ["'none'"], path
        script = policy["script-src"]
        assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script, path


def test_the_policy_allows_exactly_the_inline_scripts_of_the_page(open_server: Server) -> None:
    reply = open_server.get("/")
    inline = _inline_script_hashes(reply.body.decode())
    assert inline, "Dash's page has inline scripts to allow"
    script = _directives(reply.headers["content-security-policy"])["script-src"]
    assert inline <= set(script)
    assert set(script) - inline == {"'self'"}


def test_probing_component_paths_answers_404_and_logs_no_traceback(open_server: Server) -> None:
    page = open_server.get("/").body.decode()
    (renderer,) = re.findall(r'src="(/_dash-component-suites/dash/dash-renderer/[^"]+)"', page)
    assert open_server.get(renderer).status == 200
    for path in PROBES:
        reply = open_server.get(path)
        assert reply.status == 404, path
        assert b"root:" not in reply.body and b"Traceback" not in reply.body, path
    log = open_server.log_text()
    assert "Traceback" not in log and "ERROR" not in log and "Exception" not in log, log


def test_development_routes_are_not_served(open_server: Server) -> None:
    for path in ("/_reload-hash", "/_alive_token", "/_dash-undo-redo"):
        assert open_server.get(path).status == 404, path
    for path in ("/_dash-layout", "/_dash-dependencies", "/_favicon.ico"):
        assert open_server.get(path).status == 200, path
    page = open_server.get("/").body.decode()
    (config,) = re.findall(r'<script id="_dash-config"[^>]*>(.*?)</script>', page, flags=re.S)
    assert '"ui": false' in config.replace('":false', '": false')
    assert "hot_reload" not in config


def test_the_health_probe_answers_ok_and_nothing_else(open_server: Server) -> None:
    reply = open_server.get("/healthz")
    assert (reply.status, reply.body) == (200, b"OK")
    assert reply.headers["content-type"].startswith("text/plain")


def _basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_basic_auth_asks_everyone_but_the_probe(tmp_path: Path) -> None:
    env = {
        "GPUWATCH_DASHBOARD__AUTH": "basic",
        "GPUWATCH_DASHBOARD__USERNAME": "finops",
        "GPUWATCH_DASHBOARD__PASSWORD": PASSWORD,
    }
    with serving(tmp_path, env) as server:
        refused = [
            {},
            _basic("finops", "wrong"),
            _basic("other", PASSWORD),
            _basic("finops", PASSWORD[:-1]),
            {"Authorization": "Bearer some-token"},
        ]
        for path in ("/", "/_dash-layout", "/_dash-dependencies", "/_favicon.ico"):
            for headers in refused:
                reply = server.get(path, headers)
                assert reply.status == 401, (path, headers)
                assert reply.headers["www-authenticate"].startswith('Basic realm="gpuwatch"')
                assert b"gw-" not in reply.body and b"_dash" not in reply.body
                assert reply.headers["x-frame-options"] == "DENY"
            assert server.get(path, _basic("finops", PASSWORD)).status == 200, path
        assert server.get("/healthz").body == b"OK"
        assert PASSWORD not in server.log_text()


def test_proxy_auth_needs_a_trusted_peer_and_a_user(tmp_path: Path) -> None:
    trusted = {
        "GPUWATCH_DASHBOARD__AUTH": "proxy",
        "GPUWATCH_DASHBOARD__TRUSTED_PROXIES": "[10.0.0.0/8, 127.0.0.1]",
    }
    with serving(tmp_path, trusted) as server:
        assert server.get("/").status == 403
        assert server.get("/", {"X-Forwarded-User": " "}).status == 403
        assert server.get("/", {"X-Forwarded-Email": "a@example.com"}).status == 403
        assert server.get("/", {"X-Forwarded-User": "alice"}).status == 200
        assert server.get("/_dash-layout", {"X-Forwarded-User": "alice"}).status == 200
        assert server.get("/healthz").status == 200
    elsewhere = dict(trusted, GPUWATCH_DASHBOARD__TRUSTED_PROXIES="[192.0.2.0/24]")
    with serving(tmp_path, elsewhere) as server:
        reply = server.get("/", {"X-Forwarded-User": "alice"})
        assert reply.status == 403 and b"_dash" not in reply.body
        assert server.get("/healthz").status == 200


def test_config_show_masks_the_dashboard_password(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("GPUWATCH_")]:
        monkeypatch.delenv(name)
    env = {
        "GPUWATCH_DASHBOARD__AUTH": "basic",
        "GPUWATCH_DASHBOARD__USERNAME": "finops",
        "GPUWATCH_DASHBOARD__PASSWORD": PASSWORD,
    }
    result = CliRunner().invoke(cli, ["config", "show"], env=env)
    assert result.exit_code == 0, result.output
    assert PASSWORD not in result.output
    assert "password: '***'" in result.output


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"GPUWATCH_DASHBOARD__AUTH": "basic"}, "dashboard.password"),
        ({"GPUWATCH_DASHBOARD__AUTH": "proxy"}, "dashboard.trusted_proxies"),
        ({"GPUWATCH_DASHBOARD__AUTH": "ldap"}, "dashboard.auth"),
    ],
)
def test_incomplete_auth_settings_are_a_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], names: str
) -> None:
    for name in [n for n in os.environ if n.startswith("GPUWATCH_")]:
        monkeypatch.delenv(name)
    env = {**env, "GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'gpuwatch.db'}"}
    result = CliRunner().invoke(cli, ["serve", "--port", str(free_port())], env=env)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and names in lines[0], result.output
