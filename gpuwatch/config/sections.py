"""The sections of the configuration: one pydantic model per YAML mapping.

Every key is documented in ``docs/configuration.md`` (a test keeps the two in step).
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    IPvAnyNetwork,
    PlainSerializer,
    SecretStr,
    field_validator,
    model_validator,
)

from gpuwatch.domain import thresholds as defaults
from gpuwatch.domain.durations import DAY_S, format_duration, parse_duration
from gpuwatch.domain.health import HealthPolicy
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.domain.pricing import DEFAULT_SPOT_DISCOUNT, DEFAULT_USD_PER_GPU_HOUR
from gpuwatch.domain.scheduling import GANG_STALL_AFTER_S, SchedulingPolicy

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
#: Defaults of ``prometheus.max_series`` and ``prometheus.max_samples_per_request``.
MAX_SERIES = 100_000
MAX_SAMPLES_PER_REQUEST = 1_000_000
_MATCHER = re.compile(r'^[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"$')


def _duration(value: Any) -> Any:
    if isinstance(value, str):
        return parse_duration(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    return value


Duration = Annotated[
    timedelta,
    BeforeValidator(_duration),
    PlainSerializer(format_duration, return_type=str),
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _label_name(value: str) -> str:
    if not _LABEL_NAME.match(value):
        raise ValueError(f"{value!r} is not a valid Prometheus label name")
    return value


LabelName = Annotated[str, BeforeValidator(lambda v: _label_name(str(v)))]


class LabelSchema(_Section):
    """Which series labels carry each fact, in order of preference (first present wins)."""

    pod: list[LabelName] = Field(default_factory=lambda: ["exported_pod", "pod"], min_length=1)
    namespace: list[LabelName] = Field(
        default_factory=lambda: ["exported_namespace", "namespace"], min_length=1
    )
    container: list[LabelName] = Field(
        default_factory=lambda: ["exported_container", "container"], min_length=1
    )
    uuid: list[LabelName] = Field(default_factory=lambda: ["UUID", "uuid"], min_length=1)
    hostname: list[LabelName] = Field(
        default_factory=lambda: ["Hostname", "hostname"], min_length=1
    )

    def variants(self) -> LabelVariants:
        """The schema as the plain value the collector and the rule renderer take."""
        return LabelVariants(
            pod=tuple(self.pod),
            namespace=tuple(self.namespace),
            container=tuple(self.container),
            uuid=tuple(self.uuid),
            hostname=tuple(self.hostname),
        )


def _readable_file(value: str) -> str:
    path = Path(value).expanduser()
    if not path.is_file():
        raise ValueError(f"{value} is not a file")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{value} is not readable")
    return str(path)


ReadableFile = Annotated[
    str, Field(min_length=1), BeforeValidator(lambda v: _readable_file(str(v)))
]


class BasicAuth(_Section):
    """HTTP basic authentication of the Prometheus requests."""

    username: str = Field(min_length=1)
    password: SecretStr


class PrometheusSettings(_Section):
    url: str = "http://127.0.0.1:9090"
    step: Duration = timedelta(seconds=60)
    lookback: Duration = timedelta(days=7)
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    tenant: str | None = None
    bearer_token: SecretStr | None = None
    bearer_token_file: ReadableFile | None = None
    basic_auth: BasicAuth | None = None
    tls_ca_file: ReadableFile | None = None
    tls_insecure_skip_verify: bool = False
    timeout: Duration = timedelta(seconds=30)
    retries: int = Field(default=3, ge=0, le=20)
    page: Duration = timedelta(hours=6)
    max_series: int = Field(default=MAX_SERIES, ge=1)
    max_samples_per_request: int = Field(default=MAX_SAMPLES_PER_REQUEST, ge=1)
    page_timeout: Duration = timedelta(minutes=10)
    max_pages: int = Field(default=10_000, ge=1)
    max_samples_per_page: int = Field(default=1_000_000, ge=1)
    max_new_units_ratio: float = Field(default=1.0, ge=0)
    max_new_units_floor: int = Field(default=256, ge=0)
    matchers: list[str] = Field(default_factory=list)
    cluster_label: LabelName | None = None
    labels: LabelSchema = Field(default_factory=LabelSchema)

    @property
    def url_is_set(self) -> bool:
        """Whether ``url`` was configured (file, environment), not left at its default."""
        return "url" in self.model_fields_set

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^\s/]+", value):
            raise ValueError("must be an http:// or https:// URL")
        return value.rstrip("/")

    @field_validator("step", "timeout", "page", "page_timeout")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value.total_seconds() < 1:
            raise ValueError("must be at least 1s")
        return value

    @field_validator("matchers")
    @classmethod
    def _matchers(cls, value: list[str]) -> list[str]:
        for matcher in value:
            if not _MATCHER.match(matcher.strip()):
                raise ValueError(f'{matcher!r} is not a PromQL label matcher like job="dcgm"')
        return [m.strip() for m in value]

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[^\s|]+(\|[^\s|]+)*$", value):
            raise ValueError("must be a tenant ID without spaces (several: team-a|team-b)")
        return value

    @model_validator(mode="after")
    def _one_authentication(self) -> PrometheusSettings:
        given = [
            name
            for name in ("bearer_token", "bearer_token_file", "basic_auth")
            if getattr(self, name) is not None
        ]
        headers = {name.lower() for name in self.headers}
        if given and "authorization" in headers:
            given.append("headers.Authorization")
        if len(given) > 1:
            raise ValueError(f"set only one of {', '.join(given)}: each is an Authorization")
        if self.tenant is not None and "x-scope-orgid" in headers:
            raise ValueError("set the tenant in tenant or in headers.X-Scope-OrgID, not both")
        return self


class KubernetesSettings(_Section):
    kubeconfig: str | None = None
    context: str | None = None
    timeout: Duration = timedelta(seconds=30)
    retries: int = Field(default=3, ge=0, le=20)
    page_size: int = Field(default=500, ge=1, le=10000)
    list_max_pages: int = Field(default=1000, ge=1)
    list_timeout: Duration = timedelta(minutes=5)
    #: DRA drivers whose allocated devices are GPUs (NVIDIA's DRA driver: ``gpu.nvidia.com``).
    dra_gpu_drivers: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=lambda: ["gpu.nvidia.com"]
    )

    @field_validator("list_timeout")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value.total_seconds() < 1:
            raise ValueError("must be at least 1s")
        return value


class TeamLabels(_Section):
    team: LabelName = "team"


class Thresholds(_Section):
    idle_util_pct: float = Field(default=defaults.IDLE_UTIL_PCT, ge=0, le=100)
    low_efficiency_pct: float = Field(default=defaults.LOW_EFFICIENCY_PCT, ge=0, le=100)
    memory_full_pct: float = Field(default=defaults.MEMORY_FULL_PCT, gt=0, le=100)
    temperature_c: float = Field(default=defaults.TEMPERATURE_C, gt=0, le=150)


_HEALTH = HealthPolicy()


class HealthSettings(_Section):
    """When a GPU counts as degraded (:class:`gpuwatch.domain.health.HealthPolicy`)."""

    throttle_degraded_pct: float = Field(default=_HEALTH.throttle_degraded_pct, gt=0, le=100)
    sbe_burst_per_hour: int = Field(default=_HEALTH.sbe_burst_per_hour, ge=1)
    pcie_replays_per_hour: int = Field(default=_HEALTH.pcie_replays_per_hour, ge=1)
    nvlink_errors_per_hour: int = Field(default=_HEALTH.nvlink_errors_per_hour, ge=1)

    def policy(self) -> HealthPolicy:
        return HealthPolicy(**self.model_dump())


class SchedulingSettings(_Section):
    """Queues and gangs (:class:`gpuwatch.domain.scheduling.SchedulingPolicy`)."""

    gang_stall_after: Duration = timedelta(seconds=GANG_STALL_AFTER_S)

    @field_validator("gang_stall_after")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value.total_seconds() < 1:
            raise ValueError("must be at least one second")
        return value

    def policy(self) -> SchedulingPolicy:
        return SchedulingPolicy(gang_stall_after_s=int(self.gang_stall_after.total_seconds()))


class ModelPrice(_Section):
    on_demand: float = Field(ge=0)
    spot: float | None = Field(default=None, ge=0)


class PricingSettings(_Section):
    default_usd_per_gpu_hour: float = Field(default=DEFAULT_USD_PER_GPU_HOUR, ge=0)
    spot_discount: float = Field(default=DEFAULT_SPOT_DISCOUNT, ge=0, lt=1)
    models: dict[str, ModelPrice] = Field(default_factory=dict)
    nodes: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)


class ShowbackSettings(_Section):
    """How costs are shown back to teams (docs/cost-model.md#showback)."""

    #: Spread each cluster's unallocated cost over its teams by their allocated cost.
    spread_unallocated: bool = False
    #: Team → budget per UTC calendar month, $ of allocated cost (docs/cost-model.md#budgets).
    monthly_budget_usd: dict[Annotated[str, Field(min_length=1)], Annotated[float, Field(gt=0)]] = (
        Field(default_factory=dict)
    )


class AlertSettings(_Section):
    """The rendered PrometheusRule: its metadata and the alert-only thresholds."""

    name: str = Field(default="gpuwatch", pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    namespace: str = Field(default="monitoring", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    labels: dict[str, str] = Field(default_factory=dict)
    runbook_base_url: str = defaults.RUNBOOK_BASE_URL
    idle_cost_usd_per_hour: float = Field(default=defaults.IDLE_COST_USD_PER_HOUR, ge=0)
    exporter_namespaces: list[str] = Field(default_factory=lambda: [*defaults.EXPORTER_NAMESPACES])


class RecommendationPolicy(_Section):
    """Triggers of contract section 5 (see docs/recommendations)."""

    @model_validator(mode="before")
    @classmethod
    def _replaced_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and "min_observed_gpu_hours" in data:
            raise ValueError(
                "min_observed_gpu_hours was replaced by reclaim_min_observed_hours "
                "(hours observed before reclaim_idle fires, default 4)"
            )
        return data

    reclaim_idle_fraction: float = Field(default=defaults.RECLAIM_IDLE_FRACTION, gt=0, le=1)
    share_max_util_pct: float = Field(default=defaults.SHARE_MAX_UTIL_PCT, ge=0, le=100)
    max_share_replicas: int = Field(default=defaults.MAX_SHARE_REPLICAS, ge=2, le=64)
    cheaper_max_util_pct: float = Field(default=defaults.CHEAPER_MAX_UTIL_PCT, ge=0, le=100)
    memory_headroom: float = Field(default=defaults.MEMORY_HEADROOM, ge=1, le=4)
    memory_risk_pct: float = Field(default=defaults.MEMORY_RISK_PCT, gt=0, le=100)
    busy_quantile: float = Field(default=defaults.BUSY_QUANTILE, gt=0, le=1)
    util_quantile: float = Field(default=defaults.UTIL_QUANTILE, gt=0, le=1)
    memory_quantile: float = Field(default=defaults.MEMORY_QUANTILE, gt=0, le=1)
    high_confidence_hours: float = Field(default=defaults.HIGH_CONFIDENCE_HOURS, ge=0)
    medium_confidence_hours: float = Field(default=defaults.MEDIUM_CONFIDENCE_HOURS, ge=0)
    replica_target_util: float = Field(default=defaults.REPLICA_TARGET_UTIL, gt=0, le=1)
    replica_swing_ratio: float = Field(default=defaults.REPLICA_SWING_RATIO, ge=1)
    reclaim_min_observed_hours: float = Field(default=defaults.RECLAIM_MIN_OBSERVED_HOURS, ge=0)
    cheaper_max_projected_util_pct: float = Field(
        default=defaults.CHEAPER_MAX_PROJECTED_UTIL_PCT, gt=0, le=100
    )
    cheaper_models: list[str] = Field(default_factory=list)


class StorageSettings(_Section):
    """Retention of raw samples and hourly roll-ups, and what reports read (docs/storage.md)."""

    raw_retention: Duration = timedelta(days=35)
    hourly_retention: Duration = timedelta(days=400)
    resolution: Literal["auto", "raw", "hourly"] = "auto"

    @field_validator("raw_retention", "hourly_retention")
    @classmethod
    def _at_least_a_day(cls, value: timedelta) -> timedelta:
        if value.total_seconds() < DAY_S:
            raise ValueError("must be at least 1d")
        return value


_HEADER_NAME = r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$"


#: Node labels that name a node pool on Karpenter, GKE, EKS managed node groups and AKS.
NODE_POOL_LABELS = (
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
)


#: The filter bar's preset windows (:data:`gpuwatch.app.windows.PRESETS`).
WarmWindow = Literal["24h", "3d", "7d", "14d", "30d", "mtd", "last-month"]


class DashboardSettings(_Section):
    """Who may open the dashboard: nobody is asked (none), HTTP basic, or a trusted proxy."""

    auth: Literal["none", "basic", "proxy"] = "none"
    username: str | None = Field(default=None, min_length=1, max_length=256)
    password: SecretStr | None = None
    proxy_user_header: str = Field(default="X-Forwarded-User", pattern=_HEADER_NAME)
    trusted_proxies: list[IPvAnyNetwork] = Field(default_factory=list)
    #: Processes serving the dashboard (``serve --workers``); more than 1 runs gunicorn.
    workers: int = Field(default=1, ge=1, le=64)
    #: Threads of each process.
    threads: int = Field(default=8, ge=1, le=64)
    #: Seconds between each process's checks of the store for new data (docs/dashboard.md).
    refresh_s: float = Field(default=60.0, ge=1.0, le=86_400.0)
    #: Node labels naming a node's pool, first present wins (Cost over time: "node pool").
    node_pool_labels: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=lambda: [*NODE_POOL_LABELS]
    )
    #: Pod labels offered by Cost over time's "aggregate by" (``app.kubernetes.io/part-of``).
    pod_labels: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    #: Windows whose Overview (recommendations included) each data version's warm-up computes
    #: ahead, beside the default view and the windows asked for lately (docs/dashboard.md).
    warm_windows: list[WarmWindow] = Field(default_factory=list)

    @model_validator(mode="after")
    def _complete(self) -> DashboardSettings:
        password = self.password.get_secret_value() if self.password else ""
        if self.auth == "basic" and not (self.username and password):
            raise ValueError(
                "auth basic needs dashboard.username and dashboard.password "
                "(GPUWATCH_DASHBOARD__USERNAME, GPUWATCH_DASHBOARD__PASSWORD)"
            )
        if self.auth == "proxy" and not self.trusted_proxies:
            raise ValueError(
                "auth proxy needs dashboard.trusted_proxies: the addresses or CIDRs of the proxy"
            )
        return self


class CollectSettings(_Section):
    """The leader lease of ``collect`` replicas (docs/deploy.md#running-two-collectors)."""

    lease_ttl: Duration = timedelta(seconds=45)
    lease_poll: Duration = timedelta(seconds=5)
    holder: str | None = Field(default=None, min_length=1, max_length=253)

    @field_validator("lease_ttl")
    @classmethod
    def _ttl(cls, value: timedelta) -> timedelta:
        if value.total_seconds() < 2:
            raise ValueError("must be at least 2s")
        return value

    @field_validator("lease_poll")
    @classmethod
    def _poll(cls, value: timedelta) -> timedelta:
        if value.total_seconds() < 1:
            raise ValueError("must be at least 1s")
        return value

    @model_validator(mode="after")
    def _poll_within_ttl(self) -> CollectSettings:
        if self.lease_poll >= self.lease_ttl:
            raise ValueError("lease_poll must be shorter than lease_ttl")
        return self
