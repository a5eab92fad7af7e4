"""The workers of one server share their expensive answers per data version: one computes, the
others wait and read; a new data version asks again; a folder or answer that cannot be used is
computed in the process; versions nobody uses are removed; only a private folder is used."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from flask import Flask
from sqlalchemy import Engine, text

from gpuwatch.app import server, views, window_hourly
from gpuwatch.app.data import DashboardData
from gpuwatch.app.shared import SharedAnswers
from gpuwatch.app.snapshot import MEMO_BYTES, SHARED_MEMO_BYTES
from gpuwatch.config import Settings
from tests.support.dash_app import demo_engine
from tests.support.prometheus import wait_until


def _private(folder: Path) -> Path:
    folder.mkdir(mode=0o700)
    return folder


def _never(*args: object, **kwargs: object) -> object:
    raise AssertionError("computed although another worker's answer was there")


def test_a_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o755)
    with pytest.raises(ValueError, match=rf"{folder}: shared answers need a folder of this user"):
        SharedAnswers(folder)


def test_an_answer_is_computed_once_per_data_version_and_question(tmp_path: Path) -> None:
    folder = _private(tmp_path / "shared")
    frame = pd.DataFrame({"gpu_id": [1, 2], "cost_usd": [1.25, 3.5]})
    first = SharedAnswers(folder).version(("marker", 1))
    assert first is not None
    assert first.get(("hourly_rows", 0, 3600), lambda: frame) is frame
    other_worker = SharedAnswers(folder).version(("marker", 1))
    assert other_worker is not None
    pd.testing.assert_frame_equal(other_worker.get(("hourly_rows", 0, 3600), _never), frame)
    assert other_worker.get(("hourly_rows", 3600, 7200), lambda: "next hour") == "next hour"
    new_data = SharedAnswers(folder).version(("marker", 2))
    assert new_data is not None
    assert new_data.get(("hourly_rows", 0, 3600), lambda: "asked again") == "asked again"
    assert len([p for p in folder.iterdir() if p.is_dir()]) == 2


def _blocked_on(lock: Path) -> bool:
    """Whether a process waits for the ``flock`` of ``lock`` (``->`` lines of /proc/locks)."""
    inode = f":{lock.stat().st_ino} "
    lines = Path("/proc/locks").read_text().splitlines()
    return any("->" in line and "FLOCK" in line and inode in line for line in lines)


def test_a_worker_asking_while_another_computes_waits_and_reads_its_answer(
    tmp_path: Path,
) -> None:
    folder = _private(tmp_path / "shared")
    first = SharedAnswers(folder).version("v")
    second = SharedAnswers(folder).version("v")
    assert first is not None and second is not None
    started, release = threading.Event(), threading.Event()
    answers: dict[str, object] = {}

    def slow() -> str:
        started.set()
        assert release.wait(timeout=120), "the test never released the computation"
        return "computed by the first"

    one = threading.Thread(target=lambda: answers.update(first=first.get("q", slow)))
    one.start()
    assert started.wait(timeout=120)
    other = threading.Thread(target=lambda: answers.update(second=second.get("q", _never)))
    other.start()
    (lock,) = first.folder.glob("*.lock")
    wait_until(lambda: _blocked_on(lock), "the second asker waiting for the first", 60)
    release.set()
    one.join(timeout=120)
    other.join(timeout=120)
    assert answers == {"first": "computed by the first", "second": "computed by the first"}


def test_versions_nobody_used_lately_are_removed(tmp_path: Path) -> None:
    folder = _private(tmp_path / "shared")
    answers = SharedAnswers(folder, keep_unused_s=300)
    old, recent = answers.version("old"), answers.version("recent")
    assert old is not None and recent is not None
    stale = os.stat(old.folder).st_mtime - 301
    os.utime(old.folder, (stale, stale))
    current = answers.version("current")
    assert current is not None
    assert not old.folder.exists()
    assert recent.folder.is_dir() and current.folder.is_dir()


def test_a_removed_folder_or_an_unreadable_answer_is_computed_here(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = _private(tmp_path / "shared")
    version = SharedAnswers(folder).version("v")
    assert version is not None
    assert version.get("q", lambda: 1) == 1
    (answer,) = version.folder.glob("*.pickle")
    answer.write_bytes(b"not a pickle")
    with caplog.at_level(logging.INFO, logger="gpuwatch.app.shared"):
        assert version.get("q", lambda: 2) == 2
        assert "unreadable" in caplog.text
        assert SharedAnswers(folder).version("v").get("q", _never) == 2  # type: ignore[union-attr]
        caplog.clear()
        for path in version.folder.iterdir():
            path.unlink()
        version.folder.rmdir()
        assert version.get("q", lambda: 3) == 3
        assert f"shared answers of {version.folder} removed: computing 'q' here" in caplog.text


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with demo_engine(Path(tmp_path_factory.mktemp("fleet")), days=4, step_s=1800, seed=3) as engine:
        yield engine


def _computing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading hourly rows or computing workload statistics fails from now on."""
    monkeypatch.setattr(window_hourly, "read_hourly", _never)
    monkeypatch.setattr(views, "workload_stats", _never)


def test_a_worker_reads_the_recommendations_another_computed(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _private(tmp_path / "shared")
    settings = Settings()

    def worker(shared: SharedAnswers | None) -> DashboardData:
        return DashboardData(engine, settings, background=False, refresh_s=0, shared=shared)

    computed = views.window_recommendations(worker(SharedAnswers(folder)).current(), "3d")
    assert len(computed) > 0
    _computing_fails(monkeypatch)
    second = worker(SharedAnswers(folder))
    read = views.window_recommendations(second.current(), "3d")
    pd.testing.assert_frame_equal(read, computed)
    with pytest.raises(AssertionError, match="computed although"):
        views.window_recommendations(worker(None).current(), "3d")  # no sharing: computes
    with engine.begin() as conn:  # a collection round: a new data version
        conn.execute(text("UPDATE collection_state SET updated_ts = updated_ts + 60"))
    with pytest.raises(AssertionError, match="computed although"):
        views.window_recommendations(second.current(), "3d")


def test_a_sharing_worker_keeps_fewer_frames(engine: Engine, tmp_path: Path) -> None:
    shared = SharedAnswers(_private(tmp_path / "shared"))
    sharing = DashboardData(engine, Settings(), background=False, shared=shared).current()
    alone = DashboardData(engine, Settings(), background=False).current()
    assert (sharing.memo_bytes, alone.memo_bytes) == (SHARED_MEMO_BYTES, MEMO_BYTES)
    assert SHARED_MEMO_BYTES < MEMO_BYTES


def test_a_long_request_hands_freed_memory_back(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[str] = []
    monkeypatch.setattr(server, "release_memory", lambda: trims.append("trim"))
    now = [100.0]
    app = Flask(__name__)
    server.trim_after_long_requests(app, clock=lambda: now[0])

    @app.route("/took/<int:ms>")
    def took(ms: int) -> str:
        now[0] += ms / 1000.0
        return "ok"

    client = app.test_client()
    assert client.get("/took/150").status_code == 200
    assert trims == []
    assert client.get("/took/200").status_code == 200
    assert trims == ["trim"]
