"""No secret ever printed: planted passwords, tokens and headers, grepped for in every output.

Every command (the test fails when a command is added without a case here) runs as a real
process with secrets planted in the database URL (URL-encoded and raw special characters), the
Prometheus URL's userinfo, the Prometheus headers and a kubeconfig token, on success and failure
paths, with and without ``--verbose``; none of their forms may appear on stdout or stderr.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from gpuwatch.cli.main import cli
from gpuwatch.domain.redact import mask_text, mask_url
from gpuwatch.report.weekly import iso_week_bounds
from tests.support import dcgm_fixture as fx
from tests.support.cli import run_gpuwatch
from tests.support.postgres import free_port
from tests.support.prometheus import PrometheusProcess, prometheus_with_blocks

WEEK = "2026-W46"
START, _ = iso_week_bounds(WEEK)
END = START + 6 * 3600
START_RFC3339, END_RFC3339 = "2026-11-09T00:00:00Z", "2026-11-09T06:00:00Z"

DB_PASSWORD = "PlantedDb@Pass:9/%x"  # raw @ : / % once decoded
DB_PASSWORD_ENCODED = "PlantedDb%40Pass%3A9%2F%25x"
PROM_PASSWORD = "PlantedProm/Pass"
PROM_PASSWORD_ENCODED = "PlantedProm%2FPass"
BEARER = "PlantedBearerToken123"
KUBE_TOKEN = "PlantedKubeToken456"
DASHBOARD_PASSWORD = "PlantedDash:Pass@77"
PLANTED = (
    DB_PASSWORD,
    DB_PASSWORD_ENCODED,
    "PlantedDb",
    PROM_PASSWORD,
    PROM_PASSWORD_ENCODED,
    "PlantedProm",
    BEARER,
    KUBE_TOKEN,
    DASHBOARD_PASSWORD,
    "PlantedDash",
)


# -- the mask itself, on hand-written cases ------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+psycopg://gw:S3cretP%40ss@db:5432/gw",
            "postgresql+psycopg://gw:***@db:5432/gw",
        ),
        ("postgresql+psycopg://gw:p@ss@db/gw", "postgresql+psycopg://gw:***@db/gw"),
        ("postgresql+psycopg://gw:a/b:c@d@db/gw", "postgresql+psycopg://gw:***@db/gw"),
        ("https://prom:pw@thanos:443/prefix", "https://prom:***@thanos:443/prefix"),
        ("postgresql+psycopg://gw@db/gw", "postgresql+psycopg://gw@db/gw"),
        ("sqlite:////var/lib/gw@x/gw.db", "sqlite:////var/lib/gw@x/gw.db"),
        (
            "postgresql://db/gw?password=pw&sslmode=require",
            "postgresql://db/gw?password=***&sslmode=require",
        ),
        ("http://prometheus:9090", "http://prometheus:9090"),
    ],
)
def test_urls_are_masked_whatever_their_password_holds(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_text_masks_urls_headers_and_known_values_in_any_form() -> None:
    message = (
        "failed postgresql+psycopg://gw:xy%40z1@db/gw with {'Authorization': 'Basic dXNlcjpwdw=='} "
        "and Bearer abcdefgh12345 then the value xy@z1 and hunter 22 and hunter%2022"
    )
    assert mask_text(message, ["xy%40z1", "hunter 22"]) == (
        "failed postgresql+psycopg://gw:***@db/gw with {'Authorization': 'Basic ***'} "
        "and Bearer *** then the value *** and *** and ***"
    )


def test_short_known_values_are_masked_only_where_their_place_says_so() -> None:
    assert mask_text("gpu at https://u:gpu@h/ used", ["gpu"]) == "gpu at https://u:***@h/ used"


# -- every command, as a process ------------------------------------------------------------------


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    folder = tmp_path_factory.mktemp("prom-secrets")
    with prometheus_with_blocks(fx.series(START, END), folder) as prom:
        yield prom


@pytest.fixture
def planted_env(
    postgres_server: str, prometheus: PrometheusProcess, tmp_path: Path
) -> dict[str, str]:
    name = f"gw_secrets_{os.getpid()}_{time.monotonic_ns()}"
    admin = create_engine(f"{postgres_server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    host = postgres_server.split("@", 1)[1]
    prom_host = prometheus.url.split("://", 1)[1]
    kubeconfig = tmp_path / "kubeconfig"
    server = f"http://127.0.0.1:{free_port()}"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        f"users: [{{name: u, user: {{token: {KUBE_TOKEN}}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "GPUWATCH_DATABASE_URL": f"postgresql+psycopg://postgres:{DB_PASSWORD_ENCODED}@{host}/{name}",
        "GPUWATCH_PROMETHEUS_URL": f"http://promuser:{PROM_PASSWORD_ENCODED}@{prom_host}",
        "GPUWATCH_PROMETHEUS__HEADERS": f'{{"Authorization": "Bearer {BEARER}"}}',
        "GPUWATCH_PROMETHEUS__RETRIES": "0",
        "GPUWATCH_KUBERNETES__RETRIES": "0",
        "GPUWATCH_KUBECONFIG": str(kubeconfig),
        "GPUWATCH_CLUSTER": "secrets",
        "GPUWATCH_DASHBOARD__AUTH": "basic",
        "GPUWATCH_DASHBOARD__USERNAME": "viewer",
        "GPUWATCH_DASHBOARD__PASSWORD": DASHBOARD_PASSWORD,
    }


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Only the planted environment, nothing inherited."""
    return run_gpuwatch(*args, env=env, cwd=cwd, inherit_env=False)


def _serve_once(args: list[str], env: dict[str, str], cwd: Path, url: str) -> tuple[int, str]:
    """Start a server command, wait until ``url`` answers, stop it; its exit and output."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuwatch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=cwd,
    )
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.2)  # polling a server's readiness, not synchronising on time
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, out


def _command_paths(group: object, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    import click

    if not isinstance(group, click.Group):
        return {prefix}
    return {
        path
        for name, sub in group.commands.items()
        for path in _command_paths(sub, (*prefix, name))
    }


#: (command path, arguments, expected exit status); {tmp} is the test's folder.
CASES: list[tuple[tuple[str, ...], list[str], int]] = [
    (("config", "show"), ["config", "show"], 0),
    (("config", "check"), ["config", "check"], 0),
    (("db", "upgrade"), ["-v", "db", "upgrade"], 0),
    (("db", "current"), ["db", "current"], 0),
    (("collect",), ["-v", "collect", "--start", START_RFC3339, "--end", END_RFC3339], 1),
    (
        ("collect",),
        ["collect", "--no-kubernetes", "--start", START_RFC3339, "--end", END_RFC3339],
        0,
    ),
    (("db", "rollup"), ["db", "rollup"], 0),
    (("db", "compact"), ["db", "compact"], 0),
    (("db", "leases"), ["-v", "db", "leases"], 0),
    (("report", "weekly"), ["report", "weekly", "--week", WEEK], 0),
    (
        ("recommend",),
        ["-v", "recommend", "--start", START_RFC3339, "--end", END_RFC3339, "--format", "json"],
        0,
    ),
    (
        ("health",),
        ["-v", "health", "--start", START_RFC3339, "--end", END_RFC3339, "--format", "json"],
        0,
    ),
    *(
        ((name,), ["-v", name, "--start", START_RFC3339, "--end", END_RFC3339, "--format=json"], 0)
        for name in ("queues", "capacity")
    ),
    (("alerts", "render"), ["alerts", "render", "--out-dir", "{tmp}/alerts"], 0),
    (("dashboards", "render"), ["dashboards", "render", "--out-dir", "{tmp}/dashboards"], 0),
    (("demo",), ["demo", "--no-serve", "--days", "1", "--step", "1h", "--db", "{tmp}/demo.db"], 0),
]
SERVERS: list[tuple[tuple[str, ...], list[str], str]] = [
    (("serve",), ["-v", "serve", "--port", "{port}"], "http://127.0.0.1:{port}/healthz"),
    (
        ("simulate", "exporter"),
        ["simulate", "exporter", "--port", "{port}"],
        "http://127.0.0.1:{port}/metrics",
    ),
    (
        ("simulate", "apiserver"),
        ["simulate", "apiserver", "--port", "{port}"],
        "http://127.0.0.1:{port}/api/v1/nodes",
    ),
]


def test_every_command_has_a_planted_secret_case() -> None:
    covered = {path for path, _, _ in CASES} | {path for path, _, _ in SERVERS}
    assert _command_paths(cli) == covered


def _assert_clean(what: str, output: str) -> None:
    leaked = [secret for secret in PLANTED if secret in output]
    assert not leaked, f"{what} printed {leaked}:\n{output}"


@pytest.mark.postgres
def test_no_command_prints_a_planted_secret(planted_env: dict[str, str], tmp_path: Path) -> None:
    for _path, args, status in CASES:
        argv = [arg.format(tmp=tmp_path) for arg in args]
        result = _run(argv, planted_env, tmp_path)
        what = "gpuwatch " + " ".join(argv)
        assert result.returncode == status, f"{what}: {result.returncode}\n{result.stderr}"
        _assert_clean(what, result.stdout + result.stderr)
    for _path, args, url in SERVERS:
        port = free_port()
        argv = [arg.format(port=port) for arg in args]
        status, out = _serve_once(argv, planted_env, tmp_path, url.format(port=port))
        _assert_clean("gpuwatch " + " ".join(argv), out)
        assert status in (0, -signal.SIGTERM, 128 + signal.SIGTERM), out


@pytest.mark.postgres
def test_failures_print_no_secret(planted_env: dict[str, str], tmp_path: Path) -> None:
    dead = free_port()
    failing = {
        **planted_env,
        "GPUWATCH_DATABASE_URL": (
            f"postgresql+psycopg://postgres:{DB_PASSWORD_ENCODED}@127.0.0.1:{dead}/gw"
        ),
    }
    for args in (["-v", "db", "upgrade"], ["report", "weekly"], ["-v", "config", "show"]):
        result = _run(args, failing, tmp_path)
        _assert_clean("gpuwatch " + " ".join(args), result.stdout + result.stderr)
    _run(["db", "upgrade"], planted_env, tmp_path)
    unreachable = {
        **planted_env,
        "GPUWATCH_PROMETHEUS_URL": f"http://promuser:{PROM_PASSWORD_ENCODED}@127.0.0.1:{dead}",
    }
    result = _run(["-v", "collect", "--no-kubernetes", "--start", "1h"], unreachable, tmp_path)
    assert result.returncode == 1
    assert f"http://promuser:***@127.0.0.1:{dead}" in result.stderr
    _assert_clean("gpuwatch collect (Prometheus unreachable)", result.stdout + result.stderr)
    bad = {**planted_env, "GPUWATCH_PROMETHEUS_URL": f"ftp://promuser:{PROM_PASSWORD_ENCODED}@x"}
    result = _run(["config", "check"], bad, tmp_path)
    assert result.returncode == 2
    _assert_clean("gpuwatch config check (bad Prometheus URL)", result.stdout + result.stderr)


@pytest.mark.postgres
def test_a_url_encoded_password_migrates(planted_env: dict[str, str], tmp_path: Path) -> None:
    result = _run(["db", "upgrade"], planted_env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "postgres:***@" in result.stdout
    assert "schema upgraded from empty" in result.stdout
