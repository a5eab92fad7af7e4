"""The Prometheus source: runs the catalogue's queries for one page, with retries (I/O only).

The connection (URL, headers, no hidden retries) is a ``prometheus_api_client.PrometheusConnect``,
which runs the readiness check. Range queries go through the same ``requests`` session but read
the answer's bytes themselves: they are asked for uncompressed (compressing a page of a large
fleet costs Prometheus more time than sending it) and decoded straight into arrays by
:mod:`gpuwatch.collectors.promjson`, never into Python lists.

Every request has a timeout, and the requests of one page, retries included, have
``page_timeout_s`` in all. They run in a daemon thread (:mod:`gpuwatch.collectors.stop`) while
the calling thread waits on their answers or on the stop request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from functools import partial
from typing import Any

import orjson
import requests
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.exceptions import HTTPError as TransportError
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from gpuwatch.collectors import promjson
from gpuwatch.collectors.promjson import Matrix, MatrixError
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.collectors.retry import RetriesExhausted, RetryPolicy
from gpuwatch.collectors.stop import NEVER, Stop, Worker

log = logging.getLogger(__name__)

#: Points per query_range request stay under Prometheus's 11,000-point limit.
MAX_POINTS = 10_000
_TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
_DONE: Future[bytes] = Future()
#: Requests sent ahead of the answer being decoded.
_AHEAD = 2


class PrometheusError(Exception):
    """Prometheus could not answer, after retries; one line for the user."""


class _StatusError(Exception):
    """A non-200 answer: its status and Prometheus's error text."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP status {status}" + (f": {text}" if text else ""))
        self.status = status


_FAILURES = (
    requests.exceptions.RequestException,
    TransportError,
    _StatusError,
    MatrixError,
    PrometheusApiClientException,
)


def _transient(exc: Exception) -> bool:
    if isinstance(exc, _StatusError):
        return exc.status in _TRANSIENT_STATUS
    if isinstance(exc, PrometheusApiClientException):
        return any(f"HTTP Status Code {code}" in str(exc) for code in _TRANSIENT_STATUS)
    return isinstance(
        exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout | TransportError
    )


def _describe(exc: Exception) -> str:
    if isinstance(exc, requests.exceptions.ConnectionError):
        return "connection refused" if "Connection refused" in str(exc) else "cannot connect"
    if isinstance(exc, requests.exceptions.Timeout | ReadTimeoutError):
        return "timed out"
    if isinstance(exc, TransportError):
        return "connection broken while reading the answer"
    return str(exc).split(" (b'", maxsplit=1)[0][:200]


def _chunks(query: str, first_ts: int, last_ts: int, step_s: int) -> list[dict[str, str]]:
    """``query_range`` parameters covering ``first_ts..last_ts``, ``MAX_POINTS`` at a time."""
    out = []
    start = first_ts
    while start <= last_ts:
        end = min(last_ts, start + (MAX_POINTS - 1) * step_s)
        out.append({"query": query, "start": str(start), "end": str(end), "step": f"{step_s}s"})
        start = end + step_s
    return out


def _error_text(body: bytes) -> str:
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:200].decode(errors="replace").strip()
    return str(answer.get("error", "")) if isinstance(answer, dict) else ""


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
        page_timeout_s: float = 600.0,
        stop: Stop = NEVER,
    ) -> None:
        self.url = url
        self.catalogue = catalogue
        self.retries = retries
        self.backoff_s = backoff_s
        self.timeout_s = max(1.0, float(timeout_s))
        self._sleep = sleep
        self.page_timeout_s = page_timeout_s
        self.stop = stop
        # No hidden urllib3 retries: ours, in _call, are explicit, logged and bounded.
        self._session = requests.Session()
        self._client = PrometheusConnect(
            url=url,
            headers=dict(headers or {}),
            timeout=int(self.timeout_s),
            retry=Retry(total=0, raise_on_status=False),
            session=self._session,
        )
        self._range_headers = {**dict(headers or {}), "Accept-Encoding": "identity"}

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        stop = None if self.stop is NEVER else self.stop
        policy = RetryPolicy(self.retries, self.backoff_s, sleep=self._sleep, stop=stop)
        try:
            return policy.call(f"{what} to Prometheus", call, _transient, _FAILURES)
        except RetriesExhausted as done:
            raise PrometheusError(
                f"Prometheus at {self.url} failed {what} after {done.attempts} "
                f"attempt{'s' if done.attempts > 1 else ''}: {_describe(done.failure)}"
            ) from None

    def _get(self, path: str, params: Mapping[str, str]) -> bytes:
        """The body of a 200 answer to ``GET path``; raises on any other status."""
        url = f"{self.url.rstrip('/')}/api/v1/{path}"
        with self._session.get(
            url, params=params, headers=self._range_headers, timeout=self.timeout_s, stream=True
        ) as resp:
            body: bytes = resp.raw.read(decode_content=True)
            if resp.status_code != 200:
                raise _StatusError(resp.status_code, _error_text(body))
            return body

    def fetch_page(self, start_ts: int, end_ts: int, step_s: int) -> dict[str, Matrix]:
        """Every field's series on the grid instants ``start_ts <= t < end_ts``; the capacity
        fields on their own grid of multiples of ``C`` (:meth:`Catalogue.capacity_step_s`), from
        the last at or before the page's first instant to the first at or after its last one:
        the instants are the same whatever the page, so a sample's total never depends on the
        page (:func:`gpuwatch.collectors.dcgm.page_samples` says which instant a sample takes).

        The requests run one after the other in a thread of their own while the answers that
        came in are decoded here: Prometheus computes the next answer meanwhile.
        """
        last = end_ts - step_s
        if last < start_ts:
            return {}
        coarse_s = self.catalogue.capacity_step_s(step_s)
        coarse_first = start_ts - start_ts % coarse_s
        coarse_last = -(-last // coarse_s) * coarse_s
        wanted = [
            (field, chunk)
            for field, query in self.catalogue.queries(step_s).items()
            for chunk in _chunks(query, start_ts, last, step_s)
        ] + [
            (field, chunk)
            for field, query in self.catalogue.capacity_queries(step_s).items()
            for chunk in _chunks(query, coarse_first, coarse_last, coarse_s)
        ]
        parts: dict[str, list[Matrix]] = {field: [] for field, _ in wanted}
        deadline = time.monotonic() + self.page_timeout_s
        pool = Worker("gpuwatch-http")
        # At most _AHEAD answers wait undecoded: memory stays bounded on slow decoding.
        bodies: list[Future[bytes]] = []
        try:
            for index, (field, _) in enumerate(wanted):
                while len(bodies) < min(len(wanted), index + _AHEAD):
                    bodies.append(pool.submit(partial(self._range_body, wanted[len(bodies)][1])))
                body = self._wait(bodies[index], deadline)
                bodies[index] = _DONE  # the answer is not kept once decoded
                parts[field].append(self._decode(body))
        finally:
            pool.close()
        return {field: promjson.concat(matrices) for field, matrices in parts.items()}

    def _wait(self, answer: Future[bytes], deadline: float) -> bytes:
        try:
            return self.stop.wait_for(answer, max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise PrometheusError(
                f"Prometheus at {self.url} did not answer one page's queries within "
                f"{self.page_timeout_s:g}s (prometheus.page_timeout)"
            ) from None

    def _range_body(self, params: Mapping[str, str]) -> bytes:
        body: bytes = self._call("a range query", lambda: self._get("query_range", params))
        return body

    def _decode(self, body: bytes) -> Matrix:
        try:
            return promjson.decode(body)
        except MatrixError as exc:
            raise PrometheusError(
                f"Prometheus at {self.url} failed a range query: {_describe(exc)}"
            ) from None

    def check(self) -> None:
        """Fail early, with the reason, when Prometheus cannot be reached."""
        self._call("the readiness query", lambda: self._client.custom_query("vector(1)"))

    def has_series(self, start_ts: int, end_ts: int, step_s: int) -> bool:
        """Whether any DCGM series read every step has a reading that the grid instants
        ``start_ts <= t < end_ts`` cover (``(start_ts - step, last instant]``)."""
        last = end_ts - step_s
        if last < start_ts:
            return False
        fields = [f for f in self.catalogue.fields if not (f.capacity or f.nonzero_only)]
        span = f"[{last - start_ts + step_s}s]"
        query = " or ".join(
            f"last_over_time({self.catalogue.selector(f.metric)}{span})" for f in fields
        )
        params = {"query": f"count({query})", "time": str(last)}
        query_once = partial(self._get, "query", params)
        body = self.stop.run(lambda: self._call("a series query", query_once))
        result = orjson.loads(body).get("data", {}).get("result", [])
        return bool(result) and float(result[0]["value"][1]) > 0
