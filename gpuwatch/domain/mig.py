"""MIG (Multi-Instance GPU) profiles per GPU model, and the share of a GPU a profile costs.

A profile ``<g>g.<mem>gb`` takes ``g`` of the GPU's compute slices. The cost model charges a MIG
instance ``price × g / 7`` (contract §3); generalised, ``price × g / slices`` where ``slices`` is
the model's compute-slice count: 7 on A100, H100, H200, B200 and GH200, 4 on the A30 (whose
``4g.24gb`` is the whole GPU and ``1g.6gb`` a quarter of it). Memory per profile is the nominal
size in the profile's name, in MiB (``GB × 1000``): within a few percent of what the driver
reports, which the recommendation's memory headroom covers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PROFILE = re.compile(r"^\s*(?:mig-)?(\d+)g\.(\d+)gb(\+me)?\s*$", re.IGNORECASE)
_SEPARATORS = re.compile(r"[\s_\-]+")


@dataclass(frozen=True, order=True)
class MigProfile:
    """One MIG profile of one GPU family."""

    g: int
    memory_mib: int
    name: str
    slices: int

    @property
    def fraction(self) -> float:
        """Share of the whole GPU: ``g / slices``."""
        return self.g / self.slices

    @property
    def resource(self) -> str:
        """The Kubernetes extended resource, e.g. ``nvidia.com/mig-1g.10gb``."""
        return f"nvidia.com/mig-{self.name}"


def parse_profile(profile: str) -> tuple[int, int]:
    """``(g, memory GB)`` of a profile name like ``3g.40gb`` (also ``mig-3g.40gb``, ``+me``).

    >>> parse_profile("3g.40gb")
    (3, 40)
    """
    match = _PROFILE.match(profile)
    if match is None:
        raise ValueError(f"invalid MIG profile {profile!r}: expected a form like 3g.40gb")
    return int(match.group(1)), int(match.group(2))


def _family(slices: int, *names: str) -> tuple[MigProfile, ...]:
    profiles = []
    for name in names:
        g, gb = parse_profile(name)
        profiles.append(MigProfile(g, gb * 1000, name, slices))
    return tuple(sorted(profiles))


#: Profiles per family (``+me`` media-extension variants omitted: same slices and memory).
MIG_FAMILIES: dict[str, tuple[MigProfile, ...]] = {
    "A30 24GB": _family(4, "1g.6gb", "2g.12gb", "4g.24gb"),
    "A100 40GB": _family(7, "1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100 80GB": _family(7, "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100 80GB": _family(7, "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100 NVL 94GB": _family(7, "1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    "GH200 96GB": _family(7, "1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"),
    "H200 141GB": _family(7, "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "B200 180GB": _family(7, "1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
}


def mig_family(model_name: str | None) -> str | None:
    """The MIG family of a GPU model (DCGM or GFD spelling), or None when not MIG-capable."""
    if not model_name:
        return None
    key = _SEPARATORS.sub("-", model_name.lower())
    rules = (
        ("gh200", "GH200 96GB"),
        ("h200", "H200 141GB"),
        ("b200", "B200 180GB"),
        ("a30", "A30 24GB"),
    )
    for needle, family in rules:
        if needle in key:
            return family
    if "h100" in key:
        return "H100 NVL 94GB" if "nvl" in key else "H100 80GB"
    if "a100" in key:
        return "A100 80GB" if "80gb" in key else "A100 40GB"
    return None


def mig_profiles(model_name: str | None) -> tuple[MigProfile, ...]:
    """The model's MIG profiles, smallest first; empty when the model has no MIG."""
    family = mig_family(model_name)
    return MIG_FAMILIES[family] if family else ()


def compute_slices(model_name: str | None) -> int:
    """Compute slices of a model's whole GPU: 4 on the A30, else 7."""
    return 4 if mig_family(model_name) == "A30 24GB" else 7


def mig_fraction(profile: str, model_name: str | None = None) -> float:
    """Share of the GPU a MIG instance costs: ``g / 7`` (``g / 4`` on the A30), at most 1."""
    g, _ = parse_profile(profile)
    return min(1.0, g / compute_slices(model_name))


def smallest_fitting_profile(
    model_name: str | None,
    memory_mib: float,
    util_ratio: float,
    profiles: tuple[MigProfile, ...] | None = None,
) -> MigProfile | None:
    """The smallest profile with at least ``memory_mib`` memory and ``g/slices ≥ util_ratio``.

    ``profiles`` replaces the model's table (for a GPU the table does not know).
    """
    for profile in mig_profiles(model_name) if profiles is None else profiles:
        if profile.memory_mib >= memory_mib and profile.fraction >= util_ratio:
            return profile
    return None


def generic_profiles(memory_mib: float) -> tuple[MigProfile, ...]:
    """The standard 7-slice layout for a MIG-capable GPU missing from the table.

    MIG splits memory in eighths: ``1g`` gets 1/8, ``2g`` 2/8, ``3g`` and ``4g`` 4/8, ``7g`` all.
    """
    layout = ((1, 1 / 8), (2, 2 / 8), (3, 4 / 8), (4, 4 / 8), (7, 1.0))
    return tuple(
        MigProfile(g, int(memory_mib * share), f"{g}g.{round(memory_mib * share / 1024)}gb", 7)
        for g, share in layout
    )
