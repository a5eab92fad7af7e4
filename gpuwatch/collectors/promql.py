"""The one PromQL catalogue of the collector, with selectors built from the configured schema.

Every query is a ``*_over_time`` of a raw range selector evaluated on the ``step`` grid: the value
at grid instant ``t`` only ever comes from samples scraped in ``(t - step, t]``. A series that
stops is therefore not extended by Prometheus's 5-minute lookback, and a gap in scraping stays a
gap ("no data"), never a repeated or zero value.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
    #: Only non-zero readings are asked for (``... != 0``): the field is an event code, 0 on
    #: nearly every GPU at nearly every step, and a missing reading reads as 0 downstream.
    nonzero_only: bool = False


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

    def window_query(self, query: FieldQuery, step_s: int) -> str:
        """The query evaluated at each grid instant ``t``: samples in ``(t - step, t]`` only.

        The window is one millisecond short of ``step`` so that a sample scraped exactly on a grid
        instant belongs to that instant alone.

        >>> Catalogue().window_query(FIELDS[0], 60)
        'avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[59999ms])'
        >>> Catalogue().window_query(FIELDS[-1], 60)
        'max_over_time(DCGM_FI_DEV_XID_ERRORS[59999ms]) != 0'
        """
        promql = f"{query.over_time}({self.selector(query.metric)}[{step_s * 1000 - 1}ms])"
        return f"{promql} != 0" if query.nonzero_only else promql

    def series_count_query(self, span_s: int) -> str:
        """How many DCGM series read every step have a reading in the last ``span_s``, one per
        label set whatever the metric (GPU unit and holder): an instant query.

        >>> Catalogue(fields=FIELDS[:1]).series_count_query(3600)
        'count(last_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[3600s]))'
        """
        read = [f for f in self.fields if not (f.capacity or f.nonzero_only)]
        inner = " or ".join(f"last_over_time({self.selector(f.metric)}[{span_s}s])" for f in read)
        return f"count({inner})"

    def queries(self, step_s: int) -> dict[str, str]:
        """Field name → PromQL of the fields read every ``step_s``, for one page."""
        return {q.field: self.window_query(q, step_s) for q in self.fields if not q.capacity}

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
