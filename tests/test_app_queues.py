"""The Queues page's figures and rows, as functions of hand-built analytics frames (the pages
themselves, on a store: tests/test_app_queues_pages.py).

Two clusters: c1 has a cohort ``research`` of ``team-a`` (8 A100s of quota, 12 GPU-hours of it
idle while team-b's work waited: $48.00) and ``team-b`` (4 GPUs, borrowed 3 GPU-hours); c2 has
no queue. Gang ``jobset/train-x`` of team-b held 3 GPU-hours ($12.00) while a sibling waited.
"""

from __future__ import annotations

import pandas as pd

from gpuwatch.app.data import Filters
from gpuwatch.app.figures_queues import hourly, lending_figure, queue_figure, stranded_figure
from gpuwatch.app.views_queues import (
    Scheduling,
    SchedulingTotals,
    queues_view_of,
    team_queues,
    totals_of,
)

H0 = 1_763_337_600  # 2025-11-17 00:00 UTC
H = 3600
A100 = "NVIDIA A100-SXM4-80GB"


def queues() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cluster": ["c1", "c1"],
            "cohort": ["research", "research"],
            "queue": ["team-a", "team-b"],
            "flavor": ["a100", "a100"],
            "gpu_model": [A100, A100],
            "nominal_gpus": [8.0, 4.0],
            "quota_gpu_hours": [24.0, 12.0],
            "allocated_gpu_hours": [12.0, 15.0],
            "busy_gpu_hours": [6.0, 14.0],
            "borrowed_gpu_hours": [0.0, 3.0],
            "lent_gpu_hours": [3.0, 0.0],
            "pending_gpu_hours": [0.0, 6.0],
            "stalled_gpu_hours": [0.0, 3.0],
            "idle_quota_gpu_hours": [12.0, 0.0],
            "idle_quota_usd": [48.0, 0.0],
        }
    )


def queue_hours() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": [H0, H0 + H, H0 + 3 * H, H0],
            "cluster": ["c1"] * 4,
            "cohort": ["research"] * 4,
            "queue": ["team-a", "team-a", "team-a", "team-b"],
            "flavor": ["a100"] * 4,
            "quota_gpus": [8.0, 8.0, 8.0, 4.0],
            "allocated_gpus": [2.0, 9.0, 1.0, 4.0],
            "busy_gpus": [1.0, 8.5, 0.5, 4.0],
            "pending_gpus": [3.0, 0.0, 0.0, 1.0],
        }
    )


def gangs() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cluster": ["c1"],
            "namespace": ["b-train"],
            "gang_kind": ["jobset"],
            "gang_name": ["train-x"],
            "queue": ["team-b"],
            "team": ["team-b"],
            "workload_kind": ["JobSet"],
            "workload": ["train-x"],
            "gang_size": [4],
            "running_pods": [3],
            "pending_pods": [1],
            "stalled_gpu_hours": [3.0],
            "stalled_cost_usd": [12.0],
            "first_stalled_ts": [H0 + 600],
            "last_stalled_ts": [H0 + 3 * H],
        }
    )


def capacity() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cluster": ["c1", "c2"],
            "gpu_model": [A100, "Tesla T4"],
            "free_gpu_hours": [6.0, 2.0],
            "stranded_gpu_hours": [4.0, 0.0],
            "stranded_cost_usd": [16.0, 0.0],
            "largest_unplaceable_request": [4, 0],
        }
    )


def capacity_hours() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": [H0, H0 + H, H0],
            "cluster": ["c1", "c1", "c2"],
            "gpu_model": [A100, A100, "Tesla T4"],
            "free_gpus": [3.0, 3.0, 1.0],
            "stranded_gpus": [0.0, 3.0, 0.0],
            "largest_unplaceable_request": [0, 4, 0],
        }
    )


def pods() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cluster": ["c1", "c1", "c1", "c2"],
            "namespace": ["a-lab", "b-train", "b-train", "web"],
            "team": ["team-a", "team-b", "team-b", "team-web"],
            "queue": ["team-a", "team-b", pd.NA, pd.NA],
        }
    )


def workloads() -> pd.DataFrame:
    """Queued work: b-train's waits in team-b, a-lab's in team-a's second queue."""
    return pd.DataFrame(
        {
            "cluster": ["c1", "c1"],
            "namespace": ["b-train", "a-lab"],
            "queue": ["team-b", "team-a-spot"],
        }
    )


def moves() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cluster": ["c1"],
            "gpu_model": [A100],
            "ts": [H0 + H],
            "request_gpus": [4],
            "node": ["n1"],
            "move_gpus": [1],
        }
    )


def example(quotas: int = 2) -> Scheduling:
    quota_rows = queues()[["cluster", "queue"]].head(quotas)
    return Scheduling(
        queues=queues().head(quotas),
        queue_hours=queue_hours(),
        gangs=gangs(),
        capacity=capacity(),
        capacity_hours=capacity_hours(),
        moves=moves(),
        quotas=quota_rows,
        workloads=workloads(),
    )


# -- figures -------------------------------------------------------------------------------


def test_hourly_values_break_the_line_where_an_hour_has_no_row() -> None:
    x, y = hourly(pd.Series([H0 + 3 * H, H0]), pd.Series([2.0, 1.0]))
    assert x == [
        "2025-11-17T00:00:00",
        "2025-11-17T01:00:00",
        "2025-11-17T02:00:00",
        "2025-11-17T03:00:00",
    ]
    assert y == [1.0, None, None, 2.0]
    assert hourly(pd.Series([], dtype="int64"), pd.Series([], dtype="float64")) == ([], [])


def test_queue_figure_draws_quota_allocated_busy_and_pending() -> None:
    rows = queue_hours()
    figure = queue_figure(rows[rows["queue"] == "team-a"], "team-a · a100 (c1)")
    names = [t["name"] for t in figure["data"]]
    assert names == [
        "quota (nominal)",
        "allocated (held by its pods)",
        "busy (utilization-weighted)",
        "pending (GPUs its waiting work asks for)",
    ]
    assert [t["y"] for t in figure["data"]] == [
        [8.0, 8.0, None, 8.0],
        [2.0, 9.0, None, 1.0],
        [1.0, 8.5, None, 0.5],
        [3.0, 0.0, None, 0.0],
    ]
    assert figure["data"][0]["x"][0] == "2025-11-17T00:00:00"
    assert figure["data"][0]["line"]["dash"] == "dash"
    assert figure["layout"]["title"]["text"].startswith("team-a · a100 (c1): quota vs allocated")
    empty = queue_figure(rows.head(0), "team-c (c1)")
    assert empty["data"] == []
    assert empty["layout"]["annotations"][0]["text"] == "team-c (c1): no hours in this window"


def test_lending_figure_pairs_borrowed_and_lent_per_queue() -> None:
    figure = lending_figure(queues())
    borrowed, lent = figure["data"]
    assert borrowed["name"] == "borrowed" and lent["name"] == "lent"
    assert borrowed["y"] == ["team-a · a100 (c1)", "team-b · a100 (c1)"]
    assert borrowed["x"] == [0.0, 3.0]
    assert lent["x"] == [3.0, 0.0]
    assert figure["layout"]["barmode"] == "group"
    nothing = queues().assign(borrowed_gpu_hours=0.0, lent_gpu_hours=0.0)
    note = lending_figure(nothing)["layout"]["annotations"][0]["text"]
    assert note == "No queue borrowed or lent quota in this window"


def test_stranded_figure_draws_free_stranded_and_the_largest_request() -> None:
    figure = stranded_figure(capacity_hours())
    names = [t["name"] for t in figure["data"]]
    assert names == [
        f"free · {A100} (c1)",
        f"stranded · {A100} (c1)",
        f"largest unplaceable request · {A100} (c1)",
        "free · Tesla T4 (c2)",
        "stranded · Tesla T4 (c2)",
    ]
    free, stranded, request = figure["data"][:3]
    assert free["y"] == [3.0, 3.0] and stranded["y"] == [0.0, 3.0]
    assert request["x"] == ["2025-11-17T01:00:00"] and request["y"] == [4.0]
    assert request["mode"] == "markers"
    assert figure["data"][3]["y"] == [1.0]
    blank = stranded_figure(capacity_hours().head(0))
    assert blank["layout"]["annotations"][0]["text"] == "No free GPUs in this window"


# -- rows of the filters -------------------------------------------------------------------


def test_team_queues_are_those_its_pods_and_its_queued_work_name() -> None:
    out = team_queues(pods(), workloads())
    assert out.to_dict("records") == [
        {"team": "team-a", "cluster": "c1", "namespace": "a-lab", "queue": "team-a"},
        {"team": "team-a", "cluster": "c1", "namespace": "a-lab", "queue": "team-a-spot"},
        {"team": "team-b", "cluster": "c1", "namespace": "b-train", "queue": "team-b"},
    ]


def test_whole_fleet_view_keeps_every_row() -> None:
    view = queues_view_of(example(), pods(), Filters())
    assert list(view.queues["queue"]) == ["team-a", "team-b"]
    assert len(view.queue_hours) == 4
    assert list(view.gangs["gang_name"]) == ["train-x"]
    assert list(view.capacity["cluster"]) == ["c1", "c2"]
    assert view.has_queues


def test_a_team_sees_the_queues_it_submits_to_and_its_gangs() -> None:
    view = queues_view_of(example(), pods(), Filters(team="team-a"))
    assert list(view.queues["queue"]) == ["team-a"]
    assert list(view.queue_hours["queue"]) == ["team-a"] * 3
    assert view.gangs.empty
    # capacity is per cluster and GPU model: a team filter keeps it
    assert len(view.capacity) == 2
    team_b = queues_view_of(example(), pods(), Filters(team="team-b"))
    assert list(team_b.queues["queue"]) == ["team-b"]
    assert list(team_b.gangs["gang_name"]) == ["train-x"]


def test_one_queue_and_one_cluster() -> None:
    view = queues_view_of(example(), pods(), Filters(), queue="team-b")
    assert list(view.queues["queue"]) == ["team-b"]
    assert list(view.queue_hours["ts"]) == [H0]
    assert list(view.gangs["gang_name"]) == ["train-x"]
    other = queues_view_of(example(), pods(), Filters(), queue="team-a")
    assert other.gangs.empty
    c2 = queues_view_of(example(), pods(), Filters(cluster="c2"))
    assert c2.queues.empty and c2.gangs.empty
    assert not c2.has_queues
    assert list(c2.capacity["gpu_model"]) == ["Tesla T4"]
    assert c2.moves.empty


def test_no_quota_stored_means_no_queues() -> None:
    view = queues_view_of(example(quotas=0), pods(), Filters())
    assert not view.has_queues
    assert list(view.gangs["gang_name"]) == ["train-x"]


def test_totals_sum_the_rows_in_scope() -> None:
    assert totals_of(queues_view_of(example(), pods(), Filters())) == SchedulingTotals(
        stalled_gpu_hours=3.0,
        stalled_cost_usd=12.0,
        stalled_gangs=1,
        stranded_gpu_hours=4.0,
        stranded_cost_usd=16.0,
    )
    c2 = totals_of(queues_view_of(example(), pods(), Filters(cluster="c2")))
    assert c2 == SchedulingTotals(0.0, 0.0, 0, 0.0, 0.0)
