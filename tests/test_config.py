"""Configuration: file + environment, errors that name the key and the file, secrets masked."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import BaseModel

from gpuwatch.config import ConfigError, Settings, load_settings, settings_as_yaml

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "gpuwatch.yaml"
    path.write_text(text)
    return str(path)


def test_defaults_match_the_contract() -> None:
    settings = load_settings(environ={})
    assert settings.cluster == "default"
    assert settings.database_url_value == "sqlite:///gpuwatch.db"
    assert settings.prometheus.url == "http://127.0.0.1:9090"
    assert settings.prometheus.step == timedelta(seconds=60)
    assert settings.prometheus.lookback == timedelta(days=7)
    assert settings.kubernetes.kubeconfig is None
    assert settings.labels.team == "team"
    assert settings.thresholds.idle_util_pct == 5
    assert settings.pricing.default_usd_per_gpu_hour == 2.0
    assert settings.pricing.spot_discount == 0.6


def test_file_values_are_read(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "cluster: prod\nprometheus:\n  step: 30s\n  lookback: 36h\n"
        'pricing:\n  models:\n    "NVIDIA A100-SXM4-80GB": {on_demand: 4.10, spot: 1.60}\n',
    )
    settings = load_settings(path, environ={})
    assert settings.cluster == "prod"
    assert settings.prometheus.step == timedelta(seconds=30)
    assert settings.prometheus.lookback == timedelta(hours=36)
    assert settings.pricing.models["NVIDIA A100-SXM4-80GB"].spot == 1.60


def test_environment_wins_over_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "cluster: from-file\nthresholds:\n  idle_util_pct: 3\n")
    env = {
        "GPUWATCH_CLUSTER": "from-env",
        "GPUWATCH_THRESHOLDS__IDLE_UTIL_PCT": "9",
        "GPUWATCH_PROMETHEUS_URL": "http://prom:9090/",
    }
    settings = load_settings(path, environ=env)
    assert settings.cluster == "from-env"
    assert settings.thresholds.idle_util_pct == 9
    assert settings.prometheus.url == "http://prom:9090"


def test_config_file_comes_from_the_environment_variable(tmp_path: Path) -> None:
    path = _write(tmp_path, "cluster: via-env-file\n")
    assert load_settings(environ={"GPUWATCH_CONFIG": path}).cluster == "via-env-file"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "thresholds:\n  idle_util_pct: 150\n",
            r"^thresholds\.idle_util_pct in config file .*gpuwatch\.yaml: .*less than or equal",
        ),
        (
            "thresholds:\n  idel_util_pct: 5\n",
            r"^thresholds\.idel_util_pct in config file .*: unknown key",
        ),
        (
            "prometheus:\n  step: soon\n",
            r"^prometheus\.step in config file .*: .*invalid duration 'soon'",
        ),
        (
            "prometheus:\n  labels:\n    pod: ['exported pod']\n",
            r"^prometheus\.labels\.pod\.0 in config file .*not a valid Prometheus label name",
        ),
        (
            "prometheus:\n  matchers: ['job=dcgm']\n",
            r"^prometheus\.matchers in config file .*PromQL label matcher",
        ),
        ("bogus: 1\n", r"^bogus in config file .*: unknown key"),
        ("pricing:\n  spot_discount: 1.5\n", r"^pricing\.spot_discount in config file"),
        (
            "dashboard:\n  refresh_s: 0\n",
            r"^dashboard\.refresh_s in config file .*greater than or equal to 1",
        ),
        (
            "dashboard:\n  warm_windows: [7d, 5d]\n",
            r"^dashboard\.warm_windows\.1 in config file .*: Input should be '24h'",
        ),
    ],
)
def test_bad_values_name_the_key_and_the_file(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert re.search(expected, str(info.value)), str(info.value)
    assert "\n" not in str(info.value)


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(
        ConfigError, match=r"prometheus\.step in environment variable GPUWATCH_PROMETHEUS_STEP"
    ):
        load_settings(environ={"GPUWATCH_PROMETHEUS_STEP": "never"})


def test_invalid_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "cluster: a\nprometheus: [unclosed\n")
    with pytest.raises(ConfigError, match=r"gpuwatch\.yaml at line \d+"):
        load_settings(path, environ={})


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read config file .*nope\.yaml"):
        load_settings(str(tmp_path / "nope.yaml"), environ={})


def test_secrets_are_never_shown(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "database_url: postgresql+psycopg://gw:hunter2@db/gw\n"
        "prometheus:\n  headers:\n    Authorization: Bearer sekrit\n",
    )
    settings = load_settings(path, environ={})
    shown = settings_as_yaml(settings) + repr(settings) + str(settings)
    assert "hunter2" not in shown
    assert "sekrit" not in shown
    assert settings.safe_database_url() == "postgresql+psycopg://gw:***@db/gw"
    assert settings.prometheus.headers["Authorization"].get_secret_value() == "Bearer sekrit"


def test_bad_secret_value_is_not_echoed(tmp_path: Path) -> None:
    path = _write(tmp_path, "database_url: 12\nprometheus:\n  headers:\n    X: [1]\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ={})
    assert "[1]" not in str(info.value)


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(_keys(annotation, f"{prefix}{name}."))
        else:
            keys.append(f"{prefix}{name}")
    return keys


def test_recommend_is_the_contract_spelling_of_recommendations(tmp_path: Path) -> None:
    path = _write(tmp_path, "cluster_provider: aws\nrecommend:\n  replica_target_util: 0.5\n"
                            "  cheaper_models: [NVIDIA L4]\n")  # fmt: skip
    settings = load_settings(path, environ={})
    assert settings.cluster_provider == "aws"
    assert settings.recommendations.replica_target_util == 0.5
    assert settings.recommendations.cheaper_models == ["NVIDIA L4"]
    both = _write(tmp_path, "recommend: {}\nrecommendations: {}\n")
    with pytest.raises(ConfigError, match=r"gpuwatch\.yaml: recommend and recommendations"):
        load_settings(both, environ={})


def test_a_provider_id_is_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^cluster_provider in config file .*gpuwatch\.yaml"):
        load_settings(_write(tmp_path, "cluster_provider: Amazon Web Services\n"), environ={})


def test_a_config_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "gpuwatch.yaml"
    path.write_bytes(b"cluster: caf\xe9\n")  # Latin-1
    with pytest.raises(ConfigError, match=r"gpuwatch\.yaml is not UTF-8 text \(byte 12\)"):
        load_settings(str(path), environ={})


def test_every_setting_is_documented() -> None:
    documented = set(re.findall(r"^\| `([a-z_.]+)` \|", DOCS.read_text(), flags=re.MULTILINE))
    missing = [key for key in _keys(Settings) if key not in documented]
    assert missing == []
    stale = [key for key in documented if "." in key and key not in _keys(Settings)]
    assert stale == []


def test_a_replaced_key_says_what_replaced_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "recommendations:\n  min_observed_gpu_hours: 24\n")
    with pytest.raises(ConfigError, match=r"replaced by reclaim_min_observed_hours"):
        load_settings(path, environ={})


def test_the_cluster_provider_has_a_short_environment_variable() -> None:
    assert load_settings(environ={"GPUWATCH_CLUSTER_PROVIDER": "gcp"}).cluster_provider == "gcp"
