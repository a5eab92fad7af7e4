"""A simulated fleet of any size, written into the store and into a real Prometheus.

The fleet is the demo's (``gpuwatch.simulate``: node pools, GPU models, MIG and time-sliced
GPUs, namespaces, workloads with daily patterns, every DCGM label variant) copied as many times
as needed, each copy built with its own seed (own node names, UUIDs, pod names, noise) and its
own namespaces (``search-prod``, ``search-prod-1``, ...), all in one cluster, then cut to the
first nodes that hold at least ``--gpus`` physical GPUs.

Two outputs of the same samples:

- the store (SQLite file or PostgreSQL database), written through the driver's bulk path
  (multi-row INSERT on SQLite, COPY on PostgreSQL), the way ``gpuwatch demo`` loads data;
- Prometheus TSDB blocks: one OpenMetrics file per 2-hour window, shaped as a dcgm-exporter
  scraped every ``step`` (labels per node style: ``UUID``/``Hostname``, ``exported_*``, lowercase
  ``uuid``/``hostname``; PROF or DEV utilization; blank sentinels; per-pod ``vgpu`` series on
  time-sliced GPUs), imported with ``promtool tsdb create-blocks-from openmetrics``, then
  compacted once by Prometheus. Each window's text is deleted once its block is built.

Everything is cached under ``$GPUWATCH_BENCH_DIR/<size>/`` (default ``/tmp/gpuwatch-bench``).

    .venv/bin/python bench/fleetgen.py --gpus 2000 --days 7 --sqlite --postgres --prometheus
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _support as S

from gpuwatch.simulate.fleet import (
    Fleet,
    GpuUnit,
    NamespaceSpec,
    NodeSpec,
    Outage,
    build_fleet,
)
from gpuwatch.simulate.generate import (
    SimulatedData,
    gpus_frame,
    namespaces_frame,
    nodes_frame,
)
from gpuwatch.simulate.generate import generate as generate_window
from gpuwatch.simulate.kube_objects import (
    EXPORTER_CONTAINER,
    EXPORTER_NAMESPACE,
    container_name,
)
from gpuwatch.simulate.noise import splitmix64, stable_hash, unit_keys
from gpuwatch.simulate.pods import pod_instances, pods_frame

CLUSTER = "bench"
#: The data ends on Monday 2026-11-16 00:00 UTC: the last 7 days are ISO week 2026-W46.
END_TS = int(datetime(2026, 11, 16, tzinfo=UTC).timestamp())
WEEK = "2026-W46"
WINDOW_S = 2 * 3600
SENTINEL = "9223372036854775794"
BLANK_ONE_IN = 200
_BLANK_CHANNEL = 97


@dataclass(frozen=True)
class Size:
    """A benchmark data set: ``gpus`` physical GPUs (at least) over ``days`` ending at END_TS."""

    gpus: int
    days: float
    step_s: int = 60
    seed: int = 7
    #: Keep raw samples for the last ``raw_days`` only (hourly roll-ups for all): a compacted store.
    raw_days: float | None = None

    @property
    def name(self) -> str:
        days = f"{self.days:g}".replace(".", "p")
        kept = "" if self.raw_days is None else f"-raw{self.raw_days:g}d".replace(".", "p")
        health = "-health" if HEALTH else ""
        return f"{self.gpus}gpu-{days}d-{self.step_s}s-seed{self.seed}{kept}{health}"

    @property
    def start_ts(self) -> int:
        return END_TS - round(self.days * 86400)

    @property
    def end_ts(self) -> int:
        return END_TS

    @property
    def folder(self) -> Path:
        return S.BENCH_DIR / self.name


# --- the fleet ----------------------------------------------------------------------------


def scaled_fleet(gpus: int, seed: int = 7, cluster: str = CLUSTER) -> Fleet:
    """Copies of the simulated fleet in one cluster, cut to the first nodes holding ``gpus``."""
    base_gpus = len({u.physical for u in build_fleet(seed).units})
    nodes: list[NodeSpec] = []
    units: list[GpuUnit] = []
    namespaces: list[NamespaceSpec] = []
    workloads: list[Any] = []
    outages: list[Outage] = []
    for copy in range(math.ceil(gpus / base_gpus)):
        fleet = build_fleet(seed + copy)

        def ns_name(name: str, copy: int = copy) -> str:
            return name if copy == 0 else f"{name}-{copy}"

        offset_units, offset_physical = len(units), len({u.physical for u in units})
        nodes += [replace(n, cluster=cluster) for n in fleet.nodes]
        units += [
            replace(u, cluster=cluster, physical=u.physical + offset_physical) for u in fleet.units
        ]
        namespaces += [
            NamespaceSpec(
                cluster,
                ns_name(ns.name),
                ns.team,
                {**ns.labels, "kubernetes.io/metadata.name": ns_name(ns.name)},
            )
            for ns in fleet.namespaces
        ]
        for w in fleet.workloads:
            workloads.append(
                replace(
                    w,
                    cluster=cluster,
                    namespace=ns_name(w.namespace),
                    pods=tuple(tuple(i + offset_units for i in pod) for pod in w.pods),
                    key=stable_hash(seed + copy, cluster, ns_name(w.namespace), w.name),
                )
            )
        outages += [replace(o, cluster=cluster) for o in fleet.outages]
    return _cut(
        Fleet(
            seed,
            (cluster,),
            tuple(nodes),
            tuple(units),
            tuple(namespaces),
            tuple(workloads),
            tuple(outages),
        ),
        gpus,
    )


def _cut(fleet: Fleet, gpus: int) -> Fleet:
    """The first nodes holding at least ``gpus`` physical GPUs and the workloads that fit."""
    names = [n.name for n in fleet.nodes]
    if len(set(names)) != len(names):
        raise ValueError("two copies of the fleet drew the same node name: use another seed")
    kept_nodes: list[NodeSpec] = []
    count = 0
    for node in fleet.nodes:
        if count >= gpus:
            break
        kept_nodes.append(node)
        count += node.gpu_count
    kept = {n.name for n in kept_nodes}
    n_units = sum(1 for u in fleet.units if u.node in kept)
    units = fleet.units[:n_units]
    assert all(u.node in kept for u in units)
    workloads = tuple(w for w in fleet.workloads if all(i < n_units for p in w.pods for i in p))
    used_ns = {w.namespace for w in workloads}
    return replace(
        fleet,
        nodes=tuple(kept_nodes),
        units=units,
        namespaces=tuple(ns for ns in fleet.namespaces if ns.name in used_ns),
        workloads=workloads,
        outages=tuple(o for o in fleet.outages if o.node in kept),
    )


def physical_gpus(fleet: Fleet) -> int:
    return len({u.physical for u in fleet.units})


def windows(start_ts: int, end_ts: int, span_s: int = WINDOW_S) -> list[tuple[int, int]]:
    """``[from, to)`` pieces of the window, aligned to ``span_s``."""
    first = start_ts - start_ts % span_s
    return [(max(s, start_ts), min(s + span_s, end_ts)) for s in range(first, end_ts, span_s)]


def window_data(fleet: Fleet, start_ts: int, end_ts: int, step_s: int) -> SimulatedData:
    return generate_window(fleet, start_ts, end_ts, step_s)


# --- OpenMetrics for promtool ---------------------------------------------------------------

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
PROF_UTIL = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FAMILIES: tuple[str, ...] = (
    PROF_UTIL,
    GPU_UTIL,
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_XID_ERRORS",
)
RESERVED_SHARE = 0.006
#: ``GPUWATCH_BENCH_HEALTH=1``: the exporter also sends the efficiency and health fields
#: (profiling ratios, SM clock, clock events, PCIe/NVLink bytes; ECC, PCIe-replay and NVLink
#: error counters at 0 and no row-remap failure: a healthy fleet), each where the simulated
#: sample has it. The data set's name says so (its own TSDB).
HEALTH = os.environ.get("GPUWATCH_BENCH_HEALTH") == "1"
#: Health family → the simulated sample column it is read from (None: a counter at 0).
HEALTH_FAMILIES: dict[str, str | None] = {
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active_ratio",
    "DCGM_FI_PROF_SM_OCCUPANCY": "sm_occupancy_ratio",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active_ratio",
    "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active_ratio",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "clock_events",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "pcie_bytes_per_s",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "pcie_bytes_per_s",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "nvlink_bytes_per_s",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "nvlink_bytes_per_s",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": None,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": None,
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": None,
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": None,
}
RATIO_FAMILIES = {f for f, col in HEALTH_FAMILIES.items() if col and col.endswith("_ratio")}
if HEALTH:
    FAMILIES = (*FAMILIES, *HEALTH_FAMILIES)


def _blank(fleet: Fleet, unit: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Per row: whether the reading is blank (a pure function of unit and instant)."""
    keys = unit_keys([u.key for u in fleet.units])[unit]
    mixed = splitmix64(keys ^ splitmix64(ts.astype(np.int64).astype(np.uint64) + np.uint64(97)))
    draw = (mixed >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return draw < 1.0 / BLANK_ONE_IN


def unit_index(fleet: Fleet, samples: pd.DataFrame) -> np.ndarray:
    """Per sample row, the index of its unit in ``fleet.units``."""
    index = pd.MultiIndex.from_tuples([(u.uuid, u.mig_gi_id, u.slot) for u in fleet.units])
    rows = pd.MultiIndex.from_arrays(
        [samples["uuid"].astype(object), samples["mig_gi_id"], samples["slot"]]
    )
    found = index.get_indexer(rows)
    if (found < 0).any():
        raise ValueError("samples name a GPU unit the fleet does not have")
    return found.astype(np.int64)


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _unit_labels(node: NodeSpec, unit: GpuUnit) -> list[tuple[str, str]]:
    """The exporter's own labels of a unit (without the holder), plus Prometheus' job/instance."""
    lowercase = node.label_style == "lowercase"
    reports_pod = node.gpu_model == "Tesla T4" or lowercase  # exporter without NODE_NAME
    labels = [
        ("gpu", str(unit.gpu_index)),
        ("uuid" if lowercase else "UUID", unit.uuid),
        ("pci_bus_id", unit.pci_bus_id),
        ("device", unit.device),
        ("modelName", unit.model_name),
    ]
    if unit.mig_gi_id >= 0:
        labels += [("GPU_I_PROFILE", str(unit.mig_profile)), ("GPU_I_ID", str(unit.mig_gi_id))]
    labels += [
        ("hostname" if lowercase else "Hostname", node.exporter_pod if reports_pod else node.name),
        ("DCGM_FI_DRIVER_VERSION", node.driver_version),
        ("job", "gpu-metrics"),
        ("instance", f"{node.name}:9400"),
    ]
    return labels


def _series_text(
    node: NodeSpec, unit: GpuUnit, holder: tuple[str, str, str] | None, vgpu: bool
) -> str:
    labels = _unit_labels(node, unit)
    names = ("container", "namespace", "pod")
    if node.label_style == "exported":
        if holder is not None:
            labels += [(f"exported_{n}", v) for n, v in zip(names, holder, strict=True)]
        labels += list(
            zip(names, (EXPORTER_CONTAINER, EXPORTER_NAMESPACE, node.exporter_pod), strict=True)
        )
    elif holder is not None:
        labels += list(zip(names, holder, strict=True))
    if vgpu:
        labels.append(("vgpu", str(unit.slot)))
    return ",".join(f'{k}="{_quote(v)}"' for k, v in labels)


@dataclass
class _Rows:
    """One window's exported rows: series label text index, instant and values per family."""

    series: np.ndarray
    ts: np.ndarray
    values: dict[str, np.ndarray]  # family -> float values (NaN: not exported on that row)


@dataclass(frozen=True)
class _Window:
    """One window's sample columns, per row, with each row's unit facts."""

    unit: np.ndarray
    ts: np.ndarray
    uid_codes: np.ndarray
    is_dev: np.ndarray
    is_mig: np.ndarray
    shared: np.ndarray
    util: np.ndarray
    used: np.ndarray
    total: np.ndarray
    power: np.ndarray
    temp: np.ndarray
    xid: np.ndarray
    blank: np.ndarray
    #: Per health family (HEALTH only): the exported value, NaN where not sent.
    health: dict[str, np.ndarray]


def _window_columns(fleet: Fleet, samples: pd.DataFrame) -> _Window:
    unit = unit_index(fleet, samples)
    ts = samples["ts"].to_numpy(np.int64)

    def per_unit(values: list[bool]) -> np.ndarray:
        chosen: np.ndarray = np.array(values)[unit]
        return chosen

    return _Window(
        unit=unit,
        ts=ts,
        uid_codes=samples["pod_uid"].cat.codes.to_numpy(),
        is_dev=per_unit([u.util_signal == "dev" for u in fleet.units]),
        is_mig=per_unit([u.mig_gi_id >= 0 for u in fleet.units]),
        shared=per_unit([u.timeslice_replicas > 1 for u in fleet.units]),
        util=samples["util_ratio"].to_numpy(np.float64),
        used=samples["fb_used_mib"].to_numpy(np.float64),
        total=samples["fb_total_mib"].to_numpy(np.float64),
        power=samples["power_w"].to_numpy(np.float64),
        temp=np.round(samples["temp_c"].to_numpy(np.float64)),
        xid=samples["xid"].to_numpy(np.float64),
        blank=_blank(fleet, unit, ts),
        health=_health_values(samples) if HEALTH else {},
    )


def _health_values(samples: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per health family, its value on each row: half the link rate for TX and for RX; the
    counters 0 where the GPU sends clock events (the health fields are enabled there)."""
    enabled = samples["clock_events"].notna().to_numpy()
    out = {}
    for family, column in HEALTH_FAMILIES.items():
        if column is None:
            out[family] = np.where(enabled, 0.0, np.nan)
            continue
        values = samples[column].to_numpy(np.float64, na_value=np.nan)
        out[family] = np.round(values / 2) if column.endswith("bytes_per_s") else values
    return out


def _unit_series(
    fleet: Fleet, data: SimulatedData, w: _Window, keep: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """Label text per distinct (unit, holder) of the kept rows, and each kept row's series."""
    samples = data.samples
    nodes = {n.name: n for n in fleet.nodes}
    containers = {
        inst.uid: container_name(fleet.workloads[inst.workload])
        for inst in pod_instances(fleet, data.start_ts, data.end_ts)
    }
    uids = samples["pod_uid"].cat.categories
    pods = samples["pod"].astype(object).to_numpy()
    nss = samples["namespace"].astype(object).to_numpy()
    key = w.unit * (len(uids) + 1) + (w.uid_codes + 1)
    codes, _ = pd.factorize(key[keep])
    texts: list[str] = []
    for row in np.flatnonzero(keep)[np.unique(codes, return_index=True)[1]]:
        u = fleet.units[w.unit[row]]
        holder = None
        if w.uid_codes[row] >= 0:
            holder = (containers.get(uids[w.uid_codes[row]], "main"), nss[row], pods[row])
        texts.append(_series_text(nodes[u.node], u, holder, bool(w.shared[row])))
    return texts, codes.astype(np.int64)


def _unit_values(w: _Window, keep: np.ndarray) -> dict[str, np.ndarray]:
    """Per kept row and family, the exported value (NaN: not exported; -1: blank sentinel)."""
    whole = ~w.is_mig & ~w.shared
    reserved = np.where(
        whole, np.minimum(np.round(w.total * RESERVED_SHARE), w.total - w.used), np.nan
    )
    free = np.maximum(0.0, w.total - w.used - np.nan_to_num(reserved))
    util, dev, blank = w.util[keep], w.is_dev[keep], w.blank[keep]
    return {
        PROF_UTIL: np.where(dev, np.nan, np.where(blank, -1.0, util)),
        GPU_UTIL: np.where(dev, np.where(blank, -1.0, np.round(util * 100)), np.nan),
        "DCGM_FI_DEV_FB_USED": w.used[keep],
        "DCGM_FI_DEV_FB_FREE": np.where(w.shared[keep], np.nan, free[keep]),
        "DCGM_FI_DEV_FB_RESERVED": reserved[keep],
        "DCGM_FI_DEV_POWER_USAGE": w.power[keep],
        "DCGM_FI_DEV_GPU_TEMP": w.temp[keep],
        "DCGM_FI_DEV_XID_ERRORS": w.xid[keep],
    } | {family: values[keep] for family, values in w.health.items()}


def _device_rows(
    fleet: Fleet, w: _Window
) -> tuple[list[str], np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The device-level series of time-sliced GPUs (the sum over their slots): label texts,
    per row the index into those texts, the instants and the values per family."""
    on = w.shared
    columns = {
        "physical": np.array([u.physical for u in fleet.units])[w.unit][on],
        "unit": w.unit[on],
        "ts": w.ts[on],
        "util": w.util[on],
        "used": w.used[on],
        "total": w.total[on],
        "power": w.power[on],
        "temp": w.temp[on],
        "xid": w.xid[on],
        "dev": w.is_dev[on],
    }
    firsts = ("total", "power", "temp", "dev")
    how = {"unit": "min", "util": "sum", "used": "sum", "xid": "max"} | dict.fromkeys(
        firsts, "first"
    )
    device = pd.DataFrame(columns).groupby(["physical", "ts"], sort=True).agg(how).reset_index()
    nodes = {n.name: n for n in fleet.nodes}
    first_units = sorted(set(device["unit"].tolist()))
    texts = [
        _series_text(nodes[fleet.units[i].node], fleet.units[i], None, False) for i in first_units
    ]
    series = np.searchsorted(first_units, device["unit"].to_numpy())
    util = np.minimum(1.0, device["util"].to_numpy())
    total, used = device["total"].to_numpy(), device["used"].to_numpy()
    reserved = np.minimum(np.round(total * RESERVED_SHARE), total - used)
    dev = device["dev"].to_numpy(bool)
    values = {
        PROF_UTIL: np.where(dev, np.nan, util),
        GPU_UTIL: np.where(dev, np.round(util * 100), np.nan),
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_DEV_FB_FREE": np.maximum(0.0, total - used - reserved),
        "DCGM_FI_DEV_FB_RESERVED": reserved,
        "DCGM_FI_DEV_POWER_USAGE": device["power"].to_numpy(),
        "DCGM_FI_DEV_GPU_TEMP": device["temp"].to_numpy(),
        "DCGM_FI_DEV_XID_ERRORS": device["xid"].to_numpy(),
    } | {family: np.full(len(device), np.nan) for family in w.health}
    return texts, series, device["ts"].to_numpy(np.int64), values


def _exported_rows(fleet: Fleet, data: SimulatedData) -> tuple[list[str], _Rows]:
    """The window's samples as dcgm-exporter series: per unit (and holder), and per time-sliced
    device; utilization as PROF ratio or DEV percent by the node's signal."""
    w = _window_columns(fleet, data.samples)
    # Whole GPUs, MIG instances and held time-slice slots (these with a vgpu label).
    keep = ~w.shared | (w.uid_codes >= 0)
    texts, series = _unit_series(fleet, data, w, keep)
    out_ts, values = w.ts[keep], _unit_values(w, keep)
    if w.shared.any():
        more, dev_series, dev_ts, extra = _device_rows(fleet, w)
        series = np.concatenate([series, len(texts) + dev_series])
        texts = texts + more
        out_ts = np.concatenate([out_ts, dev_ts])
        values = {k: np.concatenate([v, extra[k]]) for k, v in values.items()}
    order = np.lexsort((out_ts, series))
    return texts, _Rows(series[order], out_ts[order], {k: v[order] for k, v in values.items()})


def _format(family: str, values: np.ndarray) -> list[str]:
    """Sample values as dcgm-exporter writes them (blank sentinel where marked -1)."""
    if family == PROF_UTIL or family in RATIO_FAMILIES:
        return [SENTINEL if v < 0 else f"{v:.6f}" for v in values.tolist()]
    if family == "DCGM_FI_DEV_POWER_USAGE":
        return [f"{v:.3f}" for v in values.tolist()]
    return [SENTINEL if v < 0 else str(int(v)) for v in values.tolist()]


def openmetrics_text(fleet: Fleet, data: SimulatedData) -> str:
    """The OpenMetrics text of one window: every family, series by series in time order."""
    texts, rows = _exported_rows(fleet, data)
    out: list[str] = []
    for family in FAMILIES:
        values = rows.values[family]
        present = ~np.isnan(values)
        if not present.any():
            continue
        out.append(f"# TYPE {family} gauge")  # counters too: OpenMetrics wants _total names
        prefix = [f"{family}{{{t}}} " for t in texts]
        series = rows.series[present].tolist()
        stamps = rows.ts[present].tolist()
        formatted = _format(family, values[present])
        out.extend(
            [f"{prefix[s]}{v} {t}" for s, v, t in zip(series, formatted, stamps, strict=True)]
        )
    out.append("# EOF\n")
    return "\n".join(out)


def _tsdb_ready(tsdb: Path) -> bool:
    return (tsdb.parent / "tsdb.done").exists()


def _block_count(tsdb: Path) -> int:
    return sum(1 for p in tsdb.iterdir() if p.is_dir() and (p / "meta.json").exists())


def _compact(tsdb: Path, log: Any) -> None:
    """Let Prometheus compact the imported 2-hour blocks once, as a long-running server would
    have (queries over days then read a few large blocks)."""
    before = _block_count(tsdb)
    with S.prometheus(tsdb) as url:
        # The TSDB triggers a compaction once a minute, never while one runs: the second
        # trigger means the first one's compactions are all done.
        S.wait_until(lambda: _compactions_triggered(url) >= 2, "TSDB compaction", 3600, 2.0)
    log(f"compaction: {before} blocks -> {_block_count(tsdb)}")


def _compactions_triggered(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("prometheus_tsdb_compactions_triggered_total "):
                return float(line.split()[1])
    return 0.0


def ensure_tsdb(size: Size, log: Any = print) -> Path:
    """Prometheus TSDB blocks of ``size`` (built once, then reused)."""
    tsdb = size.folder / "tsdb"
    if _tsdb_ready(tsdb):
        return tsdb
    promtool = S.binary("promtool")
    shutil.rmtree(tsdb, ignore_errors=True)
    tsdb.mkdir(parents=True)
    text_dir = size.folder / "openmetrics"
    text_dir.mkdir(exist_ok=True)
    fleet = scaled_fleet(size.gpus, size.seed)
    pieces = windows(size.start_ts, size.end_ts)
    started = time.monotonic()
    running: tuple[subprocess.Popen[bytes], Path] | None = None
    for number, (lo, hi) in enumerate(pieces, 1):
        path = text_dir / f"window-{lo}.om"
        path.write_text(openmetrics_text(fleet, window_data(fleet, lo, hi, size.step_s)))
        if running is not None:  # promtool builds the previous window while we wrote this one
            _finish(*running)
        cmd = [promtool, "tsdb", "create-blocks-from", "openmetrics", str(path), str(tsdb)]
        running = (subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), path)
        if number % 6 == 0 or number == len(pieces):
            log(
                f"tsdb {size.name}: window {number}/{len(pieces)}, "
                f"{time.monotonic() - started:.0f}s"
            )
    if running is not None:
        _finish(*running)
    shutil.rmtree(text_dir, ignore_errors=True)
    _compact(tsdb, log)
    (size.folder / "tsdb.done").write_text(f"built in {time.monotonic() - started:.0f}s\n")
    return tsdb


def _finish(proc: subprocess.Popen[bytes], path: Path) -> None:
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"promtool failed on {path.name}: {err.decode()[-2000:]}")
    path.unlink()


# --- the store ------------------------------------------------------------------------------


def _entities(fleet: Fleet, size: Size) -> SimulatedData:
    """Every frame but the samples (those are written window by window)."""
    tiny = window_data(fleet, size.start_ts, size.start_ts + size.step_s, size.step_s)
    instances = pod_instances(fleet, size.start_ts, size.end_ts)
    return SimulatedData(
        start_ts=size.start_ts,
        end_ts=size.end_ts,
        step_s=size.step_s,
        clusters=pd.DataFrame({"cluster": list(fleet.clusters)}),
        nodes=nodes_frame(fleet),
        gpus=gpus_frame(fleet),
        namespaces=namespaces_frame(fleet),
        pods=pods_frame(fleet, instances, size.end_ts),
        samples=tiny.samples.iloc[:0],
    )


def _sample_columns(
    fleet: Fleet, samples: pd.DataFrame, gpu_ids: np.ndarray, pod_ids: dict[str, int]
) -> dict[str, np.ndarray]:
    """The window's ``gpu_samples`` columns, in primary-key order (ts, gpu_id).

    Blank readings (the sentinel in Prometheus) are stored as missing, as the collector does.
    """
    unit = unit_index(fleet, samples)
    ts = samples["ts"].to_numpy(np.int64)
    blank = _blank(fleet, unit, ts)
    uid = samples["pod_uid"].cat
    pod_lookup = np.array([pod_ids[str(u)] for u in uid.categories] + [-1], dtype=np.int64)
    signal = np.where(samples["util_signal"].astype(object).to_numpy() == "dev_gpu_util", 2, 1)
    columns = {
        "gpu_id": gpu_ids[unit],
        "ts": ts,
        "step_s": samples["step_s"].to_numpy(np.int64),
        "pod_id": pod_lookup[uid.codes.to_numpy()],
        "util_ratio": np.where(blank, np.nan, samples["util_ratio"].to_numpy(np.float64)),
        "util_signal": np.where(blank, -1, signal),
        "fb_used_mib": samples["fb_used_mib"].to_numpy(np.float64),
        "fb_total_mib": samples["fb_total_mib"].to_numpy(np.float64),
        "power_w": samples["power_w"].to_numpy(np.float64),
        "temp_c": samples["temp_c"].to_numpy(np.float64),
        "xid": samples["xid"].to_numpy(np.int64),
    }
    order = np.lexsort((columns["gpu_id"], columns["ts"]))
    return {k: v[order] for k, v in columns.items()}


def _python_rows(columns: dict[str, np.ndarray]) -> list[tuple[Any, ...]]:
    """Rows of Python values, NULL (None) for NaN floats and -1 ids/codes."""
    from gpuwatch.store.models import SAMPLE_FIELDS

    out: list[list[Any]] = []
    for name in SAMPLE_FIELDS:
        values = columns[name]
        boxed = values.astype(object)
        if values.dtype.kind == "f":
            boxed[np.isnan(values)] = None
        elif name in ("pod_id", "util_signal"):
            boxed[values < 0] = None
        out.append(boxed.tolist())
    return list(zip(*out, strict=True))


def _copy_text(columns: dict[str, np.ndarray]) -> bytes:
    """The rows as PostgreSQL COPY text (tab separated, \\N for NULL)."""
    from gpuwatch.store.models import SAMPLE_FIELDS

    frame = pd.DataFrame({name: columns[name] for name in SAMPLE_FIELDS})
    for name in ("pod_id", "util_signal"):
        frame[name] = frame[name].astype("Int64").where(frame[name] >= 0)
    return frame.to_csv(sep="\t", header=False, index=False, na_rep="\\N").encode()


def _insert_window(dbapi: Any, dialect: str, columns: dict[str, np.ndarray]) -> None:
    """One window's samples through the driver's bulk path: COPY, or multi-row INSERTs."""
    from gpuwatch.store.models import SAMPLE_FIELDS, GpuSample

    table = GpuSample.__tablename__
    names = ", ".join(SAMPLE_FIELDS)
    if dialect == "postgresql":
        with dbapi.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as cp:
            cp.write(_copy_text(columns))
        return
    rows = _python_rows(columns)
    one = "(" + ", ".join(["?"] * len(SAMPLE_FIELDS)) + ")"
    per = 90  # 990 parameters per statement: within every SQLite's limit
    full = len(rows) // per * per
    cursor = dbapi.cursor()
    flat = [sum(rows[i : i + per], ()) for i in range(0, full, per)]
    cursor.executemany(f"INSERT INTO {table} ({names}) VALUES " + ", ".join([one] * per), flat)
    if full < len(rows):
        cursor.executemany(f"INSERT INTO {table} ({names}) VALUES {one}", rows[full:])
    cursor.close()


def write_store(size: Size, url: str, log: Any = print) -> int:
    """Write ``size`` into the empty store at ``url`` (schema created); returns samples written."""
    from sqlalchemy import text

    from gpuwatch.simulate.load import load_simulated
    from gpuwatch.store import daily, partitions, rollup
    from gpuwatch.store.engine import make_engine, upgrade
    from gpuwatch.store.models import GpuSample

    engine = make_engine(url)
    upgrade(engine)
    fleet = scaled_fleet(size.gpus, size.seed)
    started = time.monotonic()
    with engine.begin() as conn:
        load_simulated(conn, _entities(fleet, size))
        ids = {
            (r.uuid, r.mig_gi_id, r.slot): r.id
            for r in conn.execute(text("SELECT id, uuid, mig_gi_id, slot FROM gpus"))
        }
        pod_ids = {r.uid: r.id for r in conn.execute(text("SELECT id, uid FROM pods"))}
    gpu_ids = np.array([ids[(u.uuid, u.mig_gi_id, u.slot)] for u in fleet.units], dtype=np.int64)
    table = GpuSample.__tablename__
    total = 0
    with engine.begin() as conn:
        partitions.ensure_partitions(conn, size.start_ts, size.end_ts - 1)
    with engine.begin() as conn:
        dbapi: Any = conn.connection.dbapi_connection
        pieces = windows(size.start_ts, size.end_ts, 6 * 3600)
        for number, (lo, hi) in enumerate(pieces, 1):
            samples = window_data(fleet, lo, hi, size.step_s).samples
            columns = _sample_columns(fleet, samples, gpu_ids, pod_ids)
            _insert_window(dbapi, engine.dialect.name, columns)
            rollup.roll_up(conn, lo, hi)
            if size.raw_days is not None and hi <= size.end_ts - size.raw_days * 86400:
                conn.exec_driver_sql(f"DELETE FROM {table} WHERE ts >= {lo} AND ts < {hi}")
            total += len(samples)
            if number % 8 == 0 or number == len(pieces):
                log(
                    f"store {size.name} ({engine.dialect.name}): {number}/{len(pieces)} windows, "
                    f"{total:,} samples, {time.monotonic() - started:.0f}s"
                )
    daily.build_pending(engine, size.end_ts)  # as the collector does after writing
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM ANALYZE")
    engine.dispose()
    log(
        f"store {size.name} ({url.split(':', maxsplit=1)[0]}): {total:,} samples in "
        f"{time.monotonic() - started:.0f}s"
    )
    return total


def sqlite_url(size: Size) -> str:
    return f"sqlite:///{size.folder / 'store.db'}"


def ensure_sqlite(size: Size, log: Any = print) -> str:
    """A SQLite store of ``size`` (built once, then reused); returns its URL."""
    done = size.folder / "sqlite.done"
    path = size.folder / "store.db"
    if not done.exists():
        size.folder.mkdir(parents=True, exist_ok=True)
        for leftover in size.folder.glob("store.db*"):
            leftover.unlink()
        write_store(size, sqlite_url(size), log)
        done.write_text("ok\n")
    assert path.exists()
    return _upgraded(sqlite_url(size))


def _upgraded(url: str) -> str:
    """The store at ``url`` at the current schema (a store built before roll-ups gets them),
    with the daily sums an upgrade left pending built, as the next ``gpuwatch collect`` would."""
    from sqlalchemy import func, select

    from gpuwatch.store import daily
    from gpuwatch.store.engine import make_engine, upgrade
    from gpuwatch.store.models import GpuSampleHourly

    engine = make_engine(url)
    upgrade(engine)
    with engine.connect() as conn:
        last = conn.execute(select(func.max(GpuSampleHourly.hour_ts))).scalar()
    if last is not None:
        daily.build_pending(engine, int(last) + 3600)
    engine.dispose()
    return url


def pg_name(size: Size) -> str:
    return "bench_" + size.name.replace("-", "_")


def ensure_postgres(size: Size, server_url: str, log: Any = print) -> str:
    """A PostgreSQL database of ``size`` on the bench server (built once); returns its URL."""
    done = size.folder / "postgres.done"
    name = pg_name(size)
    if done.exists() and S.database_exists(server_url, name):
        return _upgraded(f"{server_url}/{name}")
    size.folder.mkdir(parents=True, exist_ok=True)
    url = S.create_database(server_url, name, drop=True)
    write_store(size, url, log)
    done.write_text("ok\n")
    return url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--gpus", type=int, default=200, help="physical GPUs (at least)")
    parser.add_argument(
        "--days",
        type=float,
        default=1.0,
        help="days of samples, ending on Monday 2026-11-16 00:00 UTC",
    )
    parser.add_argument("--step", type=int, default=60, help="seconds between samples")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--raw-days",
        type=float,
        help="keep raw samples for the last RAW_DAYS only (older hours as roll-ups only)",
    )
    parser.add_argument("--sqlite", action="store_true", help="build the SQLite store")
    parser.add_argument("--postgres", action="store_true", help="build the PostgreSQL store")
    parser.add_argument("--prometheus", action="store_true", help="build the Prometheus TSDB")
    args = parser.parse_args(argv)
    size = Size(args.gpus, args.days, args.step, args.seed, args.raw_days)
    fleet = scaled_fleet(size.gpus, size.seed)
    print(
        f"{size.name}: {physical_gpus(fleet)} GPUs, {len(fleet.units)} units, "
        f"{len(fleet.nodes)} nodes, {len(fleet.workloads)} workloads, "
        f"{len(fleet.namespaces)} namespaces, folder {size.folder}"
    )
    if not (args.sqlite or args.postgres or args.prometheus):
        parser.error("say what to build: --sqlite, --postgres and/or --prometheus")
    if args.sqlite:
        print(ensure_sqlite(size))
    if args.postgres:
        with S.postgres_server() as server:
            print(ensure_postgres(size, server))
    if args.prometheus:
        print(ensure_tsdb(size))


if __name__ == "__main__":
    main()
