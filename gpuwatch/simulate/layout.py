"""The simulated fleet, declared: clusters, node pools, namespaces and workloads.

Plain declarations that ``fleet.build_fleet`` turns into a concrete, seeded fleet. Workload
names are stable (tests and docs refer to them); the seed only varies generated names, UUIDs,
rollout times and noise.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.domain.durations import DAY_S, HOUR_S
from gpuwatch.simulate.kueue_decl import KueueDecl
from gpuwatch.simulate.patterns import Pattern
from gpuwatch.simulate.schedule import Schedule
from gpuwatch.simulate.volcano_decl import VolcanoDecl


@dataclass(frozen=True)
class ModelDecl:
    """A GPU model as DCGM and GPU Feature Discovery name it, with its power envelope."""

    dcgm_name: str
    gfd_product: str
    memory_mib: int
    family: str
    idle_w: float
    max_w: float
    util_signal: str
    mig_capable: bool


@dataclass(frozen=True)
class ClusterDecl:
    name: str
    cloud: str
    region: str
    driver_version: str


@dataclass(frozen=True)
class NodeDecl:
    """One node; ``alias`` is the handle workload declarations use."""

    cluster: str
    alias: str
    model: str
    instance_type: str
    capacity_type: str
    pool: str
    label_style: str = "standard"
    util_signal: str | None = None
    mig_layout: tuple[tuple[str, ...], ...] = ()
    mig_config: str | None = None
    timeslice_replicas: int = 1
    temp_offset_c: float = 0.0
    managed_nodegroup: bool = False
    #: ``mps`` or ``dra`` (NVIDIA's DRA driver instead of the device plugin); None: the device
    #: plugin, time-slicing when ``timeslice_replicas`` > 1.
    sharing: str | None = None
    #: On a DRA node, ``(gpu index, pods)``: that GPU is one device in a claim ``pods`` share.
    dra_shared: tuple[int, int] | None = None


@dataclass(frozen=True)
class WorkloadDecl:
    """A workload: ``pods`` pods of ``gpus_per_pod`` units each, taken in order from the
    candidate units of ``nodes`` (whole GPUs, MIG instances of ``mig_profile``, or time-slice
    slots) starting at position ``first`` on each node. On a DRA node the pods hold their units
    through ResourceClaims: one per pod from a template, or the named ``claim`` all pods share.
    ``per_node`` caps the pods placed on one node; ``kueue`` says how Kueue admits it,
    ``volcano`` how Volcano schedules it as a gang."""

    cluster: str
    namespace: str
    name: str
    kind: str
    nodes: tuple[str, ...]
    pods: int
    pattern: Pattern
    schedule: Schedule
    gpus_per_pod: int = 1
    first: int = 0
    mig_profile: str | None = None
    team: str | None = None
    seeded_offset: bool = False
    xid_code: int = 0
    xid_rate: float = 0.0
    claim: str | None = None
    per_node: int | None = None
    kueue: KueueDecl | None = None
    volcano: VolcanoDecl | None = None


MODELS: dict[str, ModelDecl] = {
    "a100": ModelDecl(
        "NVIDIA A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB", 81920, "ampere", 58.0, 400.0, "prof", True
    ),
    "h100": ModelDecl(
        "NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3", 81559, "hopper", 72.0, 700.0, "prof", True
    ),
    "l4": ModelDecl("NVIDIA L4", "NVIDIA-L4", 23034, "ada-lovelace", 16.0, 72.0, "prof", False),
    "t4": ModelDecl("Tesla T4", "Tesla-T4", 15360, "turing", 10.0, 70.0, "dev", False),
    "l40s": ModelDecl(
        "NVIDIA L40S", "NVIDIA-L40S", 46068, "ada-lovelace", 32.0, 350.0, "prof", False
    ),
}

INSTANCE_GPUS = {
    "p4de.24xlarge": 8,
    "p5.48xlarge": 8,
    "g6.12xlarge": 4,
    "g6e.12xlarge": 4,
    "g4dn.12xlarge": 4,
    "a2-ultragpu-8g": 8,
    "a3-highgpu-8g": 8,
    "g2-standard-48": 4,
    "n1-standard-32": 4,
}

#: Memory the driver reports per MIG instance on an 80 GB GPU (MiB), and GPU instance ids.
MIG_MEMORY_MIB = {"1g.10gb": 9856, "3g.40gb": 40192}
MIG_FIRST_GI_ID = {"1g.10gb": 7, "3g.40gb": 1}

CLUSTERS = (
    ClusterDecl("prod-us-east", "aws", "us-east-1", "550.127.08"),
    ClusterDecl("research-eu", "gcp", "europe-west4", "535.216.03"),
)

PROD = "prod-us-east"
RESEARCH = "research-eu"
_ALL_1G = ("1g.10gb",) * 7
_MIXED = ("3g.40gb", "3g.40gb", "1g.10gb")

NODES = (
    *(NodeDecl(PROD, f"a{i}", "a100", "p4de.24xlarge", "on_demand", "gpu-a100") for i in range(4)),
    *(NodeDecl(PROD, f"a{i}", "a100", "p4de.24xlarge", "spot", "gpu-a100-spot") for i in (4, 5)),
    *(NodeDecl(PROD, f"a{i}", "a100", "p4de.24xlarge", "on_demand", "gpu-a100") for i in (6, 7)),
    NodeDecl(PROD, "h0", "h100", "p5.48xlarge", "on_demand", "gpu-h100"),
    NodeDecl(PROD, "h1", "h100", "p5.48xlarge", "on_demand", "gpu-h100", temp_offset_c=11.0),
    NodeDecl(PROD, "h2", "h100", "p5.48xlarge", "on_demand", "gpu-h100"),
    NodeDecl(
        PROD,
        "h3",
        "h100",
        "p5.48xlarge",
        "on_demand",
        "gpu-h100-mig",
        mig_layout=(_ALL_1G,) * 4 + (_MIXED,) * 4,
        mig_config="inference-mixed",
    ),
    *(NodeDecl(PROD, f"l{i}", "l4", "g6.12xlarge", "on_demand", "gpu-l4") for i in (0, 1)),
    NodeDecl(PROD, "l2", "l4", "g6.12xlarge", "on_demand", "gpu-l4", util_signal="dev"),
    *(NodeDecl(PROD, f"l{i}", "l4", "g6.12xlarge", "spot", "gpu-l4-spot") for i in (3, 4)),
    *(
        NodeDecl(PROD, f"l{i}", "l4", "g6.12xlarge", "on_demand", "gpu-l4-serving")
        for i in range(5, 10)
    ),
    *(
        NodeDecl(PROD, f"t{i}", "t4", "g4dn.12xlarge", "on_demand", "t4", managed_nodegroup=True)
        for i in (0, 1)
    ),
    NodeDecl(
        PROD,
        "t2",
        "t4",
        "g4dn.12xlarge",
        "on_demand",
        "t4-shared",
        timeslice_replicas=4,
        managed_nodegroup=True,
    ),
    *(NodeDecl(RESEARCH, f"ra{i}", "a100", "a2-ultragpu-8g", "on_demand", "a100") for i in (0, 2)),
    NodeDecl(RESEARCH, "ra1", "a100", "a2-ultragpu-8g", "on_demand", "a100", "lowercase"),
    *(NodeDecl(RESEARCH, f"ra{i}", "a100", "a2-ultragpu-8g", "spot", "a100-spot") for i in (3, 4)),
    *(NodeDecl(RESEARCH, f"rh{i}", "h100", "a3-highgpu-8g", "on_demand", "h100") for i in range(4)),
    *(NodeDecl(RESEARCH, f"rl{i}", "l4", "g2-standard-48", "on_demand", "l4") for i in (0, 1)),
    NodeDecl(RESEARCH, "rl2", "l4", "g2-standard-48", "spot", "l4-preemptible"),
    *(NodeDecl(RESEARCH, f"rl{i}", "l4", "g2-standard-48", "on_demand", "l4") for i in (3, 4)),
    *(NodeDecl(RESEARCH, f"rt{i}", "t4", "n1-standard-32", "on_demand", "t4") for i in (0, 1)),
)

#: The node whose exporter is scraped without honorLabels (series carry ``exported_*``).
EXPORTED_LABELS_NODE = (PROD, "a1")
#: A node whose exporter disappears for a few hours every week (Monday 03:00-08:00 UTC).
OUTAGE_NODE = (PROD, "l2")
OUTAGE = Schedule(period_s=7 * DAY_S, offset_s=4 * DAY_S, start_s=3 * HOUR_S, run_s=5 * HOUR_S)

NAMESPACES = (
    (PROD, "search-prod", "search"),
    (PROD, "recsys", "search"),
    (PROD, "llm-training", "ml-platform"),
    (PROD, "llm-serving", "ml-platform"),
    (PROD, "ml-dev", "ml-platform"),
    (PROD, "batch-etl", "data"),
    (PROD, "notebooks", "research"),
    (PROD, "vision-prod", "vision"),
    (PROD, "speech", "research"),
    (PROD, "support", "search"),
    (RESEARCH, "nlp-research", "research"),
    (RESEARCH, "genai-research", "research"),
    (RESEARCH, "vision-research", "vision"),
    (RESEARCH, "jupyter", "ml-platform"),
    (RESEARCH, "eval", "ml-platform"),
    (RESEARCH, "ci", "ml-platform"),
    (RESEARCH, "data-labeling", "data"),
)

# Patterns: the shapes the field complains about, and some healthy ones.
SPARSE_TRAINING = Pattern(
    "flat", 0.62, 0.93, 0.55, 0.8, idle_util=0.02, mem_idle=0.006, busy_units=3
)
SPARSE_FINETUNE = Pattern(
    "flat", 0.55, 0.9, 0.5, 0.75, idle_util=0.02, mem_idle=0.006, busy_units=2
)
EFFICIENT_TRAINING = Pattern("flat", 0.85, 0.95, 0.82, 0.92)
IDLE_INFERENCE = Pattern("diurnal", 0.01, 0.075, 0.15, 0.18, idle_util=0.0, mem_idle=0.15)
SERVING = Pattern("diurnal", 0.2, 0.65, 0.3, 0.42, mem_idle=0.3)
LIGHT_SERVING = Pattern("diurnal", 0.04, 0.25, 0.1, 0.2, mem_idle=0.1)
NEAR_OOM = Pattern("diurnal", 0.3, 0.72, 0.955, 0.985, mem_idle=0.955)
NOTEBOOK = Pattern("office", 0.3, 0.85, 0.35, 0.6, idle_util=0.01, mem_idle=0.25)
BATCH = Pattern("flat", 0.55, 0.82, 0.4, 0.6)
DEBUG_IDLE = Pattern("flat", 0.0, 0.008, 0.012, 0.013, idle_util=0.0)
#: 12 replicas with the demand of 3 (Σ utilization about 1.6: ⌈p95 ÷ 0.6⌉ = 3).
OVER_REPLICATED = Pattern("flat", 0.11, 0.16, 0.3, 0.35)
#: Traffic that follows the day: summed utilization swings fourfold between night and peak.
DIURNAL_SERVING = Pattern("diurnal", 0.04, 0.55, 0.3, 0.4, mem_idle=0.3, peak_hour=14.0)


def rolling(period_h: int) -> Schedule:
    """A long-running workload replaced by a rollout every ``period_h`` hours."""
    return Schedule(period_s=period_h * HOUR_S)


def daily(start_h: float, run_h: float, jitter_h: float = 0, pending_h: float = 0) -> Schedule:
    """A run every day from ``start_h`` UTC."""
    return Schedule(
        period_s=DAY_S,
        start_s=int(start_h * HOUR_S),
        run_s=int(run_h * HOUR_S),
        jitter_s=int(jitter_h * HOUR_S),
        pending_s=int(pending_h * HOUR_S),
    )


def every(period_h: float, run_h: float, jitter_h: float = 0, start_h: float = 0) -> Schedule:
    """A run every ``period_h`` hours (cycles aligned to the Unix epoch)."""
    return Schedule(
        period_s=int(period_h * HOUR_S),
        start_s=int(start_h * HOUR_S),
        run_s=int(run_h * HOUR_S),
        jitter_s=int(jitter_h * HOUR_S),
    )


def declare(
    cluster: str,
    ns: str,
    name: str,
    kind: str,
    nodes: str,
    pods: int,
    pattern: Pattern,
    schedule: Schedule,
    *,
    gpus_per_pod: int = 1,
    first: int = 0,
    mig_profile: str | None = None,
    team: str | None = None,
    seeded_offset: bool | None = None,
    xid_code: int = 0,
    xid_rate: float = 0.0,
    claim: str | None = None,
    per_node: int | None = None,
    kueue: KueueDecl | None = None,
    volcano: VolcanoDecl | None = None,
) -> WorkloadDecl:
    """A declaration; long-running kinds get a seeded rollout time unless told otherwise."""
    if seeded_offset is None:
        seeded_offset = kind in ("Deployment", "StatefulSet", "Pod") and schedule.run_s is None
    return WorkloadDecl(
        cluster,
        ns,
        name,
        kind,
        tuple(nodes.split()),
        pods,
        pattern,
        schedule,
        gpus_per_pod=gpus_per_pod,
        first=first,
        mig_profile=mig_profile,
        team=team,
        seeded_offset=seeded_offset,
        xid_code=xid_code,
        xid_rate=xid_rate,
        claim=claim,
        per_node=per_node,
        kueue=kueue,
        volcano=volcano,
    )


_w = declare

# fmt: off
WORKLOADS = (
    # prod-us-east: A100
    _w(PROD, "llm-training", "llm-pretrain", "Job", "a0 a6", 2, SPARSE_TRAINING,
       every(72, 60, 4), gpus_per_pod=8),
    _w(PROD, "search-prod", "search-ranker", "Deployment", "a1", 4, IDLE_INFERENCE, rolling(216)),
    _w(PROD, "search-prod", "embedding-api", "Deployment", "a1", 2, IDLE_INFERENCE, rolling(260),
       first=4),
    _w(PROD, "notebooks", "nb-alice", "StatefulSet", "a1", 1, NOTEBOOK, rolling(168), first=6,
       team="search"),
    _w(PROD, "recsys", "recsys-train", "Job", "a2", 1, EFFICIENT_TRAINING, daily(2, 20, 2),
       gpus_per_pod=4),
    _w(PROD, "batch-etl", "feature-backfill", "Job", "a2", 4, BATCH, daily(6, 11, 1), first=4),
    _w(PROD, "ml-dev", "hpo-trial", "Job", "a2", 4, BATCH, daily(18, 10, 2, pending_h=5), first=4),
    _w(PROD, "recsys", "ads-ctr-train", "Job", "a3", 1, EFFICIENT_TRAINING, every(48, 44, 3),
       gpus_per_pod=8),
    _w(PROD, "vision-prod", "vision-train-sweep", "Job", "a4", 8, BATCH, daily(4, 16, 2)),
    _w(PROD, "recsys", "recsys-serving", "Deployment", "a7", 8, SERVING, rolling(180)),
    # prod-us-east: H100 and MIG
    _w(PROD, "llm-serving", "vllm-llama70b", "Deployment", "h0", 2, NEAR_OOM, rolling(240),
       gpus_per_pod=4),
    _w(PROD, "llm-training", "llm-sft", "Job", "h1", 1, EFFICIENT_TRAINING, every(96, 84, 6),
       gpus_per_pod=8),
    _w(PROD, "ml-dev", "gpu-debug-ivan", "Pod", "h2", 1, DEBUG_IDLE,
       Schedule(period_s=7 * DAY_S, run_s=6 * DAY_S + 12 * HOUR_S), seeded_offset=True),
    _w(PROD, "search-prod", "rag-embed", "Deployment", "h2", 4, SERVING, rolling(200), first=1),
    _w(PROD, "search-prod", "text-embedding-predictor", "Deployment", "h3", 8, LIGHT_SERVING,
       rolling(150), mig_profile="1g.10gb"),
    _w(PROD, "speech", "tts-predictor", "Deployment", "h3", 6, SERVING, rolling(170),
       mig_profile="1g.10gb", first=8),
    _w(PROD, "search-prod", "reranker-predictor", "Deployment", "h3", 6, LIGHT_SERVING,
       rolling(190), mig_profile="1g.10gb", first=14),
    _w(PROD, "llm-serving", "llm-small-predictor", "Deployment", "h3", 5, SERVING, rolling(230),
       mig_profile="3g.40gb"),
    # prod-us-east: L4 and T4
    _w(PROD, "batch-etl", "nightly-embed", "CronJob", "l0 l1", 8, BATCH, daily(1, 3.5, 1)),
    _w(PROD, "vision-prod", "image-moderation", "Deployment", "l2", 4, SERVING, rolling(210)),
    _w(PROD, "vision-prod", "thumbnailer", "Deployment", "l3", 3, LIGHT_SERVING, rolling(190)),
    _w(PROD, "notebooks", "nb-bob", "StatefulSet", "l4", 1, NOTEBOOK, rolling(168)),
    _w(PROD, "notebooks", "jupyter-dana", "Pod", "l4", 1, NOTEBOOK, rolling(168), first=1,
       team="vision"),
    _w(PROD, "vision-prod", "ocr-service", "Deployment", "t0", 4, SERVING, rolling(220)),
    _w(PROD, "support", "chat-assist", "Deployment", "l5 l6 l7", 12, OVER_REPLICATED, rolling(320)),
    _w(PROD, "support", "ticket-triage", "Deployment", "l8 l9", 8, DIURNAL_SERVING, rolling(280)),
    _w(PROD, "search-prod", "legacy-classifier", "Deployment", "t1", 2, IDLE_INFERENCE,
       rolling(400)),
    _w(PROD, "speech", "asr-small", "Deployment", "t2", 5, LIGHT_SERVING, rolling(200)),
    _w(PROD, "vision-prod", "ocr-lite", "Deployment", "t2", 4, LIGHT_SERVING, rolling(250),
       first=5),
    # research-eu
    _w(RESEARCH, "vision-research", "vit-finetune", "Job", "ra0", 1, SPARSE_FINETUNE,
       every(48, 40, 4), gpus_per_pod=8, xid_code=31, xid_rate=0.002),
    _w(RESEARCH, "jupyter", "nb-chen", "StatefulSet", "ra1", 1, NOTEBOOK, rolling(168),
       team="research"),
    _w(RESEARCH, "jupyter", "nb-eva", "StatefulSet", "ra1", 1, NOTEBOOK, rolling(168), first=1),
    _w(RESEARCH, "jupyter", "nb-farid", "StatefulSet", "ra1", 1, NOTEBOOK, rolling(168), first=2),
    _w(RESEARCH, "jupyter", "jupyter-gil", "Pod", "ra1", 1, NOTEBOOK, rolling(168), first=3),
    _w(RESEARCH, "genai-research", "protein-fold", "Job", "ra1", 1, EFFICIENT_TRAINING,
       every(36, 30, 3), gpus_per_pod=2, first=4),
    _w(RESEARCH, "vision-research", "diffusion-train", "Job", "ra2", 1, EFFICIENT_TRAINING,
       every(72, 66, 4), gpus_per_pod=8),
    _w(RESEARCH, "genai-research", "translation-api", "Deployment", "ra3", 2, IDLE_INFERENCE,
       rolling(300)),
    _w(RESEARCH, "eval", "speech-eval", "CronJob", "ra3", 2, BATCH, daily(2, 3, 0.5), first=2),
    _w(RESEARCH, "vision-research", "scratch-kim", "Pod", "ra4", 1, LIGHT_SERVING,
       Schedule(period_s=5 * DAY_S, run_s=4 * DAY_S), gpus_per_pod=2, seeded_offset=True),
    _w(RESEARCH, "vision-research", "batch-captioning", "Job", "ra4", 4, BATCH, daily(9, 9, 1),
       first=2),
    _w(RESEARCH, "genai-research", "moe-pretrain", "Job", "rh0", 1, EFFICIENT_TRAINING,
       every(120, 108, 6), gpus_per_pod=8),
    _w(RESEARCH, "nlp-research", "rlhf-train", "Job", "rh1", 1, BATCH, daily(8, 14, 2),
       gpus_per_pod=4),
    _w(RESEARCH, "eval", "eval-harness", "CronJob", "rh1", 4, BATCH, daily(0, 6, 1), first=4),
    _w(RESEARCH, "nlp-research", "embedding-bench", "Pod", "rh2", 1, LIGHT_SERVING,
       Schedule(period_s=7 * DAY_S, run_s=5 * DAY_S), gpus_per_pod=2, seeded_offset=True),
    _w(RESEARCH, "nlp-research", "reward-model-train", "Job", "rh2", 1, EFFICIENT_TRAINING,
       every(24, 16, 2, start_h=6), gpus_per_pod=4, first=2),
    _w(RESEARCH, "genai-research", "code-model-train", "Job", "rh3", 1, EFFICIENT_TRAINING,
       every(72, 68, 3), gpus_per_pod=8),
    _w(RESEARCH, "nlp-research", "whisper-api", "Deployment", "rl0", 2, SERVING, rolling(240)),
    _w(RESEARCH, "jupyter", "nb-hana", "StatefulSet", "rl0", 1, NOTEBOOK, rolling(168), first=2),
    _w(RESEARCH, "eval", "nightly-eval", "CronJob", "rl1", 4, BATCH, daily(2, 3, 1)),
    _w(RESEARCH, "genai-research", "translation-batch", "CronJob", "rl3 rl4", 8, BATCH,
       daily(20, 3, 1)),
    _w(RESEARCH, "genai-research", "doc-ocr-batch", "CronJob", "rl3 rl4", 8, BATCH,
       daily(8, 8, 1)),
    _w(RESEARCH, "data-labeling", "labeling-tool", "Deployment", "rt0", 2, LIGHT_SERVING,
       rolling(300)),
    _w(RESEARCH, "ci", "ci-gpu-tests", "CronJob", "rt1", 2, BATCH, every(6, 0.75, 0.25, 0.5)),
)
# fmt: on
