"""The simulated fleet's scheduling scenarios: node pools and workloads under Kueue and Volcano.

Two node pools of ``prod-us-east`` that Kueue hands out through the cohort of
:mod:`kueue_decl`, with daily workloads at fixed hours (UTC, no jitter), so that every figure
can be counted by hand (docs/simulation.md#scheduling-scenarios):

- ``gpu-h100-batch`` (``hb0``-``hb3``, 8 × H100 each): a **stalled gang**, the indexed Job
  ``llm-training/ddp-pretrain`` (8 pods × 4 GPUs, 10:00-22:00), whose pods 6 and 7 (node
  ``hb3``) stay Pending until 13:00 while ``speech/tts-pretrain`` (6 GPUs of ``hb3``,
  22:00-13:00) finishes: 6 pods hold 24 GPUs meanwhile. A **scattered job**,
  ``llm-training/distill-eval`` (8 × 1 GPU, 22:30-09:30), two pods on each of the 4 nodes.
- ``gpu-l40s`` (``s0``-``s3``, 4 × L40S each): a **fragmented pool**. ``vision-prod/video-tagger``
  holds GPUs 0-1 of ``s0``-``s2``, ``vision-prod/frame-embed`` GPU 2 of every node
  (06:00-16:00), the pod group ``vision-prod/clip-rerank`` GPUs 0-1 of ``s3`` (05:00-16:00):
  from 09:00 to 16:00 one GPU is free on each node while ``speech/asr-finetune`` (one pod of
  4 GPUs, admitted at 09:00) waits Pending; it runs on ``s3`` 16:00-04:00.
- **Work pending without admission**: ``speech/asr-eval`` (2 × 1 L40S) is created at 17:00 and
  waits unadmitted (research is at its quota and inference lends none) until 04:00, when
  ``asr-finetune`` finishes; it runs 04:00-08:00 on GPU 3 of ``s0`` and ``s1``.

And a **Volcano gang** in ``research-eu`` (:mod:`volcano_decl`): ``nlp-research/ddp-finetune``,
a PodGroup of 4 plain pods × 1 L4 (``minMember`` 4, queue ``research-batch``) on the otherwise
unused node ``rl2``, daily 10:00-16:00.
"""

from __future__ import annotations

from gpuwatch.domain.durations import HOUR_S
from gpuwatch.simulate.kueue_decl import KueueDecl
from gpuwatch.simulate.layout import (
    BATCH,
    EFFICIENT_TRAINING,
    PROD,
    SERVING,
    NodeDecl,
    daily,
    declare,
    rolling,
)
from gpuwatch.simulate.volcano_decl import VOLCANO_CLUSTER, VolcanoDecl

QUEUE_NODES = (
    *(NodeDecl(PROD, f"hb{i}", "h100", "p5.48xlarge", "on_demand", "gpu-h100-batch")
      for i in range(4)),
    *(NodeDecl(PROD, f"s{i}", "l40s", "g6e.12xlarge", "on_demand", "gpu-l40s") for i in range(4)),
)  # fmt: skip

TRAINING = KueueDecl("training")
RESEARCH = KueueDecl("research")
INFERENCE = KueueDecl("inference")
#: The gang's pods 6 and 7 wait 3 hours for GPUs of ``hb3``.
STALLED_GANG = KueueDecl("training", stall_replicas=(6, 7), stall_s=3 * HOUR_S)
#: Created at 17:00, admitted at 04:00 (pods then).
QUEUED_EVAL = KueueDecl("research", queued_s=11 * HOUR_S)

# fmt: off
QUEUE_WORKLOADS = (
    declare(PROD, "llm-training", "ddp-pretrain", "Job", "hb0 hb1 hb2 hb3", 8,
            EFFICIENT_TRAINING, daily(10, 12), gpus_per_pod=4, kueue=STALLED_GANG),
    declare(PROD, "speech", "tts-pretrain", "Job", "hb3", 1, EFFICIENT_TRAINING, daily(22, 15),
            gpus_per_pod=6, kueue=RESEARCH),
    declare(PROD, "llm-training", "distill-eval", "Job", "hb0 hb1 hb2 hb3", 8, BATCH,
            daily(22.5, 11), first=6, kueue=TRAINING),
    declare(PROD, "vision-prod", "video-tagger", "Deployment", "s0 s1 s2", 6, SERVING,
            rolling(240), per_node=2),
    declare(PROD, "vision-prod", "frame-embed", "Job", "s0 s1 s2 s3", 4, BATCH, daily(6, 10),
            first=2, per_node=1, kueue=INFERENCE),
    declare(PROD, "vision-prod", "clip-rerank", "Pod", "s3", 2, BATCH, daily(5, 11),
            kueue=KueueDecl("inference", pod_group=True)),
    declare(PROD, "speech", "asr-finetune", "Job", "s3", 1, EFFICIENT_TRAINING,
            daily(16, 12, pending_h=7), gpus_per_pod=4, kueue=RESEARCH),
    declare(PROD, "speech", "asr-eval", "Job", "s0 s1", 2, BATCH, daily(4, 4), first=3,
            per_node=1, kueue=QUEUED_EVAL),
)
# fmt: on

#: Volcano's gang: its PodGroup and pods exist 10:00-16:00 (Running from 10:00, all 4 bound).
VOLCANO_WORKLOADS = (
    declare(VOLCANO_CLUSTER, "nlp-research", "ddp-finetune", "Pod", "rl2", 4, EFFICIENT_TRAINING,
            daily(10, 6), volcano=VolcanoDecl("research-batch")),
)  # fmt: skip
