"""A small DCGM fleet with every label variant, as raw Prometheus series with known values.

Nodes (all values are deterministic functions of unit and time, so tests compute expectations):

- ``gpu-node-a``: 8 × A100, standard labels (``UUID``, ``Hostname``, ``pod``), PROF and DEV
  both exported (PROF is half of DEV/100, so the test can tell which signal was used); GPUs 0-3
  held by ``ml-research/train-0``, 4-5 by ``serving/infer-6d5f-x2x``, 6-7 unheld; XID on GPU 5.
- ``gpu-node-b``: 4 × L40S scraped without ``honorLabels``: ``exported_pod`` names the holder and
  plain ``pod`` names the exporter; DEV only; scraped 17 s after each grid instant; GPU 3 unheld.
- ``gpu-node-c``: one H100 in MIG mode with lowercase ``uuid``/``hostname``: instances 1 (3g.40gb)
  and 2 (2g.20gb) held, 3 (1g.10gb) unheld; PROF only.
- ``gpu-node-d``: 2 × T4, DEV only, an exporter outage (no samples) and blank-sentinel readings.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tests.support.prometheus import Series

SENTINEL = 9223372036854775794.0
STEP_S = 60


@dataclass(frozen=True)
class Unit:
    node: str
    uuid: str
    gpu: int
    model: str
    gi: int = -1
    profile: str | None = None
    namespace: str | None = None
    pod: str | None = None
    style: str = "standard"  # standard | exported | lowercase
    prof: bool = True
    dev: bool = True
    offset_s: int = 0
    index: int = 0


def units() -> list[Unit]:
    out: list[Unit] = []
    a100 = "NVIDIA A100-SXM4-80GB"
    for gpu in range(8):
        holder = ("ml-research", "train-0") if gpu < 4 else ("serving", "infer-6d5f-x2x")
        ns, pod = holder if gpu < 6 else (None, None)
        out.append(Unit("gpu-node-a", f"GPU-a000000{gpu}", gpu, a100, namespace=ns, pod=pod))
    for gpu in range(4):
        ns, pod = ("research", "notebook-alice-0") if gpu < 3 else (None, None)
        out.append(
            Unit(
                "gpu-node-b",
                f"GPU-b000000{gpu}",
                gpu,
                "NVIDIA L40S",
                namespace=ns,
                pod=pod,
                style="exported",
                prof=False,
                offset_s=17,
            )
        )
    for gi, profile, holder in (
        (1, "3g.40gb", "llm-3g-0"),
        (2, "2g.20gb", "embed-0"),
        (3, "1g.10gb", None),
    ):
        out.append(
            Unit(
                "gpu-node-c",
                "GPU-c0000000",
                0,
                "NVIDIA H100 80GB HBM3",
                gi=gi,
                profile=profile,
                namespace="inference" if holder else None,
                pod=holder,
                style="lowercase",
                dev=False,
            )
        )
    for gpu in range(2):
        out.append(
            Unit(
                "gpu-node-d",
                f"GPU-d000000{gpu}",
                gpu,
                "Tesla T4",
                namespace="batch",
                pod=f"etl-{gpu}",
                prof=False,
            )
        )
    return [Unit(**{**u.__dict__, "index": i}) for i, u in enumerate(out)]


def outage(ts: int, start_ts: int) -> bool:
    """gpu-node-d's exporter is down from day 1 06:00 to 12:00 (relative to the window start)."""
    return start_ts + 86400 + 6 * 3600 <= ts < start_ts + 86400 + 12 * 3600


def dev_pct(unit: Unit, grid_ts: int) -> float:
    return float((unit.index * 13 + grid_ts // STEP_S) % 101)


def util_value(unit: Unit, grid_ts: int) -> tuple[float, str]:
    """(expected util_ratio, expected signal) at a grid instant."""
    if unit.prof and unit.dev:
        return dev_pct(unit, grid_ts) / 200.0, "prof_gr_engine_active"
    if unit.prof:
        return dev_pct(unit, grid_ts) / 100.0, "prof_gr_engine_active"
    return dev_pct(unit, grid_ts) / 100.0, "dev_gpu_util"


def util_sentinel(unit: Unit, grid_ts: int) -> bool:
    return unit.node == "gpu-node-d" and unit.gpu == 0 and (grid_ts // STEP_S) % 97 == 0


def fb_used(unit: Unit, grid_ts: int) -> float:
    return float(1000 + unit.index * 100 + (grid_ts // STEP_S) % 50)


def fb_total(unit: Unit) -> float:
    sizes = {"3g.40gb": 40192.0, "2g.20gb": 19968.0, "1g.10gb": 9856.0}
    if unit.profile:
        return sizes[unit.profile]
    return {"NVIDIA A100-SXM4-80GB": 81920.0, "NVIDIA L40S": 46068.0, "Tesla T4": 15360.0}[
        unit.model
    ]


def labels(unit: Unit) -> dict[str, str]:
    uuid_label, host_label = (
        ("uuid", "hostname") if unit.style == "lowercase" else ("UUID", "Hostname")
    )
    out = {
        "gpu": str(unit.gpu),
        uuid_label: unit.uuid,
        "device": f"nvidia{unit.gpu}",
        "modelName": unit.model,
        host_label: unit.node,
        "DCGM_FI_DRIVER_VERSION": "550.54.15",
        "job": "dcgm-exporter",
        "instance": f"10.0.0.{ord(unit.node[-1]) - 96}:9400",
    }
    if unit.gi >= 0:
        out |= {"GPU_I_ID": str(unit.gi), "GPU_I_PROFILE": str(unit.profile)}
    holder = {
        "namespace": unit.namespace or "",
        "pod": unit.pod or "",
        "container": "main" if unit.pod else "",
    }
    if unit.style == "exported":
        out |= {f"exported_{k}": v for k, v in holder.items() if v}
        out |= {
            "pod": "nvidia-dcgm-exporter-b7x2k",
            "namespace": "gpu-operator",
            "container": "exporter",
        }
    else:
        out |= {k: v for k, v in holder.items() if v}
    return out


def grid(start_ts: int, end_ts: int, unit: Unit) -> Iterator[int]:
    for ts in range(start_ts, end_ts, STEP_S):
        if unit.node == "gpu-node-d" and outage(ts, start_ts):
            continue
        yield ts


def series(start_ts: int, end_ts: int) -> list[Series]:
    """Every raw series of the fleet over ``[start_ts, end_ts)``."""
    out: list[Series] = []
    for unit in units():
        base = labels(unit)
        stamps = list(grid(start_ts, end_ts, unit))
        raw = [ts + unit.offset_s for ts in stamps]

        def make(metric: str, values: list[float]) -> None:
            out.append(Series(metric, base, list(zip(raw, values, strict=True))))  # noqa: B023

        if unit.dev:
            make(
                "DCGM_FI_DEV_GPU_UTIL",
                [SENTINEL if util_sentinel(unit, t) else dev_pct(unit, t) for t in stamps],
            )
        if unit.prof:
            make("DCGM_FI_PROF_GR_ENGINE_ACTIVE", [util_value(unit, t)[0] for t in stamps])
        make("DCGM_FI_DEV_FB_USED", [fb_used(unit, t) for t in stamps])
        make("DCGM_FI_DEV_FB_FREE", [fb_total(unit) - fb_used(unit, t) for t in stamps])
        make("DCGM_FI_DEV_GPU_TEMP", [40.0 + unit.index for _ in stamps])
        if unit.node == "gpu-node-a" and unit.gpu == 5:
            make(
                "DCGM_FI_DEV_XID_ERRORS",
                [79.0 if (t // STEP_S) % 500 == 0 else 0.0 for t in stamps],
            )
    return out


def expected_grid(start_ts: int, end_ts: int, unit: Unit) -> list[int]:
    """The grid instants at which the collector must store a sample for ``unit``."""
    stamps = list(grid(start_ts, end_ts, unit))
    if unit.offset_s:
        # Scraped after the grid instant: belongs to the next instant (window (t - step, t]).
        return [t + STEP_S for t in stamps if t + STEP_S < end_ts]
    return stamps
