"""What a DCGM reading may be: each field's plausible range (pure).

A reading outside its field's range (blank sentinels ~9.2e18, negatives, NaN, infinities,
averages that include a sentinel, a counter increase that cannot fit the store) becomes
missing, never data.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

#: Plausible range of each field (both ends included).
BOUNDS: dict[str, tuple[float, float]] = {
    "util_prof": (0.0, 1.0001),
    "util_dev_pct": (0.0, 100.01),
    "fb_used_mib": (0.0, 1e8),
    "fb_used_last_mib": (0.0, 1e8),
    "fb_free_mib": (0.0, 1e8),
    "fb_reserved_mib": (0.0, 1e8),
    "power_w": (0.0, 1e5),
    "temp_c": (-50.0, 300.0),
    "xid": (0.0, 1e6),
    # Efficiency and health (HEALTH_VALUE_COLUMNS): ratios within 0-1 (a hair over is rounding),
    # rates and clocks below what any GPU reaches, counts and bitmasks that fit the store's
    # INTEGER columns (a reset counter's reading included).
    "sm_active_ratio": (0.0, 1.0001),
    "sm_occupancy_ratio": (0.0, 1.0001),
    "tensor_active_ratio": (0.0, 1.0001),
    "dram_active_ratio": (0.0, 1.0001),
    "sm_clock_mhz": (0.0, 1e5),
    "pcie_bytes_per_s": (0.0, 1e13),
    "nvlink_bytes_per_s": (0.0, 1e14),
    "clock_events": (0.0, 2**31 - 1),
    "ecc_sbe_count": (0.0, 2**31 - 1),
    "ecc_dbe_count": (0.0, 2**31 - 1),
    "pcie_replay_count": (0.0, 2**31 - 1),
    "nvlink_error_count": (0.0, 2**31 - 1),
    "row_remap_failure": (0.0, 1.0),
}
#: Ratios kept within 0-1 (a reading a hair over 1 is 1).
_RATIOS = ("sm_active_ratio", "sm_occupancy_ratio", "tensor_active_ratio", "dram_active_ratio")


def bounded(name: str, values: np.ndarray) -> np.ndarray:
    """``values`` of field ``name``, NaN where out of its range."""
    low, high = BOUNDS[name]
    return np.where((values >= low) & (values <= high), values, np.nan)


def health_values(readings: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The efficiency and health readings of a page's rows as stored: ratios a hair over 1
    are 1."""
    return {
        name: np.minimum(column, 1.0) if name in _RATIOS else column
        for name, column in readings.items()
    }
