"""Stranded capacity (docs/cost-model.md#scheduling): free GPUs that a pending pod cannot use
because they are scattered over nodes.

Per hour and (cluster, GPU model): each node's free GPUs are the GPU-equivalent hours of its
units that no pod held in the hour (the mean free GPUs). A pod Pending during the hour that
asks for ``r`` devices of ``nvidia.com/gpu`` is unplaceable there when ``r`` ≤ the free GPUs of
the model's nodes together but ``r`` > the whole free GPUs of every single node. The free
GPU-hours of the model in such hours are stranded.

``samples`` is the costed samples frame (:func:`gpuwatch.analytics.costing.prepare`) of raw
samples or hourly roll-ups; ``pods`` is POD_COLUMNS. Pure.
"""

from __future__ import annotations

import pandas as pd

#: Keys of ``gpuwatch capacity`` (contract section 7), in order.
CAPACITY_REPORT_COLUMNS: tuple[str, ...] = (
    "cluster",
    "gpu_model",
    "free_gpu_hours",
    "stranded_gpu_hours",
    "stranded_cost_usd",
    "largest_unplaceable_request",
)
#: Columns of :func:`capacity_timeline`, in order.
CAPACITY_TIMELINE_COLUMNS: tuple[str, ...] = (
    "ts",
    "cluster",
    "gpu_model",
    "free_gpus",
    "stranded_gpus",
    "largest_unplaceable_request",
)
#: Columns of :func:`consolidate_hint`, in order.
CONSOLIDATE_COLUMNS: tuple[str, ...] = (
    "cluster",
    "gpu_model",
    "ts",
    "request_gpus",
    "node",
    "move_gpus",
)


def _empty(names: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=object) for name in names})


def capacity_report(
    samples: pd.DataFrame, pods: pd.DataFrame, start_ts: int, end_ts: int
) -> pd.DataFrame:
    """One row per (cluster, GPU model) with GPUs in the window (columns
    :data:`CAPACITY_REPORT_COLUMNS`), most stranded dollars first.

    ``free_gpu_hours``: GPU-equivalent hours no pod held; ``stranded_gpu_hours`` and
    ``stranded_cost_usd``: those of the hours with an unplaceable pod;
    ``largest_unplaceable_request``: the largest request unplaceable in any hour (0: none)."""
    return _empty(CAPACITY_REPORT_COLUMNS)


def capacity_timeline(
    samples: pd.DataFrame, pods: pd.DataFrame, start_ts: int, end_ts: int
) -> pd.DataFrame:
    """Per hour (``ts``) and (cluster, GPU model): ``free_gpus`` and ``stranded_gpus`` (mean
    GPUs over the hour) and the ``largest_unplaceable_request`` of the hour (0: none), for a
    chart (columns :data:`CAPACITY_TIMELINE_COLUMNS`)."""
    return _empty(CAPACITY_TIMELINE_COLUMNS)


def consolidate_hint(
    samples: pd.DataFrame, pods: pd.DataFrame, start_ts: int, end_ts: int
) -> pd.DataFrame:
    """Where to make room for the largest unplaceable request (columns
    :data:`CONSOLIDATE_COLUMNS`): per (cluster, GPU model), at the last hour the largest
    request ``r`` was unplaceable, each node with at least ``r`` GPUs whose held GPUs beyond
    its free ones, ``move_gpus = r − ⌊free⌋``, fit the whole free GPUs of the model's other
    nodes: moving that many GPUs' pods off the node would let ``r`` fit there. Fewest GPUs to
    move first."""
    return _empty(CONSOLIDATE_COLUMNS)
