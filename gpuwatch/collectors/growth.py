"""How much a collection may take in at once (pure, no I/O).

Two guards against a source that suddenly announces far more than the fleet it reported so far
(a misconfigured federation, a relabelling accident, a hostile exporter):

- **New GPU units per page** (:class:`NewUnitLimit`): a page that names more GPU units the store
  has never seen than ``max(floor, known × ratio)`` is refused before anything of it is written
  (:class:`UnitGrowthError`). An empty store takes any first page. A fleet that really grew is
  let in once with ``gpuwatch collect --accept-new-units``.
- **Samples per page** (:func:`page_for_budget`): the page is shortened so that the GPU units
  the store knows × the steps of a page stay within ``prometheus.max_samples_per_page``; the
  memory of a page follows its samples (docs/collectors.md).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable
from dataclasses import dataclass

from gpuwatch.domain.durations import rfc3339


class UnitGrowthError(Exception):
    """A page names unexpectedly many GPU units the store has never seen; nothing was written."""


@dataclass(frozen=True)
class NewUnitLimit:
    """``prometheus.max_new_units_ratio`` and ``prometheus.max_new_units_floor``."""

    ratio: float
    floor: int

    def allowed(self, known: int) -> int | None:
        """How many unseen units one page may add to a store knowing ``known`` (None: any)."""
        if known == 0:
            return None
        return max(self.floor, int(known * self.ratio))


def check_new_units(
    known: Collection[Hashable],
    page: Collection[Hashable],
    limit: NewUnitLimit,
    cluster: str,
    page_start_ts: int,
) -> None:
    """Raise :class:`UnitGrowthError` when ``page`` holds more unseen units than allowed."""
    allowed = limit.allowed(len(known))
    if allowed is None:
        return
    new = sum(1 for key in page if key not in known)
    if new <= allowed:
        return
    when = rfc3339(page_start_ts)
    raise UnitGrowthError(
        f"the page from {when} names {new:,} GPU units never seen in cluster {cluster} (the "
        f"store knows {len(known):,}; at most {allowed:,} new ones per page): refused as an "
        "unexpected jump. If the fleet really grew, run `gpuwatch collect --accept-new-units` "
        "once, or raise prometheus.max_new_units_ratio"
    )


def page_for_budget(page_s: int, step_s: int, units: int, max_samples: int) -> int:
    """The page length: ``page_s``, shortened to whole steps so that ``units`` × steps stays
    within ``max_samples`` (at least one step).

    >>> page_for_budget(6 * 3600, 60, 2_000, 1_000_000)  # 360 steps x 2,000 units: fits
    21600
    >>> page_for_budget(6 * 3600, 60, 20_000, 1_000_000)  # 50 steps x 20,000 units
    3000
    """
    if units <= 0:
        return page_s
    steps = max(1, max_samples // units)
    return min(page_s, steps * step_s)
