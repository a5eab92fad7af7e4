"""Recording rules: normalise once, then aggregate per pod and namespace, and price the GPUs."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.alerts import promql
from gpuwatch.alerts.definitions import (
    ALLOCATED_IDLE,
    UNCORRECTABLE_REMAPPED_ROWS,
    XID_ERROR,
)
from gpuwatch.alerts.normalise import (
    ALLOCATED,
    MIG_PROFILE_LABEL,
    MODEL_LABEL,
    dcgm,
    gauge,
    normalise,
)
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording_health import health_records

PROF_UTIL = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
DEV_UTIL = "DCGM_FI_DEV_GPU_UTIL"

UTIL = "gpuwatch:gpu_util:ratio"
#: The peak over ``GPUAllocatedIdle``'s window (``gpuwatch:gpu_util_max30m:ratio``).
UTIL_PEAK = f"gpuwatch:gpu_util_max{ALLOCATED_IDLE.window}:ratio"
FB_USED = "gpuwatch:gpu_fb_used:ratio"
SHARE = "gpuwatch:gpu_share:ratio"
PRICE = "gpuwatch:gpu_price:usd_per_hour"
POD_GPUS = "gpuwatch:pod_gpus_allocated:count"
#: GPU equivalents (contract section 3): a MIG instance counts g/7 of a GPU.
NAMESPACE_GPUS = "gpuwatch:namespace_gpus_allocated:sum"
NAMESPACE_UTIL_SUM = "gpuwatch:namespace_gpu_util:sum"
NAMESPACE_COST = "gpuwatch:namespace_allocated_cost:usd_per_hour"
NAMESPACE_IDLE_COST = "gpuwatch:namespace_idle_cost:usd_per_hour"
NODE_UNALLOCATED = "gpuwatch:node_gpus_unallocated:sum"
TEMPERATURE = "gpuwatch:gpu_temp:celsius"
XID_CODE = f"gpuwatch:gpu_xid_code:max{XID_ERROR.window}"
ROW_REMAP_FAILURE = "gpuwatch:gpu_row_remap_failure:value"
UNCORRECTABLE_ROWS = (
    f"gpuwatch:gpu_uncorrectable_remapped_rows:increase{UNCORRECTABLE_REMAPPED_ROWS.window}"
)


@dataclass(frozen=True)
class Record:
    """One recording rule."""

    record: str
    expr: str


def _signal(expr: str, name: str) -> str:
    return promql.replace(expr, "util_signal", name, "__name__", ".*")


def _utilization(params: RuleParams, window: str | None) -> str:
    """PROF (0-1) where a GPU exports it, else DEV / 100; one series per GPU and holder."""

    def source(metric: str) -> str:
        if window is None:
            return promql.below_sentinel(dcgm(metric, params))
        ranged = f"max_over_time({dcgm(metric, params)}[{window}])"
        return promql.below_sentinel(ranged)

    prof = normalise(_signal(source(PROF_UTIL), "prof"), params)
    dev = normalise(f"{_signal(source(DEV_UTIL), 'dev')} / 100", params)
    identity = promql.by([*params.cluster, "gpu", "namespace", "pod"])
    return f"{prof}\nor on ({identity})\n{dev}"


def _fb_used(params: RuleParams) -> str:
    used = gauge("DCGM_FI_DEV_FB_USED", params)
    free = gauge("DCGM_FI_DEV_FB_FREE", params)
    reserved = gauge("DCGM_FI_DEV_FB_RESERVED", params)
    ratio = f"{used}\n/\n({used} + {free} + ({reserved} or {free} * 0))"
    return normalise(ratio, params)


def _constant(extra: tuple[str, ...], value: str) -> str:
    return f"{promql.selector(UTIL, (), extra)} * 0 + {value}"


def _model_matcher(aliases: tuple[str, ...]) -> str:
    regex = "(?i)" + promql.alternation(aliases, fold_separators=True)
    return f"{MODEL_LABEL}=~{promql.string(regex)}"


def _share(params: RuleParams) -> str:
    """A MIG instance's share of its GPU, ``g / slices``; 1 for a whole GPU."""
    terms = [_constant((f'{MIG_PROFILE_LABEL}=""',), "1")]
    for slices in sorted({p.compute_slices for p in params.prices} - {7}):
        aliases = tuple(a for p in params.prices if p.compute_slices == slices for a in p.aliases)
        for g in range(1, slices + 1):
            profile = f'{MIG_PROFILE_LABEL}=~"{g}g[.].*"'
            terms.append(_constant((profile, _model_matcher(aliases)), f"{g} / {slices}"))
    for g in range(1, 8):
        terms.append(_constant((f'{MIG_PROFILE_LABEL}=~"{g}g[.].*"',), f"{g} / 7"))
    terms.append(_constant((), "1"))
    return "\nor\n".join(terms)


def _price(params: RuleParams) -> str:
    """On-demand $ per GPU-hour of each GPU (node override, model, default) × its share."""
    terms = [
        _constant((f"node={promql.string(node)}",), promql.number(usd))
        for node, usd in params.node_prices
    ]
    terms += [
        _constant((_model_matcher(p.aliases),), promql.number(p.usd_per_gpu_hour))
        for p in params.prices
    ]
    terms.append(_constant((), promql.number(params.default_usd_per_gpu_hour)))
    body = promql.indent("\nor\n".join(terms))
    return f"(\n{body}\n)\n* {SHARE}"


def _allocated(metric: str) -> str:
    return promql.selector(metric, (), ALLOCATED)


def _per_holder(params: RuleParams) -> list[Record]:
    namespace = [*params.cluster, "namespace"]
    pod = [*params.cluster, "namespace", "pod"]
    idle = promql.number(params.idle_ratio)
    idle_gpus = f"{_allocated(PRICE)} and {UTIL} < {idle}"
    idle_cost = f"{promql.aggregate('sum', namespace, idle_gpus)}\nor\n{NAMESPACE_COST} * 0"
    gpu = promql.by([*params.cluster, "gpu"])
    unallocated = f"{SHARE}\nunless on ({gpu})\n{_allocated(UTIL)}"
    used = f"{_allocated(UTIL)} * {_allocated(SHARE)}"
    return [
        Record(POD_GPUS, promql.aggregate("count", pod, _allocated(UTIL))),
        Record(NAMESPACE_GPUS, promql.aggregate("sum", namespace, _allocated(SHARE))),
        Record(NAMESPACE_UTIL_SUM, promql.aggregate("sum", namespace, used)),
        Record(NAMESPACE_COST, promql.aggregate("sum", namespace, _allocated(PRICE))),
        Record(NAMESPACE_IDLE_COST, idle_cost),
        Record(NODE_UNALLOCATED, promql.aggregate("sum", [*params.cluster, "node"], unallocated)),
    ]


def _health(params: RuleParams) -> list[Record]:
    xid = f"max_over_time({dcgm('DCGM_FI_DEV_XID_ERRORS', params)}[{XID_ERROR.window}])"
    rows_window = UNCORRECTABLE_REMAPPED_ROWS.window
    rows = f"increase({dcgm('DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS', params)}[{rows_window}])"
    return [
        Record(TEMPERATURE, normalise(gauge("DCGM_FI_DEV_GPU_TEMP", params), params)),
        Record(XID_CODE, normalise(promql.below_sentinel(xid), params)),
        Record(
            ROW_REMAP_FAILURE, normalise(gauge("DCGM_FI_DEV_ROW_REMAP_FAILURE", params), params)
        ),
        Record(UNCORRECTABLE_ROWS, normalise(rows, params)),
    ]


def recording_rules(params: RuleParams) -> list[Record]:
    """The recording rules, in evaluation order (later rules read earlier ones)."""
    return [
        Record(UTIL, _utilization(params, None)),
        Record(UTIL_PEAK, _utilization(params, ALLOCATED_IDLE.window)),
        Record(FB_USED, _fb_used(params)),
        Record(SHARE, _share(params)),
        Record(PRICE, _price(params)),
        *_per_holder(params),
        *_health(params),
        *(Record(record, expr) for record, expr in health_records(params)),
    ]
