"""Decoding ``query_range`` answers into arrays: the fast reading gives what JSON says."""

from __future__ import annotations

import math
import random

import numpy as np
import orjson
import pytest

from gpuwatch.collectors import promjson
from gpuwatch.collectors.promjson import MatrixError

#: How Prometheus writes values: Go's shortest 'f' format, 'e' beyond 1e21 and below 1e-6.
TRICKY = ["0", "-0", "0.41", "100", "9223372036854775808", "1e+21", "1e-07", "5e-324",
          "1.7976931348623157e+308", "0.30000000000000004", "123456789.12345679",
          "NaN", "+Inf", "-Inf", "-12.5"]  # fmt: skip


def _answer(result: list[dict[str, object]]) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def _expected(result: list[dict[str, object]]) -> tuple[list[object], list[float], list[float]]:
    points = [p for series in result for p in series["values"]]  # type: ignore[attr-defined]
    return (
        [s["metric"] for s in result],
        [float(p[0]) for p in points],
        [float(p[1]) for p in points],
    )


def _same(got: np.ndarray, want: list[float]) -> bool:
    """Bit for bit, but any NaN for a NaN (-0.0 is not 0.0)."""
    return len(got) == len(want) and all(
        (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
        for a, b in zip(got.tolist(), want, strict=True)
    )


def test_values_are_read_exactly_as_python_reads_them() -> None:
    rng = random.Random(7)
    values = TRICKY + [repr(rng.uniform(0, 1e4)) for _ in range(2000)]
    values += [repr(rng.lognormvariate(0, 20)) for _ in range(2000)]
    result = [
        {
            "metric": {"UUID": f"GPU-{i}", "pod": f"p-{i}"},
            "values": [
                [1763251200 + 60 * j + (0.5 if j % 5 == 0 else 0), v]
                for j, v in enumerate(values[i::3])
            ],
        }
        for i in range(3)
    ]
    assert promjson._scan(_answer(result)) is not None, "the fast path reads Prometheus's layout"
    matrix = promjson.decode(_answer(result))
    labels, ts, want = _expected(result)
    assert matrix.labels == labels
    assert matrix.counts.tolist() == [len(s["values"]) for s in result]  # type: ignore[arg-type]
    assert _same(matrix.ts, ts)
    assert _same(matrix.values, want)
    assert matrix.series_of_points.tolist() == [
        i for i, s in enumerate(result) for _ in s["values"]
    ]  # type: ignore[attr-defined]


def test_labels_that_look_like_the_layout_do_not_confuse_it() -> None:
    result = [
        {
            "metric": {"pod": 'x,"values":[[1,"2"]]},{"metric":', "ns": "]]"},
            "values": [[60, "1.5"]],
        },
        {"metric": {}, "values": [[120, "2"], [180, "3"]]},
    ]
    matrix = promjson.decode(_answer(result))
    assert matrix.labels == [result[0]["metric"], {}]
    assert matrix.ts.tolist() == [60.0, 120.0, 180.0]
    assert matrix.values.tolist() == [1.5, 2.0, 3.0]


@pytest.mark.parametrize(
    "body",
    [
        # keys in another order, extra keys, native histograms: the full JSON reading
        b'{"data":{"result":[{"values":[[60,"1"]],"metric":{"a":"b"}}],"resultType":"matrix"},"status":"success"}',
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[60,"1"]],"histograms":[]}]}}',
        b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[60,"1"]]}]},"warnings":["w"]}',
    ],
)
def test_other_layouts_are_read_in_full(body: bytes) -> None:
    matrix = promjson.decode(body)
    assert matrix.labels == [{"a": "b"}]
    assert matrix.ts.tolist() == [60.0]
    assert matrix.values.tolist() == [1.0]


def test_an_empty_result_and_errors() -> None:
    empty = promjson.decode(_answer([]))
    assert empty.labels == [] and len(empty.ts) == 0
    with pytest.raises(MatrixError, match="expected a matrix"):
        promjson.decode(b'{"status":"success","data":{"resultType":"vector","result":[]}}')
    with pytest.raises(MatrixError, match="bad query"):
        promjson.decode(b'{"status":"error","errorType":"bad_data","error":"bad query"}')
    with pytest.raises(MatrixError, match="not JSON"):
        promjson.decode(b"<html>proxy error</html>")


def test_chunks_of_one_query_concatenate_in_order() -> None:
    first = promjson.decode(_answer([{"metric": {"a": "1"}, "values": [[60, "1"]]}]))
    second = promjson.decode(_answer([{"metric": {"a": "1"}, "values": [[120, "2"], [180, "3"]]}]))
    both = promjson.concat([first, second])
    assert both.labels == [{"a": "1"}, {"a": "1"}]
    assert both.counts.tolist() == [1, 2]
    assert both.values.tolist() == [1.0, 2.0, 3.0]


def test_each_series_has_its_labels_as_bytes_equal_for_equal_labels() -> None:
    same = {"UUID": "GPU-a", "pod": "p"}
    result = [
        {"metric": same, "values": [[1, "0.5"]]},
        {"metric": {"UUID": "GPU-b"}, "values": [[1, "0.5"]]},
        {"metric": dict(same), "values": [[2, "0.7"]]},
    ]
    fast = promjson.decode(_answer(result))
    slow = promjson.from_series(result)
    for matrix in (fast, slow):
        assert [orjson.loads(key) for key in matrix.keys] == [s["metric"] for s in result]
        assert matrix.keys[0] == matrix.keys[2] != matrix.keys[1]
    both = promjson.concat([fast, slow])
    assert both.keys == fast.keys + slow.keys
