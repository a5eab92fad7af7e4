"""GPU prices: the built-in per-GPU-hour table and the price book that applies overrides.

The table ships as ``gpuwatch/data/gpu_prices.csv`` with the source and date of every price
(see docs/cost-model.md). Model names match case-insensitively, whichever spelling arrives:
DCGM's ``modelName`` (``NVIDIA A100-SXM4-80GB``) or GPU Feature Discovery's
``nvidia.com/gpu.product`` (``NVIDIA-A100-SXM4-80GB``, also with ``-MIG-…`` or ``-SHARED``).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources

SPOT = "spot"
ON_DEMAND = "on_demand"
#: Discount used for table rows that list no spot price, until a price book applies its own.
DEFAULT_SPOT_DISCOUNT = 0.6
#: $ per GPU-hour of models the price table does not know (``pricing.default_usd_per_gpu_hour``).
DEFAULT_USD_PER_GPU_HOUR = 2.0
_SUFFIX = re.compile(r"(-mig-\d+g\.\d+gb|-shared)+$")
_SEPARATORS = re.compile(r"[\s_\-]+")


def normalize_model_name(name: str) -> str:
    """A model name reduced for matching: lower case, spaces/dashes/underscores as ``-``.

    >>> normalize_model_name("NVIDIA-A100-SXM4-40GB-MIG-3g.20gb")
    'nvidia-a100-sxm4-40gb'
    """
    key = _SEPARATORS.sub("-", name.strip().lower())
    return _SUFFIX.sub("", key)


def is_spot(capacity_type: str | None) -> bool:
    """Whether a capacity type names spot/preemptible capacity."""
    return (capacity_type or "").strip().lower() in {SPOT, "preemptible"}


@dataclass(frozen=True)
class ModelPrice:
    """Per-GPU-hour prices of one GPU model."""

    model: str
    aliases: tuple[str, ...]
    memory_mib: int | None
    mig_capable: bool
    on_demand_usd_per_gpu_hour: float
    spot_usd_per_gpu_hour: float
    source: str
    as_of: str
    #: False where the source lists no spot price (then spot = on-demand × (1 − discount)).
    spot_listed: bool = True
    #: Providers that offer the model at about this price (``aws``, ``gcp``, …).
    providers: frozenset[str] = frozenset()
    #: Dense BF16/FP16 tensor throughput relative to the A100 (1.0); None when unknown.
    relative_speed: float | None = None

    def price(self, capacity_type: str | None) -> float:
        """$ per GPU-hour at a capacity type."""
        return (
            self.spot_usd_per_gpu_hour
            if is_spot(capacity_type)
            else self.on_demand_usd_per_gpu_hour
        )


@dataclass(frozen=True)
class PriceBook:
    """Prices in effect: the table with config overrides, a default, and per-node overrides."""

    default_usd_per_gpu_hour: float
    spot_discount: float
    models: Mapping[str, ModelPrice]
    nodes: Mapping[str, float] = field(default_factory=dict)
    _index: dict[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        index = {normalize_model_name(a): p.model for p in self.models.values() for a in p.aliases}
        index.update({normalize_model_name(m): m for m in self.models})
        object.__setattr__(self, "_index", index)

    def lookup(self, model_name: str | None) -> ModelPrice | None:
        """The price entry for any spelling of a model, or None when unknown."""
        if not model_name:
            return None
        canonical = self._index.get(normalize_model_name(model_name))
        return self.models[canonical] if canonical is not None else None

    def usd_per_gpu_hour(
        self, model_name: str | None, capacity_type: str, node: str | None = None
    ) -> float:
        """Node override, else the model's price at the capacity type, else the default."""
        if node is not None and node in self.nodes:
            return float(self.nodes[node])
        entry = self.lookup(model_name)
        if entry is not None:
            return entry.price(capacity_type)
        if is_spot(capacity_type):
            return self.default_usd_per_gpu_hour * (1.0 - self.spot_discount)
        return self.default_usd_per_gpu_hour


def _parse_row(row: Mapping[str, str]) -> ModelPrice:
    model = row["model"].strip()
    aliases = tuple(a.strip() for a in row["aliases"].split("|") if a.strip())
    on_demand = float(row["on_demand_usd_per_gpu_hour"])
    spot_text = (row.get("spot_usd_per_gpu_hour") or "").strip()
    memory = (row.get("memory_mib") or "").strip()
    speed = (row.get("relative_speed") or "").strip()
    providers = frozenset(p.strip().lower() for p in (row.get("providers") or "").split("|"))
    return ModelPrice(
        model=model,
        aliases=(model, *[a for a in aliases if a != model]),
        memory_mib=int(memory) if memory else None,
        mig_capable=row["mig_capable"].strip().lower() == "true",
        on_demand_usd_per_gpu_hour=on_demand,
        spot_usd_per_gpu_hour=(
            float(spot_text) if spot_text else on_demand * (1.0 - DEFAULT_SPOT_DISCOUNT)
        ),
        source=row["source"].strip(),
        as_of=row["as_of"].strip(),
        spot_listed=bool(spot_text),
        providers=providers - {""},
        relative_speed=float(speed) if speed else None,
    )


def parse_price_table(text: str) -> dict[str, ModelPrice]:
    """Parse a price table in the format of ``gpuwatch/data/gpu_prices.csv``."""
    return {p.model: p for p in map(_parse_row, csv.DictReader(io.StringIO(text)))}


@cache
def _builtin_text() -> str:
    return resources.files("gpuwatch").joinpath("data/gpu_prices.csv").read_text(encoding="utf-8")


def builtin_prices() -> dict[str, ModelPrice]:
    """The built-in price table, keyed by canonical model name."""
    return parse_price_table(_builtin_text())


def _with_discount(price: ModelPrice, spot_discount: float) -> ModelPrice:
    if price.spot_listed:
        return price
    spot = price.on_demand_usd_per_gpu_hour * (1.0 - spot_discount)
    return replace(price, spot_usd_per_gpu_hour=spot)


def _override(
    base: ModelPrice | None, name: str, on_demand: float, spot: float | None, discount: float
) -> ModelPrice:
    spot_value = spot if spot is not None else on_demand * (1.0 - discount)
    if base is None:
        return ModelPrice(name, (name,), None, False, on_demand, spot_value, "configuration", "")
    return replace(
        base,
        on_demand_usd_per_gpu_hour=on_demand,
        spot_usd_per_gpu_hour=spot_value,
        source="configuration",
        as_of="",
        spot_listed=spot is not None,
    )


def build_price_book(
    default_usd_per_gpu_hour: float,
    spot_discount: float,
    overrides: Mapping[str, tuple[float, float | None]],
    nodes: Mapping[str, float],
) -> PriceBook:
    """The built-in table with config overrides applied (model name or any alias)."""
    table = {m: _with_discount(p, spot_discount) for m, p in builtin_prices().items()}
    base_book = PriceBook(default_usd_per_gpu_hour, spot_discount, table, {})
    for name, (on_demand, spot) in overrides.items():
        base = base_book.lookup(name)
        entry = _override(base, name, float(on_demand), spot, spot_discount)
        table[entry.model] = entry
    return PriceBook(default_usd_per_gpu_hour, spot_discount, table, dict(nodes))
