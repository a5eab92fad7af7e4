"""``gpuwatch health``: the GPUs that were not healthy in a window (contract section 7)."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from gpuwatch.analytics.health import gpu_health
from gpuwatch.analytics.render_health import render_csv, render_json, render_table
from gpuwatch.cli.context import AppContext, pass_app
from gpuwatch.domain.durations import parse_instant
from gpuwatch.report.inputs import health_policy_from, hour_window, load_health, price_book_from

DEFAULT_HEALTH_WINDOW = "7d"


def _window(start: str, end: str | None) -> tuple[int, int]:
    now = datetime.now(UTC)
    try:
        start_ts = int(parse_instant(start, now).timestamp())
        end_ts = int(parse_instant(end, now).timestamp()) if end else int(now.timestamp())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if end_ts <= start_ts:
        raise click.BadParameter("--end must be after --start")
    return start_ts, end_ts


@click.command("health")
@click.option("--start", default=DEFAULT_HEALTH_WINDOW, show_default=True,
              help="Window start: RFC 3339 or a duration before now.")  # fmt: skip
@click.option("--end", help="Window end (exclusive; default: now).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@pass_app
def health_command(app: AppContext, start: str, end: str | None, fmt: str) -> None:
    """GPUs that were failing, hit application errors or were degraded in the window, worst
    first, with the dollars paid for allocated GPU-hours while failing.

    The window is read in whole hours (the hourly health roll-up)."""
    start_ts, end_ts = _window(start, end)
    first, last = hour_window(start_ts, end_ts)
    frame = load_health(app.engine(), first, last)
    entries = gpu_health(
        frame, price_book_from(app.settings), health_policy_from(app.settings), last
    )
    if fmt == "table":
        click.echo(render_table(entries, (first, last)), nl=False)
        return
    renderers = {"csv": render_csv, "json": render_json}
    click.echo(renderers[fmt](entries), nl=False)
