"""A real Prometheus and a real VictoriaMetrics that refuse queries for their limits: the
collector asks again for shorter time ranges (a limit of samples) or one node at a time (a limit
of series, or of samples that one instant already exceeds), and stores exactly what it stores
without limits; where even one node's one instant is refused, it gives up naming the limit.

The servers are loaded without limits, then started again on the same data with them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from gpuwatch.collectors.prometheus import PrometheusError
from gpuwatch.collectors.promsplit import instants
from tests.support import dcgm_fixture as fx
from tests.support.prometheus import PrometheusProcess, build_blocks, write_openmetrics
from tests.support.recording_proxy import RecordingProxy
from tests.support.victoria import VictoriaProcess, restarted, victoria_with
from tests.test_collect_victoria import START, collect_from, new_store, source, stored_rows

END = START + 86400
#: The series begin an hour before the window: VictoriaMetrics 1.79 answers a one-instant range
#: query at a series' very first sample with nothing, and the split path asks one-instant queries.
DATA_START = START - 3600
PAGE_INSTANTS = 12 * 3600 // fx.STEP_S

pytestmark = pytest.mark.prometheus


@pytest.fixture(scope="module")
def victoria(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaProcess]:
    with victoria_with(fx.series(DATA_START, END), tmp_path_factory.mktemp("vm-limits")) as server:
        yield server


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    folder = tmp_path_factory.mktemp("prom-limits")
    build_blocks(write_openmetrics(fx.series(DATA_START, END), folder / "om"), folder / "tsdb")
    server = PrometheusProcess(folder / "tsdb").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def reference(prometheus: PrometheusProcess, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """The store collected from Prometheus without limits."""
    engine = new_store(tmp_path_factory.mktemp("reference") / "store")
    collect_from(engine, source(prometheus.url), START, END)
    return engine


def _same_store(engine: Engine, reference: Engine) -> None:
    samples = stored_rows(engine, "gpu_samples")
    expected = [t for u in fx.units() for t in fx.expected_grid(DATA_START, END, u) if t >= START]
    assert len(samples) == len(expected)
    assert samples == stored_rows(reference, "gpu_samples")
    assert stored_rows(engine, "gpu_samples_hourly") == stored_rows(reference, "gpu_samples_hourly")


def test_a_limit_of_samples_splits_the_time_range(
    prometheus: PrometheusProcess, reference: Engine, tmp_path: Path
) -> None:
    prometheus.stop()
    prometheus.flags = ["--query.max-samples=3000"]
    prometheus.start()
    engine = new_store(tmp_path / "s")
    with RecordingProxy(prometheus.url) as proxy:
        stats = collect_from(engine, source(proxy.url), START, END)
    assert stats.pages == 2
    _same_store(engine, reference)
    query = "max_over_time(DCGM_FI_DEV_FB_USED[59999ms])"
    answers = [(seen.query, status) for seen, status in proxy.answered
               if seen.query.get("query") == query]  # fmt: skip
    # 17 series: a request of the page's rest (hundreds of instants) holds over 3,000 samples.
    refused = [instants(q) for q, status in answers if status == 422]
    assert refused
    assert max(instants(q) for q, status in answers if status == 200) <= max(refused) // 2
    # The first page's instants were each answered once, in parts no server limit refused.
    first_page = sorted(
        (int(q["start"]), int(q["end"])) for q, status in answers
        if status == 200 and int(q["start"]) < START + PAGE_INSTANTS * fx.STEP_S
    )  # fmt: skip
    assert first_page[0][0] == START
    assert first_page[-1][1] == START + (PAGE_INSTANTS - 1) * fx.STEP_S
    assert all(b[0] == a[1] + fx.STEP_S for a, b in itertools.pairwise(first_page))
    assert not any("Hostname" in q["query"] for q, _ in answers)


def test_a_limit_of_samples_that_one_instant_exceeds_splits_by_node(
    victoria: VictoriaProcess, reference: Engine, tmp_path: Path
) -> None:
    # VictoriaMetrics counts the samples of the blocks it reads (here a day of a series each):
    # the fleet's 17 series are over the limit at any instant, gpu-node-a's 8 within it.
    restarted(victoria, ["-search.maxSamplesPerQuery=20000"])
    engine = new_store(tmp_path / "s")
    with RecordingProxy(victoria.url) as proxy:
        stats = collect_from(engine, source(proxy.url), START, END)
    assert stats.pages == 2
    _same_store(engine, reference)
    queries = [s.query["query"] for s in proxy.requests_to("/api/v1/query_range")]
    assert any('Hostname="gpu-node-a"' in q for q in queries)


def test_a_limit_of_series_splits_the_series_by_node(
    victoria: VictoriaProcess, reference: Engine, tmp_path: Path
) -> None:
    # gpu-node-a exports 8 GPUs, the fleet 17: a limit of 12 refuses the fleet and lets one node
    # through (VictoriaMetrics refuses more series than the limit; `VictoriaProcess.load`
    # registers each series once, so none is counted twice).
    restarted(victoria, ["-search.maxUniqueTimeseries=12"])
    engine = new_store(tmp_path / "s")
    with RecordingProxy(victoria.url) as proxy:
        stats = collect_from(engine, source(proxy.url), START, END)
    assert stats.pages == 2
    _same_store(engine, reference)
    queries = [s.query["query"] for s in proxy.requests_to("/api/v1/query_range")]
    nodes = {'Hostname="gpu-node-a"', 'Hostname="gpu-node-b"', 'Hostname="gpu-node-d"'}
    for node in nodes:
        assert any(node in q for q in queries), node
    # gpu-node-c names itself in lowercase "hostname": it is among the series of no listed node.
    assert any('Hostname!~"gpu\\\\-node\\\\-a|gpu\\\\-node\\\\-b|gpu\\\\-node\\\\-d"' in q
               for q in queries)  # fmt: skip
    assert proxy.requests_to("/api/v1/label/Hostname/values")


def test_a_limit_one_node_exceeds_fails_naming_it(
    victoria: VictoriaProcess, reference: Engine, tmp_path: Path
) -> None:
    restarted(victoria, ["-search.maxUniqueTimeseries=4"])
    engine = new_store(tmp_path / "s")
    with pytest.raises(PrometheusError) as failed:
        collect_from(engine, source(victoria.url), START, END)
    message = str(failed.value)
    assert "refused the range query of util_prof even for one node, for its limit" in message
    assert "-search.maxUniqueTimeseries (VictoriaMetrics)" in message
    assert "raise that limit on the server" in message
    assert stored_rows(engine, "gpu_samples") == []


def test_a_limit_without_node_labels_fails_naming_it(
    victoria: VictoriaProcess, reference: Engine, tmp_path: Path
) -> None:
    restarted(victoria, ["-search.maxUniqueTimeseries=8"])
    engine = new_store(tmp_path / "s")
    with pytest.raises(PrometheusError) as failed:
        collect_from(engine, source(victoria.url, node_labels=("rack",)), START, END)
    assert (
        "refused the range query of util_prof, and no series has a node label ('rack',) to split "
        "it by, for its limit -search.maxUniqueTimeseries (VictoriaMetrics)"
    ) in str(failed.value)
