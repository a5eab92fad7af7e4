"""The read-only demo fleet the ``demo_fleet`` fixture (tests/conftest.py) builds once."""

from __future__ import annotations

#: The last hour of the fleet: Monday 2026-11-16 10:00 UTC.
DEMO_NOW_TS = 1_794_823_200
#: Days of history, simulation seed and step of the fleet.
DEMO_DAYS, DEMO_SEED, DEMO_STEP_S = 10, 5, 1800
