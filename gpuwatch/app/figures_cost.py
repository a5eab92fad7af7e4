"""Cost over time: one stacked bar series per group (pure: the timeline in, a figure out)."""

from __future__ import annotations

from typing import Any

from gpuwatch.analytics.timeline import COST_USD, OTHER, UNALLOCATED
from gpuwatch.app.figures import UNALLOCATED_COLOR, Figure, _layout, empty_figure, times
from gpuwatch.app.views_cost import CostTimeline
from gpuwatch.domain.durations import HOUR_S

#: One colour per group, largest first (colour-blind safe, Okabe-Ito then Tableau).
GROUP_COLORS = (
    "#0072b2",
    "#e69f00",
    "#009e73",
    "#cc79a7",
    "#56b4e9",
    "#d55e00",
    "#f0e442",
    "#4e79a7",
    "#59a14f",
    "#b07aa1",
)
OTHER_COLOR = "#94a3b8"


def _color(group: str, rank: int) -> str:
    if group == UNALLOCATED:
        return UNALLOCATED_COLOR
    if group == OTHER:
        return OTHER_COLOR
    return GROUP_COLORS[rank % len(GROUP_COLORS)]


def cost_over_time_figure(timeline: CostTimeline, by_title: str) -> Figure:
    """Stacked bars of cost per bucket, one series per group (the largest at the bottom);
    each bar carries its group's link (``customdata``) for a click to open."""
    series = timeline.series
    if series.empty:
        return empty_figure("No cost in this window", height=360)
    data: list[dict[str, Any]] = []
    for (_, group), rows in series.groupby(["rank", "group"], sort=True):
        name = str(group)
        rank = int(rows["rank"].iloc[0])
        href = timeline.hrefs.get(name)
        data.append(
            {
                "type": "bar",
                "name": name,
                "x": times(rows["bucket_ts"]),
                "y": [round(float(v), 2) for v in rows[COST_USD]],
                "customdata": [href] * len(rows),
                "marker": {"color": _color(name, rank)},
                "hovertemplate": f"{name}: $%{{y:,.2f}}<extra></extra>",
            }
        )
    per = "hour" if timeline.bucket_s == HOUR_S else "UTC day"
    title = f"Cost per {per} by {by_title.lower()} ($)"
    layout = _layout(title, "$", height=460, barmode="stack", bargap=0.1, hovermode="closest")
    layout["yaxis"] |= {"tickprefix": "$", "separatethousands": True}
    layout["legend"] |= {"traceorder": "normal"}
    return {"data": data, "layout": layout}


def legend_links(timeline: CostTimeline) -> list[tuple[str, str, str]]:
    """The chart's groups that have a page, in the legend's order: (name, colour, link)."""
    series = timeline.series
    if series.empty:
        return []
    firsts = series.drop_duplicates("group").sort_values(["rank", "group"], kind="stable")
    found = []
    for group, rank in zip(firsts["group"], firsts["rank"], strict=True):
        href = timeline.hrefs.get(str(group))
        if href is not None:
            found.append((str(group), _color(str(group), int(rank)), href))
    return found


def clicked_href(click: dict[str, Any] | None) -> str | None:
    """The link of a clicked bar's group, ``None`` when it has none."""
    try:
        href = click["points"][0]["customdata"]  # type: ignore[index]
    except (TypeError, KeyError, IndexError):
        return None
    return href if isinstance(href, str) and href.startswith("/") else None
