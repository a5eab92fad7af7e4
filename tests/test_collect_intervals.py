"""Where a coarse-interval reading is stored: the unit's last row in its interval, else (a
count) its first row within the next interval, else nowhere."""

from __future__ import annotations

import numpy as np

from gpuwatch.collectors.intervals import count_plan, mean_plan, place

NAN = float("nan")


def _place(
    rows: list[tuple[int, int]], readings: list[tuple[int, int, float]], carry: bool
) -> list[float | None]:
    unit, ts = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    r = [np.array(c) for c in zip(*readings, strict=True)]
    out = place((unit, ts), (r[0].astype(np.int64), r[1].astype(np.int64), r[2]), 60, 900, carry)
    return [None if np.isnan(v) else float(v) for v in out]


# unit 0: rows at 0, 300, 840 (the block end), 1200; unit 1: rows at 60 and 1000
ROWS = [(0, 0), (0, 300), (0, 840), (0, 1200), (1, 60), (1, 1000)]


def test_a_reading_sits_on_its_units_last_row_of_the_interval() -> None:
    got = _place(ROWS, [(0, 840, 3.0), (1, 840, 2.0), (0, 1740, 4.0)], carry=True)
    assert got == [None, None, 3.0, 4.0, 2.0, None]


def test_a_count_without_row_in_its_interval_goes_on_the_next_row_within_15_minutes() -> None:
    # unit 0: 840 -> row 0 (in (-60, 840]); 1740 has no row in (840, 1740]: carried to 1800;
    # 3540 has no row in (2640, 3540] nor in (3540, 4440]: not stored. Unit 1: 1000.
    rows = [(0, 0), (0, 1800), (1, 1000)]
    got = _place(rows, [(0, 840, 1.0), (0, 1740, 2.0), (1, 1740, 5.0), (0, 3540, 7.0)], True)
    assert got == [1.0, 2.0, 5.0]


def test_a_carried_count_adds_to_the_rows_own_and_a_mean_is_never_carried() -> None:
    rows = [(0, 1740), (0, 1800), (0, 2640)]
    readings = [(0, 840, 1.0), (0, 1740, 2.0), (0, 2640, 4.0)]
    assert _place(rows, readings, carry=True) == [3.0, None, 4.0]
    rows = [(0, 1800), (0, 2640)]
    assert _place(rows, readings[1:2] + readings[2:], carry=False) == [None, 4.0]
    assert _place(rows, readings[1:2] + readings[2:], carry=True) == [2.0, 4.0]


def test_the_page_plans_partition_its_time_at_block_ends() -> None:
    # a page of instants 420..2460 (a 60 s step): (360, 840], (840, 1740], (1740, 2460]
    assert count_plan(420, 2460, 60, 900) == ((1740, 1740), [(840, 480), (2460, 720)])
    assert mean_plan(420, 2460, 60, 900) == (840, 1740)
    # a page on block boundaries: whole blocks only
    assert count_plan(900, 2640, 60, 900) == ((1740, 2640), [])
