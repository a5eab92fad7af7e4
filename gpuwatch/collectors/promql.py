"""The one PromQL catalogue of the collector, with selectors built from the configured schema.

Every query is a ``*_over_time`` of a raw range selector evaluated on the ``step`` grid: the value
at grid instant ``t`` only ever comes from samples scraped in ``(t - step, t]``. A series that
stops is therefore not extended by Prometheus's 5-minute lookback, and a gap in scraping stays a
gap ("no data"), never a repeated or zero value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwatch.collectors import intervals


@dataclass(frozen=True)
class FieldQuery:
    """One stored field and the DCGM metric it is read from."""

    field: str
    metric: str
    over_time: str
    unit: str
    #: Read on the coarser capacity grid (:meth:`Catalogue.capacity_step_s`): the framebuffer
    #: total of a GPU unit is a constant of its hardware and MIG profile, and reading its three
    #: parts every step tripled what Prometheus evaluates and sends for one number.
    capacity: bool = False
    #: Only non-zero readings are asked for (``... != 0``): the field is an event code or an
    #: error count, 0 on nearly every GPU at nearly every step; a missing reading is no event.
    nonzero_only: bool = False
    #: More metrics read into the same field: alternatives (``combine="or"``: the first present
    #: wins, as when a metric was renamed) or parts added together (``combine="sum"``: any
    #: number of ``last_over_time`` readings, else two parts, each counted where the other is
    #: absent).
    also: tuple[str, ...] = ()
    combine: str = "or"
    #: A counter: the stored value is its increase over the step, ``last - last one step
    #: earlier``, or the last reading where the counter went down (it was reset). The first
    #: step a series is seen has no increase (no data, never 0).
    counter: bool = False
    #: Read once per coarse interval (:mod:`gpuwatch.collectors.intervals`): ``"count"``, the
    #: increase over each interval; ``"mean"``, the average over each whole block.
    coarse: str = ""

    @property
    def metrics(self) -> tuple[str, ...]:
        return (self.metric, *self.also)


#: Stored fields, the DCGM metric behind each, how a step's raw samples are reduced, and the unit.
FIELDS: tuple[FieldQuery, ...] = (
    FieldQuery("util_prof", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "avg_over_time", "ratio 0-1"),
    FieldQuery("util_dev_pct", "DCGM_FI_DEV_GPU_UTIL", "avg_over_time", "percent 0-100"),
    FieldQuery("fb_used_mib", "DCGM_FI_DEV_FB_USED", "max_over_time", "MiB"),
    FieldQuery("fb_used_last_mib", "DCGM_FI_DEV_FB_USED", "last_over_time", "MiB", True),
    FieldQuery("fb_free_mib", "DCGM_FI_DEV_FB_FREE", "last_over_time", "MiB", True),
    FieldQuery("fb_reserved_mib", "DCGM_FI_DEV_FB_RESERVED", "last_over_time", "MiB", True),
    FieldQuery("power_w", "DCGM_FI_DEV_POWER_USAGE", "avg_over_time", "W"),
    FieldQuery("temp_c", "DCGM_FI_DEV_GPU_TEMP", "max_over_time", "degrees Celsius"),
    FieldQuery(
        "xid", "DCGM_FI_DEV_XID_ERRORS", "max_over_time", "last XID code", nonzero_only=True
    ),
    # Efficiency (profiling fields; absent on GPUs without profiling support: no data).
    FieldQuery("sm_active_ratio", "DCGM_FI_PROF_SM_ACTIVE", "avg_over_time", "ratio 0-1"),
    FieldQuery("sm_occupancy_ratio", "DCGM_FI_PROF_SM_OCCUPANCY", "avg_over_time", "ratio 0-1"),
    FieldQuery(
        "tensor_active_ratio", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "avg_over_time", "ratio 0-1"
    ),
    FieldQuery("dram_active_ratio", "DCGM_FI_PROF_DRAM_ACTIVE", "avg_over_time", "ratio 0-1"),
    FieldQuery("sm_clock_mhz", "DCGM_FI_DEV_SM_CLOCK", "avg_over_time", "MHz"),
    FieldQuery(
        "pcie_bytes_per_s",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "avg_over_time",
        "bytes per second, TX + RX, interval mean",
        also=("DCGM_FI_PROF_PCIE_RX_BYTES",),
        combine="sum",
        coarse="mean",
    ),
    FieldQuery(
        "nvlink_bytes_per_s",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "avg_over_time",
        "bytes per second, TX + RX, interval mean",
        also=("DCGM_FI_PROF_NVLINK_RX_BYTES",),
        combine="sum",
        coarse="mean",
    ),
    # Health.
    FieldQuery(
        "clock_events",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "last_over_time",
        "bitmask (gpuwatch.domain.health.CLOCK_EVENT_BITS)",
        also=("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",),
    ),
    FieldQuery(
        "ecc_sbe_count",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "last_over_time",
        "correctable ECC errors in the interval",
        nonzero_only=True,
        also=("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",),
        counter=True,
        coarse="count",
    ),
    FieldQuery(
        "ecc_dbe_count",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "last_over_time",
        "uncorrectable ECC errors in the interval",
        nonzero_only=True,
        also=("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",),
        counter=True,
        coarse="count",
    ),
    FieldQuery(
        "pcie_replay_count",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "last_over_time",
        "PCIe replays in the interval",
        nonzero_only=True,
        counter=True,
        coarse="count",
    ),
    FieldQuery(
        "nvlink_error_count",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "last_over_time",
        "NVLink CRC, replay and recovery errors in the interval",
        nonzero_only=True,
        also=(
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        ),
        combine="sum",
        counter=True,
        coarse="count",
    ),
    FieldQuery(
        "row_remap_failure",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "max_over_time",
        "1 when row remapping failed",
        nonzero_only=True,
    ),
)
#: The capacity grid's step, in seconds, where the collection step is shorter.
CAPACITY_STEP_S = 900


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Catalogue:
    """PromQL for one cluster: extra matchers and an optional cluster label from the config."""

    matchers: tuple[str, ...] = ()
    cluster_label: str | None = None
    cluster: str = "default"
    fields: tuple[FieldQuery, ...] = field(default=FIELDS)

    def selector(self, metric: str) -> str:
        """``METRIC{matchers}``.

        >>> Catalogue(("job=\\"dcgm\\"",), "k8s_cluster", "prod").selector("DCGM_FI_DEV_GPU_UTIL")
        'DCGM_FI_DEV_GPU_UTIL{job="dcgm",k8s_cluster="prod"}'
        """
        parts = list(self.matchers)
        if self.cluster_label:
            parts.append(f"{self.cluster_label}={_quote(self.cluster)}")
        return f"{metric}{{{','.join(parts)}}}" if parts else metric

    def selector_any(self, metrics: tuple[str, ...]) -> str:
        """One selector of several metric names (``{__name__=~"A|B",matchers}``).

        >>> Catalogue(("job=\\"dcgm\\"",)).selector_any(("A", "B"))
        '{__name__=~"A|B",job="dcgm"}'
        """
        if len(metrics) == 1:
            return self.selector(metrics[0])
        parts = [f"__name__=~{_quote('|'.join(metrics))}", *self.matchers]
        if self.cluster_label:
            parts.append(f"{self.cluster_label}={_quote(self.cluster)}")
        return "{" + ",".join(parts) + "}"

    def _reading(
        self, query: FieldQuery, window: str, offset: str = "", over_time: str = ""
    ) -> str:
        """The field's reading over a range ``window`` (``59999ms``), ``offset`` earlier, by
        ``over_time`` (the field's own when empty)."""
        back = f" offset {offset}" if offset else ""
        over_time = over_time or query.over_time
        if query.combine == "sum" and query.also:
            if query.over_time == "last_over_time":  # keeps the metric name: no clash
                inner = f"{over_time}({self.selector_any(query.metrics)}[{window}]{back})"
                return f"sum without () ({inner})"
            first, second = (
                f"{over_time}({self.selector(m)}[{window}]{back})" for m in query.metrics
            )
            return f"({first} + {second}) or {first} or {second}"
        readings = [f"{over_time}({self.selector(m)}[{window}]{back})" for m in query.metrics]
        return " or ".join(readings)

    def window_query(
        self,
        query: FieldQuery,
        step_s: int,
        lookback_s: int | None = None,
        first_s: int | None = None,
    ) -> str:
        """The query evaluated at each grid instant ``t``: samples in ``(t - step, t]`` only.

        The window is one millisecond short of ``step`` so that a sample scraped exactly on a grid
        instant belongs to that instant alone. A counter's value is its increase since
        ``t - step``: ``now - before`` where ``before <= now``, else ``now`` (it went down: a
        reset), ``before`` being its last reading in the ``lookback_s`` (``step_s`` when None)
        before ``t - step``, else, for a series seen first in the window, its lowest reading there
        (for a sum of counters: its reading in the window's first ``first_s``), as
        ``A - (B <= A) or A``.

        >>> Catalogue().window_query(FIELDS[0], 60)
        'avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[59999ms])'
        >>> Catalogue().window_query(FIELDS[8], 60)
        'max_over_time(DCGM_FI_DEV_XID_ERRORS[59999ms]) != 0'
        >>> by_name = {q.field: q for q in FIELDS}
        >>> Catalogue().window_query(by_name["clock_events"], 60)  # doctest: +NORMALIZE_WHITESPACE
        'last_over_time(DCGM_FI_DEV_CLOCKS_EVENT_REASONS[59999ms])
         or last_over_time(DCGM_FI_DEV_CLOCK_THROTTLE_REASONS[59999ms])'
        >>> Catalogue().window_query(FieldQuery("n", "C", "last_over_time", "1", counter=True), 300,
        ...                          900)  # doctest: +NORMALIZE_WHITESPACE
        'last_over_time(C[299999ms]) - ((last_over_time(C[899999ms] offset 300s)
         or min_over_time(C[299999ms])) <= last_over_time(C[299999ms]))
         or last_over_time(C[299999ms])'
        """
        window = f"{step_s * 1000 - 1}ms"
        if query.counter:
            back = f"{(lookback_s or step_s) * 1000 - 1}ms"
            now = self._reading(query, window)
            before = self._reading(query, back, f"{step_s}s")
            first = self._first(query, step_s, first_s or step_s)
            if query.also:
                now, before, first = f"({now})", f"({before})", f"({first})"
            promql = f"{now} - (({before} or {first}) <= {now}) or {now}"
            return f"({promql}) != 0" if query.nonzero_only else promql
        promql = self._reading(query, window)
        if query.nonzero_only:
            return f"({promql}) != 0" if len(query.metrics) > 1 else f"{promql} != 0"
        return promql

    def _first(self, query: FieldQuery, step_s: int, first_s: int) -> str:
        """A counter's reading to count from where it has none before the window of ``step_s``:
        its lowest in the window; for a sum of counters (whose minima Prometheus cannot tell
        apart), its reading in the window's first ``first_s``."""
        if query.combine == "sum" and query.also:
            offset = f"{step_s - first_s}s" if step_s > first_s else ""
            return self._reading(query, f"{first_s * 1000 - 1}ms", offset)
        return self._reading(query, f"{step_s * 1000 - 1}ms", over_time="min_over_time")

    def series_count_query(self, span_s: int) -> str:
        """How many DCGM series read every step have a reading in the last ``span_s``, one per
        label set whatever the metric (GPU unit and holder): an instant query.

        >>> Catalogue(fields=FIELDS[:1]).series_count_query(3600)
        'count(last_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[3600s]))'
        """
        read = [f for f in self.fields if not (f.capacity or f.nonzero_only or f.coarse)]
        inner = " or ".join(f"last_over_time({self.selector(f.metric)}[{span_s}s])" for f in read)
        return f"count({inner})"

    def queries(self, step_s: int) -> dict[str, str]:
        """Field name → PromQL of the fields read every ``step_s``, for one page."""
        return {
            q.field: self.window_query(q, step_s)
            for q in self.fields
            if not (q.capacity or q.coarse)
        }

    @staticmethod
    def capacity_step_s(step_s: int) -> int:
        """The capacity grid's step: :data:`CAPACITY_STEP_S` rounded up to a whole number of
        collection steps, and never shorter than one.

        >>> [Catalogue.capacity_step_s(step_s) for step_s in (60, 120, 3600)]
        [900, 960, 3600]
        """
        return max(step_s, -(-CAPACITY_STEP_S // step_s) * step_s)

    def capacity_queries(self, step_s: int) -> dict[str, str]:
        """Field name → PromQL of the capacity fields, evaluated every :meth:`capacity_step_s`:
        the value at instant ``T`` is the last reading in ``(T - capacity step, T]``."""
        coarse = self.capacity_step_s(step_s)
        return {q.field: self.window_query(q, coarse) for q in self.fields if q.capacity}

    def interval_requests(
        self, first_ts: int, last_ts: int, step_s: int
    ) -> list[tuple[str, str, int, int, int]]:
        """(field, PromQL, first instant, last instant, step) of the coarse-interval fields of
        the page whose instants are ``first_ts..last_ts`` (:mod:`gpuwatch.collectors.intervals`):
        per field one range query over whole blocks, and one single-instant query for each
        shorter interval at an end of the page (counts only)."""
        coarse = self.capacity_step_s(step_s)
        out: list[tuple[str, str, int, int, int]] = []
        for q in self.fields:
            if q.coarse == intervals.MEAN:
                blocks = intervals.mean_plan(first_ts, last_ts, step_s, coarse)
                if blocks is not None:
                    out.append((q.field, self.window_query(q, coarse), *blocks, coarse))
            elif q.coarse == intervals.COUNT:
                whole, partial = intervals.count_plan(first_ts, last_ts, step_s, coarse)
                if whole is not None:
                    promql = self.window_query(q, coarse, coarse, step_s)
                    out.append((q.field, promql, *whole, coarse))
                for end, length in partial:
                    promql = self.window_query(q, length, coarse, step_s)
                    out.append((q.field, promql, end, end, coarse))
        return out
