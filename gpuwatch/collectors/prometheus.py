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
from collections import deque
from collections.abc import Callable, Iterator, Mapping
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
from gpuwatch.config.sections import MAX_SAMPLES_PER_REQUEST, MAX_SERIES
from gpuwatch.domain.durations import rfc3339
from gpuwatch.domain.redact import mask_url

log = logging.getLogger(__name__)

#: Points per query_range request stay under Prometheus's 11,000-point limit.
MAX_POINTS = 10_000
_TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
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


def _chunks(
    query: str, first_ts: int, last_ts: int, step_s: int, steps: Callable[[], int]
) -> Iterator[dict[str, str]]:
    """``query_range`` parameters covering ``first_ts..last_ts``, each ``steps()`` instants
    (asked for as each request is made, at most ``MAX_POINTS``)."""
    start = first_ts
    while start <= last_ts:
        end = min(last_ts, start + (min(steps(), MAX_POINTS) - 1) * step_s)
        yield {"query": query, "start": str(start), "end": str(end), "step": f"{step_s}s"}
        start = end + step_s


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
        max_series: int = MAX_SERIES,
        max_samples: int = MAX_SAMPLES_PER_REQUEST,
        page_timeout_s: float = 600.0,
        stop: Stop = NEVER,
    ) -> None:
        self.url = url
        self.max_series, self.max_samples = max_series, max_samples
        #: Per field, the series count of its last answer: what the next request is sized by.
        self._series: dict[str, int] = {}
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

    def _call(self, what: str, call: Callable[[], Any], retries: int | None = None) -> Any:
        """``call()`` under the retry policy (``retries``: the configured number, else this)."""
        stop = None if self.stop is NEVER else self.stop
        retries = self.retries if retries is None else retries
        policy = RetryPolicy(retries, self.backoff_s, sleep=self._sleep, stop=stop)
        try:
            return policy.call(f"{what} to Prometheus", call, _transient, _FAILURES)
        except RetriesExhausted as done:
            raise PrometheusError(
                f"Prometheus at {mask_url(self.url)} failed {what} after {done.attempts} "
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
        the last at or before the page's first instant to the last at or before its last one,
        the instants being the same whatever the page; and, where the page's last instant is not
        one, once more at that instant, standing for the next multiple
        (:func:`gpuwatch.collectors.dcgm.page_samples` says which instant a sample takes). No
        capacity field is read after the page's last instant: a reading of a future instant
        would change between the requests for used and free memory as scrapes land, and a total
        summed across them would be torn.

        The requests run one after the other in a thread of their own while the answers that
        came in are decoded here: Prometheus computes the next answer meanwhile.
        """
        last = end_ts - step_s
        if last < start_ts:
            return {}
        parts: dict[str, list[Matrix]] = {}
        wanted = self._requests(start_ts, last, step_s, parts)
        deadline = time.monotonic() + self.page_timeout_s
        pool = Worker("gpuwatch-http")
        # At most _AHEAD answers wait undecoded: memory stays bounded on slow decoding.
        bodies: deque[tuple[str, Future[bytes]]] = deque()

        def ask() -> None:
            request = next(wanted, None)
            if request is not None:
                field, params = request
                bodies.append((field, pool.submit(partial(self._range_body, params))))

        try:
            for _ in range(_AHEAD):
                ask()
            while bodies:
                field, future = bodies.popleft()
                body = self._wait(future, deadline)
                ask()
                matrix = self._decode(body)
                del body  # the answer is not kept once decoded
                self._count_series(field, matrix, start_ts)
                parts[field].append(matrix)
        finally:
            pool.close()
        return {field: promjson.concat(matrices) for field, matrices in parts.items()}

    def _requests(
        self, start_ts: int, last: int, step_s: int, parts: dict[str, list[Matrix]]
    ) -> Iterator[tuple[str, dict[str, str]]]:
        """Every field's requests for the page, each sized when it is made (:meth:`_steps`)."""
        coarse_s = self.catalogue.capacity_step_s(step_s)
        coarse_first = start_ts - start_ts % coarse_s
        coarse_last = last - last % coarse_s
        plans = [
            (field, query, start_ts, last, step_s)
            for field, query in self.catalogue.queries(step_s).items()
        ]
        for field, query in self.catalogue.capacity_queries(step_s).items():
            plans.append((field, query, coarse_first, coarse_last, coarse_s))
            if coarse_last < last:  # the next capacity instant, read no later than the page
                plans.append((field, query, last, last, coarse_s))
        plans += self.catalogue.interval_requests(start_ts, last, step_s)
        for field, query, first, final, step in plans:
            parts.setdefault(field, [])
            steps = partial(self._steps, field)
            for params in _chunks(query, first, final, step, steps):
                yield field, params

    def _steps(self, field: str) -> int:
        """Instants per request of ``field``: samples (series × instants) stay within
        ``max_samples``, the series counted in the field's last answer (``max_series`` before
        the first)."""
        return max(1, self.max_samples // max(1, self._series.get(field, self.max_series)))

    def _count_series(self, field: str, matrix: Matrix, start_ts: int) -> None:
        """Remember ``field``'s series count; refuse the page when it is over ``max_series``."""
        count = len(matrix.labels)
        self._series[field] = count
        if count > self.max_series:
            when = rfc3339(start_ts)
            raise PrometheusError(
                f"Prometheus at {mask_url(self.url)} answered {count:,} series of {field} for "
                f"the page from {when}, more than prometheus.max_series ({self.max_series:,}): "
                "raise prometheus.max_series if the fleet is that large"
            )

    def _wait(self, answer: Future[bytes], deadline: float) -> bytes:
        try:
            return self.stop.wait_for(answer, max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise PrometheusError(
                f"Prometheus at {mask_url(self.url)} did not answer one page's queries within "
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
                f"Prometheus at {mask_url(self.url)} failed a range query: {_describe(exc)}"
            ) from None

    def check(self) -> None:
        """Fail early, with the reason, when Prometheus cannot be reached."""
        self._call("the readiness query", lambda: self._client.custom_query("vector(1)"))

    def has_series(self, start_ts: int, end_ts: int, step_s: int) -> bool:
        """Whether any DCGM series read every step has a reading that the grid instants
        ``start_ts <= t < end_ts`` cover (``(start_ts - step, last instant]``)."""
        return self.series_count(start_ts, end_ts, step_s) > 0

    def series_count(self, start_ts: int, end_ts: int, step_s: int, retry: bool = True) -> int:
        """How many DCGM series (one per GPU unit and holder, metric names aside) have a
        reading that the grid instants ``start_ts <= t < end_ts`` cover; with ``retry`` false,
        one attempt (an estimate that may fail fast)."""
        last = end_ts - step_s
        if last < start_ts:
            return 0
        query = self.catalogue.series_count_query(last - start_ts + step_s)
        query_once = partial(self._get, "query", {"query": query, "time": str(last)})
        retries = None if retry else 0
        body = self.stop.run(lambda: self._call("a series query", query_once, retries))
        result = orjson.loads(body).get("data", {}).get("result", [])
        return int(float(result[0]["value"][1])) if result else 0
