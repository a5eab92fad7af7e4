"""A pod's gang and queue, on hand-made pods, Jobs and scheduler state."""

from __future__ import annotations

from typing import Any

from gpuwatch.collectors.gangs import PodGang, job_facts, pod_gang
from gpuwatch.collectors.sched_state import GangFacts, SchedState

QUEUE = "kueue.x-k8s.io/queue-name"
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
VOLCANO = "scheduling.k8s.io/group-name"
JOBSET = "jobset.sigs.k8s.io/jobset-name"


def _ref(kind: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": kind,
        "name": name,
        "uid": f"uid-{name}",
        "controller": True,
    }


def _pod(
    namespace: str = "ml",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    job: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": namespace, "name": "p-0", "labels": labels or {}}
    meta["annotations"] = annotations or {}
    if job:
        meta["ownerReferences"] = [_ref("Job", job)]
    return {"metadata": meta, "spec": {"containers": []}}


def _job(
    name: str,
    parallelism: int | None = None,
    completions: int | None = None,
    indexed: bool = False,
    labels: dict[str, str] | None = None,
    jobset: str | None = None,
    namespace: str = "ml",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"completionMode": "Indexed" if indexed else "NonIndexed"}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "labels": labels or {}}
    if jobset:
        meta["ownerReferences"] = [
            {**_ref("JobSet", jobset), "apiVersion": "jobset.x-k8s.io/v1alpha2"}
        ]
    return {"metadata": meta, "spec": spec}


SCHED = SchedState(
    local_queues={("ml", "train"): "team-a-cq", ("ml", "serve"): "team-b-cq"},
    kueue_owners={
        ("ml", "Job", "train-a"): GangFacts("team-a-cq", 4),
        ("ml", "JobSet", "llm"): GangFacts("team-a-cq", 6),
    },
    kueue_groups={("ml", "infer"): GangFacts("team-b-cq", 3)},
    pod_groups={("ml", "vc-pg"): GangFacts("research", 8)},
)


def test_a_kueue_pod_group_takes_its_size_from_the_annotation() -> None:
    pod = _pod(labels={GROUP: "infer", QUEUE: "serve"}, annotations={TOTAL: "2"})
    assert pod_gang(pod, {}, SCHED) == PodGang("team-b-cq", "kueue", "infer", 2)
    # no annotation: the group's Workload's pod count; no queue label: the Workload's queue
    assert pod_gang(_pod(labels={GROUP: "infer"}), {}, SCHED) == PodGang(
        "team-b-cq", "kueue", "infer", 3
    )
    unknown = _pod(labels={GROUP: "other"}, annotations={TOTAL: "x"})
    assert pod_gang(unknown, {}, SCHED) == PodGang(None, "kueue", "other", None)


def test_a_kueue_job_is_the_gang_of_its_owner() -> None:
    jobs = job_facts([_job("train-a", 4, 4, indexed=True, labels={QUEUE: "train"})])
    assert pod_gang(_pod(job="train-a"), jobs, SCHED) == PodGang(
        "team-a-cq", "kueue", "job/train-a", 4
    )
    # labelled but no Workload read: the Job's parallelism, the LocalQueue's ClusterQueue
    jobs = job_facts([_job("train-b", 2, labels={QUEUE: "train"})])
    assert pod_gang(_pod(job="train-b"), jobs, SCHED) == PodGang(
        "team-a-cq", "kueue", "job/train-b", 2
    )
    # the queue label on the pod alone also makes its Job Kueue's
    jobs = job_facts([_job("train-c", 1)])
    assert pod_gang(_pod(labels={QUEUE: "serve"}, job="train-c"), jobs, SCHED) == PodGang(
        "team-b-cq", "kueue", "job/train-c", 1
    )


def test_a_jobset_admitted_by_kueue_is_one_kueue_gang() -> None:
    jobs = job_facts(
        [_job("llm-workers-0", 3, 3, jobset="llm"), _job("llm-workers-1", 3, 3, jobset="llm")]
    )
    pod = _pod(labels={JOBSET: "llm"}, job="llm-workers-0")
    assert pod_gang(pod, jobs, SCHED) == PodGang("team-a-cq", "kueue", "jobset/llm", 6)


def test_a_jobset_without_kueue_counts_its_jobs_parallelism() -> None:
    jobs = job_facts(
        [
            _job("mpi-workers-0", 3, 3, jobset="mpi"),
            _job("mpi-workers-1", 3, 3, jobset="mpi"),
            _job("mpi-launcher-0", 1, 1, jobset="mpi"),
            _job("other-0", 5, 5, jobset="other"),
            _job("mpi-workers-0", 9, 9, jobset="mpi", namespace="elsewhere"),
        ]
    )
    pod = _pod(labels={JOBSET: "mpi"}, job="mpi-workers-1")
    assert pod_gang(pod, jobs, SCHED) == PodGang(None, "jobset", "mpi", 7)


def test_a_volcano_pod_group_gives_gang_and_queue() -> None:
    pod = _pod(annotations={VOLCANO: "vc-pg"})
    assert pod_gang(pod, {}, SCHED) == PodGang("research", "volcano", "vc-pg", 8)
    assert pod_gang(_pod(annotations={VOLCANO: "gone"}), {}, SCHED) == PodGang(
        None, "volcano", "gone", None
    )


def test_kueue_comes_before_volcano() -> None:
    pod = _pod(labels={GROUP: "infer"}, annotations={VOLCANO: "vc-pg", TOTAL: "3"})
    assert pod_gang(pod, {}, SCHED).gang_kind == "kueue"


def test_parallel_jobs_are_gangs_and_batches_of_tasks_are_not() -> None:
    jobs = job_facts(
        [
            _job("indexed", 4, 16, indexed=True),
            _job("work-queue", 3),
            _job("all-at-once", 2, 2),
            _job("batch", 2, 10),
            _job("single", 1, 1, indexed=True),
            _job("default"),
        ]
    )
    gangs = {name: pod_gang(_pod(job=name), jobs, SCHED) for _, name in jobs}
    assert gangs == {
        "indexed": PodGang(None, "job", "indexed", 4),
        "work-queue": PodGang(None, "job", "work-queue", 3),
        "all-at-once": PodGang(None, "job", "all-at-once", 2),
        "batch": PodGang(),
        "single": PodGang(),
        "default": PodGang(),
    }


def test_a_bare_pod_has_no_gang_and_a_labelled_one_a_queue() -> None:
    assert pod_gang(_pod(), {}, SCHED) == PodGang()
    assert pod_gang(_pod(labels={QUEUE: "serve"}), {}, SCHED) == PodGang("team-b-cq")
    assert pod_gang(_pod(labels={QUEUE: "nowhere"}), {}, SCHED) == PodGang()
    assert PodGang("q", "job", "j", 2).row() == {
        "queue": "q",
        "gang_kind": "job",
        "gang_name": "j",
        "gang_size": 2,
    }
