"""Numbers in sentences, the same way in every message."""

from __future__ import annotations


def counted(count: int, noun: str) -> str:
    """``1 row``, ``2 rows``: ``count`` and ``noun``, plural (an ``s``) unless one."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
