"""The Prometheus source: runs the catalogue's queries for one page, with retries (I/O only).

The connection (URL, headers, no hidden retries) is a ``prometheus_api_client.PrometheusConnect``,
which runs the readiness check. Range queries go through the same ``requests`` session but read
the answer's bytes themselves: they are asked for uncompressed (compressing a page of a large
fleet costs Prometheus more time than sending it) and decoded straight into arrays by
:mod:`gpuwatch.collectors.promjson`, never into Python lists.

A request that the server refuses for one of its limits is asked again in parts, by halves of
its time range, then one node at a time (:mod:`gpuwatch.collectors.promsplit`); an answer that
says it is partial is asked again, and raises :class:`~gpuwatch.collectors.answers.PartialAnswer`
when it stays so (:mod:`gpuwatch.collectors.answers`). Headers, tenant, authentication and TLS
trust come from :class:`~gpuwatch.config.http.HttpOptions`.

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
from dataclasses import replace
from functools import partial
from typing import Any

import orjson
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from gpuwatch.collectors import promjson, promsplit
from gpuwatch.collectors.answers import PartialAnswer, ServerLimit, answer_warnings, server_limit
from gpuwatch.collectors.promerrors import (
    FAILURES,
    PartialError,
    StatusError,
    describe,
    error_text,
    transient,
)
from gpuwatch.collectors.promjson import Matrix, MatrixError
from gpuwatch.collectors.promql import Catalogue
from gpuwatch.collectors.promsplit import MAX_POINTS, Plan, Request, chunks, page_plans
from gpuwatch.collectors.retry import RetriesExhausted, RetryPolicy
from gpuwatch.collectors.stop import NEVER, Stop, Worker
from gpuwatch.config.http import HttpOptions
from gpuwatch.config.sections import MAX_SAMPLES_PER_REQUEST, MAX_SERIES
from gpuwatch.domain.durations import rfc3339
from gpuwatch.domain.redact import mask_url

log = logging.getLogger(__name__)

#: Requests sent ahead of the answer being decoded.
_AHEAD = 2
#: A query longer than this (a node split's) is sent as a form (POST), not in the URL.
_LONG_QUERY = 4096


class PrometheusError(Exception):
    """Prometheus could not answer, after retries; one line for the user."""


class PrometheusSource:
    """Reads DCGM series from one Prometheus (or Thanos Query / Mimir / VictoriaMetrics)
    endpoint."""

    def __init__(
        self,
        url: str,
        catalogue: Catalogue,
        timeout_s: float = 30.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        max_series: int = MAX_SERIES,
        max_samples: int = MAX_SAMPLES_PER_REQUEST,
        page_timeout_s: float = 600.0,
        stop: Stop = NEVER,
        http: HttpOptions | None = None,
        node_labels: tuple[str, ...] = ("Hostname", "hostname"),
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
        self.node_labels = node_labels
        #: Per field, the most instants a request may ask for since the server refused more.
        self._cap: dict[str, int] = {}
        #: Fields asked for one node at a time since one instant of all was refused.
        self._by_node: set[str] = set()
        # No hidden urllib3 retries: ours, in _call, are explicit, logged and bounded.
        self._session = (http or HttpOptions()).session()
        self._client = PrometheusConnect(
            url=url,
            headers={},
            timeout=int(self.timeout_s),
            retry=Retry(total=0, raise_on_status=False),
            session=self._session,
        )
        self._range_headers = {"Accept-Encoding": "identity"}

    def _call(
        self, what: str, call: Callable[[], Any], retries: int | None = None, split: bool = False
    ) -> Any:
        """``call()`` under the retry policy (``retries``: the configured number, else this);
        a refusal for a server limit is raised as such where the caller ``split`` s the
        request, else it fails the call."""
        stop = None if self.stop is NEVER else self.stop
        retries = self.retries if retries is None else retries
        policy = RetryPolicy(retries, self.backoff_s, sleep=self._sleep, stop=stop)
        try:
            return policy.call(f"{what} to Prometheus", call, transient, FAILURES)
        except ServerLimit as limit:
            if split:
                raise
            raise PrometheusError(self._limit_text(what, limit, "")) from None
        except RetriesExhausted as done:
            if isinstance(done.failure, PartialError):
                server = f"Prometheus at {mask_url(self.url)}"
                raise PartialAnswer(server, done.failure.warnings, done.attempts) from None
            raise PrometheusError(
                f"Prometheus at {mask_url(self.url)} failed {what} after {done.attempts} "
                f"attempt{'s' if done.attempts > 1 else ''}: {describe(done.failure)}"
            ) from None

    def _get(self, path: str, params: Mapping[str, str]) -> bytes:
        """The body of a 200 answer to ``GET path`` (a form ``POST`` for a long query);
        raises :class:`ServerLimit` for a refusal that names a limit, else
        :class:`StatusError` for any other status."""
        url = f"{self.url.rstrip('/')}/api/v1/{path}"
        long = len(params.get("query", "")) > _LONG_QUERY
        with self._session.request(
            "POST" if long else "GET",
            url,
            params=None if long else params,
            data=params if long else None,
            headers=self._range_headers,
            timeout=self.timeout_s,
            stream=True,
        ) as resp:
            body: bytes = resp.raw.read(decode_content=True)
            if resp.status_code != 200:
                text = error_text(body)
                raise server_limit(resp.status_code, text) or StatusError(resp.status_code, text)
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
        plans = page_plans(self.catalogue, start_ts, last, step_s)
        wanted = self._requests(plans, parts)
        deadline = time.monotonic() + self.page_timeout_s
        pool = Worker("gpuwatch-http")
        # At most _AHEAD answers wait undecoded: memory stays bounded on slow decoding.
        bodies: deque[tuple[str, Future[list[bytes]]]] = deque()
        nodes: dict[str, list[str]] = {}  # the page's nodes, listed on the first node split

        def ask() -> None:
            request = next(wanted, None)
            if request is not None:
                fetch = partial(self._fetch, request, (start_ts, last, step_s), nodes)
                bodies.append((request.field, pool.submit(fetch)))

        try:
            for _ in range(_AHEAD):
                ask()
            while bodies:
                field, future = bodies.popleft()
                answers = self._wait(future, deadline)
                ask()
                while answers:
                    matrix = self._decode(answers.pop(0))  # not kept once decoded
                    self._count_series(field, matrix, start_ts)
                    parts[field].append(matrix)
        finally:
            pool.close()
        return {field: promjson.concat(matrices) for field, matrices in parts.items()}

    def _requests(self, plans: list[Plan], parts: dict[str, list[Matrix]]) -> Iterator[Request]:
        """Every request of the page's ``plans``, each sized when it is made (:meth:`_steps`)."""
        for index, (field, query, first, final, step) in enumerate(plans):
            parts.setdefault(field, [])
            steps = partial(self._steps, field)
            for params in chunks(query, first, final, step, steps):
                yield Request(field, index, params)

    def _steps(self, field: str) -> int:
        """Instants per request of ``field``: samples (series × instants) stay within
        ``max_samples``, the series counted in the field's last answer (``max_series`` before
        the first)."""
        steps = self.max_samples // max(1, self._series.get(field, self.max_series))
        return max(1, min(steps, self._cap.get(field, MAX_POINTS)))

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

    def _wait(self, answer: Future[list[bytes]], deadline: float) -> list[bytes]:
        try:
            return self.stop.wait_for(answer, max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise PrometheusError(
                f"Prometheus at {mask_url(self.url)} did not answer one page's queries within "
                f"{self.page_timeout_s:g}s (prometheus.page_timeout)"
            ) from None

    def _fetch(
        self, request: Request, page: tuple[int, int, int], nodes: dict[str, list[str]]
    ) -> list[bytes]:
        """The answers of ``request``: one, or, where the server refuses it for a limit, those
        of its parts (:meth:`_parts`), each split again as long as it is refused."""
        parts = []
        if request.node is None and request.field in self._by_node:
            parts = self._node_parts(request, page, nodes)
        if not parts:
            try:
                return [self._range_body(request.params)]
            except ServerLimit as limit:
                parts = self._parts(request, page, nodes, limit)
        return [body for part in parts for body in self._fetch(part, page, nodes)]

    def _parts(
        self,
        request: Request,
        page: tuple[int, int, int],
        nodes: dict[str, list[str]],
        limit: ServerLimit,
    ) -> list[Request]:
        """A refused request in two halves of its time range (a limit of samples), else one
        part per node (one instant, or a limit of series); fails where one node's one instant
        is refused."""
        halves = promsplit.halves(request.params) if limit.kind == "samples" else None
        if halves is not None:
            if request.node is None:
                self._cap[request.field] = promsplit.instants(halves[0])
            log.info("%s: asking for %s in two halves", limit, request.field)
            return [replace(request, params=half) for half in halves]
        if request.node is not None:
            what = f"the range query of {request.field}"
            at = " at one instant" if limit.kind == "samples" else ""
            raise PrometheusError(self._limit_text(what, limit, f" even for one node{at}"))
        parts = self._node_parts(request, page, nodes)
        if not parts:
            what = f"the range query of {request.field}"
            at = " even for one instant" if limit.kind == "samples" else ""
            why = f"{at}, and no series has a node label {self.node_labels} to split it by"
            raise PrometheusError(self._limit_text(what, limit, why))
        self._by_node.add(request.field)
        self._cap.pop(request.field, None)
        return parts

    def _node_parts(
        self,
        request: Request,
        page: tuple[int, int, int],
        nodes: dict[str, list[str]],
    ) -> list[Request]:
        """``request`` as one request per node of the page (:mod:`promsplit`); none where the
        page's series carry no node label."""
        if not nodes:  # listed once a page; none found is remembered as a label without values
            nodes.update(self._list_nodes(page) or {"": []})
        ((label, values),) = nodes.items()
        if not values:
            return []
        parts = []
        for matcher in promsplit.node_matchers(label, values):
            catalogue = replace(self.catalogue, matchers=(*self.catalogue.matchers, matcher))
            query = page_plans(catalogue, *page)[request.plan][1]
            parts.append(
                Request(request.field, request.plan, {**request.params, "query": query}, matcher)
            )
        return parts

    def _list_nodes(self, page: tuple[int, int, int]) -> dict[str, list[str]]:
        """The first hostname label of the schema that the page's series carry, and its values
        (empty: none); where the server refuses to match the series for a limit, the label's
        values of all series (a node without DCGM series only costs an empty answer)."""
        first, last, step_s = page
        metrics = tuple(m for q in self.catalogue.fields for m in q.metrics)
        span = {"start": str(first - self.catalogue.capacity_step_s(step_s)), "end": str(last)}
        matched = {"match[]": self.catalogue.selector_any(metrics), **span}
        for label in self.node_labels:
            path = f"label/{label}/values"
            try:
                body = self._call(
                    "a label values query", partial(self._get, path, matched), split=True
                )
            except ServerLimit:
                body = self._call("a label values query", partial(self._get, path, span))
            values = promsplit.node_values(orjson.loads(body))
            if values:
                return {label: values}
        return {}

    def _limit_text(self, what: str, limit: ServerLimit, why: str) -> str:
        return (
            f"Prometheus at {mask_url(self.url)} refused {what}{why}, for its limit "
            f"{limit.setting}: raise that limit on the server "
            f"({limit.text})"
        )

    def _range_body(self, params: Mapping[str, str]) -> bytes:
        """A range query's answer, asked again while it is partial (:class:`PartialAnswer`
        when it stays so); :class:`ServerLimit` for a refusal that names a limit."""

        def once() -> bytes:
            body = self._get("query_range", params)
            warnings = answer_warnings(body)
            if warnings:
                raise PartialError(warnings)
            return body

        body: bytes = self._call("a range query", once, split=True)
        return body

    def _decode(self, body: bytes) -> Matrix:
        try:
            return promjson.decode(body)
        except MatrixError as exc:
            raise PrometheusError(
                f"Prometheus at {mask_url(self.url)} failed a range query: {describe(exc)}"
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
