"""The pieces every page is built from: navigation, the filter bar, cards, tables, empty states.

Every value from the data (pod, namespace, label values) goes into components as plain text
children or table cells: Dash renders those as text, never as HTML or markdown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl

import dash
from dash import ALL, Input, Output, State, dcc, html

from gpuwatch.app import format as fmt
from gpuwatch.app.data import DEFAULT_WINDOW, FILTER_NAMES, Filters, Snapshot
from gpuwatch.app.urls import PAGE_URL_ID, URL_ID, search_with
from gpuwatch.app.views import Options, data_window, window_bounds
from gpuwatch.app.window_form import range_form
from gpuwatch.app.windows import PRESETS, is_window, label

NAV: tuple[tuple[str, str], ...] = (
    ("/", "Overview"),
    ("/teams", "Teams & namespaces"),
    ("/cost", "Cost over time"),
    ("/workloads", "Workloads"),
    ("/gpus", "GPUs & nodes"),
    ("/queues", "Queues"),
    ("/savings", "Savings"),
    ("/reports", "Reports"),
    ("/alerts", "Alerts"),
    ("/gpu-health", "GPU health"),
    ("/health", "Data health"),
)


def filter_id(name: str) -> dict[str, str]:
    return {"type": "gw-filter", "name": name}


def navigation(active: str, f: Filters) -> html.Nav:
    links = [
        dcc.Link(
            label,
            href=f.href(path),
            className="gw-nav-link gw-active" if path == active else "gw-nav-link",
            id=f"nav-{path.strip('/') or 'overview'}",
        )
        for path, label in NAV
    ]
    return html.Nav(
        [dcc.Link("gpuwatch", href=f.href("/"), className="gw-brand"), *links], className="gw-nav"
    )


def _dropdown(name: str, value: str | None, choices: Sequence[str], everything: str) -> Any:
    return html.Div(
        [
            html.Label(name.capitalize() if name != "model" else "GPU model"),
            dcc.Dropdown(
                id=filter_id(name),
                options=[{"label": v, "value": v} for v in choices],
                value=value,
                placeholder=everything,
                clearable=True,
                className="gw-dropdown",
            ),
        ],
        className="gw-filter",
    )


def _window_radio(f: Filters) -> html.Fieldset:
    radio = dcc.RadioItems(
        id=filter_id("window"),
        options=[{"label": name, "value": key} for key, name in PRESETS.items()],
        value=f.window,
        inline=True,
        className="gw-window",
        inputClassName="gw-window-input",
        labelClassName="gw-window-label",
    )
    # A fieldset names the group of radios for assistive technology (its legend).
    return html.Fieldset(
        [html.Legend("Time window"), radio], className="gw-filter gw-filter-window"
    )


def filter_bar(f: Filters, opts: Options | None) -> html.Div:
    """Cluster, team, namespace, GPU model, allocation mode and window; a change rewrites the
    URL's query.

    Without ``opts``, the time window alone (pages about one workload, node or GPU).
    """
    choices: list[Any] = []
    if opts is not None:
        choices = [
            _dropdown("cluster", f.cluster, opts.clusters, "All clusters"),
            _dropdown("team", f.team, opts.teams, "All teams"),
            _dropdown("namespace", f.namespace, opts.namespaces, "All namespaces"),
            _dropdown("model", f.model, opts.models, "All GPU models"),
            _dropdown("allocation", f.allocation, opts.allocations, "All allocations"),
        ]
    return html.Div(
        [*choices, _window_radio(f), range_form(f)], className="gw-filters", id="gw-filters"
    )


def filters_to_search(
    values: list[str | None], ids: list[dict[str, str]], search: str | None
) -> Any:
    """The callback of the filter bar: the new query string of the URL; no update while every
    filter already has the URL's value, whatever the order of its parameters (a page's own
    parameter, such as Cost over time's ``by``, may come after the filters)."""
    changes = {i["name"]: v for i, v in zip(ids, values, strict=True) if i["name"] in FILTER_NAMES}
    if "window" in changes and not is_window(changes["window"]):
        changes["window"] = DEFAULT_WINDOW
    if _as_in_url(search, changes):
        return dash.no_update
    new = search_with(search, changes)
    return dash.no_update if new == (search or "") else new


def _as_in_url(search: str | None, changes: Mapping[str, str | None]) -> bool:
    """Whether each filter of ``changes`` has the value the query string gives it."""
    current = dict(parse_qsl((search or "").lstrip("?")))
    for name, value in changes.items():
        shown = current.get(name) or (DEFAULT_WINDOW if name == "window" else None)
        if (value or None) != shown:
            return False
    return True


dash.callback(
    Output(PAGE_URL_ID, "search"),
    Input(filter_id(ALL), "value"),  # type: ignore[arg-type]
    State(filter_id(ALL), "id"),  # type: ignore[arg-type]
    State(URL_ID, "search"),
    prevent_initial_call=True,
)(filters_to_search)


def window_label(snap: Snapshot, f: Filters) -> str:
    """The window as shown under a page's title; a window that starts before the data says
    where its data really starts (monthly figures are extrapolated from that span)."""
    start, end = window_bounds(snap, f)
    span = data_window(snap, f.window)
    last = f"data up to {fmt.when(snap.marker.last_ts)}"
    if span is None or span[0] <= start:
        return f"Window: {fmt.when(start)} to {fmt.when(end)} ({label(f.window)}) · {last}"
    hours = f"{(span[1] - span[0]) / 3600:,.1f}".removesuffix(".0")
    return (
        f"Window: {label(f.window)}, with data from {fmt.when(span[0])} to "
        f"{fmt.when(span[1])} only ({hours} h) · {last}"
    )


def header(
    title: str, snap: Snapshot | None, f: Filters, note: str | None = None, window: bool = True
) -> html.Div:
    parts: list[Any] = [html.H1(title)]
    if snap is not None and not snap.empty and not window:
        parts.append(html.P(f"Data up to {fmt.when(snap.marker.last_ts)}", className="gw-subtitle"))
    elif snap is not None and not snap.empty:
        parts.append(html.P(window_label(snap, f), className="gw-subtitle"))
    if note:
        parts.append(html.P(note, className="gw-note"))
    return html.Div(parts, className="gw-header")


#: The filter bar's choice list of each filter, and what the filter names.
CHOICES = {
    "cluster": ("clusters", "cluster"),
    "team": ("teams", "team"),
    "namespace": ("namespaces", "namespace"),
    "model": ("models", "GPU model"),
    "allocation": ("allocations", "allocation"),
}


def unknown_filters(f: Filters, opts: Options) -> list[tuple[str, str]]:
    """The filters whose value is none of the store's choices (a shared link from before a
    rename, a typo): (filter, value) in the filter bar's order."""
    found = []
    for name, (choices, _) in CHOICES.items():
        value = getattr(f, name)
        if value is not None and value not in getattr(opts, choices):
            found.append((name, value))
    return found


def stale_filters(page: str, path: str, f: Filters, opts: Options) -> html.Div | None:
    """A notice naming each filter of the link that matches nothing, with a link without it:
    the page never drops a filter silently, nor shows nothing without saying why."""
    unknown = unknown_filters(f, opts)
    if not unknown:
        return None
    items = []
    for name, value in unknown:
        noun = CHOICES[name][1]
        where = " for the chosen cluster and team" if name == "namespace" else ""
        drop = dcc.Link("show without it", href=f.with_(**{name: None}).href(path),
                        className="gw-link")  # fmt: skip
        items.append(html.Li([f"No {noun} “{value}” in this store{where}: ", drop]))
    return html.Div(
        [html.Strong("This link filters on what the store does not hold."), html.Ul(items)],
        className="gw-notice",
        id=f"{page}-stale-filters",
        role="status",
    )


def shell(
    page: str,
    path: str,
    title: str,
    f: Filters,
    snap: Snapshot | None,
    opts: Options | None,
    body: Any,
    note: str | None = None,
    *,
    filters: bool = True,
    crumbs: html.Nav | None = None,
) -> html.Div:
    """A page: navigation, (``crumbs``,) title with window and data time, filter bar, then
    ``body``.

    ``opts`` None shows the time window alone; ``filters`` False shows no filter bar.
    """
    main: list[Any] = [] if crumbs is None else [crumbs]
    main.append(header(title, snap, f, note, window=filters))
    if filters and snap is not None and not snap.empty:
        main.append(filter_bar(f, opts))
        notice = None if opts is None else stale_filters(page, path, f, opts)
        if notice is not None:
            main.append(notice)
    main.append(html.Div(body, className="gw-body", id=f"{page}-body"))
    # Landmarks: the navigation, then everything of the page in <main>. The page's controls
    # write the URL through its own location (urls.PAGE_URL_ID).
    here = dcc.Location(id=PAGE_URL_ID, refresh="callback-nav")
    children = [here, navigation(path, f), html.Main(main, className="gw-main")]
    return html.Div(children, className="gw-page", id=f"{page}-page")


def breadcrumbs(page: str, trail: Sequence[tuple[str, str]], current: str) -> html.Nav:
    """Where a detail page sits: each (label, href) of ``trail`` a link, then ``current``."""
    items: list[Any] = [
        html.Li(dcc.Link(label, href=href, className="gw-link")) for label, href in trail
    ]
    here: dict[str, Any] = {"aria-current": "page"}
    named: dict[str, Any] = {"aria-label": "Breadcrumb"}
    items.append(html.Li(current, **here))
    return html.Nav(html.Ol(items), className="gw-crumbs", id=f"{page}-crumbs", **named)


def empty_state(page: str, title: str, hint: str, link: tuple[str, str] | None = None) -> html.Div:
    children: list[Any] = [html.H3(title), html.P(hint)]
    if link is not None:
        children.append(dcc.Link(link[1], href=link[0], className="gw-button"))
    return html.Div(children, className="gw-empty", id=f"{page}-empty")


NO_DATA_HINT = (
    "Run `gpuwatch collect` against your Prometheus (or `gpuwatch demo` for a simulated fleet); "
    "this page fills in as soon as samples are stored."
)


def no_data(page: str, path: str, title: str, f: Filters, snap: Snapshot | None) -> html.Div:
    body = empty_state(page, "No GPU samples stored yet", NO_DATA_HINT)
    return shell(page, path, title, f, snap, None, body, filters=False)


def no_match(page: str, f: Filters, path: str) -> html.Div:
    return empty_state(
        page,
        "Nothing matches these filters in this window",
        "Widen the time window or clear a filter.",
        (Filters(window=f.window).href(path), "Clear filters"),
    )


def card(
    label: str,
    value: Any,
    note: str | None = None,
    key: str = "",
    *,
    text: bool = False,
    delta: str | None = None,
) -> html.Div:
    """A headline figure; ``text`` for a name rather than a number (smaller type); ``delta``:
    its change since the previous period."""
    value_class = "gw-card-value gw-card-text" if text else "gw-card-value"
    children = [
        html.Div(label, className="gw-card-label"),
        html.Div(value, className=value_class),
    ]
    if note:
        children.append(html.Div(note, className="gw-card-note"))
    if delta:
        children.append(html.Div(f"vs previous period: {delta}", className="gw-card-delta"))
    if key:
        return html.Div(children, className="gw-card", id=f"card-{key}")
    return html.Div(children, className="gw-card")


def section(title: str, *children: Any, note: str | None = None, key: str = "") -> html.Section:
    head: list[Any] = [html.H2(title)]
    if note:
        head.append(html.P(note, className="gw-note"))
    if key:
        return html.Section([*head, *children], className="gw-section", id=key)
    return html.Section([*head, *children], className="gw-section")


Cell = Callable[[Mapping[Any, Any]], Any]


def html_table(
    table_id: str, columns: Sequence[tuple[str, Cell]], rows: Sequence[Mapping[Any, Any]]
) -> html.Table:
    """A plain table; each column is (heading, cell builder returning text or a component).

    Each heading is a button that sorts the rows by its column, up then down
    (``assets/gpuwatch-grid.js``; the heading's ``aria-sort`` says which way)."""
    head = html.Thead(
        html.Tr(
            [
                html.Th(html.Button(title, type="button", className="gw-sort"), scope="col")
                for title, _ in columns
            ]
        )
    )
    body = html.Tbody([html.Tr([html.Td(build(row)) for _, build in columns]) for row in rows])
    return html.Table([head, body], className="gw-table", id=table_id)


def records_of(frame: Any) -> list[dict[str, Any]]:
    """A frame's rows as dicts keyed by column name."""
    return [{str(k): v for k, v in row.items()} for row in frame.to_dict("records")]
