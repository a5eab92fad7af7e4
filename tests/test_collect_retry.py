"""The one retry policy of the Prometheus and Kubernetes sources."""

from __future__ import annotations

import pytest

from gpuwatch.collectors.retry import RetriesExhausted, RetryPolicy


class Transient(Exception):
    pass


class Fatal(Exception):
    pass


def _flaky(failures: list[Exception]) -> object:
    """A call that raises the given failures in turn, then returns "ok"."""

    def call() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    return call


def test_transient_failures_are_retried_with_doubling_capped_delays() -> None:
    waits: list[float] = []
    policy = RetryPolicy(retries=4, base_delay_s=0.5, max_delay_s=1.5, sleep=waits.append)
    call = _flaky([Transient(), Transient(), Transient()])
    result = policy.call("a query", call, lambda e: isinstance(e, Transient))  # type: ignore[arg-type]
    assert result == "ok"
    assert waits == [0.5, 1.0, 1.5]  # 0.5 × 2^n, at most 1.5


def test_the_last_failure_ends_it_with_the_attempts_counted() -> None:
    waits: list[float] = []
    policy = RetryPolicy(retries=2, base_delay_s=1.0, sleep=waits.append)
    with pytest.raises(RetriesExhausted) as caught:
        policy.call("a query", _flaky([Transient()] * 5), lambda e: True)  # type: ignore[arg-type]
    assert caught.value.attempts == 3 and isinstance(caught.value.failure, Transient)
    assert waits == [1.0, 2.0]


def test_a_failure_a_retry_cannot_change_ends_it_at_once() -> None:
    waits: list[float] = []
    policy = RetryPolicy(retries=5, sleep=waits.append)
    with pytest.raises(RetriesExhausted) as caught:
        policy.call("a query", _flaky([Fatal()]), lambda e: isinstance(e, Transient))  # type: ignore[arg-type]
    assert caught.value.attempts == 1 and waits == []


def test_failures_outside_the_named_types_are_not_caught() -> None:
    with pytest.raises(KeyError):
        RetryPolicy(sleep=lambda _s: None).call(
            "a query",
            _flaky([KeyError("x")]),
            lambda e: True,
            (Transient,),  # type: ignore[arg-type]
        )
