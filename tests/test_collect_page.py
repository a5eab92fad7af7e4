"""A page of DCGM series → one row per GPU unit and instant: duplicates, shadowing, attribution."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from gpuwatch.collectors import dcgm
from gpuwatch.collectors.dcgm import page_samples, samples_from_results
from gpuwatch.collectors.dcgm_labels import unnamed
from gpuwatch.collectors.promjson import from_series
from gpuwatch.domain.labels import LabelVariants

T0 = 1_763_251_200


def _series(uuid: str, points: dict[int, str], **labels: str) -> dict[str, Any]:
    metric = {"UUID": uuid, "Hostname": "node-a", "modelName": "NVIDIA L40S", **labels}
    return {"metric": metric, "values": [[T0 + t, v] for t, v in points.items()]}


def _results() -> dict[str, list[dict[str, Any]]]:
    return {
        "util_prof": [
            # one unit, its pod changing within a step: two series at the same instant
            _series("GPU-a", {0: "0.2", 60: "0.3"}, pod="p1", namespace="ml"),
            _series("GPU-a", {60: "0.7", 120: "0.4"}, pod="p2", namespace="ml"),
            # utilization without a pod outranks memory with one
            _series("GPU-b", {0: "0.5"}),
            # a blank sentinel: missing, and the device utilization takes over
            _series("GPU-c", {0: "9.2e18"}, pod="p3", namespace="ml"),
            # MIG: the whole-GPU series is ignored, instances are units
            _series("GPU-m", {0: "0.9"}),
            _series("GPU-m", {0: "0.1"}, GPU_I_ID="1", GPU_I_PROFILE="1g.10gb"),
        ],
        "util_dev_pct": [_series("GPU-c", {0: "40"})],
        "fb_used_mib": [_series("GPU-b", {0: "100"}, pod="p4", namespace="ml")],
        "fb_used_last_mib": [_series("GPU-a", {0: "90"}), _series("GPU-d", {0: "9.2e18"})],
        "fb_free_mib": [_series("GPU-a", {0: "910"})],
        "fb_reserved_mib": [],
        "power_w": [_series("GPU-e", {0: "70"}, pod="p5", namespace="web")],
        "temp_c": [],
        "xid": [],
    }


def _frame() -> pd.DataFrame:
    frame = samples_from_results(_results(), LabelVariants(), 60)
    return frame.set_index(["uuid", "mig_gi_id", "ts"])


def test_one_row_per_unit_and_instant_with_a_reading() -> None:
    frame = _frame()
    assert sorted(frame.index) == [
        ("GPU-a", -1, T0), ("GPU-a", -1, T0 + 60), ("GPU-a", -1, T0 + 120),
        ("GPU-b", -1, T0), ("GPU-c", -1, T0), ("GPU-e", -1, T0), ("GPU-m", 1, T0),
    ]  # fmt: skip
    # GPU-d has only a blank reading: no row, not a zero


def test_several_series_at_one_instant_keep_the_largest_reading_and_the_first_series() -> None:
    row = _frame().loc[("GPU-a", -1, T0 + 60)]
    assert row["util_ratio"] == 0.7
    assert row["pod"] == "p1", "equally authoritative series: the first one attributes"
    assert _frame().loc[("GPU-a", -1, T0 + 120)]["pod"] == "p2"


def test_attribution_prefers_utilization_then_a_pod() -> None:
    frame = _frame()
    assert isinstance(frame.loc[("GPU-b", -1, T0)]["pod"], float), "no pod on the util series"
    assert frame.loc[("GPU-b", -1, T0)]["fb_used_mib"] == 100.0
    assert frame.loc[("GPU-e", -1, T0)]["pod"] == "p5", "any series attributes without util"
    assert frame.loc[("GPU-c", -1, T0)]["pod"] == "p3"


def test_signal_sentinels_and_memory_total() -> None:
    frame = _frame()
    c = frame.loc[("GPU-c", -1, T0)]
    assert (c["util_ratio"], c["util_signal"]) == (0.4, "dev_gpu_util")
    a = frame.loc[("GPU-a", -1, T0)]
    assert (a["util_ratio"], a["util_signal"]) == (0.2, "prof_gr_engine_active")
    assert a["fb_total_mib"] == 1000.0, "used + free, reserved missing counts 0"
    # no reading in its own window: missing (the collector's fallback applies), not a neighbour's
    assert math.isnan(frame.loc[("GPU-a", -1, T0 + 60)]["fb_total_mib"])
    assert math.isnan(frame.loc[("GPU-b", -1, T0)]["fb_total_mib"]), "never read: missing"


def test_capacity_fields_on_their_own_grid_fill_each_row_by_the_window_that_holds_it() -> None:
    """Each row takes the capacity instant whose window holds it, and only that one: where
    that window has no reading the row has none either (the collector's fallback applies), so
    a row's total never depends on which other instants a page holds."""
    minutes = {t: "0.5" for t in range(0, 3600, 60)}
    results = {
        "util_prof": [_series("GPU-a", minutes), _series("GPU-b", minutes)],
        # capacity instants T0, T0+900, ... each the last reading in (T - 900, T]
        "fb_used_last_mib": [
            _series("GPU-a", {0: "10", 900: "20", 2700: "30"}),
            _series("GPU-b", {1800: "5"}),
        ],
        "fb_free_mib": [
            _series("GPU-a", {0: "990", 900: "980", 2700: "1070"}),
            _series("GPU-b", {1800: "95"}),
        ],
        "fb_reserved_mib": [_series("GPU-a", {0: "24", 900: "24", 2700: "24"})],
    }
    frame = samples_from_results(results, LabelVariants(), 60, capacity_step_s=900)
    total = frame.set_index(["uuid", "ts"])["fb_total_mib"]
    assert len(frame) == 120, "capacity readings add no rows"
    # A row takes the last capacity instant at or before it, else the next one: [T0, T0+900)
    # the one at T0 (10 + 990 + 24), [T0+900, T0+1800) T0+900 (20 + 980 + 24), [T0+1800,
    # T0+2700) T0+1800 has no reading: the next, T0+2700 (30 + 1070 + 24), as [T0+2700, ...).
    assert total[("GPU-a", T0)] == total[("GPU-a", T0 + 840)] == 1024.0
    assert total[("GPU-a", T0 + 900)] == total[("GPU-a", T0 + 1740)] == 1024.0
    assert total[("GPU-a", T0 + 1800)] == total[("GPU-a", T0 + 3540)] == 1124.0
    # GPU-b read only at T0+1800: [T0+900, T0+2700) take it, the rest have no reading near.
    b = total.loc["GPU-b"]
    assert set(b[(b.index >= T0 + 900) & (b.index < T0 + 2700)]) == {100.0}
    assert b[(b.index < T0 + 900) | (b.index >= T0 + 2700)].isna().all()


def test_the_page_s_last_instant_stands_for_the_next_capacity_instant() -> None:
    """A page ending between capacity instants has its capacity read once more at its last
    instant (never after it), standing for the next instant: not mixed into the one before."""
    minutes = {t: "0.5" for t in range(780, 1200, 60)}  # a GPU that appeared at T0+780
    results = {
        "util_prof": [_series("GPU-n", minutes)],
        # read at the instant T0+900 and at the page's last instant T0+1140, used memory grown
        "fb_used_last_mib": [_series("GPU-n", {900: "300", 1140: "500"})],
        "fb_free_mib": [_series("GPU-n", {900: "700", 1140: "500"})],
        "fb_reserved_mib": [_series("GPU-o", {0: "10"})],  # the grid starts at T0
    }
    frame = samples_from_results(results, LabelVariants(), 60, capacity_step_s=900)
    assert frame["ts"].tolist() == [T0 + t for t in range(780, 1200, 60)]
    # each total from one instant's readings (300 + 700, 500 + 500), never 500 + 700
    assert frame["fb_total_mib"].tolist() == [1000.0] * 7


def test_mig_instances_shadow_the_whole_gpu() -> None:
    frame = _frame()
    assert ("GPU-m", -1, T0) not in frame.index
    assert frame.loc[("GPU-m", 1, T0)]["util_ratio"] == 0.1
    assert frame.loc[("GPU-m", 1, T0)]["mig_profile"] == "1g.10gb"


def test_arrays_and_json_give_the_same_page_and_a_window_keeps_its_units() -> None:
    results = _results()
    matrices = {name: from_series(series) for name, series in results.items()}
    page = page_samples(matrices, LabelVariants(), 60)
    pd.testing.assert_frame_equal(
        page.to_frame(), samples_from_results(results, LabelVariants(), 60)
    )
    later = page.between(T0 + 60, T0 + 180)
    assert later.units["uuid"].tolist() == ["GPU-a"]
    assert later.to_frame()["ts"].tolist() == [T0 + 60, T0 + 120]
    assert later["ts"].tolist() == [T0 + 60, T0 + 120]


def test_label_sets_are_read_without_the_metric_name() -> None:
    assert unnamed(b'{"UUID":"GPU-1","__name__":"DCGM_FI_DEV_FB_USED","gpu":"0"}') == (
        b'{"UUID":"GPU-1","gpu":"0"}'
    )
    assert unnamed(b'{"__name__":"A","gpu":"0"}') == b'{"gpu":"0"}'
    assert unnamed(b'{"UUID":"GPU-1","__name__":"A"}') == b'{"UUID":"GPU-1"}'
    assert unnamed(b'{"__name__":"A"}') == b"{}"
    assert unnamed(b'{"__name__":"A\\"B","pod":"p"}') == b'{"pod":"p"}'
    assert unnamed(b'{"pod":"__name__"}') == b'{"pod":"__name__"}'


def test_a_unit_read_with_and_without_its_metric_name_is_one_label_set() -> None:
    """``last_over_time`` keeps ``__name__``: the unit's identity is still worked out once."""
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in _results()}
    results["util_prof"] = [_series("GPU-x", {0: "0.5"}, pod="p", namespace="ml")]
    named = {"pod": "p", "namespace": "ml", "__name__": "DCGM_FI_DEV_FB_USED"}
    results["fb_used_last_mib"] = [_series("GPU-x", {0: "90"}, **named)]
    named["__name__"] = "DCGM_FI_DEV_FB_FREE"
    results["fb_free_mib"] = [_series("GPU-x", {0: "910"}, **named)]
    dcgm._identity.cache_clear()
    frame = samples_from_results(results, LabelVariants(), 60)
    assert dcgm._identity.cache_info().misses == 1
    assert frame[["uuid", "pod"]].to_numpy().tolist() == [["GPU-x", "p"]]
