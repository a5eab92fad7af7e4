"""The store's tables (SQLAlchemy 2). The Alembic history in ``migrations/`` builds the same schema.

Conventions: every instant is whole seconds since the Unix epoch (UTC) in a ``*_ts`` column;
units are in column names (``fb_used_mib``, ``power_w``, ``util_ratio``). ``gpu_samples`` is the big
table (one row per GPU unit per ``step``); it has a compact integer key and no text columns.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Defined in the domain, re-exported (``as``) for the store modules that import them from here.
from gpuwatch.domain.durations import HOUR_S as HOUR_S  # noqa: PLC0414
from gpuwatch.domain.frames import NO_POD as NO_POD  # noqa: PLC0414

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: ``gpu_samples.util_signal``: which DCGM field the utilization ratio came from.
UTIL_SIGNAL_PROF = 1  # DCGM_FI_PROF_GR_ENGINE_ACTIVE, ratio 0-1
UTIL_SIGNAL_DEV = 2  # DCGM_FI_DEV_GPU_UTIL / 100
UTIL_SIGNALS = {UTIL_SIGNAL_PROF: "prof_gr_engine_active", UTIL_SIGNAL_DEV: "dev_gpu_util"}
#: ``gpu_samples`` efficiency and health readings (0006), NULL where not exported: the
#: profiling ratios and clocks are step means, ``clock_events`` the step's last bitmask, the
#: ``*_count`` fields counter increases over the step (NULL: no increase reported).
HEALTH_SAMPLE_FIELDS = (
    "sm_active_ratio",
    "sm_occupancy_ratio",
    "tensor_active_ratio",
    "dram_active_ratio",
    "sm_clock_mhz",
    "pcie_bytes_per_s",
    "nvlink_bytes_per_s",
    "clock_events",
    "ecc_sbe_count",
    "ecc_dbe_count",
    "pcie_replay_count",
    "nvlink_error_count",
    "row_remap_failure",
)
#: ``gpu_samples`` columns in the order bulk readers and writers exchange rows.
SAMPLE_FIELDS = (
    "gpu_id",
    "ts",
    "step_s",
    "pod_id",
    "util_ratio",
    "util_signal",
    "fb_used_mib",
    "fb_total_mib",
    "power_w",
    "temp_c",
    "xid",
)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSON,
        dict[str, str]: JSON,
        list[Any]: JSON,
    }


class Cluster(Base):
    __tablename__ = "clusters"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)


class Node(Base):
    """A Kubernetes node with GPUs, with its GPU Feature Discovery facts."""

    __tablename__ = "nodes"
    __table_args__ = (UniqueConstraint("cluster_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(253))
    gpu_model: Mapped[str | None] = mapped_column(String(128))
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    gpu_memory_mib: Mapped[int | None] = mapped_column(Integer)
    capacity_type: Mapped[str] = mapped_column(String(16), default="on_demand")
    instance_type: Mapped[str | None] = mapped_column(String(64))
    mig_capable: Mapped[bool] = mapped_column(Boolean, default=False)
    mig_strategy: Mapped[str | None] = mapped_column(String(16))
    mig_config: Mapped[str | None] = mapped_column(String(64))
    timeslice_replicas: Mapped[int] = mapped_column(Integer, default=1)
    labels: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    first_seen_ts: Mapped[int] = mapped_column(BigInteger)
    last_seen_ts: Mapped[int] = mapped_column(BigInteger)
    #: The cloud the node runs on (``aws``, ``gcp``, …; :mod:`gpuwatch.domain.providers`).
    provider: Mapped[str | None] = mapped_column(String(32))
    #: How the node hands out GPUs (:data:`gpuwatch.domain.allocation.MODES` less ``mig``).
    gpu_sharing: Mapped[str | None] = mapped_column(String(16))


class Gpu(Base):
    """A sample unit: a physical GPU, a MIG instance, or one slot of a shared GPU.

    ``mig_gi_id`` is -1 for a whole GPU; ``slot`` is 0 unless the GPU (or MIG instance, or DRA
    device) is split into ``timeslice_replicas`` slots (time-slicing, MPS, a claim shared by
    several pods), each its own unit worth 1/replicas of it. ``sharing`` says how the unit is
    handed out (:data:`gpuwatch.domain.allocation.MODES`; NULL: as before 0005).
    """

    __tablename__ = "gpus"
    __table_args__ = (UniqueConstraint("cluster_id", "uuid", "mig_gi_id", "slot"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="SET NULL"))
    uuid: Mapped[str] = mapped_column(String(64))
    mig_gi_id: Mapped[int] = mapped_column(Integer, default=-1)
    slot: Mapped[int] = mapped_column(SmallInteger, default=0)
    gpu_index: Mapped[int | None] = mapped_column(Integer)
    device: Mapped[str | None] = mapped_column(String(32))
    model_name: Mapped[str | None] = mapped_column(String(128))
    mig_profile: Mapped[str | None] = mapped_column(String(32))
    timeslice_replicas: Mapped[int] = mapped_column(Integer, default=1)
    sharing: Mapped[str | None] = mapped_column(String(16))
    memory_total_mib: Mapped[float | None] = mapped_column(Float)
    first_seen_ts: Mapped[int] = mapped_column(BigInteger)
    last_seen_ts: Mapped[int] = mapped_column(BigInteger)


class Namespace(Base):
    __tablename__ = "namespaces"
    __table_args__ = (UniqueConstraint("cluster_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(253))
    team: Mapped[str | None] = mapped_column(String(128))
    labels: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    last_seen_ts: Mapped[int] = mapped_column(BigInteger)


class Pod(Base):
    """A pod that held (or waited for) GPUs, with its top owner and team.

    ``uid`` is empty for a pod known only from DCGM labels (never seen in the API).
    """

    __tablename__ = "pods"
    __table_args__ = (
        UniqueConstraint("cluster_id", "namespace", "name", "uid"),
        Index("ix_pods_workload", "cluster_id", "namespace", "workload_kind", "workload_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    uid: Mapped[str] = mapped_column(String(64), default="")
    node_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id", ondelete="SET NULL"))
    phase: Mapped[str | None] = mapped_column(String(16))
    workload_kind: Mapped[str] = mapped_column(String(64), default="Pod")
    workload_name: Mapped[str] = mapped_column(String(253))
    team: Mapped[str] = mapped_column(String(128), default="unassigned")
    gpu_resource: Mapped[str | None] = mapped_column(String(64))
    gpu_count: Mapped[int] = mapped_column(Integer, default=0)
    labels: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    created_ts: Mapped[int | None] = mapped_column(BigInteger)
    started_ts: Mapped[int | None] = mapped_column(BigInteger)
    finished_ts: Mapped[int | None] = mapped_column(BigInteger)
    last_seen_ts: Mapped[int] = mapped_column(BigInteger)
    #: ``dra`` for a pod holding GPUs through ResourceClaims; NULL: by its resources.
    allocation: Mapped[str | None] = mapped_column(String(16))
    #: The Kueue ClusterQueue (through its LocalQueue) or Volcano queue it ran in, else NULL.
    queue: Mapped[str | None] = mapped_column(String(253))
    #: Its gang (:data:`gpuwatch.domain.scheduling.GANG_KINDS`): kind, name (unique in the
    #: namespace and kind) and the pods the gang needs at once; NULL: not in a gang.
    gang_kind: Mapped[str | None] = mapped_column(String(16))
    gang_name: Mapped[str | None] = mapped_column(String(253))
    gang_size: Mapped[int | None] = mapped_column(Integer)


class DraDevice(Base):
    """A device a ResourceClaim was allocated (Dynamic Resource Allocation), as last seen.

    ``gpu_uuid`` is the physical GPU (a MIG device's parent), NULL when its ResourceSlice gave
    no UUID; ``consumers`` lists the pods the claim is reserved for as
    ``[namespace, name, uid]``.
    """

    __tablename__ = "dra_devices"
    __table_args__ = (UniqueConstraint("cluster_id", "claim_uid", "driver", "pool", "device"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    claim_namespace: Mapped[str] = mapped_column(String(253))
    claim_name: Mapped[str] = mapped_column(String(253))
    claim_uid: Mapped[str] = mapped_column(String(64))
    request: Mapped[str] = mapped_column(String(253))
    driver: Mapped[str] = mapped_column(String(253))
    pool: Mapped[str] = mapped_column(String(253))
    device: Mapped[str] = mapped_column(String(253))
    node: Mapped[str | None] = mapped_column(String(253))
    gpu_uuid: Mapped[str | None] = mapped_column(String(64))
    mig_profile: Mapped[str | None] = mapped_column(String(32))
    product: Mapped[str | None] = mapped_column(String(128))
    memory_mib: Mapped[int | None] = mapped_column(Integer)
    consumers: Mapped[list[Any]] = mapped_column(JSON, default=list)
    first_seen_ts: Mapped[int] = mapped_column(BigInteger)
    last_seen_ts: Mapped[int] = mapped_column(BigInteger)


class GpuSample(Base):
    """One reading of one GPU unit at ``ts`` (on the ``step`` grid), standing for ``[ts, ts+step)``.

    ``pod_id`` is the pod whose DCGM labels the sample carried (NULL: unallocated). Missing
    readings are NULL, never zero. ``step_s`` makes each row self-describing for the cost model.
    """

    __tablename__ = "gpu_samples"
    # The primary key is the only index (0013): every sample written pays for one B-tree. One
    # GPU unit's history is read through it too, one probe per stored instant
    # (repository.load_gpu_samples).
    __table_args__ = ({"sqlite_with_rowid": False},)

    # Clustered by time first: reports and pages read time windows across every GPU.
    ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    # No foreign keys (migration 0003): the writer stores a page's gpus and pods rows first, in
    # the same transaction; checking both parents of every sample dominated bulk loads.
    gpu_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    step_s: Mapped[int] = mapped_column(Integer)
    pod_id: Mapped[int | None] = mapped_column(Integer)
    util_ratio: Mapped[float | None] = mapped_column(Float)
    util_signal: Mapped[int | None] = mapped_column(SmallInteger)
    fb_used_mib: Mapped[float | None] = mapped_column(Float)
    fb_total_mib: Mapped[float | None] = mapped_column(Float)
    power_w: Mapped[float | None] = mapped_column(Float)
    temp_c: Mapped[float | None] = mapped_column(Float)
    xid: Mapped[int | None] = mapped_column(Integer)
    # Efficiency and health (0006): NULL where the exporter does not provide the field.
    sm_active_ratio: Mapped[float | None] = mapped_column(Float)
    sm_occupancy_ratio: Mapped[float | None] = mapped_column(Float)
    tensor_active_ratio: Mapped[float | None] = mapped_column(Float)
    dram_active_ratio: Mapped[float | None] = mapped_column(Float)
    sm_clock_mhz: Mapped[float | None] = mapped_column(Float)
    pcie_bytes_per_s: Mapped[float | None] = mapped_column(Float)
    nvlink_bytes_per_s: Mapped[float | None] = mapped_column(Float)
    clock_events: Mapped[int | None] = mapped_column(Integer)
    ecc_sbe_count: Mapped[int | None] = mapped_column(Integer)
    ecc_dbe_count: Mapped[int | None] = mapped_column(Integer)
    pcie_replay_count: Mapped[int | None] = mapped_column(Integer)
    nvlink_error_count: Mapped[int | None] = mapped_column(Integer)
    row_remap_failure: Mapped[int | None] = mapped_column(SmallInteger)


class CollectionState(Base):
    """Per cluster and source, the last point up to which a window is completely written."""

    __tablename__ = "collection_state"

    cluster_id: Mapped[int] = mapped_column(
        ForeignKey("clusters.id", ondelete="CASCADE"), primary_key=True
    )
    source: Mapped[str] = mapped_column(String(32), primary_key=True)
    watermark_ts: Mapped[int] = mapped_column(BigInteger)
    updated_ts: Mapped[int] = mapped_column(BigInteger)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class GpuSampleHourly(Base):
    """One GPU unit's samples of one hour, per pod that held it (``pod_id`` ``NO_POD``: none).

    The additive quantities of the cost model are exact sums (seconds, never averages):
    ``data_s`` (Σ step of samples with a utilization reading), ``used_s`` (Σ util × step),
    ``idle_s`` (Σ step of samples below ``rollup_state.idle_util_pct``). The rest are hourly
    maxima (``util_max``, ``fb_used_max_mib``, ``temp_max_c``, ``xid``), the sum and count of
    power readings, and the first and last sample instants, for coverage.
    """

    __tablename__ = "gpu_samples_hourly"
    __table_args__ = (
        Index("ix_gpu_samples_hourly_gpu_id_hour_ts", "gpu_id", "hour_ts"),
        {"sqlite_with_rowid": False},
    )

    hour_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    gpu_id: Mapped[int] = mapped_column(ForeignKey("gpus.id", ondelete="CASCADE"), primary_key=True)
    pod_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    samples: Mapped[int] = mapped_column(Integer)
    step_s: Mapped[int] = mapped_column(Integer)
    first_ts: Mapped[int] = mapped_column(BigInteger)
    last_ts: Mapped[int] = mapped_column(BigInteger)
    data_s: Mapped[int] = mapped_column(Integer)
    used_s: Mapped[float] = mapped_column(Float)
    idle_s: Mapped[int] = mapped_column(Integer)
    util_max: Mapped[float | None] = mapped_column(Float)
    util_signal: Mapped[int | None] = mapped_column(SmallInteger)
    fb_used_max_mib: Mapped[float | None] = mapped_column(Float)
    fb_total_mib: Mapped[float | None] = mapped_column(Float)
    power_w_sum: Mapped[float | None] = mapped_column(Float)
    power_n: Mapped[int] = mapped_column(Integer)
    temp_max_c: Mapped[float | None] = mapped_column(Float)
    xid: Mapped[int | None] = mapped_column(Integer)


class PodSampleHourly(Base):
    """One pod's samples of one hour, as mergeable histograms (docs/storage.md#detail).

    ``busy_hist``: its units at or above the idle threshold at each sample time; ``util_hist``
    and ``fb_used_hist``: every sample's utilization and framebuffer bins
    (:mod:`gpuwatch.domain.sketch`). ``data_s``: Σ step over its sample times with data;
    ``held_max``: most of its units with data at one sample time; ``gpu_model``: its units'.
    """

    __tablename__ = "pod_samples_hourly"
    __table_args__ = ({"sqlite_with_rowid": False},)

    hour_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    pod_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    gpu_model: Mapped[str | None] = mapped_column(String(128))
    data_s: Mapped[int] = mapped_column(Integer)
    held_max: Mapped[int] = mapped_column(Integer)
    busy_hist: Mapped[bytes] = mapped_column(LargeBinary)
    util_hist: Mapped[bytes] = mapped_column(LargeBinary)
    fb_used_hist: Mapped[bytes] = mapped_column(LargeBinary)


class WorkloadSampleHourly(Base):
    """One workload's sample times of one hour, as mergeable histograms (docs/storage.md#detail).

    The workload is its pods' top owner and GPU model as stored when the hour was rolled up
    (``gpu_model`` '' when unknown). ``held_hist``: GPUs its pods hold at one sample time (pod
    limits, else units with data); ``util_sum_hist``: the summed utilization bins of its units
    at one sample time; ``util_sum_bin_s``: Σ over its sample times of those bins × step;
    ``data_s``: Σ step over its sample times with data.
    """

    __tablename__ = "workload_samples_hourly"
    __table_args__ = ({"sqlite_with_rowid": False},)

    hour_ts: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253), primary_key=True)
    workload_kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    workload_name: Mapped[str] = mapped_column(String(253), primary_key=True)
    gpu_model: Mapped[str] = mapped_column(String(128), primary_key=True)
    data_s: Mapped[int] = mapped_column(Integer)
    util_sum_bin_s: Mapped[int] = mapped_column(BigInteger)
    held_hist: Mapped[bytes] = mapped_column(LargeBinary)
    util_sum_hist: Mapped[bytes] = mapped_column(LargeBinary)


class RollupState(Base):
    """How the hourly roll-ups were built: the idle threshold ``idle_s`` counts against."""

    __tablename__ = "rollup_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    idle_util_pct: Mapped[float] = mapped_column(Float)
    updated_ts: Mapped[int] = mapped_column(BigInteger)
    raw_kept_from_ts: Mapped[int | None] = mapped_column(BigInteger)


# The health roll-up's table lives in its own module; importing it here registers it on
# ``Base.metadata`` wherever the models are loaded.
from gpuwatch.store import models_daily as models_daily  # noqa: E402, PLC0414
from gpuwatch.store import models_health as models_health  # noqa: E402, PLC0414
from gpuwatch.store import models_lease as models_lease  # noqa: E402, PLC0414
from gpuwatch.store import models_scheduling as models_scheduling  # noqa: E402, PLC0414
