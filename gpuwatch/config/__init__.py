"""Configuration: a YAML file, then ``GPUWATCH_*`` environment variables on top.

Built once by the CLI (:func:`load_settings`) and passed down; nothing reads it at import time.
Every key is documented in ``docs/configuration.md`` (a test keeps the two in step). The
sections' models live in :mod:`gpuwatch.config.sections`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from gpuwatch.config.sections import (
    AlertSettings,
    CollectSettings,
    DashboardSettings,
    Duration,
    HealthSettings,
    KubernetesSettings,
    LabelName,
    LabelSchema,
    ModelPrice,
    PricingSettings,
    PrometheusSettings,
    RecommendationPolicy,
    SchedulingSettings,
    ShowbackSettings,
    StorageSettings,
    TeamLabels,
    Thresholds,
)
from gpuwatch.domain.redact import MASK, mask_text, mask_url, url_password

__all__ = [
    "AlertSettings",
    "CollectSettings",
    "ConfigError",
    "DashboardSettings",
    "Duration",
    "KubernetesSettings",
    "LabelName",
    "LabelSchema",
    "ModelPrice",
    "PricingSettings",
    "PrometheusSettings",
    "RecommendationPolicy",
    "SchedulingSettings",
    "Settings",
    "ShowbackSettings",
    "StorageSettings",
    "TeamLabels",
    "Thresholds",
    "load_settings",
    "resolve_config_path",
    "settings_as_yaml",
]

CONFIG_ENV = "GPUWATCH_CONFIG"
DEFAULT_CONFIG_FILE = "gpuwatch.yaml"
ENV_PREFIX = "GPUWATCH_"
DATABASE_URL_ENV = "GPUWATCH_DATABASE_URL"

#: Short environment names for the settings people override most, besides the generic
#: ``GPUWATCH_<SECTION>__<KEY>`` form (for example ``GPUWATCH_THRESHOLDS__IDLE_UTIL_PCT``).
ENV_SHORTHANDS: dict[str, tuple[str, ...]] = {
    "GPUWATCH_CLUSTER": ("cluster",),
    "GPUWATCH_CLUSTER_PROVIDER": ("cluster_provider",),
    DATABASE_URL_ENV: ("database_url",),
    "GPUWATCH_PROMETHEUS_URL": ("prometheus", "url"),
    "GPUWATCH_PROMETHEUS_STEP": ("prometheus", "step"),
    "GPUWATCH_PROMETHEUS_LOOKBACK": ("prometheus", "lookback"),
    "GPUWATCH_KUBECONFIG": ("kubernetes", "kubeconfig"),
    "GPUWATCH_KUBERNETES_CONTEXT": ("kubernetes", "context"),
}
_META_ENV = {CONFIG_ENV}


class ConfigError(Exception):
    """A configuration problem, phrased for one line on stderr."""


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
    health: HealthSettings = Field(default_factory=HealthSettings)
    scheduling: SchedulingSettings = Field(default_factory=SchedulingSettings)
    pricing: PricingSettings = Field(default_factory=PricingSettings)
    showback: ShowbackSettings = Field(default_factory=ShowbackSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    recommendations: RecommendationPolicy = Field(default_factory=RecommendationPolicy)
    storage: StorageSettings = Field(default_factory=StorageSettings)
    collect: CollectSettings = Field(default_factory=CollectSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)

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
        return mask_url(self.database_url_value)

    def secret_values(self) -> list[str]:
        """Every secret the settings hold, to mask wherever text leaves the process: each
        ``SecretStr`` (database URL, headers, passwords) and the password of every URL."""
        return sorted(_secrets_in(self))


def _secrets_in(value: Any) -> set[str]:
    if isinstance(value, SecretStr):
        secret = value.get_secret_value()
        password = url_password(secret)
        if "://" in secret:
            return {password} if password else set()
        # "Bearer <token>": the token alone may travel too.
        return {secret, secret.partition(" ")[2]} - {""}
    if isinstance(value, str):
        password = url_password(value)
        return {password} if password else set()
    if isinstance(value, BaseModel):
        value = dict(value)
    if isinstance(value, dict):
        return {found for item in value.values() for found in _secrets_in(item)}
    if isinstance(value, list | tuple):
        return {found for item in value for found in _secrets_in(item)}
    return set()


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
        secret = any(word in key for word in ("header", "database_url", "password", "token"))
        shown = MASK if secret else mask_text(repr(error["input"]))
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
    data["prometheus"]["url"] = mask_url(settings.prometheus.url)
    data["prometheus"]["headers"] = dict.fromkeys(settings.prometheus.headers, MASK)
    if settings.dashboard.password is not None:
        data["dashboard"]["password"] = MASK
    text = yaml.safe_dump(data, sort_keys=False)
    # SecretStr fields dump as "**********"; any secret elsewhere is masked as text.
    return mask_text(text, settings.secret_values())
