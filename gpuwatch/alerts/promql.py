"""Small PromQL builders: selectors, regex escaping, numbers, and label normalisation chains.

Everything here returns PromQL text. Label normalisation is written with ``label_replace``
and ``label_join`` only, so the rules run on any Prometheus since 2.x (and on Thanos/Mimir).
"""

from __future__ import annotations

from collections.abc import Sequence

#: Blank DCGM readings arrive as int64 sentinels near 9.22e18; anything above this is missing.
SENTINEL_LIMIT = "9.2e18"
#: A label used in passing while a chain runs; never present on a result.
TMP_LABEL = "gpuwatch_tmp"


def number(value: float) -> str:
    """A float as short PromQL text (``0.05``, ``85``, ``4.1``)."""
    text = f"{value:.10g}"
    return text if "e" not in text else repr(float(value))


def string(value: str) -> str:
    """A double-quoted PromQL string literal."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def regex_literal(text: str, fold_separators: bool = False) -> str:
    """A regular expression (RE2) matching ``text`` exactly, safe inside a PromQL string.

    With ``fold_separators``, spaces and dashes match either, as DCGM model names use spaces
    where GPU Feature Discovery product names use dashes.
    """
    parts: list[str] = []
    for char in text:
        if fold_separators and char in " -":
            parts.append("[- ]")
        elif char.isascii() and (char.isalnum() or char in " -_"):
            parts.append(char)
        else:
            parts.append(f"\\x{{{ord(char):x}}}")
    return "".join(parts)


def alternation(items: Sequence[str], fold_separators: bool = False) -> str:
    """A regex matching any of ``items`` exactly, each escaped; duplicates dropped, order kept."""
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(regex_literal(item, fold_separators), None)
    return "|".join(seen)


def selector(metric: str, matchers: Sequence[str] = (), extra: Sequence[str] = ()) -> str:
    """``metric{m1, m2}``: the configured matchers first, then rule-specific ones."""
    inner = ", ".join([*matchers, *extra])
    return f"{metric}{{{inner}}}" if inner else metric


def by(labels: Sequence[str]) -> str:
    """A grouping clause body, ``namespace, pod``."""
    return ", ".join(labels)


def aggregate(operator: str, labels: Sequence[str], body: str) -> str:
    """``operator by (labels) (body)``, or ``operator(body)`` without labels."""
    grouping = f" by ({by(labels)}) " if labels else ""
    if "\n" in body:
        return f"{operator}{grouping}(\n{indent(body)}\n)"
    return f"{operator}{grouping}({body})"


def indent(text: str, spaces: int = 2) -> str:
    """Indent every line of ``text``."""
    pad = " " * spaces
    return "\n".join(pad + line if line else line for line in text.splitlines())


def call(function: str, *args: str) -> str:
    """``function(args...)`` with the first argument on its own indented lines."""
    first, *rest = args
    tail = "".join(f", {arg}" for arg in rest)
    return f"{function}(\n{indent(first)}{tail}\n)"


def replace(expr: str, dst: str, replacement: str, src: str, regex: str) -> str:
    """``label_replace(expr, dst, replacement, src, regex)``."""
    return call("label_replace", expr, string(dst), string(replacement), string(src), string(regex))


def join(expr: str, dst: str, separator: str, *src: str) -> str:
    """``label_join(expr, dst, separator, src...)``."""
    return call("label_join", expr, string(dst), string(separator), *map(string, src))


def _fill_if_empty(expr: str, target: str, source: str) -> str:
    # target;source is ";value" only when target is empty and source is not.
    joined = join(expr, TMP_LABEL, ";", target, source)
    return replace(joined, target, "$1", TMP_LABEL, ";(.+)")


def coalesce(expr: str, target: str, variants: Sequence[str]) -> str:
    """Set ``target`` to the first non-empty label of ``variants`` (in order of preference).

    Labels before ``target`` in ``variants`` override it; labels after it only fill it in when
    it is empty. Where no variant is set, ``target`` is left as it was.
    """
    position = variants.index(target) if target in variants else len(variants)
    higher, lower = variants[:position], variants[position + 1 :]
    for label in lower:
        expr = _fill_if_empty(expr, target, label)
    if lower:
        expr = replace(expr, TMP_LABEL, "", TMP_LABEL, ".*")
    for label in reversed(higher):
        expr = replace(expr, target, "$1", label, "(.+)")
    return expr


def clear_where(expr: str, targets: Sequence[str], label: str, regex: str) -> str:
    """Remove every label of ``targets`` from series whose ``label`` matches ``regex``.

    ``label`` itself is cleared last when it is among ``targets``.
    """
    ordered = [t for t in targets if t != label] + [t for t in targets if t == label]
    for target in ordered:
        expr = replace(expr, target, "", label, regex)
    return expr


def below_sentinel(expr: str) -> str:
    """Drop blank-reading sentinels (``expr < 9.2e18``); keeps the metric name."""
    return f"{expr} < {SENTINEL_LIMIT}"


def _bit_runs(mask: int) -> list[tuple[int, int]]:
    """The runs of consecutive set bits of ``mask``, as (lowest bit, run length), lowest first.

    >>> _bit_runs(0b11101100)
    [(2, 2), (5, 3)]
    """
    runs: list[tuple[int, int]] = []
    for bit in range(mask.bit_length()):
        if not (mask >> bit) & 1:
            continue
        if runs and sum(runs[-1]) == bit:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((bit, 1))
    return runs


def bit_and(expr: str, mask: int) -> str:
    """``expr AND mask`` for a bitmask ``expr`` (a non-negative integer), written arithmetically.

    PromQL has no bitwise operators: each run of consecutive bits ``lo … lo + n - 1`` of
    ``mask`` is ``floor(expr / 2^lo) % 2^n * 2^lo``, and the runs are added.

    >>> bit_and("x", 0b101100)
    'floor(x / 4) % 4 * 4 + floor(x / 32) % 2 * 32'
    """
    if mask <= 0:
        raise ValueError(f"a bit mask needs a set bit, got {mask}")
    terms = []
    for lo, length in _bit_runs(mask):
        shifted = f"floor({expr} / {2**lo})" if lo else f"floor({expr})"
        terms.append(f"{shifted} % {2**length} * {2**lo}")
    return " + ".join(terms)
