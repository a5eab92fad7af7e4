"""Which rows a command's ``--cluster``, ``--team`` and ``--namespace`` keep.

A scope narrows what is shown, never what is computed: recommendations and report rows are
computed over the whole fleet (a workload's team, node-level attribution and placement see
every GPU), then the rows of the scope are kept, as the dashboard's filter bar keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import pandas as pd


@dataclass(frozen=True)
class Scope:
    """One cluster, team and/or namespace; ``None`` means any."""

    cluster: str | None = None
    team: str | None = None
    namespace: str | None = None

    def terms(self) -> dict[str, str]:
        """The set fields, as ``{column: value}``."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return {name: value for name, value in values.items() if value is not None}

    def describe(self) -> str:
        """``cluster=prod, team=ml`` (empty when the scope is everything)."""
        return ", ".join(f"{name}={value}" for name, value in self.terms().items())


def in_scope(frame: pd.DataFrame, scope: Scope) -> pd.DataFrame:
    """The rows of ``frame`` whose columns equal each set field of ``scope``, in order.

    Rows without a team or namespace (unallocated capacity has neither) match no team or
    namespace but its own: ``namespace=__idle__`` keeps the weekly report's idle rows.
    """
    keep = pd.Series(True, index=frame.index)
    for column, value in scope.terms().items():
        keep &= frame[column].astype(object).eq(value)
    return frame[keep].reset_index(drop=True)
