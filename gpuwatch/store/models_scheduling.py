"""Queues, quotas and queued work as the Kubernetes API showed them (0007, docs/storage.md).

- ``queue_flavors``: one row per (cluster, queue kind, queue, flavor, GPU resource) with a GPU
  quota: a Kueue ClusterQueue's flavor quota of ``nvidia.com/gpu`` or a MIG resource, or a
  Volcano Queue's ``capability``/``deserved`` (flavor ``""``). Quotas are as last seen; the span
  ``first_seen_ts``..``last_seen_ts`` is when the queue existed.
- ``sched_workloads``: one row per Kueue Workload or Volcano PodGroup that asks for GPUs: what
  it asks for, when it was created, admitted and finished. Work not yet admitted has no pods
  (Kueue keeps its Job suspended), so its demand is read here and nowhere else.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from gpuwatch.store.models import Base


class QueueFlavor(Base):
    __tablename__ = "queue_flavors"
    __table_args__ = (UniqueConstraint("cluster_id", "kind", "queue", "flavor", "gpu_resource"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    #: ``kueue`` (a ClusterQueue) or ``volcano`` (a Queue).
    kind: Mapped[str] = mapped_column(String(16))
    queue: Mapped[str] = mapped_column(String(253))
    cohort: Mapped[str | None] = mapped_column(String(253))
    #: The Kueue ResourceFlavor; ``""`` for a Volcano queue.
    flavor: Mapped[str] = mapped_column(String(253), default="")
    #: ``nvidia.com/gpu`` or a MIG resource such as ``nvidia.com/mig-1g.10gb``.
    gpu_resource: Mapped[str] = mapped_column(String(64))
    #: The GPU model the flavor's node labels select (``nvidia.com/gpu.product``), else NULL.
    gpu_model: Mapped[str | None] = mapped_column(String(128))
    #: Devices of ``gpu_resource``: nominal quota (Volcano: ``deserved``, else ``capability``).
    nominal_gpus: Mapped[float] = mapped_column(Float)
    #: Kueue ``borrowingLimit``/``lendingLimit`` (Volcano: capability − deserved as borrowing);
    #: NULL: unlimited.
    borrowing_limit_gpus: Mapped[float | None] = mapped_column(Float)
    lending_limit_gpus: Mapped[float | None] = mapped_column(Float)
    first_seen_ts: Mapped[int] = mapped_column(BigInteger)
    last_seen_ts: Mapped[int] = mapped_column(BigInteger)


class SchedWorkload(Base):
    __tablename__ = "sched_workloads"
    __table_args__ = (
        UniqueConstraint("cluster_id", "kind", "namespace", "name", "uid"),
        Index("ix_sched_workloads_queue", "cluster_id", "queue"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[int] = mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))
    #: ``kueue`` (a Workload) or ``volcano`` (a PodGroup).
    kind: Mapped[str] = mapped_column(String(16))
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    uid: Mapped[str] = mapped_column(String(64), default="")
    #: The ClusterQueue (admitted one, else the LocalQueue's) or Volcano queue; NULL: unknown.
    queue: Mapped[str | None] = mapped_column(String(253))
    #: The flavor Kueue assigned the GPU resource at admission, else NULL.
    flavor: Mapped[str | None] = mapped_column(String(253))
    #: The owner the gang's pods carry (``Job/train-a``, ``JobSet/x``, ``PodGroup/y``).
    owner_kind: Mapped[str | None] = mapped_column(String(64))
    owner_name: Mapped[str | None] = mapped_column(String(253))
    gpu_resource: Mapped[str | None] = mapped_column(String(64))
    #: Σ over pod sets of count × GPUs per pod; ``pod_count`` Σ count (Volcano: minMember).
    gpus_requested: Mapped[float] = mapped_column(Float, default=0.0)
    pod_count: Mapped[int] = mapped_column(Integer, default=0)
    #: ``pending``, ``admitted``, ``finished`` or ``evicted`` (docs/collectors.md, queues).
    state: Mapped[str] = mapped_column(String(16))
    created_ts: Mapped[int | None] = mapped_column(BigInteger)
    admitted_ts: Mapped[int | None] = mapped_column(BigInteger)
    finished_ts: Mapped[int | None] = mapped_column(BigInteger)
    #: Times Kueue evicted (preempted) it, from its conditions and ``status.requeueState``.
    evictions: Mapped[int] = mapped_column(Integer, default=0)
    last_seen_ts: Mapped[int] = mapped_column(BigInteger)
