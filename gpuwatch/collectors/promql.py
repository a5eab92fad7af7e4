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


#: Stored fields, the DCGM metric behind each, how a step's raw samples are reduced, and the unit.
FIELDS: tuple[FieldQuery, ...] = (
    FieldQuery("util_prof", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "avg_over_time", "ratio 0-1"),
    FieldQuery("util_dev_pct", "DCGM_FI_DEV_GPU_UTIL", "avg_over_time", "percent 0-100"),
    FieldQuery("fb_used_mib", "DCGM_FI_DEV_FB_USED", "max_over_time", "MiB"),
    FieldQuery("fb_used_last_mib", "DCGM_FI_DEV_FB_USED", "last_over_time", "MiB"),
    FieldQuery("fb_free_mib", "DCGM_FI_DEV_FB_FREE", "last_over_time", "MiB"),
    FieldQuery("fb_reserved_mib", "DCGM_FI_DEV_FB_RESERVED", "last_over_time", "MiB"),
    FieldQuery("power_w", "DCGM_FI_DEV_POWER_USAGE", "avg_over_time", "W"),
    FieldQuery("temp_c", "DCGM_FI_DEV_GPU_TEMP", "max_over_time", "degrees Celsius"),
    FieldQuery("xid", "DCGM_FI_DEV_XID_ERRORS", "max_over_time", "last XID code"),
)


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
        """
        return f"{query.over_time}({self.selector(query.metric)}[{step_s * 1000 - 1}ms])"

    def queries(self, step_s: int) -> dict[str, str]:
        """Field name → PromQL, for one page of collection."""
        return {q.field: self.window_query(q, step_s) for q in self.fields}
