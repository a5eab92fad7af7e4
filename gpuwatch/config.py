"""Configuration: a YAML file, then ``GPUWATCH_*`` environment variables on top.

Built once by the CLI (:func:`load_settings`) and passed down; nothing reads it at import time.
Every key is documented in ``docs/configuration.md`` (a test keeps the two in step).
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from gpuwatch.domain import thresholds as defaults
from gpuwatch.domain.durations import DAY_S, format_duration, parse_duration
from gpuwatch.domain.labels import LabelVariants
from gpuwatch.domain.pricing import DEFAULT_SPOT_DISCOUNT, DEFAULT_USD_PER_GPU_HOUR

CONFIG_ENV = "GPUWATCH_CONFIG"
DEFAULT_CONFIG_FILE = "gpuwatch.yaml"
ENV_PREFIX = "GPUWATCH_"

#: Short environment names for the settings people override most, besides the generic
#: ``GPUWATCH_<SECTION>__<KEY>`` form (for example ``GPUWATCH_THRESHOLDS__IDLE_UTIL_PCT``).
ENV_SHORTHANDS: dict[str, tuple[str, ...]] = {
    "GPUWATCH_CLUSTER": ("cluster",),
    "GPUWATCH_CLUSTER_PROVIDER": ("cluster_provider",),
    "GPUWATCH_DATABASE_URL": ("database_url",),
    "GPUWATCH_PROMETHEUS_URL": ("prometheus", "url"),
    "GPUWATCH_PROMETHEUS_STEP": ("prometheus", "step"),
    "GPUWATCH_PROMETHEUS_LOOKBACK": ("prometheus", "lookback"),
    "GPUWATCH_KUBECONFIG": ("kubernetes", "kubeconfig"),
    "GPUWATCH_KUBERNETES_CONTEXT": ("kubernetes", "context"),
}
_META_ENV = {CONFIG_ENV}
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_MATCHER = re.compile(r'^[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"$')


class ConfigError(Exception):
    """A configuration problem, phrased for one line on stderr."""


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


class PrometheusSettings(_Section):
    url: str = "http://127.0.0.1:9090"
    step: Duration = timedelta(seconds=60)
    lookback: Duration = timedelta(days=7)
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    timeout: Duration = timedelta(seconds=30)
    retries: int = Field(default=3, ge=0, le=20)
    page: Duration = timedelta(hours=6)
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

    @field_validator("step", "timeout", "page")
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


class KubernetesSettings(_Section):
    kubeconfig: str | None = None
    context: str | None = None
    timeout: Duration = timedelta(seconds=30)
    retries: int = Field(default=3, ge=0, le=20)
    page_size: int = Field(default=500, ge=1, le=10000)


class TeamLabels(_Section):
    team: LabelName = "team"


class Thresholds(_Section):
    idle_util_pct: float = Field(default=defaults.IDLE_UTIL_PCT, ge=0, le=100)
    low_efficiency_pct: float = Field(default=defaults.LOW_EFFICIENCY_PCT, ge=0, le=100)
    memory_full_pct: float = Field(default=defaults.MEMORY_FULL_PCT, gt=0, le=100)
    temperature_c: float = Field(default=defaults.TEMPERATURE_C, gt=0, le=150)


class ModelPrice(_Section):
    on_demand: float = Field(ge=0)
    spot: float | None = Field(default=None, ge=0)


class PricingSettings(_Section):
    default_usd_per_gpu_hour: float = Field(default=DEFAULT_USD_PER_GPU_HOUR, ge=0)
    spot_discount: float = Field(default=DEFAULT_SPOT_DISCOUNT, ge=0, lt=1)
    models: dict[str, ModelPrice] = Field(default_factory=dict)
    nodes: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)


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


class Settings(BaseSettings):
    """All of gpuwatch's settings. Build with :func:`load_settings`."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    cluster: str = Field(default="default", min_length=1, max_length=128)
    cluster_provider: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9-]{0,31}$")
    database_url: SecretStr = SecretStr("sqlite:///gpuwatch.db")
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    kubernetes: KubernetesSettings = Field(default_factory=KubernetesSettings)
    labels: TeamLabels = Field(default_factory=TeamLabels)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    pricing: PricingSettings = Field(default_factory=PricingSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    recommendations: RecommendationPolicy = Field(default_factory=RecommendationPolicy)
    storage: StorageSettings = Field(default_factory=StorageSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The merged file + environment dictionary arrives as init kwargs (load_settings).
        return (init_settings,)

    @property
    def database_url_value(self) -> str:
        """The database URL in clear, for the store only; never print it."""
        return self.database_url.get_secret_value()

    def safe_database_url(self) -> str:
        """The database URL with any password masked, for messages and logs."""
        return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", self.database_url_value)


def _set_path(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        child = target.setdefault(key, {})
        if not isinstance(child, dict):
            child = {}
            target[key] = child
        target = child
    target[path[-1]] = value


def _env_overlay(environ: dict[str, str]) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """Settings from ``GPUWATCH_*`` variables, and which variable set each dotted key."""
    overlay: dict[str, Any] = {}
    origin: dict[tuple[str, ...], str] = {}
    for name in sorted(environ):
        if not name.startswith(ENV_PREFIX) or name in _META_ENV:
            continue
        if name in ENV_SHORTHANDS:
            path = ENV_SHORTHANDS[name]
        elif "__" in name:
            path = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
        else:
            continue
        raw = environ[name]
        value: Any = yaml.safe_load(raw) if raw.strip()[:1] in "[{" else raw
        _set_path(overlay, path, value)
        origin[path] = name
    return overlay, origin


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def resolve_config_path(explicit: str | None, environ: dict[str, str]) -> Path | None:
    """``--config``, else ``$GPUWATCH_CONFIG``, else ``./gpuwatch.yaml`` if present."""
    if explicit:
        return Path(explicit)
    if environ.get(CONFIG_ENV):
        return Path(environ[CONFIG_ENV])
    default = Path(DEFAULT_CONFIG_FILE)
    return default if default.is_file() else None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {exc.start}): save it as UTF-8"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"config file {path}{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of keys")
    if "recommend" in data:  # the contract's spelling of the section
        if "recommendations" in data:
            raise ConfigError(
                f"config file {path}: recommend and recommendations are the same section; keep one"
            )
        data["recommendations"] = data.pop("recommend")
    return data


def _describe(error: dict[str, Any], path: Path | None, origin: dict[tuple[str, ...], str]) -> str:
    loc = tuple(str(part) for part in error["loc"])
    key = ".".join(loc) or "(top level)"
    source = next((origin[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in origin), None)
    where = f"environment variable {source}" if source else f"config file {path or '(defaults)'}"
    message = str(error["msg"])
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    elif "input" in error and not isinstance(error["input"], dict | list):
        shown = "***" if "header" in key or "database_url" in key else repr(error["input"])
        message = f"{message} (got {shown})"
    return f"{key} in {where}: {message}"


def load_settings(
    config_file: str | None = None,
    environ: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Settings:
    """Build the settings once: file, then environment, then explicit overrides (CLI flags)."""
    env = dict(os.environ if environ is None else environ)
    path = resolve_config_path(config_file, env)
    data = _read_yaml(path) if path else {}
    overlay, origin = _env_overlay(env)
    merged = _deep_merge(_deep_merge(data, overlay), overrides or {})
    try:
        return Settings(**merged)
    except ValidationError as exc:
        errors = exc.errors()
        first = _describe(dict(errors[0]), path, origin)
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ConfigError(f"{first}{more}") from None


def settings_as_yaml(settings: Settings) -> str:
    """The effective settings as YAML, secrets masked (``gpuwatch config show``)."""
    data = settings.model_dump(mode="json")
    data["database_url"] = settings.safe_database_url()
    data["prometheus"]["headers"] = dict.fromkeys(settings.prometheus.headers, "***")
    return yaml.safe_dump(data, sort_keys=False)
