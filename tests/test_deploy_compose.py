"""docker-compose.yml and the Dockerfile, checked without Docker.

Static checks: the compose file validates against the compose specification, every gpuwatch
service runs a real ``gpuwatch`` command with known options, services start in order, and the
files it mounts are wired to each other. Then the same wiring runs as processes on 127.0.0.1:
the simulated exporter and API server, a real Prometheus with the compose scrape configuration
and rules, ``db upgrade``, ``collect --follow`` and ``serve``, with the compose environment.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import click
import pytest
import sqlalchemy as sa
import yaml
from click.testing import CliRunner

from gpuwatch import __version__
from gpuwatch.cli.main import cli
from gpuwatch.config import load_settings
from gpuwatch.simulate.apiserver import kubeconfig_for
from gpuwatch.store import repository
from gpuwatch.store.engine import make_engine
from tests.support.postgres import free_port
from tests.support.prometheus import PrometheusProcess, wait_until

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
GPUWATCH_IMAGE = f"gpuwatch:{__version__}"
_INTERPOLATION = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")
ENV_EXAMPLE = ROOT / ".env.example"
#: What a user puts in .env: every variable .env.example names, set.
DOT_ENV = {"POSTGRES_PASSWORD": "pg-from-dot-env", "GRAFANA_ADMIN_PASSWORD": "gf-from-dot-env"}


class MissingVariable(Exception):
    """Compose would refuse to start: a required variable is unset or empty."""


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text(encoding="utf-8")))


def _services() -> dict[str, dict[str, Any]]:
    return dict(_compose()["services"])


def _gpuwatch_services() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in _services().items() if s.get("image") == GPUWATCH_IMAGE}


def _interpolate(value: str, env: dict[str, str] | None = None) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` (default: .env set)."""
    env = DOT_ENV if env is None else env

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match[1], match[2], match[3]
        if env.get(name):
            return env[name]
        if kind == "?":
            raise MissingVariable(f"{name}: {rest}")
        return rest if kind == "-" else ""

    return _INTERPOLATION.sub(one, value)


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Bind mounts of a service: target in the container → source path in the repository."""
    found = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            found[target] = source
    return found


def _option(command: Sequence[str], name: str) -> str:
    return command[list(command).index(name) + 1]


def resolve_command(args: Sequence[str]) -> tuple[click.Command, list[str], list[str]]:
    """The click command an argument list names, its path, and the arguments left for it."""
    command: click.Command = cli
    path: list[str] = []
    rest = list(args)
    while isinstance(command, click.Group):
        assert rest and not rest[0].startswith("-"), f"`gpuwatch {' '.join(args)}`: no command"
        name = rest.pop(0)
        sub = command.get_command(click.Context(command), name)
        assert sub is not None, f"`gpuwatch {' '.join([*path, name])}` is not a command"
        command, path = sub, [*path, name]
    return command, path, rest


def check_command(args: Sequence[str]) -> None:
    """Fail unless ``gpuwatch ARGS`` parses: the command exists, options and values are valid."""
    command, path, rest = resolve_command(args)
    try:
        command.make_context(f"gpuwatch {' '.join(path)}", rest)
    except click.ClickException as exc:
        pytest.fail(f"`gpuwatch {' '.join(args)}`: {exc.format_message()}")
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0, result.output


# --- the compose file ------------------------------------------------------------------------


def _validate(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", path],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_compose_file_validates_against_the_compose_spec() -> None:
    result = _validate(COMPOSE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_schema_check_catches_a_broken_compose_file(tmp_path: Path) -> None:
    broken = _compose()
    broken["services"]["collector"]["depends_on"]["migrate"]["condition"] = "after_a_while"
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    assert _validate(path).returncode != 0


def test_every_gpuwatch_service_runs_a_real_command() -> None:
    services = _gpuwatch_services()
    assert set(services) == {"exporter", "apiserver", "migrate", "collector", "dashboard"}
    commands = {name: service["command"] for name, service in services.items()}
    for command in commands.values():
        check_command(command)
    assert commands["migrate"][:2] == ["db", "upgrade"]
    assert commands["collector"][:2] == ["collect", "--follow"]
    assert commands["dashboard"][0] == "serve" and _option(commands["dashboard"], "--host") == (
        "0.0.0.0"
    )
    assert commands["exporter"][:2] == ["simulate", "exporter"]
    assert commands["apiserver"][:2] == ["simulate", "apiserver"]


def test_the_command_check_rejects_what_the_cli_would() -> None:
    check_command(["collect", "--follow", "--interval", "60s"])
    with pytest.raises(AssertionError, match="is not a command"):
        check_command(["collect-all"])
    with pytest.raises(pytest.fail.Exception, match="--every"):
        check_command(["collect", "--every", "60s"])
    with pytest.raises(pytest.fail.Exception, match="--cluster"):
        check_command(["simulate", "exporter", "--cluster", "no-such-cluster"])


def test_services_start_in_order() -> None:
    services = _services()

    def waits_for(name: str) -> dict[str, str]:
        return {dep: spec["condition"] for dep, spec in services[name]["depends_on"].items()}

    assert waits_for("migrate") == {"postgres": "service_healthy"}
    assert waits_for("collector") == {
        "migrate": "service_completed_successfully",
        "prometheus": "service_healthy",
        "apiserver": "service_healthy",
    }
    assert waits_for("dashboard") == {"migrate": "service_completed_successfully"}
    assert waits_for("prometheus") == {"exporter": "service_healthy"}
    for name in ("postgres", "prometheus"):
        assert services[name]["healthcheck"]["test"][0] == "CMD"
    for name, url in (("exporter", "/health"), ("apiserver", "/healthz")):
        port = _option(services[name]["command"], "--port")
        assert services[name]["environment"]["HEALTHCHECK_URL"] == f"http://127.0.0.1:{port}{url}"
    assert services["grafana"]["profiles"] == ["grafana"]


def test_the_compose_environment_is_a_valid_configuration() -> None:
    services = _services()
    collector = services["collector"]
    env = {k: _interpolate(str(v)) for k, v in collector["environment"].items()}
    settings = load_settings(None, environ=env)
    assert settings.cluster == _option(services["exporter"]["command"], "--cluster")
    assert settings.cluster == _option(services["apiserver"]["command"], "--cluster")
    assert settings.prometheus.url == "http://prometheus:9090"
    postgres = services["postgres"]["environment"]
    user, password = postgres["POSTGRES_USER"], _interpolate(postgres["POSTGRES_PASSWORD"])
    expected = f"postgresql+psycopg://{user}:{password}@postgres:5432/{postgres['POSTGRES_DB']}"
    assert settings.database_url_value == expected
    assert settings.kubernetes.kubeconfig in _mounts(collector)
    assert env == {k: _interpolate(str(v)) for k, v in services["dashboard"]["environment"].items()}


def _strings(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


def test_compose_has_no_default_passwords_and_refuses_to_start_without_them() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    used = {m[1]: m[2] for m in _INTERPOLATION.finditer(text)}
    secrets = {name for name in used if re.search("PASSWORD|SECRET|TOKEN", name)}
    assert secrets == {"POSTGRES_PASSWORD", "GRAFANA_ADMIN_PASSWORD"}
    for name in secrets:
        assert used[name] == "?", f"{name} must be required (${{{name}:?...}}), not defaulted"
    example = dict(
        line.split("=", 1)
        for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert set(example) == secrets and not any(example.values())
    for name in secrets:
        refused = [s for s in _strings(_compose()) if f"${{{name}:?" in s]
        assert refused
        for value in refused:
            with pytest.raises(MissingVariable, match=name):
                _interpolate(value, example)
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()


def test_grafana_has_no_anonymous_access() -> None:
    environment = _services()["grafana"]["environment"]
    assert str(environment.get("GF_AUTH_ANONYMOUS_ENABLED", "false")).lower() == "false"
    assert "GF_AUTH_ANONYMOUS_ORG_ROLE" not in environment
    assert _interpolate(environment["GF_SECURITY_ADMIN_PASSWORD"]) == "gf-from-dot-env"


def test_mounted_files_exist_and_are_wired() -> None:
    services = _services()
    for name, service in services.items():
        for source in _mounts(service).values():
            assert (ROOT / source).exists(), f"{name} mounts missing {source}"
    prometheus = _mounts(services["prometheus"])
    config = yaml.safe_load((ROOT / prometheus["/etc/prometheus/prometheus.yml"]).read_text())
    (rules_target,) = config["rule_files"]
    assert prometheus[rules_target] == "./alerts/gpuwatch-rules.plain.yaml"
    exporter_port = _option(services["exporter"]["command"], "--port")
    (job,) = config["scrape_configs"]
    assert job["http_sd_configs"][0]["url"] == f"http://exporter:{exporter_port}/targets"

    kube_target = _interpolate(services["collector"]["environment"]["GPUWATCH_KUBECONFIG"])
    static = yaml.safe_load((ROOT / _mounts(services["collector"])[kube_target]).read_text())
    apiserver_port = _option(services["apiserver"]["command"], "--port")
    assert static["clusters"][0]["cluster"]["server"] == f"http://apiserver:{apiserver_port}"


def test_the_static_kubeconfig_is_what_the_simulator_writes(tmp_path: Path) -> None:
    static = yaml.safe_load((ROOT / "deploy/compose/kubeconfig.yaml").read_text())
    written = kubeconfig_for("http://apiserver:8001", tmp_path / "kubeconfig")
    assert static == yaml.safe_load(written.read_text())


def test_grafana_is_provisioned_with_the_dashboards_and_prometheus() -> None:
    grafana = _services()["grafana"]
    mounts = _mounts(grafana)
    provisioning = ROOT / mounts["/etc/grafana/provisioning"]
    providers = yaml.safe_load((provisioning / "dashboards/gpuwatch.yaml").read_text())
    (provider,) = providers["providers"]
    assert mounts[provider["options"]["path"]] == "./dashboards"
    assert sorted((ROOT / "dashboards").glob("*.json"))
    sources = yaml.safe_load((provisioning / "datasources/prometheus.yaml").read_text())
    (source,) = sources["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"


def test_ports_are_published_on_localhost_and_images_are_pinned() -> None:
    for name, service in _services().items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on all addresses"
        image = service["image"]
        tag = image.rsplit(":", 1)[1] if ":" in image else "latest"
        assert tag != "latest" and re.search(r"\d", tag), f"{name}: pin {image}"
    for service in _gpuwatch_services().values():
        assert service["build"]["context"] == "."


# --- the Dockerfile --------------------------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    found = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), " ".join(rest.split())))
    return found


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether ``.dockerignore`` keeps ``path`` out (last matching pattern wins)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!").rstrip("/")
        candidates = [glob, glob.removeprefix("**/")]
        if any(fnmatch.fnmatchcase(p, g) for p in prefixes for g in candidates):
            ignored = not negated
    return ignored


def _dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_dockerfile_builds_a_pinned_non_root_image() -> None:
    steps = _instructions()
    args = {rest.split("=")[0]: rest.split("=")[1] for kw, rest in steps if kw == "ARG"}
    base = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base), base
    assert [rest for kw, rest in steps if kw == "FROM"] == [
        "${PYTHON_IMAGE} AS build",
        "${PYTHON_IMAGE}",
    ]
    runtime = steps[max(i for i, (kw, _) in enumerate(steps) if kw == "FROM") :]
    (user,) = [rest for kw, rest in runtime if kw == "USER"]
    assert user.split(":")[0] not in ("0", "root")
    install = next(rest for kw, rest in runtime if kw == "RUN" and "pip install" in rest)
    assert "--constraint /tmp/constraints.txt" in install
    assert any(kw == "HEALTHCHECK" for kw, _ in runtime)
    assert ("ENTRYPOINT", '["gpuwatch"]') in runtime
    (cmd,) = [json.loads(rest) for kw, rest in runtime if kw == "CMD"]
    check_command(cmd)


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    patterns = _dockerignore()
    copied = []
    for keyword, rest in _instructions():
        if keyword == "COPY" and not rest.startswith("--from"):
            copied += rest.split()[:-1]
    assert {"pyproject.toml", "constraints.txt", "migrations", "gpuwatch"} <= set(copied)
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: no such file"
        assert not _ignored(source, patterns), f"COPY {source} is excluded by .dockerignore"
    assert not _ignored("gpuwatch/cli/main.py", patterns)
    assert not _ignored("migrations/versions/x.py", patterns)
    for private in (".venv/bin/python", ".git/config", "gpuwatch.db", "gpuwatch.yaml", "tests"):
        assert _ignored(private, patterns), f"{private} would reach the build context"
    assert _ignored("gpuwatch/__pycache__/x.pyc", patterns)


# --- the same wiring, as processes on 127.0.0.1 ----------------------------------------------


def _localize(command: Sequence[str], **values: str) -> list[str]:
    """The compose command with option values replaced (``port="1234"`` → ``--port 1234``)."""
    out = list(command)
    for option, value in values.items():
        out[out.index(f"--{option}") + 1] = value
    return out


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _query(prometheus: PrometheusProcess, expr: str) -> list[dict[str, Any]]:
    url = f"{prometheus.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=10) as response:
        return list(json.load(response)["data"]["result"])


class Processes:
    """``gpuwatch`` subprocesses with their output in files, stopped at the end."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder, self.env = folder, env
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
        log = (self.folder / f"{name}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "gpuwatch", *args],
            cwd=self.folder,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.running[name] = process
        return process

    def run(self, name: str, args: Sequence[str]) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "gpuwatch", *args],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, f"{name}: {result.stdout}{result.stderr}"
        return result.stdout

    def alive(self, name: str) -> bool:
        if self.running[name].poll() is None:
            return True
        pytest.fail(f"{name} exited with {self.running[name].returncode}: {self.log(name)}")

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop_all(self) -> None:
        for process in self.running.values():
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=30)


@contextmanager
def _processes(folder: Path, env: dict[str, str]) -> Iterator[Processes]:
    procs = Processes(folder, env)
    try:
        yield procs
    finally:
        procs.stop_all()


def _environment(tmp_path: Path, prometheus_url: str, kubeconfig: Path) -> dict[str, str]:
    """The compose collector's environment, pointed at local processes and a SQLite file."""
    compose_env = {
        k: _interpolate(str(v)) for k, v in _services()["collector"]["environment"].items()
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUWATCH_")}
    env |= compose_env
    env |= {
        "GPUWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'gpuwatch.db'}",
        "GPUWATCH_PROMETHEUS_URL": prometheus_url,
        "GPUWATCH_KUBECONFIG": str(kubeconfig),
        # Only to be quick: 5-second samples instead of the default 60 s.
        "GPUWATCH_PROMETHEUS_STEP": "5s",
    }
    return env


def _prometheus_config(exporter_port: int) -> str:
    config = yaml.safe_load((ROOT / "deploy/compose/prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(ROOT / "alerts/gpuwatch-rules.plain.yaml")]
    for job in config["scrape_configs"]:
        for sd in job["http_sd_configs"]:
            sd["url"] = sd["url"].replace("exporter:9400", f"127.0.0.1:{exporter_port}")
            sd["refresh_interval"] = "1s"
    return yaml.safe_dump(config)


def _local_kubeconfig(tmp_path: Path, port: int) -> Path:
    text = (ROOT / "deploy/compose/kubeconfig.yaml").read_text()
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(text.replace("http://apiserver:8001", f"http://127.0.0.1:{port}"))
    return path


@pytest.mark.prometheus
def test_the_compose_wiring_runs_on_localhost(tmp_path: Path) -> None:
    services = _services()
    ports = {name: free_port() for name in ("exporter", "apiserver", "dashboard")}
    local = {name: str(port) for name, port in ports.items()}
    kubeconfig = _local_kubeconfig(tmp_path, ports["apiserver"])
    with ExitStack() as stack:
        procs = stack.enter_context(_processes(tmp_path, dict(os.environ)))
        for name in ("exporter", "apiserver"):
            procs.start(
                name, _localize(services[name]["command"], host="127.0.0.1", port=local[name])
            )
        exporter_url = f"http://127.0.0.1:{ports['exporter']}"
        wait_until(
            lambda: procs.alive("exporter") and _http_ok(f"{exporter_url}/health"),
            "the exporter",
            120,
        )
        api_url = f"http://127.0.0.1:{ports['apiserver']}"
        wait_until(
            lambda: procs.alive("apiserver") and _http_ok(f"{api_url}/healthz"), "the API", 120
        )

        prometheus = PrometheusProcess(tmp_path / "tsdb", _prometheus_config(ports["exporter"]))
        stack.callback(prometheus.stop)
        prometheus.start()
        wait_until(lambda: _query(prometheus, "gpuwatch:gpu_util:ratio"), "the rules' series", 90)

        procs.env = _environment(tmp_path, prometheus.url, kubeconfig)
        assert "schema upgraded" in procs.run("migrate", services["migrate"]["command"])
        collector = procs.start(
            "collector", _localize(services["collector"]["command"], interval="1s")
        )
        engine = make_engine(procs.env["GPUWATCH_DATABASE_URL"])
        stack.callback(engine.dispose)

        def collected() -> bool:
            summary = repository.summary(engine)
            return procs.alive("collector") and summary.samples > 0 and summary.pods > 0

        wait_until(collected, "samples and pods in the store", 120)
        command = _localize(
            services["dashboard"]["command"], host="127.0.0.1", port=local["dashboard"]
        )
        procs.start("dashboard", command)
        dashboard_url = f"http://127.0.0.1:{ports['dashboard']}"
        wait_until(
            lambda: procs.alive("dashboard") and _http_ok(f"{dashboard_url}/"), "dashboard", 120
        )
        assert _http_ok(f"{dashboard_url}/_dash-layout")

        collector.send_signal(signal.SIGTERM)
        assert collector.wait(timeout=60) == 0, procs.log("collector")
        assert "collected" in procs.log("collector")
        assert repository.summary(engine).gpu_units > 10
        with engine.connect() as conn:
            clusters = conn.execute(sa.text("SELECT name FROM clusters")).scalars().all()
        assert clusters == [procs.env["GPUWATCH_CLUSTER"]]
        assert "up to date" in procs.run("current", ["db", "current"])
