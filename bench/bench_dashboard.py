"""Server-side time of the dashboard's pages: first loads and filter changes.

    .venv/bin/python bench/bench_dashboard.py --db /tmp/dash-demo.db

Reads the store's snapshot once (the fleet's inventory at the current data version: what the
server does in the background when the data changes), then times each page's layout
function, JSON encoding included (what one page request costs the server):

- ``first load``: the page's first request after the background warm-up (each sample starts
  from a fresh page cache, warm-up redone untimed);
- ``first load, no warm-up``: the same before the warm-up has run (right after new data);
- ``filter change``: a request for filters not seen before (cluster, team, namespace, GPU
  model, time window), with the snapshot warm;
- ``store cost sums``: the store summing one window's cost and GPU rows, uncached (daily sums
  for its whole UTC days whose sums are built, hourly rows for the rest);
- ``store hourly rows``: the store's hourly rows of one window read and costed, uncached (what
  the capacity chart, heatmaps, recommendations and health views read);
- ``warm-up CPU with several workers``: the warm-up's CPU seconds in the first worker of a
  server, which computes the shared answers, and in each other one, which reads them
  (:mod:`gpuwatch.app.shared`).

Prints p50 (median), p95 and max in milliseconds per row, the snapshot's read time, the size
of its frames (no samples: pages read those per window), and the process's RSS after the
read, after the warm-up and its peak at the end.
"""

from __future__ import annotations

import argparse
import importlib
import json
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import plotly.utils
from sqlalchemy import Engine

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gpuwatch.app.data import DashboardData, Filters, Snapshot  # noqa: E402
from gpuwatch.app.server import create_app  # noqa: E402
from gpuwatch.app.shared import SharedAnswers  # noqa: E402
from gpuwatch.app.views import options, window_bounds, workloads  # noqa: E402
from gpuwatch.app.window_costs import span_sums  # noqa: E402
from gpuwatch.app.window_hourly import window_hourly  # noqa: E402
from gpuwatch.app.windows import ROLLING  # noqa: E402
from gpuwatch.config import Settings  # noqa: E402
from gpuwatch.store.engine import make_engine  # noqa: E402

#: The rolling windows of the filter bar.
WINDOWS = tuple(ROLLING)

PAGES = (
    "overview",
    "teams",
    "workloads",
    "workload",
    "gpus",
    "node",
    "gpu",
    "savings",
    "reports",
    "alerts",
    "health",
)
FILTERED = ("overview", "teams", "workloads", "gpus", "savings", "health")


def timed(call: Callable[[], Any]) -> float:
    began = time.perf_counter()
    json.dumps(call(), cls=plotly.utils.PlotlyJSONEncoder)
    return (time.perf_counter() - began) * 1000.0


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]


def row(name: str, values: list[float]) -> str:
    return (
        f"{name:<44} {len(values):>4} {statistics.median(values):>9.1f} {p95(values):>9.1f} "
        f"{max(values):>9.1f}"
    )


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def rss_mib() -> float:
    """The process's resident memory now (Linux), else NaN."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return float("nan")
    return pages * resource.getpagesize() / 2**20


def frames_mib(snap: Snapshot) -> float:
    frames = (snap.units, snap.pods, snap.nodes, snap.collection, snap.dra)
    return sum(float(f.memory_usage(index=True, deep=True).sum()) for f in frames) / 2**20


def detail_queries(snap: Snapshot) -> dict[str, dict[str, str]]:
    top = workloads(snap, Filters()).iloc[0]
    unit = snap.units.iloc[0]
    return {
        "workload": {
            "cluster": str(top["cluster"]),
            "namespace": str(top["namespace"]),
            "kind": str(top["workload_kind"]),
            "name": str(top["workload"]),
        },
        "node": {"cluster": str(unit["cluster"]), "name": str(unit["node"])},
        "gpu": {"id": str(int(unit["gpu_id"]))},
    }


def store_sums(snap: Snapshot, window: str, samples: int) -> list[float]:
    """Times the store takes to sum a window's cost and GPU rows (daily sums for its whole days
    whose sums are built, hourly rows for the rest), uncached."""
    start, end = window_bounds(snap, Filters(window=window))
    values = []
    for _ in range(samples):
        snap.forget()
        values.append(timed(lambda: len(span_sums(snap, start, end).cost)))
    return values


def store_hourly(snap: Snapshot, window: str, samples: int) -> list[float]:
    """Times the store takes to read and cost a window's hourly rows, uncached."""
    start, end = window_bounds(snap, Filters(window=window))
    values = []
    for _ in range(samples):
        snap.forget()
        values.append(timed(lambda: len(window_hourly(snap, start, end))))
    return values


def filter_changes(snap: Snapshot) -> list[dict[str, str]]:
    """Filter sets a user would click through, each different from the others."""
    opts = options(snap, Filters())
    changes: list[dict[str, str]] = [{"window": w} for w in WINDOWS if w != "7d"]
    changes += [{"cluster": cl} for cl in opts.clusters]
    changes += [{"team": t} for t in opts.teams]
    changes += [{"namespace": n} for n in opts.namespaces[:6]]
    changes += [{"model": m} for m in opts.models]
    changes += [{"cluster": cl, "window": "24h"} for cl in opts.clusters]
    return changes


def shared_warm_ups(engine: Engine, settings: Settings) -> tuple[float, float]:
    """CPU seconds of the default views' warm-up in the first worker of a server (computes and
    writes the shared answers) and in a second one (reads them): ``serve --workers N``."""
    with tempfile.TemporaryDirectory(prefix="gpuwatch-bench-") as folder:
        cpu = []
        for _ in range(2):
            data = DashboardData(
                engine, settings, background=False, shared=SharedAnswers(Path(folder))
            )
            app = create_app(engine, settings, data=data, warm=False)
            with app.server.app_context():
                began = time.process_time()
                data.warm(data.current())
                cpu.append(time.process_time() - began)
    return cpu[0], cpu[1]


def run(db: str, samples: int) -> None:
    engine = make_engine(f"sqlite:///{Path(db).resolve()}")
    settings = Settings()
    data = DashboardData(engine, settings, background=False)
    app = create_app(engine, settings, data=data, warm=False)
    pages = {name: importlib.import_module(f"gpuwatch.app.pages.{name}") for name in PAGES}
    with app.server.app_context():
        began = time.perf_counter()
        snap = data.current()
        build_s = time.perf_counter() - began
        built_rss, built_peak = rss_mib(), peak_rss_mib()
        began = time.perf_counter()
        data.warm(snap)
        warm_s = time.perf_counter() - began
        queries: dict[str, dict[str, Any]] = {name: {} for name in PAGES}
        queries |= detail_queries(snap)
        print(
            f"store: {db}: {snap.marker.last_ts} last sample, {len(snap.units)} GPU units, "
            f"{len(snap.pods):,} pods"
        )
        print(
            f"snapshot read (background, once per data version): {build_s:.2f} s; "
            f"frames {frames_mib(snap):.0f} MiB; RSS after it {built_rss:.0f} MiB, "
            f"peak {built_peak:.0f} MiB"
        )
        print(
            f"warm-up of the default views (background, after the build): {warm_s:.2f} s; "
            f"RSS after it {rss_mib():.0f} MiB\n"
        )
        first_cpu, second_cpu = shared_warm_ups(engine, settings)
        print(
            f"warm-up CPU with several workers (answers shared): first worker {first_cpu:.2f} s, "
            f"each other worker {second_cpu:.2f} s\n"
        )
        print(f"{'page / action':<44} {'n':>4} {'p50':>9} {'p95':>9} {'max':>9}  (ms)")
        for window in WINDOWS:
            print(row(f"store cost sums: {window} window", store_sums(snap, window, samples)))
        for window in WINDOWS:
            print(row(f"store hourly rows: {window} window", store_hourly(snap, window, samples)))
        cold: dict[str, list[float]] = {name: [] for name in PAGES}
        first: dict[str, list[float]] = {name: [] for name in PAGES}
        for _ in range(samples):
            snap.forget()
            for name in PAGES:
                cold[name].append(timed(partial(pages[name].layout, **queries[name])))
            snap.forget()
            data.warm(snap)
            for name in PAGES:
                first[name].append(timed(partial(pages[name].layout, **queries[name])))
        for name in PAGES:
            print(row(f"{name}: first load", first[name]))
        for name in PAGES:
            print(row(f"{name}: first load, no warm-up", cold[name]))
        changes = filter_changes(snap)
        for name in FILTERED:
            values = [timed(partial(pages[name].layout, **q)) for q in changes]
            print(row(f"{name}: filter change", values))
        windows = [{"window": w} for w in WINDOWS]
        for name in ("workload", "node", "gpu"):
            values = [timed(partial(pages[name].layout, **queries[name], **q)) for q in windows]
            print(row(f"{name}: window change", values))
    print(f"\npeak RSS of the process: {peak_rss_mib():.0f} MiB")
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="SQLite file (e.g. from `gpuwatch demo`)")
    parser.add_argument("--samples", type=int, default=5, help="first-load samples per page")
    args = parser.parse_args()
    run(args.db, args.samples)


if __name__ == "__main__":
    main()
