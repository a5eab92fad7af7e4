"""deploy/kubernetes: plain manifests, least-privilege RBAC, hardened pods, real commands."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuwatch import __version__
from gpuwatch.config import load_settings
from tests.test_deploy_compose import check_command

ROOT = Path(__file__).resolve().parents[1]
KUBE = ROOT / "deploy" / "kubernetes"
IMAGE = f"gpuwatch:{__version__}"
READ_ONLY_RULES = {
    ("", "pods"),
    ("", "nodes"),
    ("", "namespaces"),
    ("apps", "replicasets"),
    ("apps", "deployments"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
    ("resource.k8s.io", "resourceclaims"),
    ("resource.k8s.io", "resourceslices"),
    ("resource.k8s.io", "deviceclasses"),
    ("kueue.x-k8s.io", "clusterqueues"),
    ("kueue.x-k8s.io", "localqueues"),
    ("kueue.x-k8s.io", "resourceflavors"),
    ("kueue.x-k8s.io", "workloads"),
    ("scheduling.volcano.sh", "queues"),
    ("scheduling.volcano.sh", "podgroups"),
}
WORKLOAD_KINDS = {"Deployment", "CronJob", "Job", "StatefulSet", "DaemonSet"}


def _manifest_files() -> list[Path]:
    return sorted(
        p
        for p in KUBE.glob("*.yaml")
        if p.name != "kustomization.yaml" and not p.name.endswith(".example.yaml")
    )


def _examples() -> list[dict[str, Any]]:
    text = (KUBE / "secret.example.yaml").read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d]


def _documents() -> list[dict[str, Any]]:
    docs = []
    for path in _manifest_files():
        docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return docs


def _by_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in _documents() if d["kind"] == kind]


def _one(kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in _by_kind(kind) if d["metadata"]["name"] == name]
    return found


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    if doc["kind"] == "CronJob":
        return dict(doc["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return dict(doc["spec"]["template"]["spec"])


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def _workloads() -> list[dict[str, Any]]:
    return [d for d in _documents() if d["kind"] in WORKLOAD_KINDS]


def _gpuwatch_args(container: dict[str, Any]) -> list[str]:
    """The ``gpuwatch`` arguments a container runs (also inside a ``sh -c`` script)."""
    if "command" not in container:
        return list(container["args"])
    script = " ".join(container["args"])
    words = shlex.split(script.split("exec gpuwatch", 1)[1])
    return [w.replace("$week", "2026-W46") for w in words]


def test_every_manifest_parses_and_names_itself() -> None:
    docs = _documents()
    assert len(docs) >= 12
    for doc in docs:
        assert doc.get("apiVersion") and doc.get("kind"), doc
        assert doc["metadata"]["name"]
        assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "gpuwatch" or (
            doc["kind"] == "PrometheusRule"
        )
    namespaced = [d for d in docs if d["kind"] not in {"Namespace", "ClusterRole"}]
    namespaced = [d for d in namespaced if d["kind"] != "ClusterRoleBinding"]
    assert {d["metadata"]["namespace"] for d in namespaced} == {"gpuwatch", "monitoring"}
    kinds = {d["kind"] for d in docs}
    assert kinds >= {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "NetworkPolicy",
        "Service",
        "CronJob",
        "PersistentVolumeClaim",
        "PrometheusRule",
    }


def test_the_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in _manifest_files())


def test_rbac_grants_only_get_and_list_on_exactly_the_objects_read() -> None:
    (role,) = _by_kind("ClusterRole")
    granted = set()
    for rule in role["rules"]:
        assert sorted(rule["verbs"]) == ["get", "list"], rule
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
        granted |= {(group, r) for group in rule["apiGroups"] for r in rule["resources"]}
    assert granted == READ_ONLY_RULES
    assert not _by_kind("Role") and not _by_kind("RoleBinding")
    (binding,) = _by_kind("ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    (subject,) = binding["subjects"]
    assert subject["kind"] == "ServiceAccount"
    _one("ServiceAccount", subject["name"])


def test_only_the_collector_gets_an_api_token() -> None:
    (binding,) = _by_kind("ClusterRoleBinding")
    reader = binding["subjects"][0]["name"]
    for account in _by_kind("ServiceAccount"):
        assert account["automountServiceAccountToken"] is False
    for doc in _workloads():
        spec = _pod_spec(doc)
        is_collector = spec["serviceAccountName"] == reader
        assert spec["automountServiceAccountToken"] is is_collector, doc["metadata"]["name"]
        if is_collector:
            assert doc["metadata"]["name"] == "gpuwatch-collector"


def test_every_container_runs_hardened() -> None:
    workloads = _workloads()
    assert {d["metadata"]["name"] for d in workloads} == {
        "gpuwatch-collector",
        "gpuwatch-dashboard",
        "gpuwatch-weekly-report",
    }
    for doc in workloads:
        spec = _pod_spec(doc)
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in _containers(spec):
            where = f"{doc['metadata']['name']}/{container['name']}"
            ctx = container["securityContext"]
            assert ctx["runAsNonRoot"] is True, where
            assert ctx["readOnlyRootFilesystem"] is True, where
            assert ctx["allowPrivilegeEscalation"] is False, where
            assert ctx["capabilities"] == {"drop": ["ALL"]}, where
            assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}, where
            assert "privileged" not in ctx and "runAsUser" not in ctx, where
            for kind in ("requests", "limits"):
                assert set(container["resources"][kind]) == {"cpu", "memory"}, where
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert "/tmp" in mounts, f"{where}: a read-only root needs a writable /tmp"


def test_images_are_the_packaged_version_everywhere() -> None:
    images = {c["image"] for d in _workloads() for c in _containers(_pod_spec(d))}
    assert images == {IMAGE}
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["x-gpuwatch"]["image"] == IMAGE


def test_every_container_runs_a_real_gpuwatch_command() -> None:
    runs = {}
    for doc in _workloads():
        for container in _containers(_pod_spec(doc)):
            args = _gpuwatch_args(container)
            check_command(args)
            runs[container["name"]] = args[:2]
    assert runs == {
        "db-upgrade": ["db", "upgrade"],
        "collector": ["collect", "--follow"],
        "dashboard": ["serve", "--host"],
        "report": ["report", "weekly"],
    }


def test_the_weekly_report_writes_to_its_volume() -> None:
    cron = _one("CronJob", "gpuwatch-weekly-report")
    (container,) = _pod_spec(cron)["containers"]
    args = _gpuwatch_args(container)
    out = args[args.index("--out") + 1]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volume = mounts[str(Path(out).parent)]
    (claim,) = [v for v in _pod_spec(cron)["volumes"] if v["name"] == volume]
    _one("PersistentVolumeClaim", claim["persistentVolumeClaim"]["claimName"])
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert re.fullmatch(r"\S+ \S+ \* \* 1", cron["spec"]["schedule"])


def test_the_dashboard_is_probed_and_served() -> None:
    deployment = _one("Deployment", "gpuwatch-dashboard")
    (container,) = _pod_spec(deployment)["containers"]
    port = int(container["args"][container["args"].index("--port") + 1])
    assert container["ports"][0]["containerPort"] == port
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    service = _one("Service", "gpuwatch-dashboard")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["replicas"] == 2


def test_two_collectors_share_a_lease_that_fails_over_within_a_minute(tmp_path: Path) -> None:
    collector = _one("Deployment", "gpuwatch-collector")
    assert collector["spec"]["replicas"] == 2
    # The old version stops before the new one migrates the schema.
    assert collector["spec"]["strategy"] == {"type": "Recreate"}
    (container,) = _pod_spec(collector)["containers"]
    assert container["args"][:2] == ["collect", "--follow"]
    assert "--ignore-lease" not in container["args"]
    path = tmp_path / "gpuwatch.yaml"
    path.write_text(_one("ConfigMap", "gpuwatch-config")["data"]["gpuwatch.yaml"])
    lease = load_settings(str(path), environ={}).collect
    assert lease.holder is None  # each pod's own name
    assert (lease.lease_ttl + lease.lease_poll).total_seconds() <= 60


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_the_configmap_and_secret_make_a_valid_configuration(tmp_path: Path) -> None:
    config = _one("ConfigMap", "gpuwatch-config")
    path = tmp_path / "gpuwatch.yaml"
    path.write_text(config["data"]["gpuwatch.yaml"])
    (secret,) = [d for d in _examples() if d["metadata"]["name"] == "gpuwatch-database"]
    url = secret["stringData"]["database-url"]
    settings = load_settings(
        None, environ={"GPUWATCH_CONFIG": str(path), "GPUWATCH_DATABASE_URL": url}
    )
    assert settings.database_url_value.startswith("postgresql+psycopg://")
    assert settings.kubernetes.kubeconfig is None
    assert "database_url" not in yaml.safe_load(config["data"]["gpuwatch.yaml"])
    for doc in _workloads():
        spec = _pod_spec(doc)
        mounted = {v["name"]: v.get("configMap", {}).get("name") for v in spec["volumes"]}
        for container in _containers(spec):
            env = _env(container)
            ref = env["GPUWATCH_DATABASE_URL"]["secretKeyRef"]
            assert (ref["name"], ref["key"]) == ("gpuwatch-database", "database-url")
            mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
            assert env["GPUWATCH_CONFIG"] == f"{mount['mountPath']}/gpuwatch.yaml"
            assert mounted["config"] == "gpuwatch-config"


def test_the_prometheus_rule_is_the_rendered_one() -> None:
    copy = (KUBE / "gpuwatch-rules.yaml").read_text(encoding="utf-8")
    rendered = (ROOT / "alerts" / "gpuwatch-rules.yaml").read_text(encoding="utf-8")
    assert copy == rendered, (
        "deploy/kubernetes/gpuwatch-rules.yaml is out of date: "
        "copy alerts/gpuwatch-rules.yaml over it"
    )


def test_kustomize_builds_the_manifests() -> None:
    built = _built()
    names = sorted((d["kind"], d["metadata"]["name"]) for d in built)
    assert names == sorted((d["kind"], d["metadata"]["name"]) for d in _documents())
    (rule,) = [d for d in built if d["kind"] == "PrometheusRule"]
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def _built() -> list[dict[str, Any]]:
    """The manifests as `kubectl kustomize` builds them."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        # `make test` installs Debian's kubernetes-client: in CI a missing kubectl is a failure
        if os.environ.get("CI"):
            pytest.fail("kubectl not installed: `make system-deps` installs kubernetes-client")
        pytest.skip("kubectl not installed (kustomize build not checked)")
    result = subprocess.run(
        [kubectl, "kustomize", str(KUBE)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    template = (
        doc["spec"]["jobTemplate"]["spec"]["template"]
        if doc["kind"] == "CronJob"
        else doc["spec"]["template"]
    )
    return dict(template["metadata"]["labels"])


def test_every_workload_has_its_own_network_policy() -> None:
    built = _built()
    policies = [d for d in built if d["kind"] == "NetworkPolicy"]
    default = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert len(default) == 1 and sorted(default[0]["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    assert "ingress" not in default[0]["spec"] and "egress" not in default[0]["spec"]
    own = {}
    for doc in (d for d in built if d["kind"] in WORKLOAD_KINDS):
        labels = _pod_labels(doc)
        (policy,) = [
            p
            for p in policies
            if p["spec"]["podSelector"] and _selects(p["spec"]["podSelector"], labels)
        ]
        assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]
        own[doc["metadata"]["name"]] = policy["spec"]
    dashboard = own["gpuwatch-dashboard"]
    (rule,) = dashboard["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8050}]
    assert rule["from"] and all("namespaceSelector" in peer for peer in rule["from"])
    for name in ("gpuwatch-collector", "gpuwatch-weekly-report"):
        assert own[name]["ingress"] == [], name
    for name, spec in own.items():
        ports = {(p["protocol"], p["port"]) for rule in spec["egress"] for p in rule["ports"]}
        assert {("UDP", 53), ("TCP", 53), ("TCP", 5432)} <= ports, name
    collector = {
        (p["protocol"], p["port"]) for r in own["gpuwatch-collector"]["egress"] for p in r["ports"]
    }
    assert {("TCP", 9090), ("TCP", 443), ("TCP", 6443)} <= collector


def test_no_secret_with_a_value_is_applied() -> None:
    built = _built()
    for doc in built:
        if doc["kind"] == "Secret":
            assert not doc.get("data") and not doc.get("stringData"), doc["metadata"]["name"]
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    assert "secretGenerator" not in kustomization
    assert not [r for r in kustomization["resources"] if "example" in r]
    referenced = set()
    for doc in _workloads():
        for container in _containers(_pod_spec(doc)):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    referenced.add((ref["name"], ref["key"]))
    shown = {(d["metadata"]["name"], key) for d in _examples() for key in d["stringData"]}
    assert referenced - {("gpuwatch-prometheus", "headers")} <= shown


def test_every_image_is_set_through_the_kustomization() -> None:
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    entries = {entry["name"]: entry for entry in kustomization["images"]}
    for doc in _workloads():
        for container in _containers(_pod_spec(doc)):
            name = container["image"].split("@")[0].rsplit(":", 1)[0]
            assert name in entries, f"{container['image']} is not named in images:"
    built = _built()
    for doc in (d for d in built if d["kind"] in WORKLOAD_KINDS):
        for container in _containers(_pod_spec(doc)):
            entry = entries["gpuwatch"]
            assert container["image"] == f"{entry['newName']}:{entry['newTag']}"


def test_an_image_digest_pins_every_container(tmp_path: Path) -> None:
    digest = "sha256:" + "ab" * 32
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(KUBE, overlay)],
                "images": [
                    {
                        "name": "gpuwatch",
                        "newName": "registry.example.com/gpuwatch",
                        "digest": digest,
                    }
                ],
            }
        )
    )
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed (kustomize build not checked)")
    result = subprocess.run(
        [kubectl, "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(overlay)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    built = [d for d in yaml.safe_load_all(result.stdout) if d]
    images = {
        c["image"] for d in built if d["kind"] in WORKLOAD_KINDS for c in _containers(_pod_spec(d))
    }
    assert images == {f"registry.example.com/gpuwatch@{digest}"}
