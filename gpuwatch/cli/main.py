"""The ``gpuwatch`` command line: builds the settings once and wires the layers together.

Exit status: 0 success, 1 runtime failure, 2 usage or configuration error. Errors are one line on
stderr; ``--verbose`` adds the traceback.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from gpuwatch import __version__
from gpuwatch.cli.context import AppContext, RuntimeFailure
from gpuwatch.cli.masking import MaskedStream, Masker
from gpuwatch.config import ConfigError
from gpuwatch.store.engine import DatabaseUrlError, StoreError

EXIT_RUNTIME = 1
EXIT_USAGE = 2


class GpuwatchGroup(click.Group):
    """Turns known failures into one clear line on stderr and the contract's exit status."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except ConfigError as exc:
            _fail(ctx, f"configuration error: {exc}", EXIT_USAGE)
        except DatabaseUrlError as exc:
            _fail(ctx, f"configuration error: {exc}", EXIT_USAGE)
        except (StoreError, RuntimeFailure) as exc:
            _fail(ctx, str(exc), EXIT_RUNTIME)
        except KeyboardInterrupt:
            _fail(ctx, "interrupted", 130)


def _fail(ctx: click.Context, message: str, status: int) -> None:
    obj = ctx.find_object(AppContext)
    masker = obj.masker if obj is not None else Masker()
    if obj is not None and obj.verbose:
        click.echo(masker.traceback(), err=True, nl=False)
    click.echo(f"gpuwatch: {masker.mask(message)}", err=True)
    ctx.exit(status)


@click.group(cls=GpuwatchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_file",
    metavar="FILE",
    envvar="GPUWATCH_CONFIG",
    help="YAML configuration file (default: $GPUWATCH_CONFIG, else ./gpuwatch.yaml if present).",
)
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(__version__, prog_name="gpuwatch")
@click.pass_context
def cli(ctx: click.Context, config_file: str | None, verbose: bool) -> None:
    """GPU observability and cost analytics for Kubernetes.

    gpuwatch collects NVIDIA DCGM metrics from Prometheus and GPU pods from the Kubernetes API,
    and tells you, in dollars, who holds GPUs without using them and what to change.

    Start with `gpuwatch demo`: a simulated fleet on SQLite and the dashboard, no cluster needed.
    """
    # The console entry point hands in the masker of its standard error (main).
    masker = ctx.obj if isinstance(ctx.obj, Masker) else Masker()
    ctx.obj = AppContext(config_file=config_file, verbose=verbose, masker=masker)


def _register() -> None:
    from gpuwatch.cli import (
        commands_alerts,
        commands_collect,
        commands_config,
        commands_dashboards,
        commands_db,
        commands_demo,
        commands_health,
        commands_report,
        commands_scheduling,
        commands_simulate,
    )

    cli.add_command(commands_alerts.alerts)
    cli.add_command(commands_collect.collect_command)
    cli.add_command(commands_report.report)
    cli.add_command(commands_report.recommend_command)
    cli.add_command(commands_health.health_command)
    cli.add_command(commands_scheduling.queues_command)
    cli.add_command(commands_scheduling.capacity_command)
    cli.add_command(commands_simulate.simulate)
    cli.add_command(commands_dashboards.dashboards)
    cli.add_command(commands_db.db)
    cli.add_command(commands_config.config)
    cli.add_command(commands_demo.demo)
    cli.add_command(commands_demo.serve)


_register()


def main() -> None:
    """Console entry point: everything written to standard error is masked."""
    masker = Masker()
    sys.stderr = MaskedStream(sys.stderr, masker)
    sys.exit(cli.main(prog_name="gpuwatch", standalone_mode=True, obj=masker))
