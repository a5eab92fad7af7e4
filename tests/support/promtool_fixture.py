"""The input series of a ``promtool test rules`` case, as the store would hold them.

So that the store-side alert evaluation is tested on the very scenarios the rendered rules are:
each DCGM series of a case becomes stored samples (one row per GPU, holder and instant), with
the labels normalised as the rules normalise them (``exported_*`` over plain, ``UUID``/``uuid``
plus ``/<GPU_I_ID>``, ``Hostname``/``hostname``) and blank-reading sentinels as missing data.
Series the store does not keep (``up``, kube-state-metrics) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pandas as pd

from gpuwatch.domain.durations import parse_duration

SENTINEL_LIMIT = 9.2e18
_TOKEN = re.compile(r"^(?P<a>[-+]?[0-9.e+]+?)(?:(?P<op>[-+])(?P<b>[0-9.e]+))?x(?P<n>\d+)$")
_SERIES = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)\{(?P<labels>.*)\}$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_FIELDS = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "prof",
    "DCGM_FI_DEV_GPU_UTIL": "dev",
    "DCGM_FI_DEV_FB_USED": "fb_used",
    "DCGM_FI_DEV_FB_FREE": "fb_free",
    "DCGM_FI_DEV_FB_RESERVED": "fb_reserved",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
}


def expand(values: str) -> list[float | None]:
    """promtool's series notation: ``a``, ``axn`` and ``a+bxn`` (n + 1 values), ``_`` and
    ``_xn`` (n missing), ``stale`` (missing: the store keeps no staleness markers)."""
    out: list[float | None] = []
    for token in values.split():
        if token in ("_", "stale"):
            out.append(None)
        elif token.startswith("_x"):
            out.extend([None] * int(token[2:]))
        elif match := _TOKEN.match(token):
            a, n = float(match["a"]), int(match["n"])
            b = float(match["b"] or 0) * (-1 if match["op"] == "-" else 1)
            out.extend(a + b * i for i in range(n + 1))
        else:
            out.append(float(token))
    return [None if v is not None and v > SENTINEL_LIMIT else v for v in out]


def _labels(series: str) -> tuple[str, dict[str, str]]:
    match = _SERIES.match(series.strip())
    assert match, series
    return match["name"], dict(_LABEL.findall(match["labels"]))


def _first(labels: dict[str, str], *names: str) -> str:
    return next((labels[n] for n in names if labels.get(n)), "")


def gpu_label(labels: dict[str, str]) -> str:
    """The rules' normalised ``gpu``: the UUID, plus ``/<GPU_I_ID>`` on a MIG instance."""
    uuid = _first(labels, "UUID", "uuid")
    return f"{uuid}/{labels['GPU_I_ID']}" if labels.get("GPU_I_ID") else uuid


def _readings(case: dict[str, Any]) -> Iterator[dict[str, Any]]:
    step_s = int(parse_duration(case["interval"]).total_seconds())
    for item in case["input_series"]:
        name, labels = _labels(item["series"])
        if name not in _FIELDS:
            continue
        holder = {
            "namespace": _first(labels, "exported_namespace", "namespace"),
            "pod": _first(labels, "exported_pod", "pod"),
        }
        identity = {
            "gpu": gpu_label(labels),
            "node": _first(labels, "Hostname", "hostname"),
            "gpu_model": labels.get("modelName", ""),
            **holder,
        }
        for i, value in enumerate(expand(item["values"])):
            if value is not None:
                yield {**identity, "ts": i * step_s, "field": _FIELDS[name], "value": value}


def stored_samples(case: dict[str, Any]) -> tuple[pd.DataFrame, dict[int, str]]:
    """The case's samples shaped as the store's (``SAMPLE_COLUMNS``), and ``gpu_id`` → gpu label."""
    keys = ["gpu", "node", "gpu_model", "namespace", "pod", "ts"]
    long = pd.DataFrame(list(_readings(case)))
    wide = long.pivot_table(index=keys, columns="field", values="value", aggfunc="last")
    wide = wide.reindex(columns=list(dict.fromkeys(_FIELDS.values()))).reset_index()
    gpus = sorted(wide["gpu"].unique())
    pods = sorted(p for p in wide["pod"].unique() if p)
    used, free, reserved = wide["fb_used"], wide["fb_free"], wide["fb_reserved"].fillna(0)
    samples = pd.DataFrame(
        {
            "cluster": "default",
            "node": wide["node"],
            "gpu_id": wide["gpu"].map({g: i + 1 for i, g in enumerate(gpus)}).astype("int64"),
            "gpu_model": wide["gpu_model"],
            "ts": wide["ts"].astype("int64"),
            "step_s": int(parse_duration(case["interval"]).total_seconds()),
            "pod_id": wide["pod"].map({p: i + 1 for i, p in enumerate(pods)}).astype("Int64"),
            "namespace": wide["namespace"].replace("", None),
            "pod": wide["pod"].replace("", None),
            "util_ratio": wide["prof"].fillna(wide["dev"] / 100),
            "fb_used_mib": used,
            "fb_total_mib": used + free + reserved,
            "temp_c": wide["temp_c"],
            "xid": wide["xid"].astype("Float64").round().astype("Int64"),
        }
    )
    samples = samples.sort_values(["ts", "gpu_id"], kind="stable").reset_index(drop=True)
    return samples, {i + 1: g for i, g in enumerate(gpus)}


def eval_seconds(text: str) -> int:
    return int(parse_duration(text).total_seconds())
