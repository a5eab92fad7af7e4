"""The GPU-health alerts: hardware XIDs, ECC, row remapping, throttling, NVLink, PCIe, a GPU
that fell off the bus, and a pod holding a failing GPU (docs/alerts.md, docs/runbook.md).

Thresholds, windows and ``for:`` come from the definitions (:mod:`gpuwatch.alerts.definitions`,
thresholds from the configuration's ``health`` section); the XID classes from NVIDIA's
catalogue in :mod:`gpuwatch.domain.health`. Each condition is written once here and reused by
``GPUAllocatedAndFailing``.
"""

from __future__ import annotations

from gpuwatch.alerts import promql
from gpuwatch.alerts.definitions import (
    FELL_OFF_BUS_XID,
    AlertDefinition,
    AlertTable,
    alert_table,
    span_text,
)
from gpuwatch.alerts.normalise import ALLOCATED
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording import ROW_REMAP_FAILURE, UTIL
from gpuwatch.alerts.recording_health import (
    CLOCK_THROTTLED,
    ECC_DBE,
    NVLINK_ERRORS_RECORD,
    PCIE_REPLAYS_RECORD,
    XID_INFO,
    XID_LABEL,
)
from gpuwatch.alerts.rules import GPU_TEXT, HELD_BY_TEXT, HOLDER_TEXT, Alert, ratio_pct
from gpuwatch.domain.health import FAILING_XIDS, XID_CATALOGUE

#: The physical GPU of a series (its ``gpu`` without a MIG instance's ``/<GPU_I_ID>``).
GPU_UUID = "gpu_uuid"
#: The label of ``GPUAllocatedAndFailing`` that says which failing condition the GPU is in.
REASON = "reason"
COUNT_TEXT = '{{ printf "%.0f" $value }}'


def _with_gpu_uuid(expr: str) -> str:
    return promql.replace(expr, GPU_UUID, "$1", "gpu", "([^/]*).*")


def _physical_gpu(expr: str) -> str:
    """``gpu`` set to the physical GPU's UUID (a MIG instance's ``/<GPU_I_ID>`` dropped)."""
    return promql.replace(expr, "gpu", "$1", "gpu", "([^/]*)/.*")


def xids_seen(codes: tuple[int, ...], window: str, extra: tuple[str, ...] = ()) -> str:
    """The XID series of ``codes`` seen in the window (one per GPU, holder and code);
    ``extra``: more matchers (the dashboards' template variables)."""
    if len(codes) == 1:
        matcher = f'{XID_LABEL}="{codes[0]}"'
    else:
        regex = "|".join(str(code) for code in sorted(codes))
        matcher = f"{XID_LABEL}=~{promql.string(regex)}"
    return f"max_over_time({promql.selector(XID_INFO, (), (*extra, matcher))}[{window}])"


def xid_hardware_condition(d: AlertDefinition, extra: tuple[str, ...] = ()) -> str:
    seen = xids_seen(FAILING_XIDS, d.timing.window, extra)
    return f"{seen} > {promql.number(d.threshold)}"


def ecc_dbe_condition(d: AlertDefinition) -> str:
    return f"{ECC_DBE} > {promql.number(d.threshold)}"


def row_remap_condition(d: AlertDefinition) -> str:
    return f"{ROW_REMAP_FAILURE} > {promql.number(d.threshold)}"


def xid_hardware_error(params: RuleParams, d: AlertDefinition) -> Alert:
    return Alert(
        d,
        xid_hardware_condition(d),
        "GPU {{ $labels.gpu }} reported hardware or driver XID {{ $labels.xid }}.",
        f"{GPU_TEXT}{HELD_BY_TEXT} reported XID {{{{ $labels.xid }}}} in the last "
        f"{span_text(d.timing.window_s)}, which NVIDIA's XID catalogue lists as a hardware or "
        "driver error: the GPU is failing. Drain the node and reset or replace the GPU.",
    )


def ecc_double_bit_error(params: RuleParams, d: AlertDefinition) -> Alert:
    return Alert(
        d,
        ecc_dbe_condition(d),
        "GPU {{ $labels.gpu }} had uncorrectable (double-bit) ECC errors.",
        f"{GPU_TEXT}{HELD_BY_TEXT} reported about {COUNT_TEXT} uncorrectable ECC errors in the "
        f"last {span_text(d.timing.window_s)}: work on it may have read corrupt memory, and "
        "the GPU is failing.",
    )


def throttled_while_allocated(params: RuleParams, d: AlertDefinition) -> Alert:
    held = promql.selector(CLOCK_THROTTLED, (), ALLOCATED)
    expr = (
        f"avg_over_time({held}[{d.timing.window}]) >= {promql.number(d.threshold)}\n"
        f"and {CLOCK_THROTTLED}"
    )
    return Alert(
        d,
        expr,
        f"Pod {HOLDER_TEXT} runs on a throttled GPU.",
        f"Pod {HOLDER_TEXT} holds {GPU_TEXT}, whose clocks were held down by heat, the power "
        "cap or a hardware slowdown in {{ $value | humanizePercentage }} of the last "
        f"{span_text(d.timing.window_s)} (threshold {ratio_pct(d.threshold)}): the work runs "
        "slower than what is paid for.",
    )


def nvlink_errors(params: RuleParams, d: AlertDefinition) -> Alert:
    return Alert(
        d,
        f"{NVLINK_ERRORS_RECORD} >= {promql.number(d.threshold)}",
        "GPU {{ $labels.gpu }} has NVLink errors.",
        f"{GPU_TEXT}{HELD_BY_TEXT} counted about {COUNT_TEXT} NVLink CRC, replay or recovery "
        f"errors in the last {span_text(d.timing.window_s)} (threshold "
        f"{promql.number(d.threshold)}): multi-GPU work on it slows down or fails.",
    )


def pcie_replays(params: RuleParams, d: AlertDefinition) -> Alert:
    return Alert(
        d,
        f"{PCIE_REPLAYS_RECORD} >= {promql.number(d.threshold)}",
        "GPU {{ $labels.gpu }} keeps retrying PCIe transfers.",
        f"{GPU_TEXT}{HELD_BY_TEXT} replayed about {COUNT_TEXT} PCIe packets in the last "
        f"{span_text(d.timing.window_s)} (threshold {promql.number(d.threshold)}): a failing "
        "link, riser or slot slows it down.",
    )


def allocated_and_failing_expr(
    params: RuleParams, t: AlertTable, extra: tuple[str, ...] = ()
) -> str:
    """A pod holds a unit (the GPU or one of its MIG instances) of a GPU that is failing: a
    double-bit ECC error, a row-remap failure or a hardware XID on any of its units, each read
    as its own alert reads it. One series per holder and reason; ``extra`` filters holders."""
    gpu = promql.by([*params.cluster, GPU_UUID])
    holder = promql.selector(UTIL, (), (*extra, *ALLOCATED))
    reasons = (
        ("ecc_dbe", ecc_dbe_condition(t.ecc_double_bit_error)),
        ("row_remap_failure", row_remap_condition(t.row_remap_failure)),
        ("hardware_xid", xid_hardware_condition(t.xid_hardware_error)),
    )
    terms = [
        f"{_with_gpu_uuid(promql.replace(holder, REASON, reason, '', ''))}\n"
        f"and on ({gpu})\n{_with_gpu_uuid(condition)}"
        for reason, condition in reasons
    ]
    return "\nor\n".join(terms)


def allocated_and_failing(params: RuleParams, t: AlertTable) -> Alert:
    return Alert(
        t.allocated_and_failing,
        allocated_and_failing_expr(params, t),
        f"Pod {HOLDER_TEXT} holds a failing GPU.",
        f"Pod {HOLDER_TEXT} holds {GPU_TEXT}, which is failing "
        "({{ $labels.reason }}; see the GPU's other alerts): its work may crash or compute "
        "wrong results. Move the work and drain the node.",
    )


def fell_off_bus_expr(params: RuleParams, d: AlertDefinition, extra: tuple[str, ...] = ()) -> str:
    """Per physical GPU: its utilization series were recorded in the window and none is now
    (on any target) while its target is up, or it reported XID 79; ``extra`` filters the GPUs."""
    window = d.timing.window
    gpu = promql.by([*params.cluster, "gpu"])
    target = promql.by([*params.cluster, "job", "instance"])
    up = promql.selector("up", params.matchers)
    seen = promql.selector(UTIL, (), extra)
    vanished = (
        f"{_physical_gpu(f'max_over_time({seen}[{window}])')}\n"
        f"unless on ({gpu})\n{_physical_gpu(UTIL)}\n"
        f"and on ({target})\n{up} == 1"
    )
    lost = _physical_gpu(xids_seen((FELL_OFF_BUS_XID,), window, extra))
    labels = [*params.cluster, "job", "instance", "node", "gpu", "modelName"]
    return promql.aggregate("max", labels, f"{vanished}\nor\n{lost}")


def fell_off_bus(params: RuleParams, d: AlertDefinition) -> Alert:
    meaning = XID_CATALOGUE[FELL_OFF_BUS_XID].meaning
    return Alert(
        d,
        fell_off_bus_expr(params, d),
        "GPU {{ $labels.gpu }} fell off the bus.",
        f"{GPU_TEXT} stopped reporting while its exporter {{{{ $labels.instance }}}} is still "
        f"up, or reported XID {FELL_OFF_BUS_XID} ({meaning}), in the last "
        f"{span_text(d.timing.window_s)}: the node has lost the GPU and its pods with it.",
    )


def health_alerts(params: RuleParams, table: AlertTable | None = None) -> list[Alert]:
    """The GPU-health alerts, in a stable order."""
    t = table or alert_table(params)
    return [
        xid_hardware_error(params, t.xid_hardware_error),
        ecc_double_bit_error(params, t.ecc_double_bit_error),
        throttled_while_allocated(params, t.throttled_while_allocated),
        nvlink_errors(params, t.nvlink_errors),
        pcie_replays(params, t.pcie_replays),
        allocated_and_failing(params, t),
        fell_off_bus(params, t.fell_off_bus),
    ]
