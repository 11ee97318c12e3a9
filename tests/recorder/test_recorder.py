"""The flight recorder: when it writes, its bounds, crash safety (kill -9 mid-write) and export."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from typing import Any
from dataclasses import replace

from hookserver.eviction import EvictionRequest
from hookserver.recorder.export import export_recording
from hookserver.recorder.reader import Recording
from hookserver.recorder.scenarios.synthetic import SyntheticNode
from hookserver.recorder.settings import RecorderSettings
from hookserver.recorder.writer import FlightRecorder

from qos.framework.plan import PlannedEviction, QoSPlan


def _frames(path: str) -> list[float]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT ts FROM frames ORDER BY ts")]
    finally:
        conn.close()


def test_writes_a_frame_per_interval_and_every_evicting_round(tmp_path) -> None:
    world = SyntheticNode(pods=10)
    rec = FlightRecorder(str(tmp_path / "r.sqlite"), RecorderSettings(interval_s=10))
    t0 = world.now
    written = []
    for i in range(25):  # one round a second
        world.now = t0 + i
        snap = world.build()
        plans: list[QoSPlan] = []
        if i == 13:
            victim = snap.pods[-1]
            plans = [QoSPlan("MemoryEvict", "evict", evictions=(PlannedEviction(EvictionRequest(
                pod_uid=victim.uid, namespace=victim.namespace, name=victim.name, reason="r", message="m")),))]
        written.append(rec.record_round(snap, plans))
    rec.close()
    assert [i for i, w in enumerate(written) if w] == [0, 10, 13, 20]
    assert _frames(str(tmp_path / "r.sqlite")) == [t0, t0 + 10, t0 + 13, t0 + 20]


def test_size_and_age_bounds_drop_the_oldest_frames(tmp_path) -> None:
    path = str(tmp_path / "r.sqlite")
    world = SyntheticNode(pods=60)
    rec = FlightRecorder(path, RecorderSettings(interval_s=10, max_mib=0.5, retention_s=1e9))
    for _ in range(900):
        rec.record_frame(world.build(), [])
        world.now += 10
    rec.prune(world.now)
    size = rec.size_bytes()
    rec.close()
    frames = _frames(path)
    assert size <= 0.5 * 2**20 * 1.15, size  # within the budget (pages in flight aside)
    assert 0 < len(frames) < 900 and frames[-1] == world.now - 10  # the newest kept, the oldest gone
    # what is left still replays: the config in force at the first kept frame was kept with it
    got = list(Recording(path).frames())
    assert len(got) == len(frames) and got[0].snapshot.node is not None and got[0].snapshot.be_tier is not None

    aged = str(tmp_path / "aged.sqlite")
    rec = FlightRecorder(aged, RecorderSettings(interval_s=10, retention_s=600))
    for _ in range(200):
        rec.record_frame(world.build(), [])
        world.now += 10
    rec.prune(world.now)
    rec.close()
    kept = _frames(aged)
    assert kept[0] >= world.now - 600 and kept[-1] == world.now - 10


_WRITER = textwrap.dedent("""
    import sys
    from hookserver.recorder.scenarios.synthetic import SyntheticNode
    from hookserver.recorder.writer import FlightRecorder
    world = SyntheticNode(pods=200)
    rec = FlightRecorder(sys.argv[1])
    while True:
        rec.record_frame(world.build(), [])
        print(repr(world.now), flush=True)  # committed
        world.now += 10
""")


def test_kill_9_mid_write_loses_at_most_the_frame_in_flight(tmp_path) -> None:
    path = str(tmp_path / "r.sqlite")
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, path], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    committed = []
    try:
        for line in proc.stdout:
            committed.append(float(line))
            if len(committed) >= 40:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the writer is inside its next transaction or about to be
        proc.wait()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    frames = _frames(path)
    # every frame reported committed is there; at most one more (committed, not yet reported)
    assert frames[:len(committed)] == committed and len(frames) - len(committed) <= 1
    assert len(list(Recording(path).frames())) == len(frames)


def test_export_is_a_consistent_copy_while_the_writer_goes_on(tmp_path) -> None:
    path, out = str(tmp_path / "r.sqlite"), str(tmp_path / "out.sqlite")
    world = SyntheticNode(pods=20)
    rec = FlightRecorder(path)
    for _ in range(30):
        rec.record_frame(replace(world.build()), [])
        world.now += 10
    assert os.path.getsize(path + "-wal") > 0  # frames still in the WAL: the copy must include them
    size = export_recording(path, out)
    rec.record_frame(world.build(), [])  # the writer carries on
    rec.close()
    assert size == os.path.getsize(out) and not os.path.exists(out + "-wal")
    assert len(list(Recording(out).frames())) == 30


def test_hookctl_status_shows_the_recorders_file_size_frames_span_and_last_error(tmp_path: Any) -> None:
    """Issue 39: the status said only "recording" and this run's frame count. An operator looking for a
    recording needs the file, its size, the frames it holds and their span, and the last write error."""
    from hookserver.debug.render_status import render_status, status_units
    from hookserver.recorder.scenarios.synthetic import SyntheticNode
    from hookserver.recorder.status import recorder_status
    from hookserver.recorder.writer import FlightRecorder

    assert recorder_status(None, "") == {"state": "disabled"}
    assert recorder_status(None, "flight recorder /x: disk full") == {"state": "unavailable",
                                                                       "reason": "flight recorder /x: disk full"}
    world = SyntheticNode(pods=5, seed=2)
    path = str(tmp_path / "r.sqlite")
    rec = FlightRecorder(path)
    first = world.now
    for _ in range(3):
        rec.record_round(world.build(), [])
        world.now += 10
    rec._conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON frames BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    assert not rec.record_round(world.build(), [])
    status = recorder_status(rec, "")
    rec.close()
    assert status["file"] == path and status["bytes"] > 0 and status["frames"] == 3 and status["written"] == 3
    assert (status["oldest_frame_at"], status["newest_frame_at"]) == (first, first + 20)
    assert "disk full" in status["last_error"] and status["last_error_at"] == world.now
    line = next(li for li in render_status(status_units({"recorder": status})).splitlines() if li.startswith("recorder:"))
    assert path in line and "3 frames from 2026-01-01T00:00:00" in line and "disk full" in line
    assert "flight recorder: " in render_status({"recorder": status})
