"""Label normalisation: every DCGM series gets ``namespace``, ``pod``, ``container``, ``node``
and ``gpu`` whatever label variant the exporter and the scrape configuration produced.

- ``pod``/``namespace``/``container``: the first present of the configured variants
  (``exported_pod`` over ``pod``: scraped through a ServiceMonitor without ``honorLabels``, plain
  ``pod`` names the exporter itself). Series whose namespace is one of the exporter's own
  namespaces lose all three: the exporter never holds a GPU.
- ``node``: the first present of the hostname variants (``Hostname``, ``hostname``).
- ``gpu``: the GPU's UUID (``UUID`` or ``uuid``), plus ``/<GPU_I_ID>`` on a MIG instance.
"""

from __future__ import annotations

from gpuwatch.alerts import promql
from gpuwatch.alerts.params import RuleParams

#: DCGM's label for the MIG GPU instance id.
MIG_INSTANCE_LABEL = "GPU_I_ID"
#: DCGM's label for the MIG profile (``3g.40gb``).
MIG_PROFILE_LABEL = "GPU_I_PROFILE"
#: DCGM's label for the GPU model.
MODEL_LABEL = "modelName"
#: Labels that identify who holds a GPU, once normalised.
HOLDER_LABELS = ("namespace", "pod", "container")
#: Matchers that keep series held by a pod.
ALLOCATED = ('namespace!=""', 'pod!=""')


def pod_and_namespace(expr: str, params: RuleParams) -> str:
    """Normalise ``pod`` and ``namespace`` (also for kube-state-metrics series)."""
    expr = promql.coalesce(expr, "pod", params.labels.pod)
    return promql.coalesce(expr, "namespace", params.labels.namespace)


def holder(expr: str, params: RuleParams) -> str:
    """Normalise ``pod``, ``namespace`` and ``container``; forget the exporter's own pods."""
    expr = pod_and_namespace(expr, params)
    expr = promql.coalesce(expr, "container", params.labels.container)
    if params.exporter_namespaces:
        regex = promql.alternation(params.exporter_namespaces)
        expr = promql.clear_where(expr, HOLDER_LABELS, "namespace", regex)
    return expr


def device(expr: str, params: RuleParams) -> str:
    """Normalise ``node`` and ``gpu`` (UUID, plus ``/<GPU_I_ID>`` on a MIG instance)."""
    expr = promql.coalesce(expr, "node", params.labels.hostname)
    expr = promql.coalesce(expr, "gpu", params.labels.uuid)
    expr = promql.join(expr, "gpu", "/", "gpu", MIG_INSTANCE_LABEL)
    return promql.replace(expr, "gpu", "$1", "gpu", "(.*)/")


def normalise(expr: str, params: RuleParams) -> str:
    """All normalised labels on a DCGM expression (its other labels are kept)."""
    return device(holder(expr, params), params)


def dcgm(metric: str, params: RuleParams, extra: tuple[str, ...] = ()) -> str:
    """A DCGM selector with the configured matchers."""
    return promql.selector(metric, params.matchers, extra)


def gauge(metric: str, params: RuleParams) -> str:
    """A DCGM gauge selector without blank-reading sentinels, in parentheses."""
    return f"({promql.below_sentinel(dcgm(metric, params))})"
