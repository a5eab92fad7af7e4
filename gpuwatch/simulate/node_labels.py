"""The labels of a simulated GPU node: GPU Feature Discovery's, the cloud's and the scheduler's.

GFD labels every GPU node the same way whatever hands its GPUs out; the sharing shows in
``nvidia.com/gpu.sharing-strategy`` and ``nvidia.com/gpu.replicas`` (time-slicing, MPS: product
suffixed ``-SHARED``), and a node on NVIDIA's DRA driver carries the driver's kubelet-plugin
label and has the device plugin switched off.
"""

from __future__ import annotations

from gpuwatch.domain.allocation import DRA, MPS, TIME_SLICE
from gpuwatch.simulate.layout import (
    INSTANCE_GPUS,
    MIG_MEMORY_MIB,
    ClusterDecl,
    ModelDecl,
    NodeDecl,
)

_GKE_ACCELERATORS = {
    "a100": "nvidia-a100-80gb",
    "h100": "nvidia-h100-80gb",
    "l4": "nvidia-l4",
    "t4": "nvidia-tesla-t4",
}
_STRATEGIES = {TIME_SLICE: "time-slicing", MPS: "mps"}


def node_labels(
    cluster: ClusterDecl, decl: NodeDecl, model: ModelDecl, name: str, zone: str, sharing: str
) -> dict[str, str]:
    shared = sharing in _STRATEGIES
    labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": decl.instance_type,
        "topology.kubernetes.io/region": cluster.region,
        "topology.kubernetes.io/zone": zone,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": model.gfd_product + ("-SHARED" if shared else ""),
        "nvidia.com/gpu.count": str(INSTANCE_GPUS[decl.instance_type]),
        "nvidia.com/gpu.memory": str(model.memory_mib),
        "nvidia.com/gpu.family": model.family,
        "nvidia.com/gpu.replicas": str(decl.timeslice_replicas),
        "nvidia.com/gpu.sharing-strategy": _STRATEGIES.get(sharing, "none"),
        "nvidia.com/mig.capable": str(model.mig_capable).lower(),
        "nvidia.com/gpu.deploy.dcgm-exporter": "true",
        "nvidia.com/cuda.driver-version.full": cluster.driver_version,
    }
    if sharing == DRA:
        labels["nvidia.com/gpu.deploy.device-plugin"] = "false"
        labels["nvidia.com/dra-kubelet-plugin"] = "true"
    if decl.mig_layout:
        labels["nvidia.com/mig.strategy"] = "mixed"
        labels["nvidia.com/mig.config"] = decl.mig_config or "custom"
        for profile in sorted({p for gpu in decl.mig_layout for p in gpu}):
            count = sum(gpu.count(profile) for gpu in decl.mig_layout)
            labels[f"nvidia.com/mig-{profile}.count"] = str(count)
            labels[f"nvidia.com/mig-{profile}.memory"] = str(MIG_MEMORY_MIB[profile])
    labels.update(_capacity_labels(cluster, decl))
    return labels


def _capacity_labels(cluster: ClusterDecl, decl: NodeDecl) -> dict[str, str]:
    spot = decl.capacity_type == "spot"
    if cluster.cloud == "gcp":
        labels = {
            "cloud.google.com/gke-nodepool": decl.pool,
            "cloud.google.com/gke-accelerator": _GKE_ACCELERATORS[decl.model],
        }
        if spot:
            kind = "preemptible" if "preemptible" in decl.pool else "spot"
            labels[f"cloud.google.com/gke-{kind}"] = "true"
        return labels
    if decl.managed_nodegroup:
        return {
            "eks.amazonaws.com/nodegroup": decl.pool,
            "eks.amazonaws.com/capacityType": "SPOT" if spot else "ON_DEMAND",
        }
    return {
        "karpenter.sh/nodepool": decl.pool,
        "karpenter.sh/capacity-type": "spot" if spot else "on-demand",
    }
