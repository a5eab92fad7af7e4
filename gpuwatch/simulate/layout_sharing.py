"""The simulated fleet's nodes that hand GPUs out other than by whole GPUs of the device plugin.

A node pool on NVIDIA's DRA driver (``gpu.nvidia.com``) instead of the device plugin, one node of
whole H100s and one of MIG devices, whose pods hold GPUs through ResourceClaims (one claim shared
by two pods), and an L4 node shared through MPS. Declared apart from :mod:`layout` only to keep
modules short; ``fleet.build_fleet`` appends them to the base fleet (after every base node, so
the base nodes keep their zones).
"""

from __future__ import annotations

from gpuwatch.domain.allocation import DRA, MPS
from gpuwatch.simulate.layout import (
    EFFICIENT_TRAINING,
    IDLE_INFERENCE,
    LIGHT_SERVING,
    PROD,
    SERVING,
    NodeDecl,
    declare,
    every,
    rolling,
)

#: Each GPU of the DRA MIG node: a 3g.40gb instance (memory slices 4-7) and four 1g.10gb.
DRA_MIG_LAYOUT = ("3g.40gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb")
#: The ResourceClaim both pods of ``llm-serving/embedder-shared`` reference.
SHARED_CLAIM = "embedder-shared-gpu"
MPS_REPLICAS = 4

SHARING_NODES = (
    NodeDecl(
        PROD, "hd0", "h100", "p5.48xlarge", "on_demand", "gpu-h100-dra", sharing=DRA,
        dra_shared=(7, 2),
    ),
    NodeDecl(
        PROD, "hd1", "h100", "p5.48xlarge", "on_demand", "gpu-h100-dra", sharing=DRA,
        mig_layout=(DRA_MIG_LAYOUT,) * 8, mig_config="dra-balanced",
    ),
    NodeDecl(
        PROD, "l10", "l4", "g6.12xlarge", "on_demand", "gpu-l4-mps", sharing=MPS,
        timeslice_replicas=MPS_REPLICAS,
    ),
)  # fmt: skip

# fmt: off
SHARING_WORKLOADS = (
    # hd0: GPUs 0-3 a Job's claim of 4, 4-5 two idle replicas, 6 free, 7 one claim of two pods
    declare(PROD, "llm-training", "dra-finetune", "Job", "hd0", 1, EFFICIENT_TRAINING,
            every(24, 20, 2), gpus_per_pod=4),
    declare(PROD, "search-prod", "semantic-cache", "Deployment", "hd0", 2, IDLE_INFERENCE,
            rolling(240), first=4),
    declare(PROD, "llm-serving", "embedder-shared", "Deployment", "hd0", 2, LIGHT_SERVING,
            rolling(200), claim=SHARED_CLAIM),
    # hd1: MIG devices through the mig.nvidia.com class
    declare(PROD, "speech", "asr-streaming", "Deployment", "hd1", 6, LIGHT_SERVING, rolling(170),
            mig_profile="1g.10gb"),
    declare(PROD, "llm-serving", "llm-mini", "Deployment", "hd1", 3, SERVING, rolling(210),
            mig_profile="3g.40gb"),
    # l10: MPS, 16 client slots of which 10 are held
    declare(PROD, "support", "intent-router", "Deployment", "l10", 6, LIGHT_SERVING,
            rolling(200)),
    declare(PROD, "vision-prod", "face-blur", "Deployment", "l10", 4, LIGHT_SERVING, rolling(230),
            first=6),
)
# fmt: on
