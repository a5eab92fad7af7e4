"""The built-in price table and the price book."""

from __future__ import annotations

import re
from datetime import date

import pytest

from gpuwatch.domain.pricing import (
    PriceBook,
    build_price_book,
    builtin_prices,
    normalize_model_name,
    parse_price_table,
)
from gpuwatch.domain.providers import provider_from_node

REQUIRED = [
    "NVIDIA H200",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 PCIe",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100 80GB PCIe",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA A10G",
    "NVIDIA L40S",
    "NVIDIA L4",
    "Tesla T4",
    "Tesla V100-SXM2-16GB",
    "NVIDIA A30",
    "NVIDIA B200",
]


@pytest.fixture
def book() -> PriceBook:
    return build_price_book(2.0, 0.6, {}, {})


def test_required_models_are_in_the_table() -> None:
    assert set(REQUIRED) <= set(builtin_prices())


def test_every_row_has_a_source_a_date_and_sane_prices() -> None:
    for price in builtin_prices().values():
        assert price.source, price.model
        assert date.fromisoformat(price.as_of) <= date(2026, 12, 31)
        assert 0 < price.spot_usd_per_gpu_hour < price.on_demand_usd_per_gpu_hour
        assert price.memory_mib and price.memory_mib > 1000


def test_prices_absent_from_the_catalog_are_marked() -> None:
    table = builtin_prices()
    for model in ["NVIDIA H100 PCIe", "NVIDIA A100 80GB PCIe", "NVIDIA A30"]:
        assert re.match(r"^(ASSUMED|ESTIMATE)", table[model].source), model
    for model in ["NVIDIA B200", "NVIDIA L40S"]:
        assert table[model].source.startswith("public list price"), model


def test_catalog_prices_are_instance_price_over_gpu_count() -> None:
    table = builtin_prices()
    assert table["NVIDIA H100 80GB HBM3"].on_demand_usd_per_gpu_hour == pytest.approx(98.32 / 8)
    assert table["NVIDIA H100 80GB HBM3"].spot_usd_per_gpu_hour == pytest.approx(30.326 / 8)
    assert table["Tesla T4"].on_demand_usd_per_gpu_hour == pytest.approx(3.912 / 4)


def test_aliases_are_unique_across_models() -> None:
    seen: dict[str, str] = {}
    for price in builtin_prices().values():
        assert price.aliases[0] == price.model
        for alias in price.aliases:
            key = normalize_model_name(alias)
            assert seen.setdefault(key, price.model) == price.model, alias


@pytest.mark.parametrize(
    ("spelling", "model"),
    [
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
        ("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"),
        ("nvidia-a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB"),
        ("NVIDIA-A100-SXM4-40GB-MIG-3g.20gb", "NVIDIA A100-SXM4-40GB"),
        ("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3"),
        ("Tesla-T4-SHARED", "Tesla T4"),
        ("Tesla V100-PCIE-16GB", "Tesla V100-SXM2-16GB"),
        ("NVIDIA-A30", "NVIDIA A30"),
        ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
    ],
)
def test_lookup_by_any_spelling(book: PriceBook, spelling: str, model: str) -> None:
    found = book.lookup(spelling)
    assert found is not None
    assert found.model == model


def test_lookup_unknown(book: PriceBook) -> None:
    assert book.lookup("NVIDIA Imaginary") is None
    assert book.lookup(None) is None
    assert book.lookup("") is None


def test_price_order_node_then_model_then_default() -> None:
    book = build_price_book(2.0, 0.5, {}, {"gpu-node-1": 9.0})
    assert book.usd_per_gpu_hour("Tesla T4", "on_demand", "gpu-node-1") == 9.0
    assert book.usd_per_gpu_hour("Tesla T4", "spot", "gpu-node-1") == 9.0
    assert book.usd_per_gpu_hour("Tesla T4", "on_demand", "other") == pytest.approx(0.978)
    assert book.usd_per_gpu_hour("Tesla T4", "spot") == pytest.approx(0.36235)
    assert book.usd_per_gpu_hour("NVIDIA Imaginary", "on_demand") == 2.0
    assert book.usd_per_gpu_hour("NVIDIA Imaginary", "spot") == pytest.approx(1.0)
    assert book.usd_per_gpu_hour(None, "on_demand") == 2.0


def test_override_by_gfd_name_replaces_the_builtin_prices() -> None:
    book = build_price_book(2.0, 0.6, {"NVIDIA-A100-SXM4-80GB": (4.10, 1.60)}, {})
    entry = book.lookup("NVIDIA A100-SXM4-80GB")
    assert entry is not None
    assert (entry.on_demand_usd_per_gpu_hour, entry.spot_usd_per_gpu_hour) == (4.10, 1.60)
    assert entry.memory_mib == 81920
    assert entry.source == "configuration"


def test_override_without_spot_uses_the_discount() -> None:
    book = build_price_book(2.0, 0.25, {"Tesla T4": (1.0, None)}, {})
    assert book.usd_per_gpu_hour("Tesla T4", "spot") == pytest.approx(0.75)


def test_unknown_override_becomes_a_new_model() -> None:
    book = build_price_book(2.0, 0.6, {"NVIDIA RTX 2000 Ada Generation": (0.5, None)}, {})
    entry = book.lookup("nvidia rtx 2000 ada generation")
    assert entry is not None
    assert entry.aliases == ("NVIDIA RTX 2000 Ada Generation",)
    assert entry.spot_usd_per_gpu_hour == pytest.approx(0.2)
    assert entry.memory_mib is None


def test_unlisted_spot_prices_follow_the_configured_discount() -> None:
    l40s = 1.861
    assert build_price_book(2.0, 0.6, {}, {}).usd_per_gpu_hour(
        "NVIDIA L40S", "spot"
    ) == pytest.approx(l40s * 0.4)
    assert build_price_book(2.0, 0.3, {}, {}).usd_per_gpu_hour(
        "NVIDIA L40S", "spot"
    ) == pytest.approx(l40s * 0.7)
    # A listed spot price is kept whatever the discount.
    assert build_price_book(2.0, 0.3, {}, {}).usd_per_gpu_hour(
        "NVIDIA L4", "spot"
    ) == pytest.approx(0.4155)


def test_parse_price_table() -> None:
    text = (
        "model,aliases,memory_mib,mig_capable,on_demand_usd_per_gpu_hour,"
        "spot_usd_per_gpu_hour,source,as_of\n"
        "GPU X,GPU-X|gpu x pcie,1024,true,3,,test,2026-01-01\n"
    )
    entry = parse_price_table(text)["GPU X"]
    assert entry.aliases == ("GPU X", "GPU-X", "gpu x pcie")
    assert entry.mig_capable
    assert not entry.spot_listed


def test_the_table_says_who_offers_each_model_and_how_fast_it_is() -> None:
    table = builtin_prices()
    assert table["NVIDIA L4"].providers == frozenset({"aws", "gcp"})
    assert table["NVIDIA RTX A6000"].providers == frozenset({"lambda"})
    assert table["NVIDIA A30"].providers == frozenset()  # no public cloud sells it
    # dense BF16/FP16 tensor TFLOPS over the A100's 312
    assert table["NVIDIA A100-SXM4-80GB"].relative_speed == 1.0
    assert table["NVIDIA L4"].relative_speed == pytest.approx(121 / 312, abs=0.001)
    assert table["NVIDIA H100 80GB HBM3"].relative_speed == pytest.approx(989 / 312, abs=0.001)
    assert all(p.relative_speed for p in table.values())


@pytest.mark.parametrize(
    ("provider_id", "labels", "expected"),
    [
        ("aws:///us-east-1a/i-0abc", {}, "aws"),
        ("gce://proj/us-central1-a/gke-pool-1", {}, "gcp"),
        ("azure:///subscriptions/x/resourceGroups/y", {}, "azure"),
        (None, {"eks.amazonaws.com/nodegroup": "gpu"}, "aws"),
        (None, {"cloud.google.com/gke-nodepool": "a100"}, "gcp"),
        (None, {"kubernetes.azure.com/agentpool": "gpu"}, "azure"),
        (None, {"topology.kubernetes.io/zone": "us-east-1a"}, None),  # generic: says nothing
        ("kind://docker/kind/kind-worker", {}, None),
    ],
)
def test_provider_from_node(
    provider_id: str | None, labels: dict[str, str], expected: str | None
) -> None:
    assert provider_from_node(provider_id, labels) == expected
