"""The simulated dcgm-exporter: its text format, label variants, values, and the HTTP server."""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gpuwatch.collectors.dcgm import LabelVariants, page_samples
from gpuwatch.collectors.promql import FIELDS
from gpuwatch.simulate.exposition import (
    BLANK_ONE_IN,
    GPU_UTIL,
    PROF_UTIL,
    SENTINEL,
    exporter_hostname,
    is_blank,
    render,
    sd_targets,
)
from gpuwatch.simulate.fleet import Fleet, GpuUnit, NodeSpec, build_fleet
from gpuwatch.simulate.generate import sample_at
from gpuwatch.simulate.serve import ExporterServer

PROD, RESEARCH = "prod-us-east", "research-eu"
TS = int(datetime(2026, 11, 16, 14, 10, tzinfo=UTC).timestamp())  # Monday, working hours
OUTAGE_TS = int(datetime(2026, 11, 16, 5, 0, tzinfo=UTC).timestamp())  # l2's exporter is down

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"')
_SAMPLE = re.compile(
    rf"^(?P<name>{_NAME})\{{(?P<labels>{_LABEL.pattern}(?:,{_LABEL.pattern})*)\}} "
    r"(?P<value>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)$"
)


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    text: str

    @property
    def value(self) -> float:
        return float(self.text)


def parse_exposition(text: str) -> list[Sample]:
    """Strict reading of the Prometheus text format as dcgm-exporter writes it: each family has
    one HELP then one TYPE line, then only its own samples; no label set repeats."""
    samples: list[Sample] = []
    seen: set[str] = set()
    family, kind = None, None
    keys: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            family = line.split(" ")[2]
            assert re.fullmatch(_NAME, family) and family not in seen, line
            seen.add(family)
            kind = None
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name == family and kind in ("gauge", "counter"), line
        else:
            match = _SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            assert match["name"] == family and kind is not None, line
            labels = dict(_LABEL.findall(match["labels"]))
            key = (family, tuple(sorted(labels.items())))
            assert key not in keys, f"duplicate series {key}"
            keys.add(key)
            samples.append(Sample(family, labels, match["value"]))
    return samples


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(7)


@pytest.fixture(scope="module")
def rows(fleet: Fleet) -> pd.DataFrame:
    return sample_at(fleet, TS)


def _exposition(fleet: Fleet, rows: pd.DataFrame, cluster: str) -> str:
    return render(fleet, TS, rows, cluster)


def _nodes(fleet: Fleet, cluster: str) -> dict[str, NodeSpec]:
    return {n.name: n for n in fleet.nodes if n.cluster == cluster}


def _host(sample: Sample) -> str:
    return sample.labels.get("Hostname") or sample.labels["hostname"]


def _unit_of(fleet: Fleet, sample: Sample, rows: pd.DataFrame | None = None) -> GpuUnit:
    """The unit a series stands for: by ``vgpu`` for a time-slice or MPS slot, by the holding
    pod (looked up in ``rows``) for a slot of a DRA device a claim shares."""
    uuid = sample.labels.get("UUID") or sample.labels["uuid"]
    gi = int(sample.labels.get("GPU_I_ID", -1))
    slot = int(sample.labels.get("vgpu", 0))
    unit = next(u for u in fleet.units if (u.uuid, u.mig_gi_id, u.slot) == (uuid, gi, slot))
    if _claim_shared(unit) and rows is not None and "pod" in sample.labels:
        mine = rows[(rows["uuid"] == uuid) & (rows["pod"] == sample.labels["pod"])]
        slot = int(mine["slot"].iloc[0])
        return next(u for u in fleet.units if (u.uuid, u.mig_gi_id, u.slot) == (uuid, gi, slot))
    return unit


def _claim_shared(unit: GpuUnit) -> bool:
    """A slot of a DRA device that one claim shares between pods (series without ``vgpu``)."""
    return unit.sharing == "dra" and unit.timeslice_replicas > 1


@pytest.mark.parametrize("cluster", [PROD, RESEARCH])
def test_text_is_well_formed_and_covers_every_node(
    fleet: Fleet, rows: pd.DataFrame, cluster: str
) -> None:
    text = _exposition(fleet, rows, cluster)
    samples = parse_exposition(text)
    nodes = _nodes(fleet, cluster)
    hosts = {_host(s) for s in samples}
    assert hosts == {exporter_hostname(n) for n in nodes.values()}
    families = {s.name for s in samples}
    assert {GPU_UTIL, PROF_UTIL, "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"} <= families
    assert {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"} <= families
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return
    parsed = [s for f in text_string_to_metric_families(text) for s in f.samples]
    assert len(parsed) == len(samples)


def test_label_styles_per_node(fleet: Fleet, rows: pd.DataFrame) -> None:
    styles_seen = set()
    for cluster in (PROD, RESEARCH):
        nodes = {exporter_hostname(n): n for n in _nodes(fleet, cluster).values()}
        for sample in parse_exposition(_exposition(fleet, rows, cluster)):
            node = nodes[_host(sample)]
            styles_seen.add(node.label_style)
            labels = sample.labels
            if node.label_style == "lowercase":
                assert {"uuid", "hostname"} <= set(labels)
                assert not {"UUID", "Hostname"} & set(labels)
            else:
                assert {"UUID", "Hostname"} <= set(labels)
                assert not {"uuid", "hostname"} & set(labels)
            if node.label_style == "exported":
                assert labels["pod"] == node.exporter_pod
                assert labels["namespace"] == "gpu-operator"
            else:
                assert not any(name.startswith("exported_") for name in labels)
            assert labels["DCGM_FI_DRIVER_VERSION"] == node.driver_version
    assert styles_seen == {"standard", "exported", "lowercase"}


def test_exported_node_names_the_holder_in_exported_labels(
    fleet: Fleet, rows: pd.DataFrame
) -> None:
    node = next(n for n in fleet.nodes if n.label_style == "exported")
    held = rows[rows["uuid"].isin({u.uuid for u in fleet.units if u.node == node.name})]
    expected = {str(r.uuid): r.pod for r in held.itertuples() if isinstance(r.pod, str)}
    assert len(expected) >= 6
    text = render(fleet, TS, rows, node.cluster, node.name)
    for sample in parse_exposition(text):
        assert sample.labels.get("exported_pod") == expected.get(sample.labels["UUID"])


def test_hostname_is_the_exporter_pod_where_the_exporter_lacks_node_name(
    fleet: Fleet, rows: pd.DataFrame
) -> None:
    hosts = {
        _host(s) for c in (PROD, RESEARCH) for s in parse_exposition(_exposition(fleet, rows, c))
    }
    t4 = [n for n in fleet.nodes if n.gpu_model == "Tesla T4"]
    assert t4 and all(n.exporter_pod in hosts and n.name not in hosts for n in t4)
    a100 = [n for n in fleet.nodes if "A100" in n.gpu_model and n.label_style == "standard"]
    assert all(n.name in hosts for n in a100)


def test_utilization_signal_per_node_and_mig(fleet: Fleet, rows: pd.DataFrame) -> None:
    seen: dict[tuple[str, str], set[str]] = {}
    for cluster in (PROD, RESEARCH):
        for sample in parse_exposition(_exposition(fleet, rows, cluster)):
            if sample.name in (GPU_UTIL, PROF_UTIL):
                unit = _unit_of(fleet, sample)
                assert sample.name == (PROF_UTIL if unit.util_signal == "prof" else GPU_UTIL)
                seen.setdefault((unit.uuid, sample.labels.get("GPU_I_ID", "")), set()).add(
                    sample.name
                )
    mig = {key: names for key, names in seen.items() if key[1]}
    assert len(mig) == sum(1 for u in fleet.units if u.mig_gi_id >= 0)
    assert all(names == {PROF_UTIL} for names in mig.values())
    assert all(len(names) == 1 for names in seen.values())
    assert {GPU_UTIL} in seen.values()


def test_values_equal_sample_at(fleet: Fleet, rows: pd.DataFrame) -> None:
    checked = 0
    for cluster in (PROD, RESEARCH):
        series: dict[tuple[str, int, int], dict[str, str]] = {}
        for sample in parse_exposition(_exposition(fleet, rows, cluster)):
            unit = _unit_of(fleet, sample, rows)
            device_level = "vgpu" not in sample.labels and not _claim_shared(unit)
            if unit.timeslice_replicas > 1 and device_level:
                continue  # the device-level series of a time-sliced or MPS GPU
            series.setdefault((unit.uuid, unit.mig_gi_id, unit.slot), {})[sample.name] = sample.text
        for row in rows[rows["cluster"] == cluster].itertuples():
            unit = _unit_of_row(fleet, row)
            values = series.get((unit.uuid, unit.mig_gi_id, unit.slot))
            if unit.timeslice_replicas > 1 and not isinstance(row.pod, str):
                assert values is None, "unheld slots have no vgpu series"
                continue
            assert values is not None
            # Every slot of a shared claim's device carries the device's (slot 0's) readings.
            _check_values(fleet.units[fleet.units.index(unit) - unit.slot], row, values)
            checked += 1
    assert checked > 250


def _unit_of_row(fleet: Fleet, row: Any) -> GpuUnit:
    key = (row.cluster, row.uuid, row.mig_gi_id, row.slot)
    return next(u for u in fleet.units if (u.cluster, u.uuid, u.mig_gi_id, u.slot) == key)


def _check_values(unit: GpuUnit, row: Any, values: dict[str, str]) -> None:
    util = values.get(GPU_UTIL) or values[PROF_UTIL]
    if is_blank(unit, TS):
        assert util == str(SENTINEL)
    elif GPU_UTIL in values:
        assert float(util) / 100.0 == pytest.approx(row.util_ratio, abs=1e-12)
    else:
        assert float(util) == pytest.approx(row.util_ratio, abs=1e-9)
    assert float(values["DCGM_FI_DEV_FB_USED"]) == row.fb_used_mib
    assert float(values["DCGM_FI_DEV_GPU_TEMP"]) == row.temp_c
    assert int(values["DCGM_FI_DEV_XID_ERRORS"]) == row.xid
    if unit.mig_gi_id >= 0:
        assert "DCGM_FI_DEV_POWER_USAGE" not in values
    else:
        assert float(values["DCGM_FI_DEV_POWER_USAGE"]) == pytest.approx(row.power_w, abs=1e-9)
    if unit.timeslice_replicas == 1:
        total = sum(
            float(values.get(name, 0))
            for name in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")
        )
        assert total == row.fb_total_mib
        assert ("DCGM_FI_DEV_FB_RESERVED" in values) == (unit.mig_gi_id < 0)


def test_time_sliced_gpus_have_slot_series_and_a_device_series(
    fleet: Fleet, rows: pd.DataFrame
) -> None:
    node = next(n for n in fleet.nodes if n.timeslice_replicas > 1)
    samples = parse_exposition(render(fleet, TS, rows, node.cluster, node.name))
    util = [s for s in samples if s.name == GPU_UTIL]
    device = {s.labels["UUID"]: s.value for s in util if "vgpu" not in s.labels}
    slots = [s for s in util if "vgpu" in s.labels]
    assert len(device) == node.gpu_count
    assert slots and all(s.labels["pod"] for s in slots)
    for uuid, total in device.items():
        mine = rows[rows["uuid"] == uuid]
        assert total == pytest.approx(round(100 * mine["util_ratio"].sum()), abs=1)
        held = mine[mine["pod"].notna()]
        assert {int(s.labels["vgpu"]) for s in slots if s.labels["UUID"] == uuid} == set(
            held["slot"]
        )


def test_an_outage_node_exports_nothing(fleet: Fleet) -> None:
    outage = fleet.outages[0]
    assert outage.windows(OUTAGE_TS, OUTAGE_TS + 1)
    text = render(fleet, OUTAGE_TS, sample_at(fleet, OUTAGE_TS), outage.cluster)
    hosts = {_host(s) for s in parse_exposition(text)}
    node = fleet.node(outage.cluster, outage.node)
    assert exporter_hostname(node) not in hosts
    assert len(hosts) == len(_nodes(fleet, outage.cluster)) - 1
    assert render(fleet, OUTAGE_TS, sample_at(fleet, OUTAGE_TS), outage.cluster, node.name) == ""


def test_blank_sentinel_readings_are_rare_and_deterministic(fleet: Fleet) -> None:
    draws = np.array([[is_blank(u, ts) for ts in range(TS, TS + 400)] for u in fleet.units])
    assert 0.5 / BLANK_ONE_IN < draws.mean() < 2.0 / BLANK_ONE_IN
    unit_index, offset = np.argwhere(draws)[0]
    unit, ts = fleet.units[unit_index], TS + int(offset)
    assert is_blank(unit, ts) and is_blank(unit, ts)  # a pure function of (unit, instant)
    text = render(fleet, ts, sample_at(fleet, ts), unit.cluster, unit.node)
    util = [s for s in parse_exposition(text) if s.name in (GPU_UTIL, PROF_UTIL)]
    blank = [s for s in util if s.text == str(SENTINEL)]
    assert unit.uuid in {s.labels.get("UUID") or s.labels.get("uuid") for s in blank}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _collector_results(text: str) -> dict[str, list[dict[str, Any]]]:
    """What Prometheus would answer for each field after scraping ``text`` at TS, one scrape
    target per node (``instance`` = the node's hostname label): the gauges the collector reads
    (a counter's increase needs two scrapes), a field of several metrics as its query combines
    them (``sum``: added per label set; ``or``: the first metric present)."""
    samples = parse_exposition(text)
    results: dict[str, list[dict[str, Any]]] = {}
    for query in (f for f in FIELDS if not f.counter):
        found: dict[tuple[tuple[str, str], ...], float] = {}
        for metric in query.metrics:
            mine = {tuple(sorted(s.labels.items())): s.value for s in samples if s.name == metric}
            for key, value in mine.items():
                if query.combine == "sum":
                    found[key] = found.get(key, 0.0) + value
                else:
                    found.setdefault(key, value)
        results[query.field] = [
            {
                "metric": {**dict(key), "__name__": query.metric, "job": "dcgm-exporter"}
                | {"instance": dict(key).get("Hostname") or dict(key)["hostname"]},
                "values": [[TS, repr(value)]],
            }
            for key, value in found.items()
        ]
    return results


_GAUGES = (
    "sm_active_ratio",
    "sm_occupancy_ratio",
    "tensor_active_ratio",
    "dram_active_ratio",
    "sm_clock_mhz",
    "clock_events",
    "pcie_bytes_per_s",
    "nvlink_bytes_per_s",
)


@pytest.mark.parametrize("cluster", [PROD, RESEARCH])
def test_the_collector_reads_back_what_sample_at_says(
    fleet: Fleet, rows: pd.DataFrame, cluster: str
) -> None:
    page = page_samples(
        _collector_results(_exposition(fleet, rows, cluster)), LabelVariants(), step_s=60
    )
    frame = page.to_frame().assign(**{name: page.values[name] for name in _GAUGES})
    read = frame.set_index(["uuid", "mig_gi_id", "slot"])
    nodes = _nodes(fleet, cluster)
    for row in rows[rows["cluster"] == cluster].itertuples():
        unit = _unit_of_row(fleet, row)
        key = (unit.uuid, unit.mig_gi_id, unit.slot)
        if unit.timeslice_replicas > 1 and not isinstance(row.pod, str):
            continue  # unheld slots: only the device series, which the held slots shadow
        if _claim_shared(unit):
            continue  # one series per pod without vgpu: the collector's DRA labels tell them apart
        got = read.loc[key]
        assert got["ts"] == TS
        assert got["node"] == exporter_hostname(nodes[unit.node])
        assert _text(got["pod"]) == _text(row.pod), key
        assert _text(got["namespace"]) == _text(row.namespace)
        if is_blank(unit, TS):
            assert math.isnan(got["util_ratio"]), "a blank sentinel must read as missing"
        else:
            assert got["util_ratio"] == pytest.approx(row.util_ratio, abs=1e-9)
        assert got["util_signal"] == row.util_signal or is_blank(unit, TS)
        assert got["fb_used_mib"] == row.fb_used_mib
        if unit.timeslice_replicas == 1:
            assert got["fb_total_mib"] == row.fb_total_mib
        assert got["temp_c"] == row.temp_c
        assert got["xid"] == row.xid
        for name in _GAUGES:  # NaN (not exported) reads back as no reading
            expected = getattr(row, name)
            assert got[name] == pytest.approx(expected, nan_ok=True, abs=1e-9), (key, name)
    pods = set(frame["pod"].dropna())
    assert not any(p.startswith("nvidia-dcgm-exporter") for p in pods)


def test_sd_targets_list_one_target_per_node(fleet: Fleet) -> None:
    targets = sd_targets(fleet, PROD, "exporter:9400")
    assert [t["labels"]["__param_node"] for t in targets] == list(_nodes(fleet, PROD))
    assert all(t["targets"] == ["exporter:9400"] for t in targets)
    assert len({t["labels"]["instance"] for t in targets}) == len(targets)


# -- the HTTP server ------------------------------------------------------------------------


@pytest.fixture
def server(fleet: Fleet) -> Iterator[ExporterServer]:
    clock = [float(TS)]
    with ExporterServer(fleet, PROD, port=0, clock=lambda: clock[0]) as running:
        running.clock = clock  # type: ignore[attr-defined]
        yield running


def _get(url: str, host: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_server_serves_metrics_at_the_clock_instant(
    server: ExporterServer, fleet: Fleet, rows: pd.DataFrame
) -> None:
    status, content_type, body = _get(f"{server.url}/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    assert body == render(fleet, TS, rows, PROD)
    server.clock[0] = TS + 3600.7  # type: ignore[attr-defined]
    later = _get(f"{server.url}/metrics")[2]
    assert later == render(fleet, TS + 3600, sample_at(fleet, TS + 3600), PROD) != body


def test_server_serves_one_node_and_refuses_unknown_ones(
    server: ExporterServer, fleet: Fleet, rows: pd.DataFrame
) -> None:
    node = next(iter(_nodes(fleet, PROD)))
    status, _, body = _get(f"{server.url}/metrics?node={node}")
    assert status == 200
    assert body == render(fleet, TS, rows, PROD, node)
    assert {_host(s) for s in parse_exposition(body)} == {node}
    other = next(iter(_nodes(fleet, RESEARCH)))
    assert _get(f"{server.url}/metrics?node={other}")[0] == 404
    assert _get(f"{server.url}/nothing")[0] == 404


def test_every_node_gets_what_its_own_render_says(
    server: ExporterServer, fleet: Fleet, rows: pd.DataFrame
) -> None:
    """The server computes an instant's series once for the cluster and answers each node's
    scrape from them: the same text as rendering that node alone (shared GPUs, DRA included)."""
    for node in _nodes(fleet, PROD):
        status, _, body = server.respond(f"/metrics?node={node}")
        assert status == 200
        assert body.decode() == render(fleet, TS, rows, PROD, node), node


def test_server_answers_503_for_a_node_in_an_outage(server: ExporterServer, fleet: Fleet) -> None:
    server.clock[0] = float(OUTAGE_TS)  # type: ignore[attr-defined]
    outage = fleet.outages[0]
    status, _, body = _get(f"{server.url}/metrics?node={outage.node}")
    assert status == 503 and "down" in body
    assert outage.node not in _get(f"{server.url}/metrics")[2]


def test_server_health_and_service_discovery(server: ExporterServer, fleet: Fleet) -> None:
    assert _get(f"{server.url}/health")[:1] == (200,)
    status, content_type, body = _get(f"{server.url}/targets", host="dcgm.example:9400")
    assert status == 200 and content_type == "application/json"
    assert json.loads(body) == sd_targets(fleet, PROD, "dcgm.example:9400")


def test_server_refuses_an_unknown_cluster(fleet: Fleet) -> None:
    with pytest.raises(ValueError, match="no simulated cluster 'nope'"):
        ExporterServer(fleet, "nope")
