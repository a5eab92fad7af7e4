"""Collection from a real Prometheus into the store: a D-day backfill and one steady minute.

A simulated fleet of N GPUs (``bench/fleetgen.py``) is imported into Prometheus TSDB blocks;
a Debian ``prometheus`` serves them. Each run collects the whole window with
``gpuwatch.collectors.collect.collect`` (the code behind ``gpuwatch collect``, default settings:
60 s step, 6-hour pages unless ``--page``, no Kubernetes API) into a fresh SQLite file and a
fresh PostgreSQL database, in a child process of its own (so its peak RSS is its own). Then the
steady state: in a store holding the window but its last minutes, a process collects one new
minute (untimed, as the round before in ``gpuwatch collect --follow``) and then the next, timed:
a minute appended to an hour that already holds the minutes before it.

Beside the backfill, its floor: the same range requests the collector sends for every page
(``PrometheusSource.fetch_page``: the same queries, request sizes, one request at a time with
the next one asked while an answer is read), each answer read whole and thrown away (only its
series are counted, which sizes the next request as in a collection). That is what Prometheus
alone needs to answer the backfill; the table gives each backfill as a multiple of it.

    .venv/bin/python bench/bench_collect.py --gpus 200 --days 1 --runs 3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _support as S
import fleetgen

STEADY_RUNS_MIN = 5
#: The fleet of ``--steady-gpus`` holds the last hour only (what a steady minute reads).
STEADY_DAYS = 1 / 24


def _settings(db_url: str, prom_url: str, step_s: int) -> object:
    from gpuwatch.config import load_settings

    prometheus = {"url": prom_url, "step": f"{step_s}s"}
    if os.environ.get("BENCH_COLLECT_PAGE"):
        prometheus["page"] = os.environ["BENCH_COLLECT_PAGE"]
    overrides = {"cluster": fleetgen.CLUSTER, "database_url": db_url, "prometheus": prometheus}
    return load_settings(None, environ={}, overrides=overrides)


def child_collect(
    db_url: str, prom_url: str, start_ts: int, end_ts: int, step_s: int, warm_s: int
) -> None:
    """In a fresh process: collect ``[start_ts, end_ts)`` and print the figures as JSON.

    With ``warm_s`` > 0, first collect ``[start_ts - warm_s, start_ts)`` untimed (a process
    that already ran one round, as in ``--follow``).
    """
    from gpuwatch.cli.commands_collect import prometheus_source
    from gpuwatch.collectors.collect import Window, collect
    from gpuwatch.store.engine import make_engine

    settings = _settings(db_url, prom_url, step_s)
    engine = make_engine(db_url)
    source = prometheus_source(settings)  # type: ignore[arg-type]
    variants = settings.prometheus.labels.variants()  # type: ignore[attr-defined]
    page_s = int(settings.prometheus.page.total_seconds())  # type: ignore[attr-defined]

    def once(lo: int, hi: int) -> tuple[float, object]:
        window = Window(lo, hi, step_s, page_s)
        started = time.perf_counter()
        stats = collect(engine, fleetgen.CLUSTER, window, source, None, variants, end_ts)
        return time.perf_counter() - started, stats

    if warm_s:
        once(start_ts - warm_s, start_ts)
    seconds, stats = once(start_ts, end_ts)
    S.emit(
        {
            "seconds": seconds,
            "samples": stats.samples,  # type: ignore[attr-defined]
            "pages": stats.pages,  # type: ignore[attr-defined]
            "gpu_units": stats.gpu_units,  # type: ignore[attr-defined]
        }
    )


def child_floor(prom_url: str, start_ts: int, end_ts: int, step_s: int) -> None:
    """In a fresh process: send every page's range requests, answers read and dropped."""
    from gpuwatch.cli.commands_collect import prometheus_source
    from gpuwatch.collectors import promjson
    from gpuwatch.collectors.collect import Window

    settings = _settings("sqlite://", prom_url, step_s)
    source = prometheus_source(settings)  # type: ignore[arg-type]
    page_s = int(settings.prometheus.page.total_seconds())  # type: ignore[attr-defined]
    answers = [0, 0]  # answers, bytes

    def series_only(body: bytes) -> promjson.Matrix:
        answers[0] += 1
        answers[1] += len(body)
        none = promjson.empty_matrix()
        return promjson.Matrix([{}] * body.count(b'{"metric":'), none.counts, none.ts, none.ts, [])

    promjson.decode = series_only
    pages = Window(start_ts, end_ts, step_s, page_s).pages()
    started = time.perf_counter()
    for lo, hi in pages:
        source.fetch_page(lo, hi, step_s)
    seconds = time.perf_counter() - started
    if not answers[0]:
        raise RuntimeError("the floor read no answer: the decode call site moved")
    S.emit({"seconds": seconds, "requests": answers[0], "bytes": answers[1], "pages": len(pages)})


def _fresh_sqlite(path: Path) -> str:
    from gpuwatch.store.engine import make_engine, upgrade

    for leftover in path.parent.glob(path.name + "*"):
        leftover.unlink()
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def _fresh_postgres(server: str, name: str) -> str:
    from gpuwatch.store.engine import make_engine, upgrade

    url = S.create_database(server, name, drop=True)
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    return url


def _warm_prometheus(prom_url: str, size: fleetgen.Size) -> None:
    """Read every sample once (untimed), as a busy Prometheus would have its blocks cached."""
    import requests

    query = f"count(count_over_time(DCGM_FI_DEV_FB_USED[{size.end_ts - size.start_ts}s]))"
    params: dict[str, str | int] = {"query": query, "time": size.end_ts}
    requests.get(f"{prom_url}/api/v1/query", params=params, timeout=600).raise_for_status()


def _child_args(db_url: str, prom: str, lo: int, hi: int, step: int, warm: int) -> list[str]:
    return [__file__, "--child", db_url, prom, str(lo), str(hi), str(step), str(warm)]


def main() -> None:
    args = _parser().parse_args()
    if args.page:
        os.environ["BENCH_COLLECT_PAGE"] = args.page  # the children inherit it
    if args.child:
        db, prom, lo, hi, step, warm = args.child
        child_collect(db, prom, int(lo), int(hi), int(step), int(warm))
        return
    if args.child_floor:
        prom, lo, hi, step = args.child_floor
        child_floor(prom, int(lo), int(hi), int(step))
        return
    size = fleetgen.Size(args.gpus, args.days, args.step, args.seed)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    server_cm = S.postgres_server() if "postgres" in backends else None
    server = server_cm.__enter__() if server_cm else None
    try:
        measures = measure_size(size, args, backends, server, args.runs, floor=True)
        if args.steady_gpus:
            big = fleetgen.Size(args.steady_gpus, STEADY_DAYS, args.step, args.seed)
            measures += measure_size(big, args, backends, server, 1, floor=False)
    finally:
        if server_cm:
            server_cm.__exit__(None, None, None)
    print(f"\nafter: {S.machine_line()}")
    page = f", {args.page} pages" if args.page else ""
    S.print_table(f"gpuwatch collect, {size.name}{page} (real Prometheus)", measures)
    floor = measures[0]
    for measure in measures:
        if measure.name.startswith(f"backfill {_span(size)},") and measure.seconds:
            ratio = measure.median_s / floor.median_s
            print(f"{measure.name}: {ratio:.2f} x the floor (target: at most 3)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--gpus", type=int, default=200)
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--step", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--backends", default="sqlite,postgres", help="comma-separated: sqlite, postgres"
    )
    parser.add_argument("--no-steady", action="store_true", help="skip the steady-state minute")
    parser.add_argument(
        "--steady-gpus",
        type=int,
        help="also the steady minute of a fleet this large (its own Prometheus holding the last "
        "hour; one backfill of that hour first fills the store it runs on)",
    )
    parser.add_argument(
        "--page",
        help="prometheus.page for the runs (default: the setting's default, 6h); a shorter page "
        "makes a short window several pages, so fetching and writing overlap as in a long one",
    )
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--child-floor", nargs=4, help=argparse.SUPPRESS)
    return parser


def measure_size(
    size: fleetgen.Size,
    args: argparse.Namespace,
    backends: list[str],
    server: str | None,
    runs: int,
    floor: bool,
) -> list[S.Measure]:
    """The floor (with ``floor``), then per backend the backfill and the steady minute."""
    fleet = fleetgen.scaled_fleet(size.gpus, size.seed)
    print(
        f"data: {size.name}: {fleetgen.physical_gpus(fleet)} GPUs ({len(fleet.units)} units), "
        f"{size.days:g} days at {size.step_s}s"
    )
    tsdb = fleetgen.ensure_tsdb(size)
    work = size.folder / "collect"
    work.mkdir(exist_ok=True)
    measures: list[S.Measure] = []
    with S.prometheus(tsdb) as prom:
        _warm_prometheus(prom, size)
        print(S.machine_line())
        if floor:
            measures.append(_bench_floor(size, runs, prom))
        for backend in backends:
            measures += _bench_backend(backend, size, args, runs, prom, server, work)
    return measures


def _span(size: fleetgen.Size) -> str:
    return f"{size.days:g}d" if size.days >= 1 else f"{size.days * 24:g}h"


def _bench_floor(size: fleetgen.Size, runs: int, prom: str) -> S.Measure:
    """The backfill's range requests alone, answers read and dropped (:func:`child_floor`)."""
    floor = S.Measure(f"floor {_span(size)}: Prometheus answers alone", unit="bytes")
    argv = [__file__, "--child-floor", prom, str(size.start_ts), str(size.end_ts)]
    for run in range(runs):
        result = S.run_child([*argv, str(size.step_s)])
        payload = result.payload
        floor.add(payload["seconds"], result.rss_mib, payload["bytes"])
        print(
            f"  floor run {run + 1}: {payload['seconds']:.1f}s, {payload['requests']} requests "
            f"over {payload['pages']} pages, {payload['bytes'] / 2**20:,.0f} MiB of answers",
            flush=True,
        )
    return floor


def _bench_backend(
    backend: str,
    size: fleetgen.Size,
    args: argparse.Namespace,
    runs: int,
    prom: str,
    server: str | None,
    work: Path,
) -> list[S.Measure]:
    label = f"{fleetgen.physical_gpus(fleetgen.scaled_fleet(size.gpus, size.seed))} GPUs"
    backfill = S.Measure(f"backfill {_span(size)}, {label} -> {backend}", unit="samples")
    steady = S.Measure(f"steady minute, {label} -> {backend}", unit="samples")
    url = ""
    for run in range(runs):
        if backend == "sqlite":
            url = _fresh_sqlite(work / "collect.db")
        else:
            assert server is not None
            url = _fresh_postgres(server, "bench_collect")
        load = os.getloadavg()[0]
        result = S.run_child(_child_args(url, prom, size.start_ts, size.end_ts, size.step_s, 0))
        backfill.add(result.payload["seconds"], result.rss_mib, result.payload["samples"])
        print(
            f"  {backfill.name} run {run + 1}: {result.payload['seconds']:.1f}s "
            f"(process {result.seconds:.1f}s), {result.payload['samples']:,} samples, "
            f"peak RSS {result.rss_mib:,.0f} MiB, load {load:.2f}",
            flush=True,
        )
    if not args.no_steady and url:
        _steady(steady, backend, size, max(runs, STEADY_RUNS_MIN), prom, server, work)
    return [backfill, steady]


def _steady(
    steady: S.Measure,
    backend: str,
    size: fleetgen.Size,
    runs: int,
    prom: str,
    server: str | None,
    work: Path,
) -> None:
    """``runs`` steady minutes, each one never stored before, as in ``collect --follow``: a
    store filled up to ``2 × runs`` steps before the end (untimed), then per run a process that
    collects one new minute (untimed, as the round before) and then the next (timed)."""
    if backend == "sqlite":
        url = _fresh_sqlite(work / "steady.db")
    else:
        assert server is not None
        url = _fresh_postgres(server, "bench_collect_steady")
    step = size.step_s
    filled = size.end_ts - 2 * runs * step
    S.run_child(_child_args(url, prom, size.start_ts, filled, step, 0))
    for run in range(runs):
        lo = filled + (2 * run + 1) * step
        result = S.run_child(_child_args(url, prom, lo, lo + step, step, step))
        steady.add(result.payload["seconds"], result.rss_mib, result.payload["samples"])
    print(f"  {steady.name}: median {steady.median_s:.2f}s", flush=True)


if __name__ == "__main__":
    main()
