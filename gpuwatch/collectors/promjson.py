"""A range query's JSON answer → arrays, without a Python object per point (pure, no I/O).

``/api/v1/query_range`` answers ``{"status":"success","data":{"resultType":"matrix","result":
[{"metric":{...},"values":[[1763251200,"0.41"],...]},...]}}``. A page of 2,000 GPUs is millions
of points; decoding them as JSON lists and strings costs seconds and gigabytes, so the answer is
read in one pass: each series' labels with ``orjson``, and all the ``values`` arrays at once with
the C parser of :func:`pandas.read_csv` (correctly rounded, as Python's ``float``). An answer laid
out otherwise (another server, native histograms) is decoded with ``orjson`` in full instead: the
result is the same either way.

A value that is not a number (``"abc"``, ``null``, a point without its value) never fails the
answer: the point is skipped and counted against its series (``Matrix.malformed``). ``"NaN"``
and ``"+Inf"``/``"-Inf"`` are Prometheus values and read as such (the DCGM reader then treats
them as no reading). Label values that are not strings are dropped.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pandas as pd

_HEAD = b'{"status":"success","data":{"resultType":"matrix","result":['
_METRIC = b'{"metric":'
_VALUES = b',"values":['
#: ``]`` ends a point's line, ``[`` and ``"`` go: ``[t,"v"],[t,"v"]`` → ``t,v\n,t,v\n``.
_TO_CSV = bytes.maketrans(b"]", b"\n")
_CSV_OPTIONS: dict[str, Any] = (
    {"keep_default_na": False, "na_values": ["NaN"]}
    | ({} if tuple(int(p) for p in pd.__version__.split(".")[:2]) >= (3, 1) else
    {"float_precision": "round_trip"})
)  # fmt: skip


class MatrixError(ValueError):
    """The answer is not a successful matrix."""


@dataclass(frozen=True)
class Matrix:
    """Series of one range query: labels per series, and per point its instant and value.

    The points of series ``i`` are ``ts[o:o + counts[i]]`` with ``o = counts[:i].sum()``.
    ``keys[i]`` is series ``i``'s labels as JSON bytes: equal labels, equal keys (within one
    server's answers), so a reader can remember what it made of a series' labels.
    ``malformed[i]``: the points of series ``i`` skipped for a malformed value (None: none).
    """

    labels: list[dict[str, str]]
    counts: np.ndarray
    ts: np.ndarray
    values: np.ndarray
    keys: list[bytes]
    malformed: np.ndarray | None = None

    @property
    def malformed_counts(self) -> np.ndarray:
        """Per series, the points skipped for a malformed value."""
        if self.malformed is None:
            return np.zeros(len(self.labels), dtype=np.int64)
        return self.malformed

    @property
    def series_of_points(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.labels), dtype=np.int64), self.counts)


def empty_matrix() -> Matrix:
    none = np.zeros(0, dtype=np.float64)
    return Matrix([], np.zeros(0, dtype=np.int64), none, none, [])


def concat(parts: Sequence[Matrix]) -> Matrix:
    """One matrix of several (the chunks of one long query, in order)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return empty_matrix()
    return Matrix(
        [labels for part in parts for labels in part.labels],
        np.concatenate([part.counts for part in parts]),
        np.concatenate([part.ts for part in parts]),
        np.concatenate([part.values for part in parts]),
        [key for part in parts for key in part.keys],
        None
        if all(part.malformed is None for part in parts)
        else np.concatenate([part.malformed_counts for part in parts]),
    )


def _number(value: object) -> float | None:
    """A point's value: a string Python reads as a float (``NaN``, ``+Inf`` included)."""
    if not isinstance(value, str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _point(point: object) -> tuple[float, float] | None:
    """``[t, "v"]`` as numbers; None for anything else."""
    if not isinstance(point, list | tuple) or len(point) != 2:
        return None
    ts, value = point[0], _number(point[1])
    if isinstance(ts, bool) or not isinstance(ts, int | float) or value is None:
        return None
    return float(ts), value


def _points(raw: object) -> tuple[np.ndarray, int]:
    """A series' points as an (n, 2) array, and how many were skipped as malformed."""
    if not isinstance(raw, list):
        return np.zeros((0, 2), dtype=np.float64), 1
    try:  # the usual case: well-formed points, read at once
        if all(isinstance(p, list) and len(p) == 2 and isinstance(p[1], str) for p in raw):
            return np.asarray(raw, dtype=np.float64).reshape(-1, 2), 0
    except (TypeError, ValueError):
        pass
    good = [parsed for parsed in map(_point, raw) if parsed is not None]
    array = np.asarray(good, dtype=np.float64).reshape(-1, 2)
    return array, len(raw) - len(good)


def _metric(series: object) -> dict[str, str]:
    metric = series.get("metric") if isinstance(series, Mapping) else None
    if not isinstance(metric, Mapping):
        return {}
    return {str(k): v for k, v in metric.items() if isinstance(v, str)}


def from_series(series_list: Sequence[Mapping[str, Any]]) -> Matrix:
    """A matrix of already decoded series (``{"metric": ..., "values": [[t, "v"], ...]}``);
    malformed points are skipped and counted (:attr:`Matrix.malformed`)."""
    labels: list[dict[str, str]] = []
    counts: list[int] = []
    bad: list[int] = []
    chunks: list[np.ndarray] = []
    for series in series_list:
        raw = series.get("values") if isinstance(series, Mapping) else None
        values, skipped = _points(raw)
        labels.append(_metric(series))
        counts.append(len(values))
        bad.append(skipped)
        chunks.append(values)
    stacked = np.concatenate(chunks) if chunks else np.zeros((0, 2), dtype=np.float64)
    keys = [orjson.dumps(metric) for metric in labels]
    malformed = np.asarray(bad, dtype=np.int64) if any(bad) else None
    return Matrix(
        labels, np.asarray(counts, dtype=np.int64), stacked[:, 0], stacked[:, 1], keys, malformed
    )


def decode(body: bytes) -> Matrix:
    """The matrix of a ``query_range`` answer; raises :class:`MatrixError` for anything else."""
    fast = _scan(body)
    if fast is not None:
        labels, keys, spans = fast
        parsed = _parse_points(body, spans)
        if parsed is not None:
            return Matrix(labels, *parsed, keys)
    return _decode_slow(body)


def _decode_slow(body: bytes) -> Matrix:
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise MatrixError(f"not JSON: {body[:120]!r}") from None
    if not isinstance(answer, dict):
        raise MatrixError("the answer is not a JSON object")
    data = answer.get("data")
    if not isinstance(data, dict) or answer.get("status") != "success":
        raise MatrixError(str(answer.get("error") or "unsuccessful answer")[:200])
    if data.get("resultType") != "matrix":
        raise MatrixError(f"expected a matrix, got {data.get('resultType')!r}")
    result = data.get("result") or []
    if not isinstance(result, list):
        raise MatrixError("the matrix's result is not a list of series")
    return from_series(result)


def _scan(
    body: bytes,
) -> tuple[list[dict[str, str]], list[bytes], list[tuple[int, int]]] | None:
    """Labels (parsed, and as bytes) and the byte span of each series' points, for Prometheus's
    own layout; else None.

    A label value cannot hold ``,"values":[`` (its quotes are escaped) and points hold no ``]]``,
    so plain searches find every boundary; anything unexpected gives up (None).
    """
    if not body.startswith(_HEAD):
        return None
    pos = len(_HEAD)
    labels: list[dict[str, str]] = []
    keys: list[bytes] = []
    spans: list[tuple[int, int]] = []
    if body.startswith(b"]", pos):
        return labels, keys, spans
    while True:
        found = _series_at(body, pos)
        if found is None:
            return None
        labels.append(found[0])
        keys.append(found[1])
        spans.append(found[2])
        pos = found[2][1] + 2  # past the series' closing "]}"
        if body.startswith(b"]", pos):
            return labels, keys, spans
        if not body.startswith(b",", pos):
            return None
        pos += 1


def _series_at(body: bytes, pos: int) -> tuple[dict[str, str], bytes, tuple[int, int]] | None:
    """``{"metric":{...},"values":[...]}`` at ``pos``: its labels, their bytes, points' span."""
    cut = body.find(_VALUES, pos)
    if not body.startswith(_METRIC, pos) or cut < 0 or not body.startswith(b"[", cut + 11):
        return None
    raw = body[pos + len(_METRIC) : cut]
    try:
        metric = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    end = body.find(b"]]", cut)
    if not isinstance(metric, dict) or end < 0 or not body.startswith(b"}", end + 2):
        return None
    if not all(isinstance(value, str) for value in metric.values()):
        return None
    return metric, raw, (cut + len(_VALUES), end + 1)


def _parse_points(
    body: bytes, spans: list[tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(counts, ts, values) of the points in ``spans``; None when they do not parse as numbers."""
    if not spans:
        none = np.zeros(0, dtype=np.float64)
        return np.zeros(0, dtype=np.int64), none, none
    raw = np.frombuffer(body, dtype=np.uint8)
    bounds = np.asarray(spans, dtype=np.int64)
    counts = _occurrences(raw, bounds, b"[")
    # One leading comma: every line then reads ``,t,v`` like those after a point separator.
    text = b",".join([b"", *(body[start:end] for start, end in spans)])
    text = text.translate(_TO_CSV, b'["')
    try:
        frame = pd.read_csv(
            io.BytesIO(text),
            header=None,
            names=["_", "ts", "value"],
            usecols=["ts", "value"],
            dtype=np.float64,
            engine="c",
            na_filter=True,
            **_CSV_OPTIONS,
        )
    except (ValueError, pd.errors.ParserError):
        return None
    if len(frame) != int(counts.sum()):
        return None
    # Each point is ``t,"v"``: one comma inside it and one between points. A point without its
    # value has one comma less (read_csv would make its value NaN).
    commas = int(_occurrences(raw, bounds, b",").sum())
    if commas != 2 * int(counts.sum()) - int(np.count_nonzero(counts)):
        return None
    return counts, frame["ts"].to_numpy(), frame["value"].to_numpy()


def _occurrences(raw: np.ndarray, bounds: np.ndarray, byte: bytes) -> np.ndarray:
    """Per ``[start, end)`` row of ``bounds``, how often ``byte`` occurs in ``raw`` there."""
    at = np.flatnonzero(raw == byte[0])
    inside: np.ndarray = np.searchsorted(at, bounds[:, 1]) - np.searchsorted(at, bounds[:, 0])
    return inside.astype(np.int64)
