"""Column widths from the text a table shows (:mod:`gpuwatch.app.grid_widths`).

Expected widths are worked out by hand from the module's documented character widths: capitals
and digits 9 px, narrow characters 4 px, wide ones 11.5 px, others 7.2 px; cells padded by
58 px, bold headings scaled by 1.1 and padded by 62 px; at least 90 px, at most 1,200 px.
"""

from __future__ import annotations

import pytest

from gpuwatch.app import grid
from gpuwatch.app.grid_widths import char_px, column_width, shown, text_px, widths


def test_a_column_is_as_wide_as_its_widest_cell() -> None:
    column = grid.text_column("node", "N")
    rows = [{"node": "aaaaaaaaaa"}, {"node": "WWWWWWWWWW"}, {"node": "iiii"}]
    # "WWWWWWWWWW": 10 × 11.5 = 115 px, + 58 = 173
    assert column_width(column, rows) == 173


def test_a_heading_wider_than_every_cell_sets_the_width() -> None:
    column = grid.text_column("team", "MMMMMMMMMMMM")
    # 12 × 11.5 = 138 px, × 1.1 = 151.8, + 62 = 213.8: 214
    assert column_width(column, [{"team": "a"}]) == 214


def test_no_column_is_narrower_than_the_grids_minimum_or_wider_than_the_maximum() -> None:
    column = grid.text_column("x", "x")
    assert column_width(column, [{"x": "a"}]) == 90
    assert column_width(column, [{"x": "W" * 200}]) == 1200
    assert column_width(column, []) == 90


def test_numbers_are_measured_as_the_grid_shows_them() -> None:
    money = grid.money_column("cost", "c", total=False)
    hours = grid.number_column("hours", "h", 1)
    assert shown(money, 1234567.891) == "$1,234,567.89"  # d3.format("$,.2f")
    assert shown(money, -5.0) == "−$5.00"
    assert shown(hours, 12345.0) == "12,345.0"
    assert shown(hours, None) == ""
    # "12,345.0": six digits × 9 + "," and "." × 4 = 62 px, + 58 = 120
    assert column_width(hours, [{"hours": 12345.0}]) == 120


def test_a_summed_column_is_as_wide_as_its_total() -> None:
    money = grid.money_column("cost", "c")
    rows = [{"cost": 600000.0}, {"cost": 500000.0}]
    # the total "$1,100,000.00": "$" and nine digits × 9 = 90, "," "," "." × 4 = 12; + 58 = 160
    # (each cell, "$600,000.00": "$" and eight digits × 9 = 81, "," "." × 4 = 8; + 58 = 147)
    assert column_width(money, rows) == 160
    alone = grid.money_column("cost", "c", total=False)
    assert column_width(alone, rows) == 147


def test_wrapped_columns_share_the_rest_of_the_width() -> None:
    columns = [grid.text_column("a", "a"), grid.wrapped_column("why", "why")]
    assert widths(columns, [{"a": "x", "why": "long " * 100}]) == {"a": 90}


def test_a_grid_gives_its_columns_widths_and_measures_nothing_in_the_browser() -> None:
    columns = [grid.text_column("name", "Name"), grid.wrapped_column("why", "Why")]
    export = grid.Export("t", "T", "7d", "7d", {})
    table = grid.grid("t-grid", columns, [{"name": "WWWWWWWWWW", "why": "w"}], export)
    ag = table.children[1]
    definitions = {spec["field"]: spec for spec in ag.columnDefs}
    assert definitions["name"]["width"] == 173
    assert "width" not in definitions["why"]
    assert getattr(ag, "columnSize", None) is None


def test_a_negative_number_is_measured_with_its_sign() -> None:
    hours = grid.number_column("hours", "h", 1)
    rows = [{"hours": -99999.0}, {"hours": 5.0}, {"hours": None}, {"hours": float("nan")}]
    # "−99,999.0": the sign 11.5, six digits × 9 = 54, "," and "." × 4 = 8: 73.5 + 58 = 131.5
    assert column_width(hours, rows) == 132
    # "123,456.0", the largest: seven digits × 9 = 63, + 8 = 71, + 58 = 129 ("−1.0": 33.5)
    assert column_width(hours, [{"hours": 9.0}, {"hours": 123456.0}, {"hours": -1.0}]) == 129


def test_a_text_is_as_wide_as_its_characters() -> None:
    # the counted path (ASCII) and the character-by-character one agree, and non-ASCII text
    # ("·", "É", "−"), like text with control characters, is measured character by character
    texts = ("NVIDIA A100-SXM4-80GB", "ml-platform", "$1,234.50", "GPU·h", "Émile", "−3")
    texts += ("a\x03b", "")
    for text in texts:
        assert text_px(text) == pytest.approx(sum(char_px(char) for char in text))
    assert text_px("Ii.") == pytest.approx(3 * 4.0)
    assert text_px("mW%") == pytest.approx(3 * 11.5)
    assert text_px("A9$") == pytest.approx(3 * 9.0)
    assert text_px("abc") == pytest.approx(3 * 7.2)
