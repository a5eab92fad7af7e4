"""Running the fresh hours' roll-up beside the samples' write (:func:`rollup_fresh.beside`)."""

from __future__ import annotations

import threading

import pytest

from gpuwatch.store.rollup_fresh import beside


def test_the_background_runs_in_another_thread_while_the_foreground_runs() -> None:
    started = threading.Event()

    def background() -> int:
        started.set()
        return threading.get_ident()

    def foreground() -> int:
        # returns only once the background has started: the two overlap
        assert started.wait(timeout=60)
        return threading.get_ident()

    mine, theirs = beside(foreground, background)
    assert mine == threading.get_ident()
    assert theirs != mine


def test_a_foreground_error_is_raised_after_the_background_has_ended() -> None:
    release = threading.Event()
    ended: list[str] = []

    def background() -> None:
        assert release.wait(timeout=60)
        ended.append("background")
        raise ValueError("background")

    def foreground() -> None:
        release.set()
        raise KeyError("foreground")

    with pytest.raises(KeyError, match="foreground"):
        beside(foreground, background)
    assert ended == ["background"]


def test_a_background_error_is_raised() -> None:
    def background() -> None:
        raise ValueError("the roll-up failed")

    with pytest.raises(ValueError, match="the roll-up failed"):
        beside(lambda: 1, background)
