"""When a simulated workload's pods exist: periodic cycles, a pure function of the cycle number."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.simulate.noise import stable_unit


@dataclass(frozen=True)
class Schedule:
    """Cycle ``k`` begins at ``k × period_s + offset_s`` (epoch seconds).

    In each cycle the pods are created ``pending_s`` before ``start_s`` (waiting for GPUs), start
    at ``start_s`` into the cycle and run ``run_s`` seconds, shortened by up to ``jitter_s``
    (a per-cycle draw). ``run_s`` None means the whole period: a long-running pod replaced by a
    new one at each cycle boundary (a rollout). A run may spill into the next cycle as long as
    no other workload holds its GPUs then.
    """

    period_s: int
    offset_s: int = 0
    start_s: int = 0
    run_s: int | None = None
    pending_s: int = 0
    jitter_s: int = 0

    def __post_init__(self) -> None:
        if self.period_s <= 0 or self.pending_s < 0 or self.jitter_s < 0:
            raise ValueError(f"invalid schedule {self}: period must be positive")
        if self.run_s is not None and self.run_s <= self.jitter_s:
            raise ValueError(f"invalid schedule {self}: run must exceed its jitter")

    @property
    def max_run_s(self) -> int:
        return self.period_s if self.run_s is None else self.run_s

    def bounds(self, k: int, salt: int) -> tuple[int, int, int]:
        """``(created_ts, started_ts, finished_ts)`` of cycle ``k``; ``salt`` varies the jitter."""
        started = k * self.period_s + self.offset_s + self.start_s
        run = self.max_run_s - int(self.jitter_s * stable_unit("jitter", salt, k))
        return started - self.pending_s, started, started + run

    def cycles(self, start_ts: int, end_ts: int) -> range:
        """Cycle numbers that may exist during ``[start_ts, end_ts)`` (a superset; check bounds)."""
        base = self.offset_s + self.start_s
        first = (start_ts - base - self.max_run_s) // self.period_s
        last = (end_ts - base + self.pending_s) // self.period_s + 1
        return range(first, last + 1)
