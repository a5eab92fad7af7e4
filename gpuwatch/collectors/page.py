"""One page of DCGM samples as columns: one row per GPU unit and grid instant (pure, no I/O).

Rows hold numbers only: the GPU unit and the series a row's attribution comes from are indices
into two small tables (``units``, ``series``), so a page of millions of rows holds no Python
object per row. :meth:`PageSamples.to_frame` gives the same rows as a plain DataFrame.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from gpuwatch.collectors.screen import SeriesIssues
from gpuwatch.store.models import HEALTH_SAMPLE_FIELDS

UNIT_KEY = ["uuid", "mig_gi_id", "slot"]
#: Facts of a unit besides its key: pods sharing its device through one ResourceClaim (1: not
#: shared), whether it is a ``vgpu`` slot, whether a claim holds it.
SHARING_COLUMNS = ["shared_by", "vgpu", "claimed"]
#: ``slot`` of the device-level series of a GPU whose pods have per-pod (``vgpu``) series: kept
#: only to fill the slots no pod holds (:mod:`gpuwatch.collectors.slots`), never stored.
DEVICE_SLOT = -1
UNIT_DTYPES = {"mig_gi_id": np.int64, "slot": np.int64, "shared_by": np.int64, "vgpu": bool,
               "claimed": bool}  # fmt: skip
#: Columns of ``PageSamples.series``: what a series' labels say besides its GPU unit.
IDENTITY_COLUMNS = ["node", "model_name", "mig_profile", "gpu_index", "device",
                    "namespace", "pod", "container", "label_style"]  # fmt: skip
#: Float columns of each row.
VALUE_COLUMNS = ["util_ratio", "fb_used_mib", "fb_total_mib", "power_w", "temp_c", "xid"]
#: Efficiency and health readings a row may also hold (``gpu_samples`` columns of the same
#: names; absent from ``PageSamples.values`` where the exporter provides none of them).
HEALTH_VALUE_COLUMNS: tuple[str, ...] = HEALTH_SAMPLE_FIELDS
SIGNAL_PROF = "prof_gr_engine_active"
SIGNAL_DEV = "dev_gpu_util"
#: ``PageSamples.util_signal`` codes: 0 no utilization reading, 1 and 2 the signal used.
SIGNALS: tuple[str | None, ...] = (None, SIGNAL_PROF, SIGNAL_DEV)
OUTPUT_COLUMNS = [*UNIT_KEY, "ts", *IDENTITY_COLUMNS, "util_ratio", "util_signal",
                  "fb_used_mib", "fb_total_mib", "power_w", "temp_c", "xid"]  # fmt: skip


@dataclass(frozen=True)
class PageSamples:
    """Rows sorted by GPU unit (``units`` order: uuid, MIG instance, slot), then instant.

    ``issues``: the page's series that were skipped or changed (:mod:`~gpuwatch.collectors.screen`).
    """

    units: pd.DataFrame
    series: pd.DataFrame
    unit: np.ndarray
    ts: np.ndarray
    source: np.ndarray
    util_signal: np.ndarray
    values: Mapping[str, np.ndarray]
    issues: SeriesIssues = field(default_factory=SeriesIssues)

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def empty(self) -> bool:
        return len(self.ts) == 0

    def __getitem__(self, column: str) -> pd.Series:
        """A row column by name (``ts``, ``unit``, ``source`` or a value column)."""
        arrays = {"ts": self.ts, "unit": self.unit, "source": self.source, **self.values}
        return pd.Series(arrays[column])

    def take(self, rows: np.ndarray) -> PageSamples:
        """The rows selected by a boolean mask or an ascending index array (and their units)."""
        present, unit = np.unique(self.unit[rows], return_inverse=True)
        return replace(
            self,
            units=self.units.take(present).reset_index(drop=True),
            unit=unit.astype(np.int64),
            ts=self.ts[rows],
            source=self.source[rows],
            util_signal=self.util_signal[rows],
            values={name: column[rows] for name, column in self.values.items()},
        )

    def between(self, start_ts: int, end_ts: int) -> PageSamples:
        """The rows with ``start_ts <= ts < end_ts``."""
        inside = (self.ts >= start_ts) & (self.ts < end_ts)
        return self if bool(inside.all()) else self.take(inside)

    def with_nodes(self, nodes: pd.Series) -> PageSamples:
        """The same rows, with each series' ``node`` replaced."""
        return replace(self, series=self.series.assign(node=nodes.to_numpy()))

    def pairs(self) -> pd.DataFrame:
        """One row per (GPU unit, attribution series) present: rows, first and last instant,
        with the unit's key and the series' identity, sorted by unit and first instant."""
        frame = pd.DataFrame({"unit": self.unit, "source": self.source, "ts": self.ts})
        grouped = frame.groupby(["unit", "source"], sort=False)["ts"]
        out = grouped.agg(["size", "min", "max"]).reset_index()
        out = out.rename(columns={"size": "rows", "min": "first_ts", "max": "last_ts"})
        out = out.join(self.units, on="unit").join(self.series, on="source")
        return out.sort_values(["unit", "first_ts"], kind="stable").reset_index(drop=True)

    def to_frame(self) -> pd.DataFrame:
        """One row per unit and instant with the columns of :data:`OUTPUT_COLUMNS`."""
        units = self.units.take(self.unit).reset_index(drop=True)
        series = self.series.take(self.source).reset_index(drop=True)
        signal = np.asarray(SIGNALS, dtype=object)[self.util_signal]
        frame = pd.concat([units, series], axis=1).assign(
            ts=self.ts, util_signal=signal, **dict(self.values)
        )
        return frame[OUTPUT_COLUMNS]


def empty_page(series: pd.DataFrame | None = None) -> PageSamples:
    none_i = np.zeros(0, dtype=np.int64)
    return PageSamples(
        units=pd.DataFrame(
            {
                "uuid": [],
                "mig_gi_id": none_i,
                "slot": none_i,
                "shared_by": none_i,
                "vgpu": none_i.astype(bool),
                "claimed": none_i.astype(bool),
            }
        ),
        series=series if series is not None else pd.DataFrame(columns=IDENTITY_COLUMNS),
        unit=none_i,
        ts=none_i,
        source=none_i,
        util_signal=np.zeros(0, dtype=np.int8),
        values={name: np.zeros(0, dtype=np.float64) for name in VALUE_COLUMNS},
    )


def scatter_max(size: int, cells: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A grid of ``size`` cells holding, per cell, the largest non-NaN value put there (NaN if
    none): what ``max`` over duplicates gives, without a Python loop."""
    grid = np.full(size, np.nan)
    grid[cells] = values
    # Where several values share a cell one of them landed; the others are merged in.
    lost = ~(grid[cells] == values)
    if lost.any():
        np.fmax.at(grid, cells[lost], values[lost])
    return grid


def scatter_min(size: int, cells: np.ndarray, values: np.ndarray, empty: int) -> np.ndarray:
    """A grid of ``size`` integers holding, per cell, the smallest value put there (``empty``
    where none was)."""
    grid = np.full(size, empty, dtype=np.int64)
    grid[cells] = values
    lost = grid[cells] != values
    if lost.any():
        np.minimum.at(grid, cells[lost], values[lost])
    return grid
