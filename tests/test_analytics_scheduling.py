"""Scheduling waste on the worked example of docs/cost-model.md#scheduling (two nodes, four
GPUs, three hours): every figure counted by hand, then properties on random fleets."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuwatch.analytics.capacity import capacity_report, capacity_timeline, consolidate_hint
from gpuwatch.analytics.gangs import gang_stalls, pod_queues, workload_stalls
from gpuwatch.analytics.queues import QUEUE_REPORT_COLUMNS, queue_report
from gpuwatch.domain.scheduling import SchedulingPolicy
from tests.scheduling_example import BOOK, END, HOUR, MODEL, T0, costed, pods, queues, workloads

POLICY = SchedulingPolicy()
# p3 is created at T0 and Pending: the gang is stalled from T0 + 600 s to the end. p1 and p2
# hold one GPU each: hour 0 counts 3000/3600 of 2 GPU-hours, hours 1 and 2 two each.
STALLED = 2 * 3000 / 3600 + 2 + 2  # 5.6667 GPU-hours, $1 each


def test_gang_stall_of_the_example() -> None:
    rows = gang_stalls(costed(), pods(), POLICY, T0, END)
    assert len(rows) == 1
    row = rows.iloc[0]
    assert (row["namespace"], row["gang_kind"], row["gang_name"]) == (
        "research",
        "kueue",
        "job/train",
    )
    assert (row["queue"], row["team"], row["workload_kind"], row["workload"]) == (
        "cq-a",
        "ml",
        "Job",
        "train",
    )
    assert (row["gang_size"], row["running_pods"], row["pending_pods"]) == (3, 2, 1)
    assert row["stalled_gpu_hours"] == pytest.approx(STALLED)
    assert row["stalled_cost_usd"] == pytest.approx(STALLED)
    assert (row["first_stalled_ts"], row["last_stalled_ts"]) == (T0 + 600, END)


def test_no_stall_before_the_threshold() -> None:
    later = SchedulingPolicy(gang_stall_after_s=4 * HOUR)  # p3 waits 3 hours: never stalls
    assert gang_stalls(costed(), pods(), later, T0, END).empty
    two_hours = SchedulingPolicy(gang_stall_after_s=2 * HOUR)  # the last hour only
    rows = gang_stalls(costed(), pods(), two_hours, T0, END)
    assert rows["stalled_gpu_hours"].tolist() == [pytest.approx(2.0)]


def test_workload_stalls_carry_the_queue() -> None:
    rows = workload_stalls(costed(), pods(), POLICY, T0, END)
    assert rows[["namespace", "workload", "gpu_model", "queue"]].values.tolist() == [
        ["research", "train", MODEL, "cq-a"]
    ]
    assert rows["stalled_gpu_hours"].tolist() == [pytest.approx(STALLED)]


def test_pod_queues_joins_each_workloads_distinct_queues_sorted() -> None:
    """Per workload: its pods' queues, distinct, sorted, ``+``-joined; none (NA or empty) is
    no queue; a workload without any is empty; samples not held are not counted."""
    keys = ["namespace", "workload"]
    rows = [  # (namespace, workload, pod_id, allocated)
        ("ml", "train", 1, True), ("ml", "train", 2, True), ("ml", "train", 3, True),
        ("ml", "train", 4, True), ("ml", "train", 1, True), ("ml", "serve", 5, True),
        ("ml", "serve", 6, True), ("ds", "nb", 7, True), (None, "orphan", 8, True),
        ("ds", "idle", 9, False),
    ]  # fmt: skip
    samples = pd.DataFrame(rows, columns=[*keys, "pod_id", "allocated"])
    queues = {1: "cq-b", 2: "cq-a", 3: "cq-b", 4: None, 5: "", 6: None, 7: "cq-z", 8: "cq-a",
              9: "cq-x"}  # fmt: skip
    pods = pd.DataFrame({"pod_id": list(queues), "queue": list(queues.values())})
    out = pod_queues(samples, pods, keys)
    assert list(out.columns) == [*keys, "queue"]
    got = {(ns if isinstance(ns, str) else None, w): q for ns, w, q in out.values.tolist()}
    assert got == {
        ("ds", "nb"): "cq-z",
        ("ml", "serve"): "",
        ("ml", "train"): "cq-a+cq-b",
        (None, "orphan"): "cq-a",
    }
    assert out[keys].values.tolist()[:3] == [["ds", "nb"], ["ml", "serve"], ["ml", "train"]]


def test_queue_report_of_the_example() -> None:
    out = queue_report(queues(), workloads(), pods(), costed(), POLICY, T0, END, price_book=BOOK)
    assert list(out.columns) == list(QUEUE_REPORT_COLUMNS)
    a, b = (out.iloc[i].to_dict() for i in range(2))
    # cq-a: nominal 4 for 3 h; p1 and p2 hold 2 GPUs at 50 %; p3 (1 GPU) Pending all 3 h,
    # its Workload admitted before T0; 2 GPUs of quota spare while the cohort waits.
    assert (a["queue"], a["quota_gpu_hours"], a["allocated_gpu_hours"], a["busy_gpu_hours"]) == (
        "cq-a", 12.0, 6.0, 3.0)  # fmt: skip
    assert (a["borrowed_gpu_hours"], a["lent_gpu_hours"], a["pending_gpu_hours"]) == (0, 0, 3.0)
    assert a["stalled_gpu_hours"] == pytest.approx(STALLED)
    assert (a["idle_quota_gpu_hours"], a["idle_quota_usd"]) == (6.0, 6.0)
    # cq-b: nominal 1, nothing held; its Workload asks for 2 GPUs from T0 + 30 min: 1 + 2 + 2.
    assert (b["queue"], b["quota_gpu_hours"], b["allocated_gpu_hours"]) == ("cq-b", 3.0, 0.0)
    assert (b["pending_gpu_hours"], b["stalled_gpu_hours"]) == (5.0, 0.0)
    assert (b["idle_quota_gpu_hours"], b["idle_quota_usd"]) == (3.0, 3.0)


def test_quota_counts_the_share_of_each_hour_the_queue_existed() -> None:
    # cq-a created at T0 + 30 min and last seen at T0 + 2 h 30 min: 2 of the 3 hours, × 4 GPUs
    short = queues()
    short.loc[short["queue"].eq("cq-a"), ["first_seen_ts", "last_seen_ts"]] = [
        T0 + 1800, T0 + 2 * HOUR + 1800]  # fmt: skip
    out = queue_report(short, workloads(), pods(), costed(), POLICY, T0, END, price_book=BOOK)
    assert out.set_index("queue").loc["cq-a", "quota_gpu_hours"] == 8.0


def test_borrowing_and_lending() -> None:
    # cq-b (nominal 1) holds both running pods: it borrows 1 GPU each hour, which cq-a lends.
    moved = pods()
    moved["queue"] = moved["queue"].where(~moved["pod_id"].isin([1, 2]), "cq-b")
    out = queue_report(queues(), workloads(), moved, costed(), POLICY, T0, END, price_book=BOOK)
    a, b = (out.iloc[i].to_dict() for i in range(2))
    assert (b["allocated_gpu_hours"], b["borrowed_gpu_hours"], b["lent_gpu_hours"]) == (6, 3, 0)
    assert (a["allocated_gpu_hours"], a["borrowed_gpu_hours"], a["lent_gpu_hours"]) == (0, 0, 3)


def test_capacity_of_the_example() -> None:
    out = capacity_report(costed(), pods(), T0, END)
    # GPUs 2 and 4 free 3 h; `big` asks for 2 from hour 1: 2 free in all, 1 per node.
    assert out.to_dict("records") == [
        {"cluster": "c1", "gpu_model": MODEL, "free_gpu_hours": 6.0, "stranded_gpu_hours": 4.0,
         "stranded_cost_usd": 4.0, "largest_unplaceable_request": 2}
    ]  # fmt: skip
    timeline = capacity_timeline(costed(), pods(), T0, END)
    assert timeline["stranded_gpus"].tolist() == [0.0, 2.0, 2.0]
    assert timeline["largest_unplaceable_request"].tolist() == [0, 2, 2]


def test_consolidate_hint_names_either_node() -> None:
    hint = consolidate_hint(costed(), pods(), T0, END)
    assert hint[["ts", "request_gpus", "node", "move_gpus"]].values.tolist() == [
        [T0 + 2 * HOUR, 2, "n1", 1],
        [T0 + 2 * HOUR, 2, "n2", 1],
    ]


def test_a_request_larger_than_all_free_gpus_is_not_stranded() -> None:
    bigger = pods()
    bigger.loc[bigger["pod_id"].eq(4), "gpu_count"] = 3  # 3 > 2 free: capacity, not placement
    out = capacity_report(costed(), bigger, T0, END)
    assert (out["stranded_gpu_hours"].tolist(), out["largest_unplaceable_request"].tolist()) == (
        [0.0], [0])  # fmt: skip


def test_a_pod_that_started_as_it_was_created_never_waited() -> None:
    # `big` created and started at once in hour 1 (a pod scheduled at once): not Pending in
    # that hour, so the two free GPUs there are not stranded by it
    at_once = pods()
    at_once.loc[at_once["pod_id"].eq(4), "started_ts"] = T0 + HOUR + 1800
    at_once.loc[at_once["pod_id"].eq(4), "created_ts"] = T0 + HOUR + 1800
    timeline = capacity_timeline(costed(), at_once, T0, END)
    assert timeline["stranded_gpus"].tolist() == [0.0, 0.0, 0.0]


def test_empty_inputs() -> None:
    empty_queues = queues().iloc[0:0]
    assert queue_report(empty_queues, workloads(), pods(), costed(), POLICY, T0, END,
                        price_book=BOOK).empty  # fmt: skip
    assert gang_stalls(costed(), pods().iloc[0:0], POLICY, T0, END).empty
    assert isinstance(capacity_report(costed().iloc[0:0], pods(), T0, END), pd.DataFrame)


def test_weekly_rows_carry_queue_and_stalls() -> None:
    from gpuwatch.analytics.policy import AnalyticsPolicy
    from gpuwatch.report.weekly import render_csv, weekly_report
    from tests.scheduling_example import samples

    frame = weekly_report(samples(), pods(), None, BOOK, AnalyticsPolicy(), T0)
    rows = {(r["namespace"], r["workload"]): r for r in frame.to_dict("records")}
    train = rows[("research", "train")]
    assert (train["queue"], train["stalled_gpu_hours"], train["stalled_cost_usd"]) == (
        "cq-a", 5.67, 5.67)  # fmt: skip
    idle = rows[("__idle__", "n1")]
    assert (idle["queue"], idle["stalled_gpu_hours"]) == ("", None)
    text = render_csv(frame)
    assert ",cq-a,5.67,5.67," in text
    # an __idle__ row (n1: 3 free GPU-hours): no queue, stalled empty, no health roll-up
    assert (
        "Unallocated,n1,NVIDIA Test GPU,0,0.00,0.00,0.0,0.00,0.00,0.00,0.00,,0.00,"
        "device-plugin,,,,,,,,,3.00,3.00" in text
    )


FLEET = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 5), st.booleans(), st.floats(0, 1)),
    min_size=1, max_size=24,
)  # fmt: skip


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(held=FLEET, wait_s=st.integers(0, 3 * HOUR), ask=st.integers(1, 4))
def test_properties(held: list[tuple[int, int, bool, float]], wait_s: int, ask: int) -> None:
    """Random holdings of the four GPUs over six hours, the gang's third pod created at
    ``wait_s``, `big` asking for ``ask`` GPUs: stalled ≤ allocated, stranded ≤ free,
    allocated ≤ nominal + borrowed."""
    from gpuwatch.analytics.build import samples_frame
    from gpuwatch.analytics.costing import prepare

    rows = {}
    for gpu, hour, taken, util in held:
        pod = 1 + gpu % 2 if taken else None
        row = {"gpu_id": gpu + 1, "node": "n1" if gpu < 2 else "n2", "gpu_model": MODEL,
               "ts": T0 + hour * HOUR, "step_s": HOUR, "util_ratio": util}  # fmt: skip
        if pod is not None:
            row.update(pod_id=pod, pod=f"train-{pod - 1}", namespace="research",
                       workload_kind="Job", workload="train", pod_gpu_count=1)  # fmt: skip
        rows[(gpu, hour)] = row
    the_pods = pods()
    the_pods.loc[the_pods["pod_id"].eq(3), "created_ts"] = T0 + wait_s
    the_pods.loc[the_pods["pod_id"].eq(4), "gpu_count"] = ask
    frame = prepare(samples_frame(list(rows.values())), the_pods, BOOK)
    end = T0 + 6 * HOUR
    held_hours = frame.loc[frame["allocated"], "gpu_hours"].sum()
    stalls = gang_stalls(frame, the_pods, POLICY, T0, end)
    assert stalls["stalled_gpu_hours"].sum() <= held_hours + 1e-9
    cap = capacity_report(frame, the_pods, T0, end)
    free = frame.loc[~frame["allocated"], "gpu_hours"].sum()
    assert (cap["stranded_gpu_hours"] <= cap["free_gpu_hours"] + 1e-9).all()
    assert cap["free_gpu_hours"].sum() == pytest.approx(free)
    out = queue_report(queues(), workloads(), the_pods, frame, POLICY, T0, end, price_book=BOOK)
    assert (
        out["allocated_gpu_hours"] <= out["quota_gpu_hours"] + out["borrowed_gpu_hours"] + 1e-9
    ).all()
    assert (out["stalled_gpu_hours"] <= out["allocated_gpu_hours"] + 1e-9).all()
