"""Jobs and their pods are named as Kubernetes names them, alike in the API objects, the
exporter's pod labels and the demo frames (seed 7; names written out by hand)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from gpuwatch.simulate.exposition import render
from gpuwatch.simulate.fleet import Fleet, build_fleet
from gpuwatch.simulate.generate import generate, sample_at
from gpuwatch.simulate.kube_objects import kube_objects

PROD = "prod-us-east"
TS = int(datetime(2026, 11, 16, 2, tzinfo=UTC).timestamp())  # nightly-embed's run of the day
SCHEDULED_MIN = int(datetime(2026, 11, 16, 1, tzinfo=UTC).timestamp()) // 60
#: The Job controller's pod suffix: 5 characters of Kubernetes' random-name alphabet.
SUFFIX = "[bcdfghjklmnpqrstvwxz2456789]{5}"
CRON_PODS = {
    "nightly-embed-29913180-ghksq",
    "nightly-embed-29913180-jmnkc",
    "nightly-embed-29913180-879jg",
    "nightly-embed-29913180-8c6zc",
    "nightly-embed-29913180-qmv98",
    "nightly-embed-29913180-j2r5j",
    "nightly-embed-29913180-lpw57",
    "nightly-embed-29913180-x2djj",
}
JOB_PODS = {"llm-pretrain-h7hf8-78q64", "llm-pretrain-h7hf8-f2z7j", "dra-finetune-5ss7q-9wjwd"}


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return build_fleet(7)


def test_cronjob_jobs_are_named_after_the_scheduled_minute(fleet: Fleet) -> None:
    assert SCHEDULED_MIN == 29913180
    objects = kube_objects(fleet, TS, PROD)
    running = {
        p["metadata"]["name"]: p["metadata"]["ownerReferences"][0]["name"]
        for p in objects["pods"]
        if p["metadata"].get("labels", {}).get("app") == "nightly-embed"
        and p["status"]["phase"] == "Running"
    }
    assert set(running) == CRON_PODS
    assert set(running.values()) == {"nightly-embed-29913180"}
    jobs = {j["metadata"]["name"] for j in objects["jobs"]}
    assert {"nightly-embed-29913180", "nightly-embed-29911740"} <= jobs  # today's and yesterday's
    assert all(re.fullmatch(rf"nightly-embed-29913180-{SUFFIX}", name) for name in running)


def test_job_pods_are_the_job_name_and_a_random_suffix(fleet: Fleet) -> None:
    pods = {p["metadata"]["name"]: p for p in kube_objects(fleet, TS, PROD)["pods"]}
    for name in JOB_PODS:
        job = pods[name]["metadata"]["ownerReferences"][0]
        assert (job["kind"], job["apiVersion"]) == ("Job", "batch/v1")
        assert re.fullmatch(rf"{job['name']}-{SUFFIX}", name)
        assert pods[name]["metadata"]["labels"]["job-name"] == job["name"]
    assert pods["dra-finetune-5ss7q-9wjwd"]["metadata"]["ownerReferences"][0]["name"] == (
        "dra-finetune-5ss7q"
    )


def test_the_exporter_and_the_demo_frames_use_the_same_names(fleet: Fleet) -> None:
    text = render(fleet, TS, sample_at(fleet, TS), PROD)
    labelled = set(re.findall(r'pod="((?:nightly-embed|llm-pretrain|dra-finetune)-[^"]+)"', text))
    assert labelled == CRON_PODS | JOB_PODS
    data = generate(fleet, TS - 3600, TS + 600, 600)
    frame = data.pods.set_index("pod")
    assert set(frame.index) >= CRON_PODS | JOB_PODS
    assert set(frame.loc[sorted(CRON_PODS), "owner_name"]) == {"nightly-embed-29913180"}
    assert frame.loc["dra-finetune-5ss7q-9wjwd", "owner_name"] == "dra-finetune-5ss7q"
