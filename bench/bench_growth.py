"""How report time grows with the data: the weekly report and recommend at several sizes.

Each size is GPUs × days of 60 s samples ending with ISO week 2026-W46 (so a size of D ≤ 7 days
fills the last D days of the report week, and the rows read grow with GPUs × days). Each
measurement runs in a child process of its own (``bench_report.py``'s children) and reads what
the CLI reads (``--resolution auto``: the hourly roll-ups). Growth is at most linear when the
time per row does not rise with size: the table shows seconds per million rows read and the
log-log slope between the smallest and largest size (1.0 = linear).

    .venv/bin/python bench/bench_growth.py --sizes 250x7,500x7,1000x7,2000x7 --runs 3
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _support as S
import fleetgen

REPORT = str(Path(__file__).resolve().parent / "bench_report.py")


def _parse_sizes(text: str) -> list[tuple[int, float]]:
    sizes = []
    for item in text.split(","):
        gpus, _, days = item.strip().partition("x")
        sizes.append((int(gpus), float(days)))
    return sizes


def _measure(
    kind: str, url: str, size: fleetgen.Size, runs: int, resolution: str
) -> tuple[list[float], int, float]:
    """(seconds of each run, rows read, peak RSS MiB) of one report kind on one store."""
    week_start = fleetgen.END_TS - 7 * 86400
    if kind == "report":
        argv = [REPORT, "--child", "report", url, resolution, str(week_start)]
    else:
        window = [str(max(week_start, size.start_ts)), str(size.end_ts)]
        argv = [REPORT, "--child", "recommend", url, resolution, *window]
    seconds, samples, rss = [], 0, 0.0
    for _ in range(runs):
        result = S.run_child(argv, limit_gb=16.0)
        seconds.append(result.payload["seconds"])
        samples = result.payload["samples"]
        rss = max(rss, result.rss_mib)
    return seconds, samples, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--sizes",
        default="100x1,200x1,200x2,400x2",
        help="comma-separated GPUSxDAYS (days at most 7 for the weekly report)",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", default="sqlite", help="sqlite and/or postgres")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--resolution", default="auto", choices=("auto", "raw", "hourly"))
    args = parser.parse_args()
    sizes = [fleetgen.Size(g, d, 60, args.seed) for g, d in _parse_sizes(args.sizes)]
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    server_cm = S.postgres_server() if "postgres" in backends else None
    server = server_cm.__enter__() if server_cm else None
    rows: list[tuple[str, str, int, float, int, list[float], float]] = []
    try:
        stores = []
        for size in sizes:
            gpus = fleetgen.physical_gpus(fleetgen.scaled_fleet(size.gpus, size.seed))
            for backend in backends:
                url = (
                    fleetgen.ensure_sqlite(size)
                    if backend == "sqlite"
                    else fleetgen.ensure_postgres(size, server or "")
                )
                stores.append((size, gpus, backend, url))
        print(S.machine_line())
        for size, gpus, backend, url in stores:
            for kind in ("report", "recommend"):
                seconds, samples, rss = _measure(kind, url, size, args.runs, args.resolution)
                rows.append((kind, backend, gpus, size.days, samples, seconds, rss))
                print(
                    f"  {kind} {backend} {gpus} GPUs x {size.days:g}d: "
                    f"median {statistics.median(seconds):.2f}s, {samples:,} rows read, "
                    f"peak RSS {rss:,.0f} MiB",
                    flush=True,
                )
    finally:
        if server_cm:
            server_cm.__exit__(None, None, None)
    print(f"\nafter: {S.machine_line()}")
    _table(rows)


def _table(rows: list[tuple[str, str, int, float, int, list[float], float]]) -> None:
    head = (
        f"{'measurement':<22} {'GPUs':>6} {'days':>5} {'GPU-days':>9} {'rows read':>12} "
        f"{'median s':>9} {'min s':>7} {'max s':>7} {'s / M rows':>13} {'RSS MiB':>8}"
    )
    print("\nreport time by size")
    print(head)
    print("-" * len(head))
    for kind, backend, gpus, days, samples, seconds, rss in rows:
        med = statistics.median(seconds)
        per = med / (samples / 1e6) if samples else float("nan")
        print(
            f"{kind + ' ' + backend:<22} {gpus:>6} {days:>5g} {gpus * days:>9,.0f} "
            f"{samples:>12,} {med:>9.2f} {min(seconds):>7.2f} {max(seconds):>7.2f} "
            f"{per:>13.2f} {rss:>8,.0f}"
        )
    for kind in sorted({r[0] + " " + r[1] for r in rows}):
        mine = [r for r in rows if r[0] + " " + r[1] == kind]
        small, large = min(mine, key=lambda r: r[4]), max(mine, key=lambda r: r[4])
        if small[4] and large[4] > small[4]:
            t_small, t_large = statistics.median(small[5]), statistics.median(large[5])
            slope = math.log(t_large / t_small) / math.log(large[4] / small[4])
            verdict = "at most linear" if slope <= 1.1 else "faster than linear"
            print(
                f"{kind}: {large[4] / small[4]:.1f}x the rows took "
                f"{t_large / t_small:.1f}x the time; log-log slope {slope:.2f} ({verdict})"
            )


if __name__ == "__main__":
    main()
