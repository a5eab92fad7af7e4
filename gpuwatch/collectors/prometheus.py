"""The Prometheus source: runs the catalogue's queries for one page, with retries (I/O only)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import requests
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from gpuwatch.collectors.promql import Catalogue

log = logging.getLogger(__name__)

#: Points per query_range request stay under Prometheus's 11,000-point limit.
MAX_POINTS = 10_000


class PrometheusError(Exception):
    """Prometheus could not answer, after retries; one line for the user."""


def _transient(exc: Exception) -> bool:
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return True
    if isinstance(exc, PrometheusApiClientException):
        text = str(exc)
        return any(f"HTTP Status Code {code}" in text for code in (429, 500, 502, 503, 504))
    return False


def _describe(exc: Exception) -> str:
    if isinstance(exc, requests.exceptions.ConnectionError):
        reason = str(exc)
        if "Connection refused" in reason:
            return "connection refused"
        return "cannot connect"
    if isinstance(exc, requests.exceptions.Timeout):
        return "timed out"
    text = str(exc)
    return text.split(" (b'", maxsplit=1)[0][:200]


class PrometheusSource:
    """Reads DCGM series from one Prometheus (or Thanos Query / Mimir) endpoint."""

    def __init__(
        self,
        url: str,
        catalogue: Catalogue,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url
        self.catalogue = catalogue
        self.retries = retries
        self.backoff_s = backoff_s
        self._sleep = sleep
        # No hidden urllib3 retries: ours, in _call, are explicit, logged and bounded.
        self._client = PrometheusConnect(
            url=url,
            headers=dict(headers or {}),
            timeout=int(max(1, timeout_s)),
            retry=Retry(total=0, raise_on_status=False),
        )

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        attempts = self.retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return call()
            except (requests.exceptions.RequestException, PrometheusApiClientException) as exc:
                if not _transient(exc) or attempt == attempts:
                    raise PrometheusError(
                        f"Prometheus at {self.url} failed {what} after {attempt} "
                        f"attempt{'s' if attempt > 1 else ''}: {_describe(exc)}"
                    ) from None
                delay = self.backoff_s * 2 ** (attempt - 1)
                log.info("%s to Prometheus failed (%s); retrying in %.1fs", what, exc, delay)
                self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def fetch_page(self, start_ts: int, end_ts: int, step_s: int) -> dict[str, list[Any]]:
        """Every field's series on the grid instants ``start_ts <= t < end_ts``."""
        last = end_ts - step_s
        if last < start_ts:
            return {}
        results: dict[str, list[Any]] = {}
        for field, query in self.catalogue.queries(step_s).items():
            results[field] = []
            chunk_start = start_ts
            while chunk_start <= last:
                chunk_end = min(last, chunk_start + (MAX_POINTS - 1) * step_s)
                results[field].extend(self._range(query, chunk_start, chunk_end, step_s))
                chunk_start = chunk_end + step_s
        return results

    def _range(self, query: str, start_ts: int, end_ts: int, step_s: int) -> list[Any]:
        start = datetime.fromtimestamp(start_ts, tz=UTC)
        end = datetime.fromtimestamp(end_ts, tz=UTC)
        result: list[Any] = self._call(
            "a range query",
            lambda: self._client.custom_query_range(query, start, end, f"{step_s}s"),
        )
        return result

    def check(self) -> None:
        """Fail early, with the reason, when Prometheus cannot be reached."""
        self._call("the readiness query", lambda: self._client.custom_query("vector(1)"))
