"""The weekly report and recommendations from the store, against asking Prometheus directly.

gpuwatch: ``load_inputs`` + ``weekly_report`` + ``render_csv`` (what ``gpuwatch report weekly``
runs) and ``load_inputs`` + ``recommend`` over the whole window (``gpuwatch recommend``), each
run in a child process of its own, on SQLite and on PostgreSQL stores of the simulated fleet.

The Prometheus-only baseline: the PromQL a user would run for the same weekly per-namespace
numbers (allocated, used and idle GPU-hours; average utilization = used / allocated), timed
through the HTTP API of a real Prometheus holding the same samples, in the same run. It handles
both label variants (``exported_namespace`` from a ServiceMonitor without honorLabels, else
``namespace``, never the exporter's own), PROF utilization where present else DEV, and drops
DCGM's blank sentinels; that filter and the idle threshold need 1-minute subqueries.

    .venv/bin/python bench/bench_report.py --gpus 200 --days 7 --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _support as S
import fleetgen

WEEK_S = 7 * 86400
#: The idle threshold of the default settings (``thresholds.idle_util_pct: 5``), as a ratio.
IDLE_RATIO = 0.05
MEASURES = ("allocated_gpu_hours", "used_gpu_hours", "idle_gpu_hours")


def _settings(db_url: str) -> Any:
    from gpuwatch.config import load_settings

    return load_settings(None, environ={}, overrides={"database_url": db_url})


def _load(db_url: str, start_ts: int, end_ts: int, resolution: str) -> Any:
    """``load_inputs`` as the CLI calls it: the settings' idle threshold, the given resolution,
    the health roll-up, GPU time no pod held summed per day."""
    from gpuwatch.report.inputs import load_inputs
    from gpuwatch.store.engine import make_engine

    threshold = _settings(db_url).thresholds.idle_util_pct
    engine = make_engine(db_url)
    return load_inputs(
        engine,
        start_ts,
        end_ts,
        resolution=resolution,
        idle_util_pct=threshold,
        health=True,
        unheld_per_day=True,
    )


def child_report(db_url: str, week_start_ts: int, resolution: str) -> None:
    """``gpuwatch report weekly`` in-process, with the same inputs (stored detail, health
    roll-up, scheduling policy): load, compute, render; figures as JSON."""
    from gpuwatch.report.inputs import policy_from, price_book_from
    from gpuwatch.report.weekly import render_csv, weekly_report

    settings = _settings(db_url)
    t0, cpu0 = time.perf_counter(), time.process_time()
    data = _load(db_url, week_start_ts, week_start_ts + WEEK_S, resolution)
    t1 = time.perf_counter()
    frame = weekly_report(
        data.samples,
        data.pods,
        data.gpus,
        price_book_from(settings),
        policy_from(settings),
        week_start_ts,
        nodes=data.nodes,
        detail=data.detail,
        health_sums=data.health_sums,
        scheduling=settings.scheduling.policy(),
    )
    text = render_csv(frame)
    t2 = time.perf_counter()
    held = frame[frame["namespace"] != "__idle__"]
    sums = held.groupby("namespace")[list(MEASURES)].sum()
    S.emit(
        {
            "seconds": t2 - t0,
            "load_s": t1 - t0,
            "compute_s": t2 - t1,
            "cpu_s": time.process_time() - cpu0,
            "samples": len(data.samples),
            "resolution": data.resolution,
            "rows": len(frame),
            "csv_bytes": len(text),
            "namespaces": {str(k): [float(x) for x in v] for k, v in sums.iterrows()},
        }
    )


def child_recommend(db_url: str, start_ts: int, end_ts: int, resolution: str) -> None:
    """``gpuwatch recommend`` in-process over ``[start_ts, end_ts)``; figures as JSON."""
    from gpuwatch.analytics.recommend import recommend
    from gpuwatch.report.inputs import policy_from, price_book_from

    settings = _settings(db_url)
    t0, cpu0 = time.perf_counter(), time.process_time()
    data = _load(db_url, start_ts, end_ts, resolution)
    t1 = time.perf_counter()
    frame = recommend(
        data.samples,
        data.pods,
        price_book_from(settings),
        policy_from(settings),
        start_ts,
        end_ts,
        gpus=data.gpus,
        nodes=data.nodes,
        detail=data.detail,
        health_sums=data.health_sums,
    )
    t2 = time.perf_counter()
    S.emit(
        {
            "seconds": t2 - t0,
            "load_s": t1 - t0,
            "compute_s": t2 - t1,
            "cpu_s": time.process_time() - cpu0,
            "samples": len(data.samples),
            "resolution": data.resolution,
            "rows": len(frame),
        }
    )


# --- the Prometheus-only baseline -------------------------------------------------------------

EXPORTER_NAMESPACE = "gpu-operator"
UTIL = {  # metric -> (upper bound of a real reading, idle threshold factor, scale to a ratio)
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": (1.0, 1.0, 1.0),
    "DCGM_FI_DEV_GPU_UTIL": (100.0, 100.0, 0.01),
}


def _selectors(metric: str) -> tuple[str, str]:
    """(series scraped without honorLabels that a pod holds, plain series a pod holds)."""
    exported = f'{metric}{{exported_pod!=""}}'
    plain = f'{metric}{{exported_pod="",pod!="",namespace!="{EXPORTER_NAMESPACE}"}}'
    return exported, plain


def _per_series(measure: str, metric: str, selector: str, idle_ratio: float) -> str:
    high, factor, scale = UTIL[metric]
    valid = f"({selector} <= {high:g})"
    if measure == "allocated_gpu_hours":
        return f"count_over_time({valid}[7d:1m])"
    if measure == "used_gpu_hours":
        expr = f"sum_over_time({valid}[7d:1m])"
        return expr if scale == 1.0 else f"{expr} * {scale:g}"
    return f"count_over_time(({selector} < {idle_ratio * factor:g})[7d:1m])"


def baseline_query(measure: str, idle_ratio: float, step_s: int) -> str:
    """One weekly per-namespace measure as a single PromQL expression (GPU-hours)."""
    prof, dev = UTIL
    exported = " or ".join(
        _per_series(measure, m, _selectors(m)[0], idle_ratio) for m in (prof, dev)
    )
    plain = " or ".join(_per_series(measure, m, _selectors(m)[1], idle_ratio) for m in (prof, dev))
    relabelled = f'label_replace({exported}, "namespace", "$1", "exported_namespace", "(.+)")'
    return f"sum by (namespace) ({relabelled} or {plain}) * {step_s} / 3600"


def run_baseline(
    prom: str, week_end_ts: int, idle_ratio: float, step_s: int
) -> tuple[float, dict[str, list[float]], dict[str, float]]:
    """The three queries, one after another, at the end of the week; seconds and values."""
    import requests

    per_ns: dict[str, list[float]] = {}
    seconds: dict[str, float] = {}
    total = 0.0
    for index, measure in enumerate(MEASURES):
        query = baseline_query(measure, idle_ratio, step_s)
        started = time.perf_counter()
        response = requests.get(
            f"{prom}/api/v1/query",
            params={"query": query, "time": f"{week_end_ts - 0.001:.3f}"},
            timeout=900,
        )
        elapsed = time.perf_counter() - started
        body = response.json()
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus refused the {measure} query: {body.get('error')}")
        total += elapsed
        seconds[measure] = elapsed
        for item in body["data"]["result"]:
            ns = item["metric"].get("namespace", "")
            per_ns.setdefault(ns, [0.0, 0.0, 0.0])[index] = float(item["value"][1])
    return total, per_ns, seconds


# --- the benchmark ----------------------------------------------------------------------------


def measure_runs(name: str, argv: list[str], runs: int, unit: str, limit_gb: float) -> S.Measure:
    """``runs`` children of this script; a child that fails ends the series with a note."""
    measure = S.Measure(name, unit=unit)
    parts: list[tuple[float, float, float]] = []
    for run in range(runs):
        load = os.getloadavg()[0]
        try:
            result = S.run_child(argv, limit_gb=limit_gb)
        except RuntimeError as exc:
            measure.note = f"failed: {str(exc).splitlines()[-1][:120]}"
            print(f"  {name} run {run + 1}: {measure.note}", flush=True)
            break
        p = result.payload
        measure.add(p["seconds"], result.rss_mib, p["samples"])
        parts.append((p["load_s"], p["compute_s"], p["cpu_s"]))
        measure.extra = p
        print(
            f"  {name} run {run + 1}: {p['seconds']:.2f}s (read {p['load_s']:.2f}s + compute "
            f"{p['compute_s']:.2f}s; CPU {p['cpu_s']:.2f}s), {p['samples']:,} {p['resolution']} "
            f"rows read, "
            f"{p['rows']} rows out, peak RSS {result.rss_mib:,.0f} MiB, load {load:.2f}",
            flush=True,
        )
    if parts:
        read, compute, cpu = (statistics.median(part[n] for part in parts) for n in range(3))
        measure.note = measure.note or f"read {read:.2f}s + compute {compute:.2f}s, CPU {cpu:.2f}s"
    return measure


def _compare(gw: dict[str, list[float]], prom: dict[str, list[float]]) -> None:
    """Print both sides for the namespace with the most allocated hours, and the fleet."""
    if not gw:
        return
    top = max(gw, key=lambda ns: gw[ns][0])
    print("\nper-namespace numbers, gpuwatch weekly report vs the PromQL baseline")
    head = f"{'':<34} {'allocated h':>12} {'used h':>10} {'idle h':>10} {'avg util %':>10}"
    print(head)

    def row(label: str, v: list[float]) -> None:
        util = 100 * v[1] / v[0] if v[0] else 0.0
        print(f"{label:<34} {v[0]:>12,.1f} {v[1]:>10,.1f} {v[2]:>10,.1f} {util:>10.1f}")

    row(f"{top} (gpuwatch)", gw[top])
    row(f"{top} (Prometheus)", prom.get(top, [0.0, 0.0, 0.0]))
    fleet_gw = [sum(v[i] for v in gw.values()) for i in range(3)]
    fleet_prom = [sum(v[i] for v in prom.values()) for i in range(3)]
    row("all namespaces (gpuwatch)", fleet_gw)
    row("all namespaces (Prometheus)", fleet_prom)
    worst, name = max(
        ((abs(prom.get(ns, [0.0])[0] - v[0]) / v[0], ns) for ns, v in gw.items() if v[0] > 0),
        default=(0.0, top),
    )
    print(
        f"namespaces: gpuwatch {len(gw)}, Prometheus {len(prom)}; largest allocated-hours "
        f"difference in one namespace {100 * worst:.1f}% ({name}: gpuwatch {gw[name][0]:,.1f} h, "
        f"Prometheus {prom.get(name, [0.0])[0]:,.1f} h)"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--gpus", type=int, default=200)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--step", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--raw-days", type=float, help="a compacted store (see fleetgen.py)")
    parser.add_argument(
        "--resolution",
        default="auto",
        choices=("auto", "raw", "hourly"),
        help="what the report reads (as storage.resolution)",
    )
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite and/or postgres")
    parser.add_argument("--no-baseline", action="store_true", help="skip the PromQL baseline")
    parser.add_argument("--no-recommend", action="store_true", help="skip recommend")
    parser.add_argument(
        "--mem-limit-gb",
        type=float,
        default=16.0,
        help="address-space limit of each gpuwatch child (0: none)",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    return parser


def _gpuwatch(
    size: fleetgen.Size, backends: list[str], args: argparse.Namespace, gpus: int
) -> list[S.Measure]:
    """The weekly report (and recommend) from each store, children one after another."""
    week_start = fleetgen.END_TS - 7 * 86400
    measures: list[S.Measure] = []
    with S.postgres_server() if "postgres" in backends else nullcontext("") as server:
        urls = {}
        if "sqlite" in backends:
            urls["sqlite"] = fleetgen.ensure_sqlite(size)
        if server:
            urls["postgres"] = fleetgen.ensure_postgres(size, server)
        print(S.machine_line())
        for backend, url in urls.items():
            res = args.resolution
            argv = [__file__, "--child", "report", url, res, str(week_start)]
            name = f"weekly report, {gpus} GPUs, {backend}, {res}"
            measures.append(measure_runs(name, argv, args.runs, "rows read", args.mem_limit_gb))
            if not args.no_recommend:
                window = [str(week_start), str(size.end_ts)]
                argv = [__file__, "--child", "recommend", url, res, *window]
                name = f"recommend 7d, {gpus} GPUs, {backend}, {res}"
                measures.append(measure_runs(name, argv, args.runs, "rows read", args.mem_limit_gb))
    return measures


def _baseline(
    tsdb: Path, size: fleetgen.Size, runs: int, gpus: int
) -> tuple[S.Measure, dict[str, list[float]]]:
    """The three PromQL queries, ``runs`` times after one untimed warm-up round."""
    baseline = S.Measure(f"Prometheus-only baseline, {gpus} GPUs (3 queries)", unit="")
    values: dict[str, list[float]] = {}
    with S.prometheus(tsdb) as prom:
        run_baseline(prom, fleetgen.END_TS, IDLE_RATIO, size.step_s)
        for run in range(runs):
            load = os.getloadavg()[0]
            seconds, values, each = run_baseline(prom, fleetgen.END_TS, IDLE_RATIO, size.step_s)
            baseline.add(seconds)
            parts = ", ".join(f"{k.split('_')[0]} {v:.2f}s" for k, v in each.items())
            print(f"  {baseline.name} run {run + 1}: {seconds:.2f}s ({parts}), load {load:.2f}")
    return baseline, values


def main() -> None:
    args = _parser().parse_args()
    if args.child:
        kind, db, res, *rest = args.child
        if kind == "report":
            child_report(db, int(rest[0]), res)
        else:
            child_recommend(db, int(rest[0]), int(rest[1]), res)
        return
    size = fleetgen.Size(args.gpus, args.days, args.step, args.seed, args.raw_days)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    fleet = fleetgen.scaled_fleet(size.gpus, size.seed)
    gpus = fleetgen.physical_gpus(fleet)
    print(
        f"data: {size.name}: {gpus} GPUs ({len(fleet.units)} units), {size.days:g} days at "
        f"{size.step_s}s; report week {fleetgen.WEEK}"
    )
    tsdb = None if args.no_baseline else fleetgen.ensure_tsdb(size)
    measures = _gpuwatch(size, backends, args, gpus)
    baseline: S.Measure | None = None
    prom_values: dict[str, list[float]] = {}
    if tsdb is not None:
        baseline, prom_values = _baseline(tsdb, size, args.runs, gpus)
        measures.append(baseline)
    print(f"\nafter: {S.machine_line()}")
    S.print_table(f"weekly report and recommend, {size.name}", measures)
    if baseline is None or not baseline.seconds:
        return
    reports = [m for m in measures if m.name.startswith("weekly report") and m.seconds]
    for m in reports:
        print(f"ratio {m.name} / baseline: {m.median_s / baseline.median_s:.2f}")
    if reports:
        _compare(reports[0].extra["namespaces"], prom_values)
    print("\nbaseline query (allocated GPU-hours):")
    print(baseline_query("allocated_gpu_hours", IDLE_RATIO, size.step_s))


if __name__ == "__main__":
    main()
