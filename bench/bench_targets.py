"""The scale targets, measured and printed as one table (docs/performance.md#the-scale-targets).

    .venv/bin/python bench/bench_targets.py                  # the targets' own sizes (hours)
    .venv/bin/python bench/bench_targets.py --large 100 --small 50 --days 2 \\
        --backfill-gpus 50 --backfill-days 0.25 --steady-gpus 100 --runs 2   # a quick check

Every row is measured by the benchmark script that owns it, with the same code (their own
progress lines print above the table as they go):

- dashboard first load and filter change (headless Chromium, median of ``--runs`` per page; the
  row shows the slowest page) and worker RSS (the largest of ``--workers`` gunicorn workers):
  ``bench_browser.py`` on the ``fleetgen.py`` stores of ``--large`` GPUs × ``--days`` on
  PostgreSQL and ``--small`` GPUs × ``--days`` on SQLite;
- weekly report (``report weekly`` in a process of its own, median of ``--runs``):
  ``bench_report.py`` on the same two stores;
- backfill of ``--backfill-gpus`` × ``--backfill-days`` as a multiple of its floor (what
  Prometheus alone needs to answer the same range requests): ``bench_collect.py``, SQLite and
  PostgreSQL;
- one steady minute of ``--steady-gpus`` GPUs: ``bench_collect.py``, SQLite and PostgreSQL.

A row measured on a smaller fleet than its target's says so. The stores and TSDB blocks are
built once and kept under ``$GPUWATCH_BENCH_DIR`` (default ``/tmp/gpuwatch-bench``); at the
targets' sizes that takes hours on two cores, so build them ahead with ``fleetgen.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _support as S
import bench_browser
import bench_collect
import bench_report
import fleetgen

#: The targets' own sizes: (GPUs, days) per store.
LARGE = (10_000, 30.0)
SMALL = (2_000, 30.0)
BACKFILL = (2_000, 7.0)
STEADY_GPUS = 10_000
SECTIONS = ("dashboard", "report", "backfill", "steady")


@dataclass(frozen=True)
class Row:
    """One target and what was measured against it (``None``: not measured, ``note`` says why)."""

    target: str
    fleet: str
    backend: str
    limit: float
    unit: str
    measured: float | None
    note: str = ""

    @property
    def met(self) -> str:
        """yes/no; in parentheses where the fleet is smaller than the target's (no verdict)."""
        if self.measured is None:
            return "-"
        verdict = "yes" if self.measured <= self.limit else "no"
        return f"({verdict})" if "(target " in self.fleet else verdict

    def cells(self) -> tuple[str, ...]:
        value = "-" if self.measured is None else f"{self.measured:,.2f} {self.unit}"
        limit = f"<= {self.limit:g} {self.unit}"
        return (self.target, self.fleet, self.backend, limit, value, self.met, self.note)


HEADER = ("target", "fleet", "backend", "target", "measured", "met", "note")


def print_rows(rows: list[Row]) -> None:
    """The rows as a table, each column as wide as its widest cell."""
    table = [HEADER, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADER) - 1)]
    right = (False, False, False, True, True, True)
    for n, line in enumerate(table):
        cells = [
            cell.rjust(width) if align else cell.ljust(width)
            for cell, width, align in zip(line, widths, right, strict=False)
        ]
        print("  ".join([*cells, line[-1]]).rstrip())
        if n == 0:
            print("-" * (sum(widths) + 2 * len(widths) + len("note")))
    if any(row.met.startswith("(") for row in rows):
        print("(yes), (no): measured on a smaller fleet than the target's, so no verdict")


def _fleet(gpus: int, days: float | None, wanted: tuple[int, float | None]) -> str:
    """``2,000 GPUs x 7 d``, with the target's size where the fleet measured is smaller."""
    text = f"{gpus:,} GPUs" + ("" if days is None else f" x {days:g} d")
    want_gpus, want_days = wanted
    if gpus >= want_gpus and (days is None or want_days is None or days >= want_days):
        return text
    return (
        f"{text} (target {want_gpus:,}" + ("" if want_days is None else f" x {want_days:g} d") + ")"
    )


def _slowest(per_page: dict[str, list[float]]) -> tuple[str, float]:
    """The page with the largest median, and that median."""
    medians = {page: statistics.median(values) for page, values in per_page.items()}
    page = max(medians, key=lambda p: medians[p])
    return page, medians[page]


def dashboard_rows(url: str, backend: str, fleet: str, args: argparse.Namespace) -> list[Row]:
    figures = bench_browser.run(url, args.workers, args.runs, args.timeout)
    first_page, first_s = _slowest(figures.first_load_s)
    change_page, change_s = _slowest(figures.filter_change_s)
    rss = max(figures.worker_rss_mib)
    workers = f"{len(figures.worker_rss_mib)} workers"
    return [
        Row("dashboard first load (slowest page)", fleet, backend, 1.0, "s", first_s, first_page),
        Row(
            "dashboard filter change (slowest page)",
            fleet,
            backend,
            0.5,
            "s",
            change_s,
            change_page,
        ),
        Row("dashboard worker RSS (largest)", fleet, backend, 300.0, "MiB", rss, workers),
    ]


def report_row(url: str, backend: str, fleet: str, args: argparse.Namespace) -> Row:
    week_start = fleetgen.END_TS - 7 * 86400
    argv = [bench_report.__file__, "--child", "report", url, "auto", str(week_start)]
    name = f"weekly report, {fleet}, {backend}"
    measure = bench_report.measure_runs(name, argv, args.runs, "rows read", args.mem_limit_gb)
    measured = measure.median_s if measure.seconds else None
    return Row("weekly report", fleet, backend, 5.0, "s", measured, measure.note)


def _stores(args: argparse.Namespace, server: str | None) -> Iterator[tuple[str, str, str]]:
    """(url, backend, fleet) of the dashboard and report stores: large on PostgreSQL, small on
    SQLite."""
    if server is not None:
        size = fleetgen.Size(args.large, args.days)
        fleet = _fleet(args.large, args.days, LARGE)
        yield fleetgen.ensure_postgres(size, server), "postgres", fleet
    if "sqlite" in args.backends:
        size = fleetgen.Size(args.small, args.days)
        yield fleetgen.ensure_sqlite(size), "sqlite", _fleet(args.small, args.days, SMALL)


def collect_rows(args: argparse.Namespace, server: str | None) -> list[Row]:
    rows: list[Row] = []
    options = argparse.Namespace(no_steady=True, steady_gpus=None)
    if "backfill" in args.sections:
        size = fleetgen.Size(args.backfill_gpus, args.backfill_days)
        fleet = _fleet(args.backfill_gpus, args.backfill_days, BACKFILL)
        measures = bench_collect.measure_size(
            size, options, args.backends, server, args.runs, floor=True
        )
        floor, backfills = measures[0], [m for m in measures[1:] if m.name.startswith("backfill")]
        for backend, measure in zip(args.backends, backfills, strict=True):
            ratio = measure.median_s / floor.median_s if measure.seconds else None
            note = f"{measure.median_s:.1f} s against a floor of {floor.median_s:.1f} s"
            rows.append(Row("backfill / its floor", fleet, backend, 3.0, "x", ratio, note))
    if "steady" in args.sections:
        size = fleetgen.Size(args.steady_gpus, bench_collect.STEADY_DAYS)
        fleet = _fleet(args.steady_gpus, None, (STEADY_GPUS, None))
        options.no_steady = False
        measures = bench_collect.measure_size(size, options, args.backends, server, 1, floor=False)
        steady = [m for m in measures if m.name.startswith("steady")]
        for backend, measure in zip(args.backends, steady, strict=True):
            measured = measure.median_s if measure.seconds else None
            rows.append(
                Row(
                    "steady one-minute collection",
                    fleet,
                    backend,
                    10.0,
                    "s",
                    measured,
                    f"median of {len(measure.seconds)}",
                )
            )
    return rows


@contextmanager
def _server(backends: list[str]) -> Iterator[str | None]:
    if "postgres" not in backends:
        yield None
        return
    with S.postgres_server() as server:
        yield server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--large", type=int, default=LARGE[0], help="GPUs of the PostgreSQL store")
    parser.add_argument("--small", type=int, default=SMALL[0], help="GPUs of the SQLite store")
    parser.add_argument("--days", type=float, default=LARGE[1], help="days of both stores")
    parser.add_argument("--backfill-gpus", type=int, default=BACKFILL[0])
    parser.add_argument("--backfill-days", type=float, default=BACKFILL[1])
    parser.add_argument("--steady-gpus", type=int, default=STEADY_GPUS)
    parser.add_argument("--workers", type=int, default=4, help="dashboard workers")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per page wait")
    parser.add_argument("--mem-limit-gb", type=float, default=16.0, help="per report process")
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite and/or postgres")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"of {', '.join(SECTIONS)}")
    return parser


def _sections(args: argparse.Namespace) -> list[Callable[[str | None], list[Row]]]:
    parts: list[Callable[[str | None], list[Row]]] = []

    def stores(server: str | None) -> list[Row]:
        rows: list[Row] = []
        for url, backend, fleet in _stores(args, server):
            if "dashboard" in args.sections:
                rows += dashboard_rows(url, backend, fleet, args)
            if "report" in args.sections:
                rows.append(report_row(url, backend, fleet, args))
        return rows

    if {"dashboard", "report"} & set(args.sections):
        parts.append(stores)
    if {"backfill", "steady"} & set(args.sections):
        parts.append(lambda server: collect_rows(args, server))
    return parts


def main() -> None:
    args = _parser().parse_args()
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    wrong = set(args.sections) - set(SECTIONS) | set(args.backends) - {"sqlite", "postgres"}
    unknown = sorted(wrong)
    if unknown:
        sys.exit(f"bench_targets: unknown section or backend: {', '.join(unknown)}")
    rows: list[Row] = []
    with _server(args.backends) as server:
        for part in _sections(args):
            rows += part(server)
    print(f"\nscale targets, measured on {S.machine_line()}")
    print_rows(rows)


if __name__ == "__main__":
    main()
