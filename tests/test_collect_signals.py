"""SIGTERM and SIGINT end ``gpuwatch collect`` promptly wherever it waits, keeping what was
committed: real processes, a real Prometheus behind a proxy that stops answering at a chosen
page, and an API server that holds a list page open."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from gpuwatch.report.weekly import iso_week_bounds
from gpuwatch.simulate.apiserver import kubeconfig_for
from gpuwatch.store import writer
from gpuwatch.store.engine import make_engine
from tests.support import dcgm_fixture as fx
from tests.support.cli import run_gpuwatch
from tests.support.prometheus import PrometheusProcess, prometheus_with_blocks
from tests.support.stub_http import HOLD, Answer, StubServer, forward, pod_list

pytestmark = pytest.mark.prometheus

START, _ = iso_week_bounds("2026-W46")
DATA_END = START + 86400
PAGE_S = 3600
#: A safety net far above the 5 s a stop may take, far below a blocked request's timeout.
EXIT_DEADLINE_S = 60
#: The request timeout configured: without the stop reaching the request, nothing ends before it.
REQUEST_TIMEOUT = "10m"


def when(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    folder = tmp_path_factory.mktemp("signals-prometheus")
    with prometheus_with_blocks(fx.series(START, DATA_END), folder) as server:
        yield server


def _start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuwatch", *args],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _env(tmp_path: Path, prometheus_url: str, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        "HOME": str(home),
        "KUBECONFIG": "",
        "GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'gw.db'}",
        "GPUWATCH_PROMETHEUS_URL": prometheus_url,
        "GPUWATCH_PROMETHEUS__PAGE": "1h",
        "GPUWATCH_PROMETHEUS__TIMEOUT": REQUEST_TIMEOUT,
        "GPUWATCH_KUBERNETES__TIMEOUT": REQUEST_TIMEOUT,
        "GPUWATCH_CLUSTER": "lab",
        **extra,
    }
    assert run_gpuwatch("db", "upgrade", env=env).returncode == 0
    return env


def _store(env: dict[str, str]) -> dict[str, Any]:
    """What the store holds: samples, pods, and each source's watermark."""
    engine = make_engine(env["GPUWATCH_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            cluster = writer.ensure_cluster(conn, "lab")
            count = conn.execute(sa.text("SELECT count(*), max(ts) FROM gpu_samples")).one()
            pods = conn.execute(sa.text("SELECT count(*) FROM pods")).scalar_one()
            return {
                "samples": int(count[0]),
                "latest_ts": count[1],
                "pods": int(pods),
                "prometheus": writer.read_watermark(conn, cluster, "prometheus"),
                "kubernetes": writer.read_watermark(conn, cluster, "kubernetes"),
            }
    finally:
        engine.dispose()


def _expected_samples(start: int, end: int) -> int:
    return sum(len(fx.expected_grid(start, end, unit)) for unit in fx.units())


def _stop(process: subprocess.Popen[str], held: threading.Event, signum: int) -> tuple[str, str]:
    """Wait until the server holds a request of ``process``, signal it, and collect its output
    (the deadline is a safety net, far above the stop's own bound)."""
    try:
        assert held.wait(120), "the collector never reached the held request"
        assert process.poll() is None, process.communicate()
        process.send_signal(signum)
        return process.communicate(timeout=EXIT_DEADLINE_S)
    finally:
        process.kill()
        process.wait()


def _proxy(prometheus: PrometheusProcess, hold_from_ts: int) -> StubServer:
    """Prometheus as it is, except that a range query from ``hold_from_ts`` on never answers."""

    def answer(path: str, query: dict[str, str]) -> Answer:
        if path.endswith("/query_range") and float(query.get("start", 0)) >= hold_from_ts:
            return HOLD
        return forward(prometheus.url, path, query)

    return StubServer(answer)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_an_unanswered_page_ends_collect_keeping_the_pages_before(
    prometheus: PrometheusProcess, tmp_path: Path, signum: signal.Signals
) -> None:
    cut = START + 2 * PAGE_S
    with _proxy(prometheus, cut) as proxy:
        env = _env(tmp_path, proxy.url)
        process = _start("collect", "--no-kubernetes", "--start", when(START),
                         "--end", when(START + 6 * PAGE_S), env=env)  # fmt: skip
        _out, err = _stop(process, proxy.held, signum)
    assert process.returncode == 128 + signum, err
    lines = err.strip().splitlines()
    assert lines == [
        f"gpuwatch: interrupted by {signum.name}: 2 of 6 pages written "
        f"({_expected_samples(START, cut):,} samples from {when(START)} to {when(cut)}); "
        f"the next collect resumes at {when(cut)}"
    ]
    stored = _store(env)
    assert stored["prometheus"] == cut
    assert stored["samples"] == _expected_samples(START, cut)
    assert stored["latest_ts"] < cut


def test_sigterm_during_a_follow_round_ends_it_cleanly_after_the_last_write(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    cut = START + 2 * PAGE_S
    with _proxy(prometheus, cut) as proxy:
        env = _env(tmp_path, proxy.url)
        process = _start("collect", "--follow", "--no-kubernetes", "--start", when(START), env=env)
        out, err = _stop(process, proxy.held, signal.SIGTERM)
    assert process.returncode == 0, err
    assert out.startswith(f"collected {_expected_samples(START, cut):,} samples ")
    assert f"from {when(START)} to {when(cut)} (2 pages)" in out
    assert "collect: stopped by SIGTERM during a round: 2 of " in err
    assert f"the next collect resumes at {when(cut)}" in err
    assert _store(env)["prometheus"] == cut


def _first_line(process: subprocess.Popen[str]) -> threading.Event:
    """Set once ``process`` has written its first line on standard output."""
    seen = threading.Event()

    def read() -> None:
        if process.stdout is not None and process.stdout.readline():
            seen.set()

    threading.Thread(target=read, daemon=True).start()
    return seen


def test_sigterm_between_follow_rounds_exits_0(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    env = _env(tmp_path, prometheus.url, GPUWATCH_PROMETHEUS__PAGE="1d")
    process = _start("collect", "--follow", "--interval", "1h", "--no-kubernetes",
                     "--start", when(START), env=env)  # fmt: skip
    _out, err = _stop(process, _first_line(process), signal.SIGTERM)
    assert process.returncode == 0, err
    assert "during a round" not in err
    last = [
        list(fx.grid(START, DATA_END, u))[-1] + (u.offset_s > 0) * fx.STEP_S for u in fx.units()
    ]
    assert _store(env)["prometheus"] == max(last) + fx.STEP_S


def test_sigterm_during_kubernetes_pagination_ends_collect_and_writes_nothing(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    env = _env(tmp_path, prometheus.url)
    done = run_gpuwatch("collect", "--no-kubernetes", "--start", when(START),
                "--end", when(START + PAGE_S), env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    before = _store(env)
    assert before["samples"] == _expected_samples(START, START + PAGE_S)

    def answer(_path: str, query: dict[str, str]) -> Answer:
        return HOLD if query.get("continue") else (200, pod_list("page-2"))

    with StubServer(answer) as api:
        kubeconfig = kubeconfig_for(api.url, tmp_path / "kubeconfig")
        env["GPUWATCH_KUBECONFIG"] = str(kubeconfig)
        process = _start("collect", "--start", when(START + PAGE_S),
                         "--end", when(START + 2 * PAGE_S), env=env)  # fmt: skip
        _out, err = _stop(process, api.held, signal.SIGTERM)
    assert process.returncode == 143, err
    assert err.strip().splitlines() == ["gpuwatch: interrupted by SIGTERM: nothing was written"]
    assert _store(env) == before
    assert [path for path, _ in api.requests] == ["/api/v1/pods", "/api/v1/pods"]
