"""What a query answer says besides its data (pure, no I/O): a refusal for a server limit, and
the warnings of a partial answer.

A Prometheus-compatible server refuses a query that would read more than it allows, with its
own text: Prometheus' ``--query.max-samples`` (also Thanos Query's and Mimir's querier's),
VictoriaMetrics' ``-search.maxSamplesPerQuery``, ``-search.maxUniqueTimeseries`` and
``-search.maxPointsPerTimeseries``, Mimir's and Cortex's per-query limits. A refusal for the
samples or points of a query is answered by asking for a shorter time range; one for its series,
by asking for fewer series (one node's).

A distributed query layer answers what it could read when part of its stores failed, with
``"warnings": [...]`` (Thanos, Mimir, Prometheus with remote read) or ``"isPartial": true``
(VictoriaMetrics cluster). Such an answer is never stored as complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import orjson

from gpuwatch.domain.durations import rfc3339

LimitKind = Literal["samples", "series"]


@dataclass(frozen=True)
class _Known:
    text: str
    kind: LimitKind
    setting: str


#: Texts of refusals, lower case, with what they limit and the server setting that sets it.
_LIMITS: tuple[_Known, ...] = (
    _Known(
        "query processing would load too many samples into memory",
        "samples",
        "--query.max-samples (Prometheus, Thanos Query), -querier.max-samples (Mimir, Cortex)",
    ),
    _Known("-search.maxsamplesperquery", "samples", "-search.maxSamplesPerQuery (VictoriaMetrics)"),
    _Known(
        "-search.maxpointspertimeseries",
        "samples",
        "-search.maxPointsPerTimeseries (VictoriaMetrics)",
    ),
    _Known(
        "-search.maxsamplesperseries", "samples", "-search.maxSamplesPerSeries (VictoriaMetrics)"
    ),
    _Known(
        "the number of matching timeseries exceeds",
        "series",
        "-search.maxUniqueTimeseries (VictoriaMetrics)",
    ),
    _Known("err-mimir-max-series-per-query", "series", "max_fetched_series_per_query (Mimir)"),
    _Known("err-mimir-max-chunks-per-query", "samples", "max_fetched_chunks_per_query (Mimir)"),
    _Known(
        "err-mimir-max-estimated-chunks-per-query",
        "samples",
        "max_estimated_fetched_chunks_per_query_multiplier (Mimir)",
    ),
    _Known(
        "err-mimir-max-chunks-bytes-per-query",
        "samples",
        "max_fetched_chunk_bytes_per_query (Mimir)",
    ),
    _Known(
        "the query hit the max number of series limit",
        "series",
        "-querier.max-fetched-series-per-query (Cortex)",
    ),
    _Known(
        "the query hit the max number of chunks limit",
        "samples",
        "-querier.max-fetched-chunks-per-query (Cortex)",
    ),
)
#: Statuses a server answers a refused query with.
_LIMIT_STATUS = frozenset({400, 422, 500, 503})


class ServerLimit(Exception):
    """The server refused a query for one of its limits: ``kind`` says what it counts,
    ``setting`` the server's setting that sets it; ``text`` is the server's (the part that names
    the limit, when it is long)."""

    def __init__(self, status: int, text: str, kind: LimitKind, setting: str) -> None:
        super().__init__(f"HTTP status {status}: {text}")
        self.status, self.text, self.kind, self.setting = status, text, kind, setting


def server_limit(status: int, text: str) -> ServerLimit | None:
    """The limit that a refusal (``status`` and the server's error text) names; None where it
    names none.

    >>> server_limit(422, "query processing would load too many samples into memory in query "
    ...              "execution").kind
    'samples'
    >>> server_limit(503, "service unavailable") is None
    True
    """
    if status not in _LIMIT_STATUS:
        return None
    lowered = text.lower()
    for known in _LIMITS:
        at = lowered.find(known.text)
        if at >= 0:
            excerpt = text if len(text) <= 240 else "…" + text[max(0, at - 40) : at + 200] + "…"
            return ServerLimit(status, excerpt, known.kind, known.setting)
    return None


def answer_warnings(body: bytes) -> tuple[str, ...]:
    """The warnings of a successful answer, with ``"isPartial": true`` as one more; () for a
    complete answer.

    Prometheus, Thanos and Mimir write ``warnings`` after ``data``; VictoriaMetrics writes
    ``isPartial`` before it. An answer whose keys before ``data`` name neither and that ends with
    ``data`` (``...]}}``) is complete without being parsed; any other is parsed in full.

    >>> answer_warnings(b'{"status":"success","data":{"resultType":"matrix","result":[]}}')
    ()
    >>> answer_warnings(b'{"status":"success","data":{"result":[]},"warnings":["store down"]}')
    ('store down',)
    >>> answer_warnings(b'{"status":"success","isPartial":true,"data":{"result":[]}}')
    ('the answer is partial (isPartial)',)
    """
    data_at = body.find(b'"data":')
    head = body if data_at < 0 else body[:data_at]
    if b'"warnings"' not in head and b'"isPartial"' not in head and body.rstrip().endswith(b"]}}"):
        return ()
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ()  # not JSON: the decoder says so
    if not isinstance(answer, dict):
        return ()
    raw = answer.get("warnings")
    warnings = [str(w) for w in raw] if isinstance(raw, list) else []
    if answer.get("isPartial") is True:
        warnings.append("the answer is partial (isPartial)")
    return tuple(warnings)


class PartialAnswer(Exception):
    """The server answered part of a query only, every attempt: ``warnings`` say why."""

    def __init__(self, server: str, warnings: tuple[str, ...], attempts: int) -> None:
        super().__init__(f"{server} answered partial data {attempts} times: {'; '.join(warnings)}")
        self.server, self.warnings, self.attempts = server, warnings, attempts


@dataclass(frozen=True)
class PartialPage:
    """A page not written because its answer stayed partial: its start, the warnings, and
    when (``seen_ts``)."""

    page_start_ts: int
    warnings: tuple[str, ...]
    seen_ts: int
    server: str = ""
    attempts: int = 1

    def describe(self) -> str:
        """One line for the user."""
        return (
            f"{self.server or 'Prometheus'} answered partial data for the page from "
            f"{rfc3339(self.page_start_ts)} ({self.attempts} attempts): "
            f"{'; '.join(self.warnings)}; that page and those after it were not written: "
            "the next collection retries them"
        )

    def detail(self) -> dict[str, object]:
        """As kept in ``collection_state.detail["partial"]``."""
        return {
            "page_start_ts": self.page_start_ts,
            "warnings": list(self.warnings),
            "seen_ts": self.seen_ts,
        }
