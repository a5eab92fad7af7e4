"""``gpuwatch simulate exporter|apiserver``: a simulated fleet behind real HTTP endpoints.

The exporter serves dcgm-exporter ``/metrics`` for Prometheus to scrape and the apiserver the
Kubernetes API for ``gpuwatch collect``, so the whole pipeline runs without GPUs or a cluster.
Both run until SIGTERM or SIGINT, then stop cleanly.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import click

from gpuwatch.cli.context import RuntimeFailure
from gpuwatch.simulate.layout import CLUSTERS

CLUSTER_NAMES = tuple(c.name for c in CLUSTERS)


class _Server(Protocol):
    @property
    def url(self) -> str: ...

    def start(self) -> Any: ...

    def stop(self) -> None: ...


def _options(port: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        for option in reversed(
            (
                click.option("--host", default="127.0.0.1", show_default=True, help="Address."),
                click.option(
                    "--port",
                    default=port,
                    show_default=True,
                    type=click.IntRange(0, 65535),
                    help="TCP port (0: any free port, printed on start).",
                ),
                click.option(
                    "--seed", default=7, show_default=True, help="Seed of the simulated fleet."
                ),
                click.option(
                    "--cluster",
                    default=CLUSTER_NAMES[0],
                    show_default=True,
                    type=click.Choice(CLUSTER_NAMES),
                    help="Which simulated cluster to serve.",
                ),
            )
        ):
            command = option(command)
        return command

    return decorate


def _serve_until_stopped(server: _Server, describe: Callable[[str], str]) -> None:
    """Start ``server``, print one line saying where it serves, block until SIGTERM/SIGINT."""
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    try:
        server.start()
    except OSError as exc:
        raise RuntimeFailure(f"cannot serve: {exc.strerror or exc}") from None
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    try:
        click.echo(describe(server.url))
        stop.wait()
    finally:
        server.stop()


@click.group("simulate")
def simulate() -> None:
    """Simulated GPU fleet endpoints: a dcgm-exporter and a Kubernetes API (no GPUs needed)."""


@simulate.command("exporter")
@_options(port=9400)
def exporter_command(host: str, port: int, seed: int, cluster: str) -> None:
    """Serve simulated dcgm-exporter metrics of one cluster, live, for Prometheus to scrape.

    /metrics has every node; /metrics?node=NAME one node; /targets lists one target per node for
    Prometheus's http_sd_configs (recommended: each node is then its own scrape target).
    """
    from gpuwatch.simulate.fleet import build_fleet
    from gpuwatch.simulate.serve import ExporterServer

    server = ExporterServer(build_fleet(seed), cluster, host, port)
    nodes = len(server.nodes)
    _serve_until_stopped(
        server,
        lambda url: (
            f"simulated dcgm-exporter for cluster {cluster} ({nodes} nodes) at "
            f"{url}/metrics, service discovery at {url}/targets"
        ),
    )


@simulate.command("apiserver")
@_options(port=8001)
@click.option(
    "--kubeconfig",
    "kubeconfig_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a kubeconfig pointing at this server to FILE.",
)
@click.option(
    "--dra-version",
    default="v1",
    show_default=True,
    type=click.Choice(["v1", "v1beta2", "v1beta1"]),
    help="The one resource.k8s.io version served (ResourceClaims, ResourceSlices, DeviceClasses).",
)
@click.option(
    "--forbid-dra",
    is_flag=True,
    help="Answer 403 to resource.k8s.io lists, as RBAC does without a role for them.",
)
def apiserver_command(
    host: str,
    port: int,
    seed: int,
    cluster: str,
    kubeconfig_path: Path | None,
    dra_version: str,
    forbid_dra: bool,
) -> None:
    """Serve the Kubernetes API of one simulated cluster (pods, nodes, namespaces, owners,
    DRA claims and slices)."""
    from gpuwatch.simulate.apiserver import kubeconfig_for
    from gpuwatch.simulate.fleet import build_fleet
    from gpuwatch.simulate.serve import LiveKubeApi

    server = LiveKubeApi(build_fleet(seed), cluster, host, port, dra_version=dra_version)
    if forbid_dra:
        server.forbid_group("resource.k8s.io")

    def describe(url: str) -> str:
        line = f"simulated Kubernetes API for cluster {cluster} at {url}"
        if kubeconfig_path is not None:
            line += f", kubeconfig {kubeconfig_for(url, kubeconfig_path)}"
        return line

    _serve_until_stopped(server, describe)
