"""A real Prometheus for tests: TSDB blocks built by promtool from OpenMetrics, or live scrapes."""

from __future__ import annotations

import math
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.binaries import require_binary
from tests.support.postgres import free_port

WINDOW_S = 2 * 3600


@dataclass(frozen=True)
class Series:
    metric: str
    labels: Mapping[str, str]
    points: Sequence[tuple[int, float]]  # (epoch seconds, value), ascending


def _labels(labels: Mapping[str, str]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{k}="{esc(v)}"' for k, v in sorted(labels.items()))


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def write_openmetrics(series: Iterable[Series], folder: Path) -> list[Path]:
    """One OpenMetrics file per 2-hour window (what promtool's block builder wants)."""
    folder.mkdir(parents=True, exist_ok=True)
    by_window: dict[int, dict[str, list[str]]] = {}
    for item in series:
        rendered = _labels(item.labels)
        for ts, value in item.points:
            family = by_window.setdefault(ts - ts % WINDOW_S, {}).setdefault(item.metric, [])
            family.append(f"{item.metric}{{{rendered}}} {_value(value)} {ts}")
    paths = []
    for window, families in sorted(by_window.items()):
        lines: list[str] = []
        for metric in sorted(families):
            lines.append(f"# TYPE {metric} gauge")
            lines.extend(families[metric])
        lines.append("# EOF")
        path = folder / f"window-{window}.om"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def build_blocks(openmetrics: Sequence[Path], tsdb: Path) -> None:
    promtool = require_binary("promtool", "prometheus")
    tsdb.mkdir(parents=True, exist_ok=True)
    for path in openmetrics:
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(path), str(tsdb)],
            check=True,
            capture_output=True,
            timeout=300,
        )


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def wait_until(check: object, what: str, timeout_s: float = 60.0, interval_s: float = 0.2) -> None:
    """Poll ``check()`` until it is true; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


class PrometheusProcess:
    """A Debian ``prometheus`` on 127.0.0.1 with its own data folder."""

    def __init__(
        self,
        tsdb: Path,
        config: str = "global: {}\n",
        port: int | None = None,
        flags: Sequence[str] = (),
    ) -> None:
        self.binary = require_binary("prometheus", "prometheus")
        self.tsdb = tsdb
        self.config_path = tsdb.parent / f"{tsdb.name}-prometheus.yml"
        self.config_path.write_text(config)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.flags = list(flags)

    def start(self) -> PrometheusProcess:
        self.process = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.tsdb}",
                "--storage.tsdb.retention.time=10y",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--log.level=warn",
                *self.flags,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_until(lambda: _ready(self.url) or self.process.poll() is not None, "Prometheus ready")  # type: ignore[union-attr]
        if self.process.poll() is not None:
            err = self.process.stderr.read().decode() if self.process.stderr else ""
            raise AssertionError(f"prometheus exited: {err[-2000:]}")
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.process = None


@contextmanager
def prometheus_with_blocks(series: Iterable[Series], folder: Path) -> Iterator[PrometheusProcess]:
    """Prometheus serving exactly ``series`` (imported as TSDB blocks)."""
    tsdb = folder / "tsdb"
    build_blocks(write_openmetrics(series, folder / "openmetrics"), tsdb)
    server = PrometheusProcess(tsdb).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder / "openmetrics", ignore_errors=True)
