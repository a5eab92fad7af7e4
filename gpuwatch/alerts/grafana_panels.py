"""Panel builders shared by the generated Grafana dashboards (:mod:`gpuwatch.alerts.grafana`,
:mod:`gpuwatch.alerts.grafana_health`): template-variable matchers and panel shorthands."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwatch.alerts import promql
from gpuwatch.alerts.grafana_model import Panel, Query
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording import NAMESPACE_GPUS, NAMESPACE_UTIL_SUM


def stat(title: str, expr: str, description: str, unit: str = "short", **kw: Any) -> Panel:
    options = {"width": 4, "height": 4, **kw}
    return Panel(title, "stat", (Query(expr),), description, unit, **options)


def series(title: str, queries: tuple[Query, ...], description: str, **kw: Any) -> Panel:
    return Panel(title, "timeseries", queries, description, **kw)


def table(title: str, queries: tuple[Query, ...], description: str) -> Panel:
    return Panel(title, "table", queries, description)


@dataclass(frozen=True)
class Scope:
    """Matchers for the template variables, and groupings that keep the cluster label."""

    params: RuleParams

    def sel(self, metric: str, *extra: str, namespace: bool = True, node: bool = False) -> str:
        return promql.selector(metric, (), (*self.matchers(namespace, node), *extra))

    def matchers(self, namespace: bool = True, node: bool = False) -> tuple[str, ...]:
        """The template variables' matchers, as :meth:`sel` adds them."""
        label = self.params.cluster_label or "cluster"
        found = [f'{label}=~"$cluster"']
        if namespace:
            found.append('namespace=~"$namespace"')
        if node:
            found.append('node=~"$node"')
        return tuple(found)

    def by(self, *labels: str) -> str:
        return promql.by([*self.params.cluster, *labels])

    def legend(self, *labels: str) -> str:
        return " ".join("{{" + name + "}}" for name in (*self.params.cluster, *labels))

    def ratio(self, numerator: str, denominator: str, *labels: str) -> str:
        """``sum(numerator) / sum(denominator)``, grouped by the cluster and ``labels``."""
        names = [*self.params.cluster, *labels]
        grouping = f" by ({promql.by(names)})" if names else ""
        return f"sum{grouping} ({numerator})\n/\nsum{grouping} ({denominator})"

    def efficiency(self, *labels: str, namespace: bool = True) -> str:
        util = self.sel(NAMESPACE_UTIL_SUM, namespace=namespace)
        return self.ratio(util, self.sel(NAMESPACE_GPUS, namespace=namespace), *labels)


def gpu_series(scope: Scope, title: str, expr: str, description: str, **kw: Any) -> Panel:
    query = Query(expr, scope.legend("node", "gpu"))
    return series(title, (query,), description, legend=False, **kw)
