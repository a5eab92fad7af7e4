"""Durations and instants as users write them: ``60s``, ``36h``, ``7d``, RFC 3339 times."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

#: Seconds in a minute, an hour, a day and a week: the one definition every layer imports.
MINUTE_S = 60
HOUR_S = 60 * MINUTE_S
DAY_S = 24 * HOUR_S
WEEK_S = 7 * DAY_S

_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": MINUTE_S, "h": HOUR_S, "d": DAY_S, "w": WEEK_S}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(text: str) -> timedelta:
    """Parse a Prometheus-style duration (``90s``, ``1h30m``, ``7d``) or plain seconds.

    >>> parse_duration("1h30m")
    datetime.timedelta(seconds=5400)
    """
    raw = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        return timedelta(seconds=float(raw))
    pos = 0
    total = 0.0
    for match in _PART.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(raw) or not raw:
        raise ValueError(f"invalid duration {text!r}: use forms like 60s, 5m, 36h, 7d or 1h30m")
    return timedelta(seconds=total)


def format_duration(value: timedelta) -> str:
    """Render a duration the way Prometheus writes one (``1h30m``, ``7d``, ``90s``).

    >>> format_duration(timedelta(hours=1, minutes=30))
    '1h30m'
    """
    seconds = int(value.total_seconds())
    if seconds <= 0:
        return "0s"
    parts: list[str] = []
    for unit, size in (("d", DAY_S), ("h", HOUR_S), ("m", MINUTE_S), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def parse_instant(text: str, now: datetime) -> datetime:
    """Parse an RFC 3339 time, or a duration meaning that long before ``now``.

    >>> parse_instant("36h", datetime(2026, 11, 16, 12, tzinfo=UTC)).isoformat()
    '2026-11-15T00:00:00+00:00'
    """
    raw = text.strip()
    try:
        return now - parse_duration(raw)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"invalid time {text!r}: use RFC 3339 (2026-11-16T00:00:00Z) "
            "or a duration before now (7d, 36h)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def to_epoch_s(value: datetime) -> int:
    """Whole seconds since the Unix epoch (UTC)."""
    return int(value.timestamp())


def from_epoch_s(value: int | float) -> datetime:
    """A UTC datetime from seconds since the Unix epoch."""
    return datetime.fromtimestamp(value, tz=UTC)


def rfc3339(ts: int | float) -> str:
    """``2026-11-16T00:00:00Z`` for an epoch second: how instants are written in messages."""
    return from_epoch_s(ts).strftime("%Y-%m-%dT%H:%M:%SZ")
