"""The simulated fleet's efficiency and health scenarios, declared (docs/simulation.md).

Plain declarations that ``fleet.build_fleet`` places on the nodes, GPUs and workloads they name;
``health`` turns them into readings. Every scenario is a fixed function of time (UTC hours,
weekly instants), so the demo's history and the live exporter show the same events:

- how each workload's work shows in the profiling fields (:class:`Efficiency`): an input-bound
  job, a job that never touches tensor cores, a memory-bound job and a healthy busy one;
- a node whose busy GPUs are held down by heat every afternoon and by the power cap every
  evening (``THROTTLING_NODE``);
- a node whose exporter names the clock-event field by its older name (``LEGACY_CLOCK_NODE``);
- one GPU that gets a double-bit ECC error and XID 79 every week while a pod holds it, keeps
  reporting for a few hours, then falls silent until it is reset (``FAILING_GPU``);
- an application error (XID 13) on one pod's GPU every night (``APP_XID``);
- a little correctable-ECC and PCIe-replay noise on a few GPUs, below the degraded thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.domain.durations import DAY_S, HOUR_S
from gpuwatch.simulate.schedule import Schedule

PROD, RESEARCH = "prod-us-east", "research-eu"


@dataclass(frozen=True)
class Efficiency:
    """How a workload's work shows in the profiling fields, as shares of its engine activity.

    SM active = engine active × ``sm_per_util`` (at most 1, so SM active never exceeds engine
    active); tensor-pipe active and SM occupancy = SM active × ``tensor_per_sm`` and
    × ``occupancy_per_sm``; DRAM active = engine active × ``dram_per_util``."""

    sm_per_util: float
    tensor_per_sm: float
    dram_per_util: float
    occupancy_per_sm: float = 0.55

    def __post_init__(self) -> None:
        shares = (self.sm_per_util, self.tensor_per_sm, self.dram_per_util, self.occupancy_per_sm)
        if not all(0.0 <= s <= 1.0 for s in shares):
            raise ValueError(f"efficiency shares must lie in [0, 1]: {self}")


#: Every workload not named in ``EFFICIENCY``: SM active well above a quarter of the engine's
#: time when busy, some tensor-core work.
DEFAULT_EFFICIENCY = Efficiency(sm_per_util=0.75, tensor_per_sm=0.35, dram_per_util=0.4)
#: Busy engine, few SMs working, little memory traffic: waiting for its input pipeline.
INPUT_BOUND = Efficiency(sm_per_util=0.28, tensor_per_sm=0.5, dram_per_util=0.1)
#: SMs busy, tensor pipes idle: FP32 work on a tensor-core GPU.
NO_TENSOR = Efficiency(sm_per_util=0.85, tensor_per_sm=0.0, dram_per_util=0.45)
#: Few SMs working while the memory interface is busy: bound by memory bandwidth.
MEMORY_BOUND = Efficiency(sm_per_util=0.3, tensor_per_sm=0.4, dram_per_util=0.9)
#: A healthy busy training job: SMs and tensor pipes working.
TENSOR_BUSY = Efficiency(sm_per_util=0.9, tensor_per_sm=0.6, dram_per_util=0.45)

#: Workload name (fleet-unique) → its efficiency.
EFFICIENCY: dict[str, Efficiency] = {
    "vision-train-sweep": INPUT_BOUND,  # prod-us-east/vision-prod, node a4 (A100, spot)
    "feature-backfill": NO_TENSOR,  # prod-us-east/batch-etl, node a2 (A100)
    "rlhf-train": MEMORY_BOUND,  # research-eu/nlp-research, node rh1 (H100)
    "recsys-train": TENSOR_BUSY,  # prod-us-east/recsys, node a2 (A100)
}

#: The hot H100 node (``llm-sft`` trains on it): its GPUs' clocks are held down while busy
#: (engine active at or above ``domain.health.BUSY_UTIL_RATIO``) by heat from 12:00 to 16:00 UTC
#: and by the power cap from 20:00 to 22:00 UTC, a quarter of their busy time.
THROTTLING_NODE = (PROD, "h1")
THERMAL_HOURS = (12.0, 16.0)
POWER_CAP_HOURS = (20.0, 22.0)
#: SM clock while held down, as a share of the model's boost clock.
THERMAL_CLOCK_SHARE = 0.8
POWER_CAP_CLOCK_SHARE = 0.87

#: A node whose exporter (a 3.x release) names the clock-event bitmask
#: ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS`` instead of ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``.
LEGACY_CLOCK_NODE = (RESEARCH, "ra0")


@dataclass(frozen=True)
class Failure:
    """A GPU that fails in every cycle of ``schedule``: at the start of its run it counts one
    double-bit ECC error and reports XID ``xid``; it keeps reporting for the run, then its series
    stop for ``silent_s`` (drained and reset) and come back with the volatile counters at 0."""

    schedule: Schedule
    silent_s: int
    xid: int = 79


#: ``(cluster, node alias, GPU index)``: GPU 5 of the A100 node a7, held by a replica of
#: ``recsys/recsys-serving``; every Wednesday 10:00 UTC, reporting until 16:00, silent until
#: Thursday 10:00 UTC (1970-01-01 was a Thursday: offset 6 days is a Wednesday).
FAILING_GPU = (PROD, "a7", 5)
FAILURE = Failure(
    Schedule(period_s=7 * DAY_S, offset_s=6 * DAY_S, start_s=10 * HOUR_S, run_s=6 * HOUR_S),
    silent_s=18 * HOUR_S,
)


@dataclass(frozen=True)
class XidEvent:
    """Replica ``replica`` of a workload reports XID ``code`` every day from ``start_s`` after
    midnight UTC for ``run_s`` seconds (while it runs)."""

    workload: str
    replica: int
    code: int
    start_s: int
    run_s: int


#: ``ml-dev/hpo-trial`` (node a2): a trial hits an illegal address every night at 23:00 UTC.
APP_XID = XidEvent("hpo-trial", replica=1, code=13, start_s=23 * HOUR_S, run_s=300)


@dataclass(frozen=True)
class CounterNoise:
    """One event of ``counter`` (``ecc_sbe`` or ``pcie_replay``) at every instant
    ``phase_s + k × every_s``."""

    counter: str
    every_s: int
    phase_s: int


#: ``(cluster, node alias, GPU index)`` → its noise: at most 1 SBE and 6 replays an hour, far
#: below ``health.sbe_burst_per_hour`` (10) and ``health.pcie_replays_per_hour`` (100).
NOISE: dict[tuple[str, str, int], CounterNoise] = {
    (PROD, "a3", 2): CounterNoise("ecc_sbe", every_s=2 * HOUR_S, phase_s=17 * 60),
    (RESEARCH, "rh0", 4): CounterNoise("ecc_sbe", every_s=3 * HOUR_S, phase_s=40 * 60),
    (PROD, "l0", 1): CounterNoise("pcie_replay", every_s=15 * 60, phase_s=7 * 60),
    (RESEARCH, "rl3", 0): CounterNoise("pcie_replay", every_s=10 * 60, phase_s=0),
}


@dataclass(frozen=True)
class NodeHealth:
    """What a node's exporter reports beyond utilization: ECC counters (``ecc``), NVLink
    bandwidth and error counters on whole GPUs (``nvlink``), the row-remap failure flag
    (``row_remap``); whether its busy GPUs are held down (``throttling``) and whether it names
    the clock-event bitmask by its older name (``legacy_clock_field``)."""

    ecc: bool = True
    nvlink: bool = False
    row_remap: bool = False
    throttling: bool = False
    legacy_clock_field: bool = False


#: A node with ECC on and none of the scenarios (what ``fleet_health`` starts from).
NO_EVENTS_NODE = NodeHealth()


#: Models (``layout.MODELS`` keys) by what they export: NVLink fields (SXM boards), row
#: remapping (HBM, Ampere and later); ECC counters everywhere but on the L4 nodes, which run
#: with ECC off.
NVLINK_MODELS = ("a100", "h100")
ROW_REMAP_MODELS = ("a100", "h100")
ECC_OFF_MODELS = ("l4",)

#: Every node loads its driver at ``DRIVER_LOAD_EPOCH_TS`` + k × ``DRIVER_LOAD_PERIOD_S`` (volatile
#: ECC, PCIe replay and NVLink error counts restart from 0); aggregate ECC counts run from
#: ``AGGREGATE_EPOCH_TS``.
DRIVER_LOAD_EPOCH_TS = 1767225600  # 2026-01-01 00:00 UTC
DRIVER_LOAD_PERIOD_S = 90 * DAY_S
AGGREGATE_EPOCH_TS = 1735689600  # 2025-01-01 00:00 UTC
