"""Sample rows as columns: what collectors hand to :mod:`gpuwatch.store.writer` (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuwatch.store.models import HEALTH_SAMPLE_FIELDS, SAMPLE_FIELDS

#: ``gpu_samples`` integer columns among :data:`HEALTH_SAMPLE_FIELDS` (written as whole numbers).
HEALTH_INTEGER_FIELDS = ("clock_events", "ecc_sbe_count", "ecc_dbe_count", "pcie_replay_count",
                         "nvlink_error_count", "row_remap_failure")  # fmt: skip


@dataclass(frozen=True)
class SampleColumns:
    """Samples as columns, one numpy array per :data:`SAMPLE_FIELDS` name, one entry per row.

    ``gpu_id``, ``ts`` and ``step_s`` are integers; the other columns are floats, NaN for a
    missing reading (NULL), holding whole numbers where the column is an integer.

    ``health``: the efficiency and health readings (:data:`HEALTH_SAMPLE_FIELDS` names), float
    arrays of the same length, NaN for a missing reading; a name not given is NULL on every
    row. Integer columns (:data:`HEALTH_INTEGER_FIELDS`) are stored rounded to whole numbers.
    """

    gpu_id: np.ndarray
    ts: np.ndarray
    step_s: np.ndarray
    pod_id: np.ndarray
    util_ratio: np.ndarray
    util_signal: np.ndarray
    fb_used_mib: np.ndarray
    fb_total_mib: np.ndarray
    power_w: np.ndarray
    temp_c: np.ndarray
    xid: np.ndarray
    health: Mapping[str, np.ndarray] = field(default_factory=dict, kw_only=True)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.health) - set(HEALTH_SAMPLE_FIELDS))
        if unknown:
            raise ValueError(f"unknown health sample fields {unknown}")

    def __len__(self) -> int:
        return len(self.ts)

    def columns(self) -> list[np.ndarray]:
        """The :data:`SAMPLE_FIELDS` columns, in that order (the health readings aside)."""
        return [getattr(self, name) for name in SAMPLE_FIELDS]

    def health_column(self, name: str) -> np.ndarray:
        """Health reading ``name`` as floats, NaN on every row where it was not given."""
        column = self.health.get(name)
        if column is None:
            return np.full(len(self), np.nan)
        return np.asarray(column, dtype=np.float64)

    def health_read(self) -> tuple[str, ...]:
        """The health readings given with at least one value, in :data:`HEALTH_SAMPLE_FIELDS`
        order."""
        return tuple(
            name
            for name in HEALTH_SAMPLE_FIELDS
            if name in self.health and not np.isnan(self.health_column(name)).all()
        )

    def take(self, rows: np.ndarray) -> SampleColumns:
        """The rows selected by a boolean mask or an index array, health readings included."""
        health = {name: np.asarray(column)[rows] for name, column in self.health.items()}
        return SampleColumns(*(column[rows] for column in self.columns()), health=health)

    def stored(self) -> tuple[tuple[str, ...], list[np.ndarray], tuple[str, ...]]:
        """What a write stores: the column names, their values (integer health readings
        rounded), and the health columns with no value on any row (written NULL)."""
        read = self.health_read()
        values = [
            np.rint(self.health_column(name))
            if name in HEALTH_INTEGER_FIELDS
            else self.health_column(name)
            for name in read
        ]
        cleared = tuple(name for name in HEALTH_SAMPLE_FIELDS if name not in read)
        return (*SAMPLE_FIELDS, *read), [*self.columns(), *values], cleared

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]]) -> SampleColumns:
        """Columns of sample tuples in :data:`SAMPLE_FIELDS` order (None or NaN: missing)."""
        table = [tuple(row) for row in rows]
        data = list(zip(*table, strict=True)) if table else [()] * len(SAMPLE_FIELDS)
        return cls(
            *(
                np.asarray(column, dtype=np.int64 if index < 3 else np.float64)
                for index, column in enumerate(data)
            )
        )
