"""One GPU unit's raw samples in a window, read through the primary key alone.

``gpu_samples`` is keyed and clustered by ``(ts, gpu_id)`` and has no other index (migration
0013): a second B-tree made every sample written dearer, and one unit's history is read far less
often than samples are written. The read walks the window's stored instants instead, one probe
of the key for each (the next instant after the last one), and looks the unit up at each of them:
two probes per instant, whatever the number of GPU units, where a range scan of the key would
read every unit's samples of the window. Both SQLite and PostgreSQL run the same statement.
"""

from __future__ import annotations

from sqlalchemy import TextClause, text

from gpuwatch.store.models import SAMPLE_FIELDS, GpuSample

_TABLE = GpuSample.__tablename__

#: The window's distinct instants (``instants``), then the unit's sample at each.
_SQL = f"""
WITH RECURSIVE instants(ts) AS (
    SELECT MIN(ts) FROM {_TABLE} WHERE ts >= :start_ts AND ts < :end_ts
  UNION ALL
    SELECT (SELECT MIN(s.ts) FROM {_TABLE} s WHERE s.ts > instants.ts AND s.ts < :end_ts)
    FROM instants WHERE instants.ts IS NOT NULL
)
SELECT {", ".join(f"g.{name}" for name in SAMPLE_FIELDS)}
FROM instants JOIN {_TABLE} g ON g.ts = instants.ts AND g.gpu_id = :gpu_id
ORDER BY g.ts
"""  # noqa: S608 - constants only


def history_query(gpu_id: int, start_ts: int, end_ts: int) -> TextClause:
    """The samples of ``gpu_id`` with ``start_ts <= ts < end_ts``, oldest first, in
    :data:`~gpuwatch.store.models.SAMPLE_FIELDS` order."""
    params = {"gpu_id": int(gpu_id), "start_ts": int(start_ts), "end_ts": int(end_ts)}
    return text(_SQL).bindparams(**params)
