"""``gpuwatch queues`` and ``gpuwatch capacity``: scheduling waste in a window (contract
section 7, docs/cost-model.md#scheduling)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
import pandas as pd

from gpuwatch.analytics.capacity import CAPACITY_REPORT_COLUMNS, capacity_report
from gpuwatch.analytics.costing import prepare
from gpuwatch.analytics.queues import QUEUE_REPORT_COLUMNS, queue_report
from gpuwatch.analytics.render_scheduling import render_csv, render_json, render_table
from gpuwatch.cli.commands_health import _window
from gpuwatch.cli.context import AppContext, pass_app
from gpuwatch.report.inputs import Inputs, load_inputs, price_book_from
from gpuwatch.store import repository_scheduling

DEFAULT_WINDOW = "7d"
_QUEUE_TABLE = (
    ("cluster", "CLUSTER"), ("cohort", "COHORT"), ("queue", "QUEUE"), ("flavor", "FLAVOR"),
    ("nominal_gpus", "NOMINAL"), ("quota_gpu_hours", "QUOTA GPU-H"),
    ("allocated_gpu_hours", "ALLOC GPU-H"), ("busy_gpu_hours", "BUSY GPU-H"),
    ("borrowed_gpu_hours", "BORROWED"), ("lent_gpu_hours", "LENT"),
    ("pending_gpu_hours", "PENDING"), ("stalled_gpu_hours", "STALLED"),
    ("idle_quota_gpu_hours", "IDLE QUOTA"), ("idle_quota_usd", "IDLE QUOTA $"),
)  # fmt: skip
_CAPACITY_TABLE = (
    ("cluster", "CLUSTER"), ("gpu_model", "MODEL"), ("free_gpu_hours", "FREE GPU-H"),
    ("stranded_gpu_hours", "STRANDED GPU-H"), ("stranded_cost_usd", "STRANDED $"),
    ("largest_unplaceable_request", "LARGEST STUCK"),
)  # fmt: skip


F = TypeVar("F", bound=Callable[..., Any])


def _options(command: F) -> F:
    """The window and format options of ``gpuwatch health``."""
    command = click.option(
        "--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
        show_default=True,
    )(command)  # fmt: skip
    command = click.option("--end", help="Window end (exclusive; default: now).")(command)
    start_help = "Window start: RFC 3339 or a duration before now."
    return click.option("--start", default=DEFAULT_WINDOW, show_default=True, help=start_help)(
        command
    )


def _costed(app: AppContext, start: str, end: str | None) -> tuple[Inputs, pd.DataFrame]:
    start_ts, end_ts = _window(start, end)
    data = load_inputs(
        app.engine(),
        start_ts,
        end_ts,
        resolution=app.settings.storage.resolution,
        idle_util_pct=app.settings.thresholds.idle_util_pct,
    )
    return data, prepare(data.samples, data.pods, price_book_from(app.settings))


def _emit(frame: pd.DataFrame, fmt: str, keys: tuple[str, ...],
          table: tuple[tuple[str, str], ...], empty: str) -> None:  # fmt: skip
    if fmt == "table":
        click.echo(render_table(frame, table, empty), nl=False)
    elif fmt == "csv":
        click.echo(render_csv(frame, keys), nl=False)
    else:
        click.echo(render_json(frame, keys), nl=False)


@click.command("queues")
@_options
@pass_app
def queues_command(app: AppContext, start: str, end: str | None, fmt: str) -> None:
    """GPU quota per Kueue ClusterQueue (or Volcano queue) and flavor: quota, allocated, busy,
    borrowed, lent, pending and stalled GPU-hours, and idle quota in dollars."""
    queues = repository_scheduling.load_queue_flavors(app.engine())
    if queues.empty:
        frame = pd.DataFrame(columns=list(QUEUE_REPORT_COLUMNS))
        _emit(frame, fmt, QUEUE_REPORT_COLUMNS, _QUEUE_TABLE, "No queues with a GPU quota.")
        return
    data, costed = _costed(app, start, end)
    workloads = repository_scheduling.load_sched_workloads(app.engine(), data.start_ts, data.end_ts)
    frame = queue_report(
        queues, workloads, data.pods, costed, app.settings.scheduling.policy(),
        data.start_ts, data.end_ts, price_book=price_book_from(app.settings),
    )  # fmt: skip
    _emit(frame, fmt, QUEUE_REPORT_COLUMNS, _QUEUE_TABLE, "No queues with a GPU quota.")


@click.command("capacity")
@_options
@pass_app
def capacity_command(app: AppContext, start: str, end: str | None, fmt: str) -> None:
    """Stranded capacity per cluster and GPU model: free GPU-hours, those a pending pod could
    not use because no single node had enough free GPUs, and their cost."""
    data, costed = _costed(app, start, end)
    frame = capacity_report(costed, data.pods, data.start_ts, data.end_ts)
    _emit(frame, fmt, CAPACITY_REPORT_COLUMNS, _CAPACITY_TABLE, "No GPU samples in the window.")
