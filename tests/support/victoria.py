"""A real single-node VictoriaMetrics for tests, fed the same simulated DCGM series as the test
Prometheus (:mod:`tests.support.dcgm_fixture`) through its Prometheus text import."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.support.binaries import require_binary
from tests.support.postgres import free_port
from tests.support.prometheus import Series, _labels, _value, wait_until

#: Lines per import request.
_BATCH = 50_000


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b""


Identity = tuple[str, tuple[tuple[str, str], ...]]


def _identity(item: Series) -> Identity:
    """What names one series: its metric and its labels, in order."""
    return item.metric, tuple(sorted(item.labels.items()))


def _lines(series: Iterable[Series]) -> Iterator[str]:
    """Prometheus text lines with millisecond timestamps, as ``/api/v1/import/prometheus``
    takes them."""
    for item in series:
        rendered = _labels(item.labels)
        for ts, value in item.points:
            yield f"{item.metric}{{{rendered}}} {_value(value)} {ts * 1000}\n"


class VictoriaProcess:
    """Debian's ``victoria-metrics`` on 127.0.0.1 with its own data folder; ``flags`` are more
    command-line flags (limits, say)."""

    def __init__(self, folder: Path, flags: Sequence[str] = ()) -> None:
        self.binary = require_binary("victoria-metrics", "victoria-metrics")
        self.folder = folder
        self.flags = list(flags)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> VictoriaProcess:
        self.process = subprocess.Popen(
            [
                self.binary,
                f"-storageDataPath={self.folder}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=100y",
                "-search.disableCache",
                "-loggerLevel=ERROR",
                *self.flags,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_until(
            lambda: _get(f"{self.url}/health")[0] == 200 or self.process.poll() is not None,  # type: ignore[union-attr]
            "VictoriaMetrics ready",
        )
        if self.process.poll() is not None:
            err = self.process.stderr.read().decode() if self.process.stderr else ""
            raise AssertionError(f"victoria-metrics exited: {err[-2000:]}")
        return self

    def load(self, series: Sequence[Series]) -> None:
        """Import ``series`` and wait until every one of them can be found, each registered once.

        VictoriaMetrics parses one import request in blocks on several workers at once: a series
        whose lines span two blocks may then be registered twice (two ids, one name), which a
        limit of series counts twice. Each series' first sample therefore goes alone, in its own
        request, before the rest; :meth:`_check_registered_once` shows it held."""
        for item in series:
            self._post("".join(_lines([Series(item.metric, item.labels, item.points[:1])])))
        batch: list[str] = []
        for line in _lines(series):
            batch.append(line)
            if len(batch) >= _BATCH:
                self._post("".join(batch))
                batch = []
        if batch:
            self._post("".join(batch))
        _get(f"{self.url}/internal/force_flush")
        first = min(ts for item in series for ts, _ in item.points[:1])
        last = max(ts for item in series for ts, _ in item.points[-1:])
        wanted = len({_identity(s) for s in series if s.points})
        query = urllib.parse.urlencode({"match[]": '{__name__=~".+"}', "start": first, "end": last})

        def loaded() -> bool:
            status, body = _get(f"{self.url}/api/v1/series?{query}")
            return status == 200 and len(json.loads(body)["data"]) == wanted

        wait_until(loaded, f"{wanted} series imported into VictoriaMetrics", timeout_s=120)
        self._check_registered_once(series)

    def _check_registered_once(self, series: Sequence[Series]) -> None:
        """Each UTC day's count of series ids (``/api/v1/status/tsdb``) is the number of series
        with a sample that day."""
        days: dict[str, set[Identity]] = {}
        for item in series:
            key = _identity(item)
            for day in {time.strftime("%Y-%m-%d", time.gmtime(ts)) for ts, _ in item.points}:
                days.setdefault(day, set()).add(key)
        for day, keys in sorted(days.items()):
            status, body = _get(f"{self.url}/api/v1/status/tsdb?date={day}")
            assert status == 200, (status, body[:200])
            total = json.loads(body)["data"]["totalSeries"]
            assert total == len(keys), f"{day}: {total} series ids for {len(keys)} series"

    def _post(self, text: str) -> None:
        request = urllib.request.Request(
            f"{self.url}/api/v1/import/prometheus", data=text.encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            assert response.status == 204, response.status

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.process = None


@contextmanager
def victoria_with(
    series: Sequence[Series], folder: Path, flags: Sequence[str] = ()
) -> Iterator[VictoriaProcess]:
    """VictoriaMetrics serving exactly ``series``."""
    server = VictoriaProcess(folder / "victoria-data", flags).start()
    try:
        server.load(series)
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder / "victoria-data", ignore_errors=True)


def restarted(server: VictoriaProcess, flags: Sequence[str]) -> VictoriaProcess:
    """``server`` started again on its data with ``flags`` instead (a limit set after the import,
    which the import's own checks would hit)."""
    server.stop()
    server.flags = list(flags)
    return server.start()
