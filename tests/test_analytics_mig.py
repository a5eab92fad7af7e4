"""MIG profiles: parsing, the share a profile costs, the smallest fitting profile."""

from __future__ import annotations

import pytest

from gpuwatch.domain.mig import (
    compute_slices,
    generic_profiles,
    mig_family,
    mig_fraction,
    mig_profiles,
    parse_profile,
    smallest_fitting_profile,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3g.40gb", (3, 40)), ("1g.10gb+me", (1, 10)), ("mig-7g.80gb", (7, 80)), ("7g.79gb", (7, 79))],
)
def test_parse_profile(text: str, expected: tuple[int, int]) -> None:
    assert parse_profile(text) == expected


def test_parse_profile_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="invalid MIG profile"):
        parse_profile("3g")


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
        ("NVIDIA-A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB"),
        ("NVIDIA H100 80GB HBM3", "H100 80GB"),
        ("NVIDIA H100 NVL", "H100 NVL 94GB"),
        ("NVIDIA H200", "H200 141GB"),
        ("NVIDIA GH200 480GB", "GH200 96GB"),
        ("NVIDIA B200", "B200 180GB"),
        ("NVIDIA-A30", "A30 24GB"),
        ("Tesla T4", None),
        ("NVIDIA L40S", None),
    ],
)
def test_mig_family(model: str, family: str | None) -> None:
    assert mig_family(model) == family


def test_fraction_is_g_over_7_and_g_over_4_on_a30() -> None:
    assert mig_fraction("1g.10gb", "NVIDIA A100-SXM4-80GB") == pytest.approx(1 / 7)
    assert mig_fraction("3g.40gb", "NVIDIA H100 80GB HBM3") == pytest.approx(3 / 7)
    assert mig_fraction("7g.79gb", "NVIDIA A100 80GB PCIe") == 1.0
    assert mig_fraction("2g.12gb", "NVIDIA A30") == pytest.approx(0.5)
    assert compute_slices("NVIDIA A30") == 4
    assert mig_fraction("4g.24gb", "NVIDIA A30") == 1.0


def test_every_family_ends_with_the_whole_gpu() -> None:
    for model in ["NVIDIA A30", "NVIDIA A100-SXM4-40GB", "NVIDIA H200", "NVIDIA B200"]:
        profiles = mig_profiles(model)
        assert profiles[-1].fraction == 1.0
        assert list(profiles) == sorted(profiles)


def test_smallest_fitting_profile() -> None:
    a100 = "NVIDIA A100-SXM4-80GB"
    assert smallest_fitting_profile(a100, 9000, 0.1).name == "1g.10gb"  # type: ignore[union-attr]
    assert smallest_fitting_profile(a100, 12000, 0.1).name == "1g.20gb"  # type: ignore[union-attr]
    assert smallest_fitting_profile(a100, 12000, 0.2).name == "2g.20gb"  # type: ignore[union-attr]
    assert smallest_fitting_profile(a100, 30000, 0.5).name == "4g.40gb"  # type: ignore[union-attr]
    assert smallest_fitting_profile(a100, 90000, 0.1) is None
    assert smallest_fitting_profile("Tesla T4", 1000, 0.1) is None
    a30 = smallest_fitting_profile("NVIDIA A30", 5000, 0.25)
    assert a30 is not None
    assert (a30.name, a30.fraction, a30.resource) == ("1g.6gb", 0.25, "nvidia.com/mig-1g.6gb")


def test_generic_profiles_split_memory_in_eighths() -> None:
    profiles = generic_profiles(81920)
    assert [p.name for p in profiles] == ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    assert [p.memory_mib for p in profiles] == [10240, 20480, 40960, 40960, 81920]
