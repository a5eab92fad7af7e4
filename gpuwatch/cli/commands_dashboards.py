"""``gpuwatch dashboards``: Grafana dashboards over the recording rules."""

from __future__ import annotations

from pathlib import Path

import click

from gpuwatch.alerts.grafana import render_dashboards, write_dashboards
from gpuwatch.alerts.render import rule_params_from_settings
from gpuwatch.cli.context import AppContext, pass_app


@click.group()
def dashboards() -> None:
    """Grafana dashboards: fleet utilization, idle cost, GPU health."""


@dashboards.command("render")
@click.option(
    "--out-dir",
    default="dashboards",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for gpuwatch-fleet.json and gpuwatch-gpu-health.json.",
)
@pass_app
def dashboards_render(app: AppContext, out_dir: str) -> None:
    """Write the dashboards rendered from the configuration (cluster label, thresholds).

    They read the series recorded by the rules of `gpuwatch alerts render`: render both from the
    same configuration and load the rules into Prometheus.
    """
    files = render_dashboards(rule_params_from_settings(app.settings))
    for path in write_dashboards(Path(out_dir), files):
        click.echo(f"wrote {path}")
