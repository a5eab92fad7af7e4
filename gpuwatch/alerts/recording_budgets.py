"""Recording rules of team budgets: allocated cost per team, month to date, run rate and the
month-end forecast, as docs/cost-model.md#budgets defines them (:mod:`gpuwatch.analytics.budgets`
computes the same figures over the store).

A pod's team is its ``labels.team`` label (kube-state-metrics' ``kube_pod_labels``), else its
namespace's (``kube_namespace_labels``), else ``unassigned``: kube-state-metrics exports a
label only when ``--metric-labels-allowlist`` names it (docs/alerts.md#team-budgets).
"""

from __future__ import annotations

from gpuwatch.alerts import promql
from gpuwatch.alerts.normalise import ALLOCATED, pod_and_namespace
from gpuwatch.alerts.params import RuleParams
from gpuwatch.alerts.recording import PRICE
from gpuwatch.alerts.recording_scheduling import ksm_label
from gpuwatch.analytics.budgets import RUN_RATE_DAYS, RUN_RATE_HOURS
from gpuwatch.domain.durations import DAY_S
from gpuwatch.domain.labels import UNASSIGNED_TEAM

POD_COST = "gpuwatch:pod_allocated_cost:usd_per_hour"
TEAM_COST = "gpuwatch:team_allocated_cost:usd_per_hour"
#: The first instant of the current UTC month (seconds since the epoch).
MONTH_START = "gpuwatch:month_start:timestamp"
TEAM_MONTH_TO_DATE = "gpuwatch:team_allocated_cost:usd_month_to_date"
TEAM_RUN_RATE = f"gpuwatch:team_allocated_cost:usd_per_hour_avg{RUN_RATE_DAYS}d"
TEAM_FORECAST = "gpuwatch:team_allocated_cost:usd_month_forecast"
#: ``showback.monthly_budget_usd``, one series per team (only rendered when budgets are set).
TEAM_BUDGET = "gpuwatch:team_budget:usd_per_month"
#: How often the subqueries sample the team's cost: once an hour.
STEP = "1h"
#: The longest month: the month-to-date subquery's range.
MONTH_RANGE = "31d"
#: Hours from now to the first instant of next month.
HOURS_LEFT = "scalar(days_in_month() * 24 - (day_of_month() - 1) * 24 - hour() - minute() / 60)"


def _teams_of(metric: str, keys: list[str], params: RuleParams) -> str:
    """``keys`` and ``team`` of the series of ``metric`` whose team label is set (value 1)."""
    label = ksm_label(params.team_label, "label")
    labelled = pod_and_namespace(promql.selector(metric, (), (f'{label}!=""',)), params)
    named = promql.replace(labelled, "team", "$1", label, "(.+)")
    return promql.aggregate("group", [*keys, "team"], named)


def _team_cost(params: RuleParams) -> str:
    pod = [*params.cluster, "namespace", "pod"]
    namespace = [*params.cluster, "namespace"]
    by_pod = _teams_of("kube_pod_labels", pod, params)
    by_namespace = _teams_of("kube_namespace_labels", namespace, params)
    unassigned = promql.replace(POD_COST, "team", UNASSIGNED_TEAM, "", "")
    body = (
        f"{POD_COST} * on ({promql.by(pod)}) group_left (team)\n{by_pod}\n"
        f"or on ({promql.by(pod)})\n"
        f"{POD_COST} * on ({promql.by(namespace)}) group_left (team)\n{by_namespace}\n"
        f"or on ({promql.by(pod)})\n{unassigned}"
    )
    return promql.aggregate("sum", [*params.cluster, "team"], body)


def _month_to_date() -> str:
    """The team's $ per hour at each whole hour of this month, summed: each sample × 1 h.

    ``@ end()`` reads the month's start at the evaluation time, not at the subquery's step.
    """
    this_month = f"vector(time()) >= scalar({MONTH_START} @ end())"
    sampled = f"(\n  {TEAM_COST}\n  and on () ({this_month})\n)[{MONTH_RANGE}:{STEP}]"
    return promql.aggregate("sum", ["team"], f"sum_over_time({sampled})")


def _run_rate() -> str:
    spent = f"sum_over_time({TEAM_COST}[{RUN_RATE_DAYS}d:{STEP}])"
    return f"{promql.aggregate('sum', ['team'], spent)}\n/ {RUN_RATE_HOURS}"


def _forecast() -> str:
    return (
        f"{TEAM_MONTH_TO_DATE} + on (team) {TEAM_RUN_RATE} * {HOURS_LEFT}\n"
        f"or {TEAM_MONTH_TO_DATE}\n"
        f"or {TEAM_RUN_RATE} * {HOURS_LEFT}"
    )


def _budgets(params: RuleParams) -> str:
    terms = [
        promql.replace(f"vector({promql.number(usd)})", "team", team, "", "")
        for team, usd in params.monthly_budget_usd
    ]
    return "\nor\n".join(terms)


def budget_records(params: RuleParams) -> list[tuple[str, str]]:
    """The recording rules of team budgets, in evaluation order (each reads the ones before)."""
    pod = [*params.cluster, "namespace", "pod"]
    records = [
        (POD_COST, promql.aggregate("sum", pod, promql.selector(PRICE, (), ALLOCATED))),
        (TEAM_COST, _team_cost(params)),
        (MONTH_START, f"vector(time() - time() % {DAY_S}) - (day_of_month() - 1) * {DAY_S}"),
        (TEAM_MONTH_TO_DATE, _month_to_date()),
        (TEAM_RUN_RATE, _run_rate()),
        (TEAM_FORECAST, _forecast()),
    ]
    if params.monthly_budget_usd:
        records.append((TEAM_BUDGET, _budgets(params)))
    return records
