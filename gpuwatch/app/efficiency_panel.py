"""The Workload page's efficiency panel: engine vs SM vs tensor vs DRAM activity per hour, and
the window's figures per GPU model (throttled, busy-but-inefficient and failing GPU-hours with
their cost, the likely cause), from the health roll-up through the efficiency analytics."""

from __future__ import annotations

from typing import Any

import pandas as pd
from dash import dcc, html

from gpuwatch.app import format as fmt
from gpuwatch.app import grid
from gpuwatch.app.components import html_table, section
from gpuwatch.app.figures_health import efficiency_figure
from gpuwatch.app.views_health import EfficiencyView
from gpuwatch.domain.health import BUSY_UTIL_RATIO, LOW_SM_ACTIVE_RATIO, NO_TENSOR_RATIO

#: Utilization signal of rows whose utilization is ``DCGM_FI_DEV_GPU_UTIL``.
DEV_GPU_UTIL = "dev_gpu_util"
NOTE = (
    "From the hourly health roll-up of the workload's pods. Percentages are GPU-hour "
    "weighted means of the hours with the reading; engine active counts only where profiling "
    "fields exist (elsewhere utilization is DCGM_FI_DEV_GPU_UTIL, another measure). Busy but "
    f"inefficient: held with the engine active ≥ {100 * BUSY_UTIL_RATIO:g} % while SM active "
    f"< {100 * LOW_SM_ACTIVE_RATIO:g} %, or tensor active < {100 * NO_TENSOR_RATIO:g} % on a "
    "GPU with tensor cores (per hourly row the larger of the two shares of "
    "its busy seconds, so no second counts twice). Throttled: with a thermal, power-cap or "
    "HW-slowdown clock event. Failing: held on a GPU after its first failing event (GPU "
    "health page). — is no reading, never 0."
)


def _has(frame: pd.DataFrame, column: str) -> bool:
    return bool(frame[column].notna().any()) if len(frame) else False


def unavailable_text(view: EfficiencyView) -> str | None:
    """Which activity readings the workload's GPUs lack, and what the exporter sends instead;
    None when SM and tensor activity both exist."""
    eff = view.efficiency
    sm, tensor = _has(eff, "sm_active_pct"), _has(eff, "tensor_active_pct")
    if sm and tensor:
        return None
    profiling = sm or tensor or _has(eff, "dram_active_pct")
    if not profiling and view.signals == {DEV_GPU_UTIL}:
        return (
            "SM and tensor activity are unavailable: the exporter sends only "
            "DCGM_FI_DEV_GPU_UTIL for these GPUs (no DCGM_FI_PROF_* profiling fields)."
        )
    if not sm and not tensor:
        return (
            "SM and tensor activity are unavailable: the exporter sends neither "
            "DCGM_FI_PROF_SM_ACTIVE nor DCGM_FI_PROF_PIPE_TENSOR_ACTIVE for these GPUs."
        )
    if not sm:
        return (
            "SM activity is unavailable: the exporter does not send DCGM_FI_PROF_SM_ACTIVE "
            "for these GPUs."
        )
    return (
        "Tensor activity is unavailable: the exporter does not send "
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE for these GPUs."
    )


def figures_table(efficiency: pd.DataFrame) -> Any:
    """The window's figures, one row per GPU model."""
    if efficiency.empty:
        return html.P(
            "No health roll-up rows for this workload in this window.", className="gw-note"
        )
    columns = [
        ("GPU model", lambda r: fmt.text(r["gpu_model"])),
        ("Allocated", lambda r: fmt.gpu_hours(r["allocated_gpu_hours"])),
        ("Engine active", lambda r: fmt.pct(r["engine_active_pct"])),
        ("SM active", lambda r: fmt.pct(r["sm_active_pct"])),
        ("Tensor active", lambda r: fmt.pct(r["tensor_active_pct"])),
        ("DRAM active", lambda r: fmt.pct(r["dram_active_pct"])),
        ("Throttled", lambda r: fmt.gpu_hours(r["throttled_gpu_hours"])),
        ("Busy but inefficient", lambda r: fmt.gpu_hours(r["inefficient_gpu_hours"])),
        ("Inefficient cost", lambda r: fmt.usd(r["inefficient_cost_usd"])),
        ("Failing", lambda r: fmt.gpu_hours(r["failing_gpu_hours"])),
        ("Failing cost", lambda r: fmt.usd(r["failing_cost_usd"])),
        ("Likely cause", lambda r: fmt.text(r["cause"]) or fmt.DASH),
    ]
    rows = efficiency.astype(object).where(efficiency.notna(), None).to_dict("records")
    return html_table("workload-efficiency-table", columns, rows)


def efficiency_section(view: EfficiencyView, export: grid.Export) -> html.Section:
    """The panel: the sentence on missing readings, the activity per hour, the figures."""
    missing = unavailable_text(view)
    children: list[Any] = []
    if missing:
        children.append(html.P(missing, className="gw-note", id="workload-efficiency-unavailable"))
    figure = efficiency_figure(view.timeline, missing)
    children.append(dcc.Graph(id="workload-efficiency-timeline", figure=figure))
    children.append(grid.exportable(figures_table(view.efficiency), export))
    return section("Real efficiency", *children, note=NOTE, key="workload-efficiency")
