"""DCGM series from Prometheus → one row per GPU unit and grid instant (pure, no I/O).

Input is what ``/api/v1/query_range`` returns for each query of :mod:`gpuwatch.collectors.promql`,
per field: a :class:`~gpuwatch.collectors.promjson.Matrix`, or the decoded JSON itself::

    [{"metric": {"__name__": "...", "UUID": "GPU-8f…", "gpu": "1",
                 "modelName": "NVIDIA L40S", "Hostname": "node-a",
                 "exported_pod": "train-0", "exported_namespace": "ml",
                 "pod": "dcgm-exporter-x2x", "namespace": "gpu-operator",
                 "instance": "10.0.0.7:9400"},
      "values": [[1763251200, "0.41"], [1763251260, "0.43"]]}]

Label variants (``exported_pod`` or ``pod``, ``UUID`` or ``uuid``, ...) are absorbed by
:mod:`gpuwatch.collectors.dcgm_labels`.

Each series' labels are screened against what the store holds (:mod:`gpuwatch.collectors.screen`):
a series without a GPU UUID, or whose labels do not fit, is skipped and counted
(``PageSamples.issues``), never written and never the cause of a failed page.

Labels are read once per series; the points are placed on a (GPU unit × grid instant) grid with
array operations, so a page costs no Python work per point.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from gpuwatch.collectors import intervals, promjson, screen
from gpuwatch.collectors.bounds import BOUNDS, bounded, health_values
from gpuwatch.collectors.dcgm_labels import (
    REMEMBERED_SERIES,
    label_facts,
    pod_label_choice,
    series_identity,
    unnamed,
)
from gpuwatch.collectors.page import (
    DEVICE_SLOT,
    HEALTH_VALUE_COLUMNS,
    IDENTITY_COLUMNS,
    OUTPUT_COLUMNS,
    SHARING_COLUMNS,
    SIGNAL_DEV,
    SIGNAL_PROF,
    UNIT_DTYPES,
    UNIT_KEY,
    PageSamples,
    empty_page,
    scatter_max,
    scatter_min,
)
from gpuwatch.collectors.promjson import Matrix
from gpuwatch.collectors.promql import FIELDS
from gpuwatch.domain.labels import LabelVariants

__all__ = ["BOUNDS", "OUTPUT_COLUMNS", "SIGNAL_DEV", "SIGNAL_PROF", "UNIT_KEY", "LabelVariants"]

#: Fields whose series decide a sample's pod attribution, in order of preference. The
#: efficiency and health readings (:data:`HEALTH_VALUE_COLUMNS`) never do, nor make a row on
#: their own: they are read into the rows the other fields make, so that whether an exporter
#: provides them changes no other stored value.
ATTRIBUTION_ORDER = ("util_prof", "util_dev_pct", "fb_used_mib")
Results = Mapping[str, Matrix | Sequence[Mapping[str, Any]]]


@dataclass(frozen=True)
class _SeriesTable:
    """Every series of the page (all fields, in order): its unit (-1: not read) and identity."""

    unit: np.ndarray
    score: np.ndarray
    identities: pd.DataFrame
    units: list[tuple[str, int, int]]
    issues: screen.SeriesIssues
    #: Per unit: pods sharing it through one ResourceClaim (1: not shared), whether a ``vgpu``
    #: label made it a slot, whether a claim holds it.
    sharing: dict[tuple[str, int, int], tuple[int, bool, bool]]


#: A series' identity and its :data:`IDENTITY_COLUMNS` values (None: skipped), and the reasons
#: it was skipped or changed (:mod:`gpuwatch.collectors.screen`).
Found = tuple[tuple[dict[str, Any], tuple[Any, ...]] | None, tuple[str, ...]]


@functools.lru_cache(maxsize=REMEMBERED_SERIES)
def _identity(key: bytes, variants: LabelVariants, pod_index: int | None) -> Found:
    """:func:`series_identity` of a series' labels, screened for the store, remembered from
    page to page (the same series come back every page)."""
    identity = series_identity(label_facts(key, variants)[0], variants, pod_index)
    if identity is None:
        return None, (screen.NO_UUID,)
    fixed, notes = screen.screen_identity(identity)
    if fixed is None:
        return None, tuple(notes)
    return (fixed, tuple(fixed[column] for column in IDENTITY_COLUMNS)), tuple(notes)


def _identities(
    results: Mapping[str, Matrix], variants: LabelVariants
) -> tuple[list[tuple[dict[str, Any], tuple[Any, ...]] | None], list[str], screen.SeriesIssues]:
    """Each series' identity and its row (None: skipped, or no point) and field; and the
    series skipped or changed, by reason."""
    label_sets = {name: [unnamed(key) for key in m.keys] for name, m in results.items()}
    choice = pod_label_choice((k for keys in label_sets.values() for k in keys), variants)
    identities: list[tuple[dict[str, Any], tuple[Any, ...]] | None] = []
    fields: list[str] = []
    issues = screen.IssueCounter()
    for name, matrix in results.items():
        counts, bad = matrix.counts.tolist(), matrix.malformed_counts.tolist()
        for key, labelled, labels, count, skipped in zip(
            matrix.keys, label_sets[name], matrix.labels, counts, bad, strict=True
        ):
            if count:
                pod_index = choice.get(label_facts(labelled, variants)[1])
                found, reasons = _identity(labelled, variants, pod_index)
            else:
                found, reasons = None, ()
            for reason in reasons:
                issues.add(reason, key, labels)
            if skipped:
                issues.add(screen.MALFORMED_VALUES, key, labels)
                issues.bad_points(skipped)
            identities.append(found)
            fields.append(name)
    return identities, fields, issues.result()


def _shadowed(
    identities: Sequence[dict[str, Any] | None], keep_device: bool
) -> tuple[list[bool], list[bool]]:
    """Per series: whether it is ignored (no identity, the whole-GPU series of a MIG-partitioned
    GPU, the device series of a GPU with per-pod vGPUs unless ``keep_device``), and whether it
    is such a device series kept (its unit's slot is ``DEVICE_SLOT``)."""
    present = [i for i in identities if i is not None]
    mig = {i["uuid"] for i in present if i["mig_gi_id"] >= 0}
    vgpu = {(i["uuid"], i["mig_gi_id"]) for i in present if i["has_vgpu"]}
    device = [
        i is not None and (i["uuid"], i["mig_gi_id"]) in vgpu and not i["has_vgpu"]
        for i in identities
    ]
    dropped = [
        i is None or (i["uuid"] in mig and i["mig_gi_id"] < 0) or (d and not keep_device)
        for i, d in zip(identities, device, strict=True)
    ]
    return dropped, device


def _claim_slots(identities: Sequence[dict[str, Any] | None]) -> list[tuple[int, int]]:
    """Per series: its slot and the number of pods sharing its device through one claim.

    dcgm-exporter gives a claim shared by k pods one series per pod, same readings: each pod
    gets a slot of its own (its rank among the claim's pods on that device), 1/k of the device.
    """
    pods: dict[tuple[str, int, str], set[str]] = {}
    for i in identities:
        if i is not None and i["dra_claim"] and i["pod"]:
            key = (i["uuid"], i["mig_gi_id"], i["dra_claim"])
            pods.setdefault(key, set()).add(f"{i['namespace']}/{i['pod']}")
    ranks = {key: sorted(names) for key, names in pods.items() if len(names) > 1}
    out: list[tuple[int, int]] = []
    for i in identities:
        shared = None if i is None else ranks.get((i["uuid"], i["mig_gi_id"], i["dra_claim"]))
        if i is None or shared is None or not i["pod"]:
            out.append((0 if i is None else int(i["slot"]), 1))
        else:
            out.append((shared.index(f"{i['namespace']}/{i['pod']}"), len(shared)))
    return out


def _series_table(
    results: Mapping[str, Matrix], variants: LabelVariants, keep_device: bool = False
) -> _SeriesTable:
    found, fields, issues = _identities(results, variants)
    identities = [None if item is None else item[0] for item in found]
    dropped, device = _shadowed(identities, keep_device)
    slots = _claim_slots(identities)
    keys, sharing = [], {}
    for i, drop, dev, (slot, shared_by) in zip(identities, dropped, device, slots, strict=True):
        if i is not None and not drop:
            key = (i["uuid"], i["mig_gi_id"], DEVICE_SLOT if dev else slot)
            keys.append(key)
            sharing[key] = (shared_by, bool(i["has_vgpu"]), bool(i["dra_claim"]))
    units = sorted(set(keys))
    index = {key: n for n, key in enumerate(units)}
    unit = np.full(len(identities), -1, dtype=np.int64)
    kept = np.flatnonzero(~np.asarray(dropped, dtype=bool))
    unit[kept] = [index[key] for key in keys]
    # Attribution: util fields first, then series with a pod, then the earliest series.
    total = len(identities)
    rank = {name: n for n, name in enumerate(ATTRIBUTION_ORDER)}
    field_rank = np.array([rank.get(f, len(rank)) for f in fields], dtype=np.int64)
    no_pod = np.array([i is None or i["pod"] is None for i in identities], dtype=np.int64)
    score = (field_rank * 2 + no_pod) * total + np.arange(total, dtype=np.int64)
    empty = (None,) * len(IDENTITY_COLUMNS)
    frame = pd.DataFrame.from_records(
        [empty if item is None else item[1] for item in found], columns=IDENTITY_COLUMNS
    )
    return _SeriesTable(unit, score, frame, units, issues, sharing)


@dataclass(frozen=True)
class _Grid:
    """Grid instants ``t0, t0 + step, ...`` (``size`` of them) for every unit."""

    t0: int
    size: int
    step_s: int


def _grid(results: Mapping[str, Matrix], step_s: int) -> _Grid:
    lows = [float(m.ts.min()) for m in results.values() if len(m.ts)]
    highs = [float(m.ts.max()) for m in results.values() if len(m.ts)]
    low, high = round(min(lows)), round(max(highs))
    low, high = low - low % step_s, high - high % step_s
    return _Grid(low, (high - low) // step_s + 1, step_s)


def _cells(matrix: Matrix, offset: int, table: _SeriesTable, grid: _Grid) -> np.ndarray:
    """Per point, its cell ``unit * grid.size + instant`` (-1: a series not read)."""
    unit = table.unit[offset : offset + len(matrix.labels)][matrix.series_of_points]
    ts = np.rint(matrix.ts).astype(np.int64)
    slot = (ts - grid.t0) // grid.step_s  # t0 is on the grid: a point snaps to its instant
    return np.where(unit >= 0, unit * grid.size + slot, -1)


def _offsets(results: Mapping[str, Matrix]) -> dict[str, int]:
    """Per field, the index of its first series in the page's series table."""
    sizes = [len(matrix.labels) for matrix in results.values()]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist() if sizes else []
    return dict(zip(results, starts, strict=True))


def _place(
    results: Mapping[str, Matrix], offsets: Mapping[str, int], table: _SeriesTable, grid: _Grid
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per field, the grid of its readings (max over series); and per cell the best source."""
    cells_total = len(table.units) * grid.size
    empty = np.iinfo(np.int64).max
    best = np.full(cells_total, empty, dtype=np.int64)
    readings: dict[str, np.ndarray] = {}
    for name, matrix in results.items():
        offset = offsets[name]
        cells, series, values = (
            _cells(matrix, offset, table, grid),
            matrix.series_of_points,
            matrix.values,
        )
        read = cells >= 0
        if not read.all():
            cells, series, values = cells[read], series[read], values[read]
        values = bounded(name, values)
        readings[name] = scatter_max(cells_total, cells, values)
        if name in HEALTH_VALUE_COLUMNS:  # never the source of a row's attribution
            continue
        score = table.score[offset : offset + len(matrix.labels)][series]
        best = np.minimum(best, scatter_min(cells_total, cells, score, empty))
    return readings, best


def _capacity(
    results: Mapping[str, Matrix], offsets: Mapping[str, int], table: _SeriesTable, step_s: int
) -> tuple[np.ndarray, int, int]:
    """The framebuffer total per unit on the capacity grid (NaN where the unit's capacity
    instant has no reading): (units × instants array, first instant, step)."""
    snapped = {name: _snap_up(m, step_s) for name, m in results.items()}
    stamps = [m.ts for m in snapped.values() if len(m.ts)]
    if not stamps:
        return np.full((len(table.units), 1), np.nan), 0, step_s
    low, high = (round(float(f(np.concatenate(stamps)))) for f in (np.min, np.max))
    grid = _Grid(low, (high - low) // step_s + 1, step_s)
    readings, _ = _place(snapped, offsets, table, grid)
    nan = np.full(len(table.units) * grid.size, np.nan)
    total = (
        readings.get("fb_used_last_mib", nan)
        + readings.get("fb_free_mib", nan)
        + np.nan_to_num(readings.get("fb_reserved_mib", nan))
    )
    return total.reshape(len(table.units), grid.size), low, step_s


def _snap_up(matrix: Matrix, step_s: int) -> Matrix:
    """``matrix`` with each point on the first multiple of ``step_s`` at or after it: the page's
    last instant, read in place of the next capacity instant, stands for that instant."""
    ts = np.rint(matrix.ts).astype(np.int64)
    return replace(matrix, ts=(-(-ts // step_s) * step_s).astype(matrix.ts.dtype))


def _capacity_at(
    capacity: tuple[np.ndarray, int, int], unit: np.ndarray, ts: np.ndarray
) -> np.ndarray:
    """Each row's framebuffer total: that of the last capacity instant at or before ``ts``, else
    (a unit's first minutes) of the next instant; NaN where neither has a reading."""
    totals, first, step_s = capacity
    result: np.ndarray = np.full(len(ts), np.nan)
    for shift in (0, 1):
        index = (ts - first) // step_s + shift
        todo = np.isnan(result) & (index >= 0) & (index < totals.shape[1])
        result[todo] = totals[unit[todo], index[todo]]
    return result


def _rows(
    readings: Mapping[str, np.ndarray],
    best: np.ndarray,
    table: _SeriesTable,
    grid: _Grid,
    capacity: tuple[np.ndarray, int, int],
    spread: Mapping[str, intervals.Points],
) -> PageSamples:
    nan = np.full(len(best), np.nan)
    grids = {f.field: readings.get(f.field, nan) for f in FIELDS if not (f.capacity or f.coarse)}
    has_reading = np.zeros(len(best), dtype=bool)
    for name, column in grids.items():
        if name not in HEALTH_VALUE_COLUMNS:
            has_reading |= ~np.isnan(column)
    cells = np.flatnonzero(has_reading)
    at = {name: column[cells] for name, column in grids.items()}
    prof, dev = at["util_prof"], at["util_dev_pct"] / 100.0
    signal = np.where(~np.isnan(prof), 1, np.where(~np.isnan(dev), 2, 0)).astype(np.int8)
    unit = cells // grid.size
    ts = grid.t0 + (cells % grid.size) * grid.step_s
    kinds = {f.field: f.coarse for f in FIELDS if f.coarse}
    for name, points in spread.items():
        count = kinds[name] == intervals.COUNT
        at[name] = intervals.place((unit, ts), points, grid.step_s, capacity[2], count)
    read = {*readings, *spread}
    health = health_values({name: at[name] for name in HEALTH_VALUE_COLUMNS if name in read})
    total = _capacity_at(capacity, unit, ts)
    present, unit = np.unique(unit, return_inverse=True)
    keys = [table.units[u] for u in present.tolist()]
    units = pd.DataFrame(keys, columns=UNIT_KEY)
    facts = pd.DataFrame([table.sharing[k] for k in keys], columns=SHARING_COLUMNS)
    return PageSamples(
        units=pd.concat([units, facts], axis=1).astype(UNIT_DTYPES),
        series=table.identities,
        unit=unit.astype(np.int64),
        ts=ts,
        source=best[cells] % max(len(table.score), 1),
        util_signal=signal,
        values={
            "util_ratio": np.clip(np.where(signal == 1, prof, dev), 0.0, 1.0),
            "fb_used_mib": at["fb_used_mib"],
            "fb_total_mib": total,
            "power_w": at["power_w"],
            "temp_c": at["temp_c"],
            "xid": at["xid"],
            **health,
        },
    )


def page_samples(
    results: Results,
    variants: LabelVariants,
    step_s: int,
    capacity_step_s: int | None = None,
    *,
    keep_device_slots: bool = False,
) -> PageSamples:
    """One row per GPU unit and grid instant with a reading of any field.

    ``util_ratio`` is ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` where the unit exports it, else
    ``DCGM_FI_DEV_GPU_UTIL / 100``; ``util_signal`` says which. A unit/instant with no reading of
    any field does not appear (no data). Several series of one unit at one instant: each field
    keeps its largest reading, and the attribution (pod, node, ...) comes from the most
    authoritative series (utilization first, then one naming a pod, then the first).

    The capacity fields (framebuffer used + free + reserved, the unit's total) are on a grid of
    their own every ``capacity_step_s`` (``step_s`` when None), at its multiples: a row takes
    the total of the last capacity instant at or before it, else of the next one (NaN where
    neither has a reading), never another one, so the total does not depend on the page.
    The error counts and link bandwidth (``FieldQuery.coarse``) are one reading per interval of
    ``capacity_step_s``, each placed on one row of its unit (:mod:`gpuwatch.collectors.intervals`).

    ``keep_device_slots``: the device-level series of a GPU with per-pod (``vgpu``) series
    becomes a unit of slot ``DEVICE_SLOT`` instead of being ignored, for
    :func:`gpuwatch.collectors.slots.fill_free_slots`.
    """
    matrices = {
        name: value if isinstance(value, Matrix) else promjson.from_series(value)
        for name, value in results.items()
    }
    table = _series_table(matrices, variants, keep_device_slots)
    coarse = {f.field for f in FIELDS if f.capacity or f.coarse}
    fine = {name: m for name, m in matrices.items() if name not in coarse}
    if not table.units or not any(len(m.ts) for m in fine.values()):
        return replace(empty_page(table.identities), issues=table.issues)
    offsets = _offsets(matrices)
    grid = _grid(fine, step_s)
    readings, best = _place(fine, offsets, table, grid)
    capacity_names = {f.field for f in FIELDS if f.capacity}
    capacity_fields = {name: m for name, m in matrices.items() if name in capacity_names}
    capacity = _capacity(capacity_fields, offsets, table, capacity_step_s or step_s)
    spread_fields = {n: m for n, m in matrices.items() if n in coarse and n not in capacity_names}
    spread = intervals.field_readings(spread_fields, offsets, table.unit)
    return replace(_rows(readings, best, table, grid, capacity, spread), issues=table.issues)


def samples_from_results(
    results: Results, variants: LabelVariants, step_s: int, capacity_step_s: int | None = None
) -> pd.DataFrame:
    """:func:`page_samples` as one DataFrame with the columns of :data:`OUTPUT_COLUMNS`."""
    return page_samples(results, variants, step_s, capacity_step_s).to_frame()
