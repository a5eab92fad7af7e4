"""Refusals for a server's limits and partial answers, read from answers as servers send them.

The refusals were recorded from Debian's Prometheus 2.42 (``--query.max-samples``) and
VictoriaMetrics 1.79 (``-search.maxSamplesPerQuery``, ``-search.maxUniqueTimeseries``,
``-search.maxPointsPerTimeseries``); Mimir's carry its documented error ids.
"""

from __future__ import annotations

import orjson
import pytest

from gpuwatch.collectors.answers import PartialPage, answer_warnings, server_limit
from gpuwatch.collectors.promerrors import error_text
from gpuwatch.collectors.promsplit import halves, instants, node_matchers, node_values

PROMETHEUS_MAX_SAMPLES = (
    b'{"status":"error","errorType":"execution","error":"query processing would load too many '
    b'samples into memory in query execution"}'
)
VM_MAX_SAMPLES = (
    b'{"status":"error","errorType":"422","error":"error when executing query=\\"avg_over_time('
    b'm[59999ms])\\" on the time range (start=1795681620000, end=1795684620000, step=60000): '
    b'cannot execute query: cannot evaluate \\"avg_over_time(m[59999ms])\\": cannot select more '
    b"than -search.maxSamplesPerQuery=100 samples; possible solutions: to increase the "
    b"-search.maxSamplesPerQuery; to reduce time range for the query; to use more specific "
    b'label filters in order to select lower number of series"}'
)
VM_MAX_SERIES = (
    b'{"status":"error","errorType":"422","error":"error when executing query=\\"avg_over_time('
    b'm[59999ms])\\" on the time range (start=1795681602000, end=1795682202000, step=60000): '
    b'cannot execute query: cannot evaluate \\"avg_over_time(m[59999ms])\\": search error after '
    b'reading 0 data blocks: error when searching for tagFilters=[{__name__=\\"m\\"}] on the time '
    b"range [2026-11-26T08:20:42Z..2026-11-26T08:36:42Z]: error when searching tsids: the number "
    b"of matching timeseries exceeds 3; either narrow down the search or increase -search.max* "
    b'command-line flag values at vmselect"}'
)
VM_MAX_POINTS = (
    b'{"status":"error","errorType":"422","error":"error when executing query=\\"avg_over_time('
    b'm{Hostname=\\\\\\"n1\\\\\\"}[59999ms])\\" on the time range (start=1795681620000, '
    b"end=1795687620000, step=60000): too many points for the given step=60000, "
    b"start=1795681620000 and end=1795687620000: 101; cannot exceed "
    b'-search.maxPointsPerTimeseries=50"}'
)
MIMIR_MAX_SERIES = (
    b'{"status":"error","errorType":"execution","error":"expanding series: the query exceeded '
    b"the maximum number of series (limit: 100 series) (err-mimir-max-series-per-query). "
    b'Consider reducing the time range and/or number of series selected by the query."}'
)


@pytest.mark.parametrize(
    ("status", "body", "kind", "setting"),
    [
        (422, PROMETHEUS_MAX_SAMPLES, "samples", "--query.max-samples"),
        (422, VM_MAX_SAMPLES, "samples", "-search.maxSamplesPerQuery"),
        (422, VM_MAX_SERIES, "series", "-search.maxUniqueTimeseries"),
        (422, VM_MAX_POINTS, "samples", "-search.maxPointsPerTimeseries"),
        (422, MIMIR_MAX_SERIES, "series", "max_fetched_series_per_query"),
    ],
)
def test_a_refusal_names_its_limit(status: int, body: bytes, kind: str, setting: str) -> None:
    limit = server_limit(status, error_text(body))
    assert limit is not None
    assert limit.kind == kind
    assert setting in limit.setting
    assert limit.status == status


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (503, b'{"status":"error","error":"service unavailable"}'),
        (400, b'{"status":"error","errorType":"bad_data","error":"1:5: parse error"}'),
        # A limit's text under a status no server refuses a query with is not read as one.
        (404, PROMETHEUS_MAX_SAMPLES),
    ],
)
def test_other_failures_name_no_limit(status: int, body: bytes) -> None:
    assert server_limit(status, error_text(body)) is None


COMPLETE = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'


@pytest.mark.parametrize(
    ("body", "warnings"),
    [
        (COMPLETE, ()),
        (COMPLETE + b"\n", ()),
        # Thanos and Mimir: warnings after the data.
        (
            COMPLETE[:-1] + b',"warnings":["No StoreAPIs matched for this query","x"]}',
            ("No StoreAPIs matched for this query", "x"),
        ),
        # VictoriaMetrics cluster: isPartial before the data.
        (
            b'{"status":"success","isPartial":true,"data":{"resultType":"matrix","result":[]}}',
            ("the answer is partial (isPartial)",),
        ),
        (b'{"status":"success","isPartial":false,"data":{"resultType":"matrix","result":[]}}', ()),
        (COMPLETE[:-1] + b',"warnings":[]}', ()),
        # Prometheus' info annotations are no warnings.
        (COMPLETE[:-1] + b',"infos":["PromQL info: metric might not be a counter"]}', ()),
        # A label named warnings is a label.
        (
            b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":'
            b'{"warnings":"3"},"values":[[1,"1"]]}]}}',
            (),
        ),
        # Warnings before the data, spaced out.
        (
            b'{ "status": "success", "warnings": ["a store timed out"], "data": '
            b'{"resultType": "matrix", "result": []} }',
            ("a store timed out",),
        ),
    ],
)
def test_partial_answers_are_told_from_complete_ones(
    body: bytes, warnings: tuple[str, ...]
) -> None:
    assert answer_warnings(body) == warnings


def test_a_partial_page_is_described_and_kept() -> None:
    page = PartialPage(1794182400, ("store b down",), 1794186000, "Prometheus at http://q", 4)
    assert page.describe() == (
        "Prometheus at http://q answered partial data for the page from 2026-11-09T00:00:00Z "
        "(4 attempts): store b down; that page and those after it were not written: the next "
        "collection retries them"
    )
    assert orjson.loads(orjson.dumps(page.detail())) == {
        "page_start_ts": 1794182400,
        "warnings": ["store b down"],
        "seen_ts": 1794186000,
    }


def test_a_request_is_halved_on_its_grid() -> None:
    params = {"query": "q", "start": "600", "end": "1140", "step": "60s"}
    assert instants(params) == 10
    first, second = halves(params)  # type: ignore[misc]
    assert (first["start"], first["end"], second["start"], second["end"]) == (
        "600",
        "840",
        "900",
        "1140",
    )
    assert first["query"] == second["query"] == "q"
    assert halves({"query": "q", "start": "600", "end": "600", "step": "60s"}) is None


def test_node_parts_cover_every_series_once() -> None:
    nodes = node_values(orjson.loads(b'{"status":"success","data":["n-2","n.1","","n-2"]}'))
    assert nodes == ["n-2", "n.1"]
    assert node_matchers("Hostname", nodes) == [
        'Hostname="n-2"',
        'Hostname="n.1"',
        'Hostname!~"n\\\\-2|n\\\\.1"',
    ]
    assert node_values({"status": "error"}) == []
