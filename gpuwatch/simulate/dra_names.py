"""Names NVIDIA's DRA driver (``gpu.nvidia.com``) and Kubernetes give to DRA objects.

Device names are the driver's canonical ones: ``gpu-<minor>`` for a whole GPU and
``gpu-<minor>-mig-<GI profile id>-<placement start>-<placement size>`` for a MIG device (the
placement in memory slices, as ``nvidia-smi mig -lgipp`` lists them). A claim made from a pod's
ResourceClaimTemplate is named ``<pod>-<pod claim name>-<5 random characters>``, as the
resourceclaim controller's ``generateName`` does. Pure: no I/O.
"""

from __future__ import annotations

from gpuwatch.simulate.noise import k8s_suffix, uuid_text

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
#: The name pods give their claim (``spec.resourceClaims[].name``) and claims their request.
POD_CLAIM = "gpu"
REQUEST = "gpu"
#: GPU instance profile ids (``nvidia-smi mig -lgip``) and placement sizes on an 80 GB GPU.
MIG_PROFILE_IDS = {"1g.10gb": 19, "3g.40gb": 9}
MIG_PLACEMENT_SIZE = {"1g.10gb": 1, "3g.40gb": 4}
#: Placement starts the driver may use for each profile, in preference order.
_MIG_STARTS = {"1g.10gb": (0, 1, 2, 3, 4, 5, 6), "3g.40gb": (4, 0)}
_MEMORY_SLICES = 8


def gpu_device_name(index: int) -> str:
    return f"gpu-{index}"


def mig_device_names(index: int, profiles: tuple[str, ...]) -> list[str]:
    """Device names of one GPU's MIG instances, in ``profiles`` order; larger instances are
    placed first, each at the first start whose memory slices are still free."""
    used: set[int] = set()
    starts: dict[int, int] = {}
    order = sorted(range(len(profiles)), key=lambda i: -MIG_PLACEMENT_SIZE[profiles[i]])
    for i in order:
        size = MIG_PLACEMENT_SIZE[profiles[i]]
        for start in _MIG_STARTS[profiles[i]]:
            span = set(range(start, start + size))
            if not span & used and start + size <= _MEMORY_SLICES:
                used |= span
                starts[i] = start
                break
        else:
            raise ValueError(f"MIG layout {profiles} does not fit one GPU")
    return [
        f"gpu-{index}-mig-{MIG_PROFILE_IDS[p]}-{starts[i]}-{MIG_PLACEMENT_SIZE[p]}"
        for i, p in enumerate(profiles)
    ]


def mig_uuid(seed: int, cluster: str, gpu_uuid: str, gi_id: int) -> str:
    """The MIG device's own UUID (``MIG-…``), which the ResourceSlice lists as ``uuid``."""
    return "MIG-" + uuid_text(seed, cluster, gpu_uuid, "mig", gi_id)


def template_claim_name(seed: int, pod: str, pod_uid: str) -> str:
    return f"{pod}-{POD_CLAIM}-{k8s_suffix(5, seed, 'claim', pod_uid)}"


def template_name(workload: str) -> str:
    """The ResourceClaimTemplate a workload's pods name (``resourceClaimTemplateName``)."""
    return f"{workload}-{POD_CLAIM}"


def claim_uid(seed: int, cluster: str, namespace: str, name: str) -> str:
    return uuid_text(seed, cluster, "ResourceClaim", namespace, name)
