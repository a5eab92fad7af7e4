"""``gpuwatch alerts``: the PrometheusRule and plain rule files from the configuration."""

from __future__ import annotations

from pathlib import Path

import click

from gpuwatch.alerts.render import render_rules, rule_params_from_settings, write_rules
from gpuwatch.cli.context import AppContext, pass_app


@click.group()
def alerts() -> None:
    """Prometheus alert and recording rules for GPU waste and health."""


@alerts.command("render")
@click.option(
    "--out-dir",
    default="alerts",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for gpuwatch-rules.yaml (PrometheusRule) and gpuwatch-rules.plain.yaml.",
)
@pass_app
def alerts_render(app: AppContext, out_dir: str) -> None:
    """Write the rules rendered from the configured thresholds, label schema and prices."""
    files = render_rules(rule_params_from_settings(app.settings))
    for path in write_rules(Path(out_dir), files):
        click.echo(f"wrote {path}")
