"""The dashboard's time windows, as the URL's ``window`` parameter names them. Pure.

- a rolling preset (``24h``, ``3d``, ``7d``, ``14d``, ``30d``): that long, ending at the hour
  after the last sample;
- ``mtd`` (month to date): from the first of the UTC month of the last sample to that end;
- ``last-month``: the whole UTC calendar month before that one;
- any range ``FROM..TO`` of UTC instants, each ``YYYY-MM-DD`` (a whole day: ``TO``'s day is
  included) or ``YYYY-MM-DDTHH`` (that hour: ``TO`` is where the window ends), e.g.
  ``2026-11-01..2026-11-14`` or ``2026-11-02T06..2026-11-03T18``.

Every window is hour-aligned, and its bounds are ``[start_ts, end_ts)``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from gpuwatch.domain.durations import DAY_S, HOUR_S

#: Rolling presets and their length in days.
ROLLING: dict[str, float] = {"24h": 1, "3d": 3, "7d": 7, "14d": 14, "30d": 30}
MONTH_TO_DATE, LAST_MONTH = "mtd", "last-month"
#: Every preset, with its name as shown, in the order the filter bar offers them.
PRESETS: dict[str, str] = {
    "24h": "24 hours",
    "3d": "3 days",
    "7d": "7 days",
    "14d": "14 days",
    "30d": "30 days",
    MONTH_TO_DATE: "Month to date",
    LAST_MONTH: "Last month",
}
#: The longest range a window may span.
MAX_RANGE_DAYS = 400
_POINT = r"(\d{4}-\d{2}-\d{2})(?:T(\d{2}))?"
_RANGE = re.compile(rf"{_POINT}\.\.{_POINT}")


class WindowError(ValueError):
    """A window the URL or the range form gives that is not one (the message says why)."""


def _instant(day: str, hour: str | None, *, end: bool) -> int:
    try:
        midnight = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError as error:
        raise WindowError(f"{day} is not a date (YYYY-MM-DD)") from error
    if hour is None:
        return int(midnight.timestamp()) + (DAY_S if end else 0)
    if int(hour) > 23:
        raise WindowError(f"T{hour} is not an hour (00 to 23)")
    return int(midnight.timestamp()) + int(hour) * HOUR_S


def range_bounds(text: str) -> tuple[int, int]:
    """``[start_ts, end_ts)`` of a range ``FROM..TO``; :class:`WindowError` if it is none."""
    found = _RANGE.fullmatch(text.strip())
    if found is None:
        raise WindowError(
            f"{text!r} is not a range: write FROM..TO, each YYYY-MM-DD or YYYY-MM-DDTHH (UTC)"
        )
    start = _instant(found[1], found[2], end=False)
    end = _instant(found[3], found[4], end=True)
    if end <= start:
        raise WindowError(f"the range {text!r} ends before it starts")
    if end - start > MAX_RANGE_DAYS * DAY_S:
        raise WindowError(f"the range {text!r} spans more than {MAX_RANGE_DAYS} days")
    return start, end


def is_window(text: str | None) -> bool:
    """Whether ``text`` names a window (a preset or a valid range)."""
    if not text:
        return False
    if text in PRESETS:
        return True
    try:
        range_bounds(text)
    except WindowError:
        return False
    return True


def _month_start(ts: int) -> datetime:
    day = datetime.fromtimestamp(ts, UTC)
    return day.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def bounds(window: str, end_ts: int) -> tuple[int, int]:
    """``[start_ts, end_ts)`` of ``window`` when the data ends at ``end_ts`` (an hour)."""
    if window in ROLLING:
        return end_ts - int(ROLLING[window] * DAY_S), end_ts
    if window == MONTH_TO_DATE:
        return int(_month_start(end_ts - 1).timestamp()), end_ts
    if window == LAST_MONTH:
        this_month = _month_start(end_ts - 1)
        before = _month_start(int((this_month - timedelta(days=1)).timestamp()))
        return int(before.timestamp()), int(this_month.timestamp())
    return range_bounds(window)


def range_text(start_ts: int, end_ts: int) -> str:
    """The range ``[start_ts, end_ts)`` as the URL writes it: whole days as dates (the last
    one included), else hours."""
    if start_ts % DAY_S == 0 and end_ts % DAY_S == 0:
        return f"{_day(start_ts)}..{_day(end_ts - DAY_S)}"
    return f"{_hour(start_ts)}..{_hour(end_ts)}"


def _day(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def _hour(ts: int) -> str:
    return datetime.fromtimestamp(ts - ts % HOUR_S, UTC).strftime("%Y-%m-%dT%H")


def label(window: str) -> str:
    """The window's name as shown: a preset's name, or a range as ``FROM to TO UTC``."""
    if window in PRESETS:
        return PRESETS[window]
    start, end = range_bounds(window)
    shown = "%Y-%m-%d %H:%M"
    first = datetime.fromtimestamp(start, UTC).strftime(shown)
    return f"{first} to {datetime.fromtimestamp(end, UTC).strftime(shown)} UTC"
