"""The utilization heatmap of the GPUs and node pages: a row per GPU unit, or per node where the
scope holds more units than a screen can show a row for (docs/dashboard.md#pages)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuwatch.analytics import columns as c
from gpuwatch.app.data import Filters, Snapshot
from gpuwatch.app.views import hourly_rows, window_bounds
from gpuwatch.app.views_gpu import scoped_units
from gpuwatch.domain.durations import HOUR_S

MAX_COLUMNS = 300
#: At most this many heatmap cells (rows × columns): many rows get wider columns.
MAX_CELLS = 250_000
#: Above this many GPU units in scope, the fleet's heatmap has a row per node (a node's page
#: keeps a row per unit): the figure is at most 2,400 px high, so more rows than this are
#: under 5 px each, and the browser spends seconds drawing cells nobody can point at.
MAX_UNIT_ROWS = 500


@dataclass(frozen=True)
class Heatmap:
    """Utilization % per row (a GPU unit, or a node with ``by_node``) and time column; NaN
    where there is no data.

    ``units``: a row's facts: ``cluster``, ``node``, ``gpu_id`` and its label ``unit`` per GPU
    unit; per node ``cluster``, ``node``, ``gpu_id`` -1 and ``gpu_units``, its units in scope.
    ``held_ratio``: the share of each cell's data hours a pod held the row's GPUs (NaN: no
    data).
    """

    z: np.ndarray
    x_ts: np.ndarray
    units: pd.DataFrame
    column_s: int
    held_ratio: np.ndarray
    by_node: bool = False


def _row_index(ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Position of each of ``values`` in ``ids`` (unique), -1 where absent."""
    if len(ids) == 0 or len(values) == 0:
        return np.full(len(values), -1, dtype="int64")
    top = int(max(ids.max(), values.max())) + 1
    lookup = np.full(top, -1, dtype="int64")
    lookup[ids] = np.arange(len(ids))
    found: np.ndarray = lookup[np.asarray(values, dtype="int64")]
    return found


def _node_rows(units: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per node of ``units`` (in their order), and each unit's node row."""
    keys = units[["cluster", "node"]].astype(object).fillna("")
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(keys), sort=False)
    rows = pd.DataFrame(list(uniques), columns=["cluster", "node"])
    counts = np.bincount(codes, minlength=len(rows))
    rows = rows.assign(gpu_id=-1, gpu_units=counts)
    return rows, codes.astype("int64")


def heatmap(
    snap: Snapshot, f: Filters, node: tuple[str, str] | None = None, max_columns: int = MAX_COLUMNS
) -> Heatmap:
    """Utilization per GPU unit (per node above :data:`MAX_UNIT_ROWS` units, unless ``node``
    is given) × time, downsampled to at most ``max_columns`` columns of whole hours (fewer
    where the rows would make more than :data:`MAX_CELLS` cells). A node's cell weighs its
    units by their data hours."""

    def compute() -> Heatmap:
        units = scoped_units(snap, f, node)
        by_node = node is None and len(units) > MAX_UNIT_ROWS
        shown, row_of_unit = _node_rows(units) if by_node else (units, np.arange(len(units)))
        start, end = window_bounds(snap, f)
        start = max(start, snap.span_start_ts)
        hours = max((end - start) // HOUR_S, 1)
        columns = max(1, min(max_columns, MAX_CELLS // max(len(shown), 1)))
        column_s = math.ceil(hours / columns) * HOUR_S
        n_cols = math.ceil((end - start) / column_s)
        rows = hourly_rows(snap, f)
        at = _row_index(units["gpu_id"].to_numpy(dtype="int64"), rows["gpu_id"].to_numpy())
        keep = at >= 0
        col = ((rows["ts"].to_numpy()[keep] - start) // column_s).astype("int64")
        cell = row_of_unit[at[keep]] * n_cols + col
        size = len(shown) * n_cols
        data_h = rows[c.DATA_HOURS].to_numpy(dtype="float64")[keep]
        util = np.bincount(cell, data_h * rows[c.UTIL].to_numpy(dtype="float64")[keep], size)
        data = np.bincount(cell, data_h, size)
        held_h = data_h * rows[c.ALLOCATED].to_numpy(dtype=bool)[keep]
        held = np.bincount(cell, held_h, size)
        per_data = np.where(data > 0, data, 1.0)
        z = np.where(data > 0, 100.0 * util / per_data, np.nan)
        held_ratio = np.where(data > 0, held / per_data, np.nan)
        x_ts = start + np.arange(n_cols, dtype="int64") * column_s
        shape = (len(shown), n_cols)
        return Heatmap(z.reshape(shape), x_ts, shown, column_s, held_ratio.reshape(shape), by_node)

    return snap.memo(("heatmap", f, node, max_columns), compute)
