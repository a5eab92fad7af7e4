"""Every remote loop of ``collect`` ends, and its time and progress are honest.

Kubernetes lists against a hostile API server (real ``kubernetes`` client, real HTTP on
127.0.0.1) that never stops paginating; windows, resume points and empty collections against a
real Prometheus holding a day of simulated DCGM series.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from gpuwatch.collectors.kube import KubeError, KubeSource
from gpuwatch.report.weekly import iso_week_bounds
from gpuwatch.simulate.apiserver import kubeconfig_for
from gpuwatch.store import writer
from gpuwatch.store.engine import make_engine
from tests.support import dcgm_fixture as fx
from tests.support.cli import run_gpuwatch
from tests.support.postgres import free_port
from tests.support.prometheus import PrometheusProcess, prometheus_with_blocks
from tests.support.stub_http import HOLD, Answer, StubServer, pod_list

# the client builds its ApiException with urllib3's deprecated getheaders()
pytestmark = pytest.mark.filterwarnings("ignore:HTTPResponse.getheader:DeprecationWarning")

START, _ = iso_week_bounds("2026-W46")
DATA_END = START + 86400  # the fixture's series cover [START, DATA_END)
NOW_TS = 1794830400


def when(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _same_token(_path: str, _query: dict[str, str]) -> Answer:
    return 200, pod_list("always-the-same")


def _fresh_tokens() -> object:
    counter = itertools.count()

    def answer(_path: str, _query: dict[str, str]) -> Answer:
        return 200, pod_list(f"token-{next(counter)}")

    return answer


def _source(url: str, tmp_path: Path, **kwargs: float) -> KubeSource:
    path = kubeconfig_for(url, tmp_path / "kubeconfig")
    settings = {"timeout_s": 30.0, "retries": 0, "page_size": 2, "base_delay_s": 0.0} | kwargs
    return KubeSource(str(path), None, **settings)  # type: ignore[arg-type]


# -- Kubernetes lists ------------------------------------------------------------------------


def test_a_repeated_continue_token_is_an_error(tmp_path: Path) -> None:
    with (
        StubServer(_same_token) as api,
        _source(api.url, tmp_path) as kube,
        pytest.raises(KubeError) as info,
    ):
        kube.snapshot(NOW_TS)
    assert str(info.value) == (
        f"Kubernetes API at {api.url} repeated a continue token listing pods (page 2): "
        "the list would never end"
    )
    assert len(api.requests) == 2


def test_a_list_that_never_ends_stops_at_the_page_limit(tmp_path: Path) -> None:
    with (
        StubServer(_fresh_tokens()) as api,  # type: ignore[arg-type]
        _source(api.url, tmp_path, list_max_pages=5) as kube,
        pytest.raises(KubeError) as info,
    ):
        kube.snapshot(NOW_TS)
    assert str(info.value) == (
        f"Kubernetes API at {api.url} still had more pods after 5 pages of 2 "
        "(kubernetes.list_max_pages): the list was not read"
    )
    assert len(api.requests) == 5


def test_a_list_past_its_wall_time_fails(tmp_path: Path) -> None:
    def answer(_path: str, query: dict[str, str]) -> Answer:
        return HOLD if query.get("continue") else (200, pod_list("second-page"))

    with StubServer(answer) as api:
        with (
            _source(api.url, tmp_path, list_timeout_s=1.0, timeout_s=600.0) as kube,
            pytest.raises(KubeError) as info,
        ):
            kube.snapshot(NOW_TS)
        assert api.held.is_set()
    assert str(info.value) == (
        f"Kubernetes API at {api.url} did not finish listing pods within 1s "
        "(kubernetes.list_timeout; 1 page read)"
    )


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        "HOME": str(home),
        "KUBECONFIG": "",
        "GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'gw.db'}",
        "GPUWATCH_PROMETHEUS_URL": f"http://127.0.0.1:{free_port()}",
        "GPUWATCH_CLUSTER": "lab",
    }
    env.update(extra)
    assert run_gpuwatch("db", "upgrade", env=env).returncode == 0
    return env


@pytest.mark.parametrize(
    ("answer", "extra", "expected"),
    [
        (_same_token, {}, "repeated a continue token listing pods (page 2)"),
        (
            _fresh_tokens(),
            {"GPUWATCH_KUBERNETES__LIST_MAX_PAGES": "4"},
            "still had more pods after 4 pages of 500 (kubernetes.list_max_pages)",
        ),
    ],
    ids=["same-token", "fresh-tokens"],
)
def test_collect_against_an_endless_list_ends_with_one_line(
    tmp_path: Path, answer: object, extra: dict[str, str], expected: str
) -> None:
    with StubServer(answer) as api:  # type: ignore[arg-type]
        kubeconfig = kubeconfig_for(api.url, tmp_path / "kubeconfig")
        env = _env(tmp_path, GPUWATCH_KUBECONFIG=str(kubeconfig), **extra)
        result = run_gpuwatch("collect", "--start", "2h", env=env)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"gpuwatch: Kubernetes API at {api.url} ")
    assert expected in lines[0]


# -- time and progress against a real Prometheus ---------------------------------------------


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    folder = tmp_path_factory.mktemp("bounds-prometheus")
    with prometheus_with_blocks(fx.series(START, DATA_END), folder) as server:
        yield server


def _prom_env(tmp_path: Path, prometheus: PrometheusProcess, **extra: str) -> dict[str, str]:
    return _env(tmp_path, GPUWATCH_PROMETHEUS_URL=prometheus.url, **extra)


def _watermark(env: dict[str, str]) -> int | None:
    engine = make_engine(env["GPUWATCH_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            return writer.read_watermark(conn, writer.ensure_cluster(conn, "lab"), "prometheus")
    finally:
        engine.dispose()


def _stored_end() -> int:
    """The end of the last step the fixture's samples are stored at (computed from the data)."""
    last = []
    for unit in fx.units():
        stamps = list(fx.grid(START, DATA_END, unit))
        last.append(stamps[-1] + (fx.STEP_S if unit.offset_s else 0))
    return max(last) + fx.STEP_S


@pytest.mark.prometheus
def test_an_end_in_the_future_is_clamped_and_the_resume_point_stays_at_the_data(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    env = _prom_env(tmp_path, prometheus)
    first = run_gpuwatch("collect", "--no-kubernetes", "--start", when(START),
                 "--end", "2030-01-01T00:00:00Z", env=env)  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "collect: --end 2030-01-01T00:00:00Z is in the future: collecting up to now" in (
        first.stderr
    )
    assert f"from {when(START)} to 2030" not in first.stdout
    assert _watermark(env) == _stored_end()
    again = run_gpuwatch("collect", "--no-kubernetes", env=env)
    assert again.returncode == 0, again.stderr
    assert f"from {when(_stored_end())} to " in again.stdout
    assert f"collect: no DCGM series in Prometheus at {prometheus.url} from " in again.stderr


def test_a_start_in_the_future_is_a_usage_error(tmp_path: Path) -> None:
    env = _env(tmp_path)
    result = run_gpuwatch("collect", "--no-kubernetes", "--start", "2031-01-01T00:00:00Z", env=env)
    assert result.returncode == 2
    assert "--start" in result.stderr and "2031-01-01T00:00:00Z is in the future" in result.stderr
    assert _watermark(env) is None


@pytest.mark.prometheus
def test_a_resume_point_in_the_future_is_repaired(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    env = _prom_env(tmp_path, prometheus)
    half = START + 12 * 3600
    first = run_gpuwatch(
        "collect", "--no-kubernetes", "--start", when(START), "--end", when(half), env=env
    )
    assert first.returncode == 0, first.stderr
    future = int(datetime(2030, 1, 1, tzinfo=UTC).timestamp())
    engine = make_engine(env["GPUWATCH_DATABASE_URL"])
    with engine.begin() as conn:  # what an older version left behind
        conn.execute(sa.text("UPDATE collection_state SET watermark_ts = :t"), {"t": future})
    engine.dispose()
    resumed = run_gpuwatch("collect", "--no-kubernetes", "--end", when(DATA_END), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "collect: the stored resume point 2030-01-01T00:00:00Z is in the future; resuming after "
        f"the last stored sample, at {when(half)}"
    ) in resumed.stderr
    assert f"from {when(half)} to {when(DATA_END)}" in resumed.stdout
    assert not resumed.stdout.startswith("collected 0 samples")
    assert _watermark(env) == DATA_END


@pytest.mark.prometheus
def test_a_window_without_dcgm_series_is_said_and_not_an_error(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    env = _prom_env(tmp_path, prometheus)
    result = run_gpuwatch("collect", "--no-kubernetes", "--start", when(START - 2 * 86400),
                  "--end", when(START - 86400), env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("collected 0 samples")
    assert (
        f"collect: no DCGM series in Prometheus at {prometheus.url} "
        f"from {when(START - 2 * 86400)} to {when(START - 86400)}"
    ) in result.stderr
    assert _watermark(env) is None


@pytest.mark.prometheus
def test_storing_nothing_where_prometheus_has_series_is_a_failure(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    env = _prom_env(tmp_path, prometheus, GPUWATCH_PROMETHEUS__LABELS__UUID="[no_such_label]")
    result = run_gpuwatch("collect", "--no-kubernetes", "--start", when(START),
                  "--end", when(START + 3600), env=env)  # fmt: skip
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == (
        f"gpuwatch: Prometheus at {prometheus.url} has DCGM series from {when(START)} to "
        f"{when(START + 3600)} but none was stored: check prometheus.labels.uuid and "
        "prometheus.matchers"
    )
    assert _watermark(env) is None


def test_a_window_of_more_pages_than_allowed_is_a_usage_error(tmp_path: Path) -> None:
    env = _env(tmp_path, GPUWATCH_PROMETHEUS__MAX_PAGES="3", GPUWATCH_PROMETHEUS__PAGE="1h")
    result = run_gpuwatch("collect", "--no-kubernetes", "--start", when(START),
                  "--end", when(START + 6 * 3600), env=env)  # fmt: skip
    assert result.returncode == 2
    assert "is 6 pages of 1h, more than prometheus.max_pages (3)" in result.stderr
    assert _watermark(env) is None


@pytest.mark.prometheus
def test_an_empty_window_says_there_is_nothing_new(
    prometheus: PrometheusProcess, tmp_path: Path
) -> None:
    env = _prom_env(tmp_path, prometheus)
    hour = START + 3600
    first = run_gpuwatch(
        "collect", "--no-kubernetes", "--start", when(START), "--end", when(hour), env=env
    )
    assert first.returncode == 0, first.stderr
    again = run_gpuwatch("collect", "--no-kubernetes", "--end", when(hour), env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("collected 0 samples")
    assert (
        f"collect: nothing new to collect: the window ends where it starts, at {when(hour)}"
        in again.stderr
    )
