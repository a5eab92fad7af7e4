"""How a refused range request is asked again in parts (pure, no I/O): its time range in two
halves, or its series one node at a time (:mod:`gpuwatch.collectors.answers` says which).

A node's part of a query adds one matcher to every selector of the catalogue
(``Hostname="node-a"``); one more part, ``Hostname!~"node-a|node-b|..."``, holds every series of
no listed node (another hostname label, or a node that appeared meanwhile), so the parts hold
each series exactly once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from gpuwatch.collectors.promql import Catalogue

#: Points per query_range request stay under Prometheus's 11,000-point limit.
MAX_POINTS = 10_000
#: One plan of a page: field, query, first instant, last instant, step.
Plan = tuple[str, str, int, int, int]

#: A request's parameters: ``query``, ``start``, ``end`` (epoch seconds) and ``step`` (``60s``).
Params = Mapping[str, str]


@dataclass(frozen=True)
class Request:
    """One range request of a page: its field, the index of its plan in the page's plans (to
    build the same query for one node), its parameters, and the node matcher of a node's part."""

    field: str
    plan: int
    params: Params
    node: str | None = None


def _step_s(params: Params) -> int:
    return int(params["step"].removesuffix("s"))


def instants(params: Params) -> int:
    """The grid instants a request asks for.

    >>> instants({"start": "0", "end": "540", "step": "60s"})
    10
    """
    return (int(params["end"]) - int(params["start"])) // _step_s(params) + 1


def halves(params: Params) -> tuple[dict[str, str], dict[str, str]] | None:
    """The request as two of about half its instants each; None for one instant.

    >>> [(h["start"], h["end"]) for h in halves({"start": "0", "end": "240", "step": "60s"})]
    [('0', '120'), ('180', '240')]
    """
    count = instants(params)
    if count < 2:
        return None
    step_s = _step_s(params)
    middle = int(params["start"]) + ((count - 1) // 2) * step_s
    first = {**params, "end": str(middle)}
    second = {**params, "start": str(middle + step_s)}
    return first, second


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def node_matchers(label: str, nodes: Sequence[str]) -> list[str]:
    """One matcher per node, and one for every series of no listed node.

    >>> node_matchers("Hostname", ["a", "b.c"])
    ['Hostname="a"', 'Hostname="b.c"', 'Hostname!~"a|b\\\\\\\\.c"']
    """
    rest = "|".join(re.escape(node) for node in nodes)
    return [f"{label}={_quote(node)}" for node in nodes] + [f"{label}!~{_quote(rest)}"]


def node_values(answer: object) -> list[str]:
    """The node names of a label-values answer (``{"status":"success","data":[...]}``)."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        return []
    return sorted({value for value in data if isinstance(value, str) and value})


def chunks(
    query: str, first_ts: int, last_ts: int, step_s: int, steps: Callable[[], int]
) -> Iterator[dict[str, str]]:
    """``query_range`` parameters covering ``first_ts..last_ts``, each ``steps()`` instants
    (asked for as each request is made, at most ``MAX_POINTS``)."""
    start = first_ts
    while start <= last_ts:
        end = min(last_ts, start + (min(steps(), MAX_POINTS) - 1) * step_s)
        yield {"query": query, "start": str(start), "end": str(end), "step": f"{step_s}s"}
        start = end + step_s


def page_plans(catalogue: Catalogue, start_ts: int, last: int, step_s: int) -> list[Plan]:
    """Every range query of the page whose instants are ``start_ts..last``: the fields read
    every step, the capacity fields on their coarser grid, the coarse-interval fields."""
    coarse_s = catalogue.capacity_step_s(step_s)
    coarse_first = start_ts - start_ts % coarse_s
    coarse_last = last - last % coarse_s
    plans = [
        (field, query, start_ts, last, step_s) for field, query in catalogue.queries(step_s).items()
    ]
    for field, query in catalogue.capacity_queries(step_s).items():
        plans.append((field, query, coarse_first, coarse_last, coarse_s))
        if coarse_last < last:  # the next capacity instant, read no later than the page
            plans.append((field, query, last, last, coarse_s))
    return plans + catalogue.interval_requests(start_ts, last, step_s)
