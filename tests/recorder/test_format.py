"""Recording format 2 (issue 39, item 6): per-container usage alongside the pods', and format-1 files still read.

A format-1 recording (no container part; made here from a format-2 one by undoing exactly what format 2
added) replays as before, every recorded decision reproduced; the writer upgrades one in place, so frames of
both formats live in one file. A new recording carries each container's CPU and memory usage, bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import json
import sqlite3
from dataclasses import replace

from hookserver.recorder.codec import pack_misc, unpack_misc
from hookserver.recorder.proposal import Proposal
from hookserver.recorder.reader import Recording
from hookserver.recorder.replay import ReplayConfig, replay
from hookserver.recorder.scenarios.synthetic import SyntheticNode, generate
from hookserver.recorder.schema import FORMAT_VERSION
from hookserver.recorder.writer import FlightRecorder

_PART2 = ("CPUBurst", "MemoryQoS")


def _as_format_1(path: str) -> None:
    """What an agent before format 2 wrote: no `frames.kernel` column, no container facts in the pods' bodies,
    no kernel config, and no decisions or round-start states of CPU burst and memory QoS."""
    conn = sqlite3.connect(path)
    frames = conn.execute("SELECT ts, node_cpu, node_memory, misc, pods FROM frames").fetchall()
    conn.execute("DROP TABLE frames")
    conn.execute("CREATE TABLE frames (ts REAL PRIMARY KEY, node_cpu REAL, node_memory REAL, misc BLOB NOT NULL, "
                 "pods BLOB NOT NULL)")
    for ts, cpu, mem, misc_blob, pods in frames:
        misc = unpack_misc(misc_blob)
        misc.pop("states", None)
        misc["decisions"] = {k: v for k, v in misc["decisions"].items() if k not in _PART2}
        conn.execute("INSERT INTO frames VALUES (?, ?, ?, ?, ?)", (ts, cpu, mem, pack_misc(misc), pods))
    for pid, body in conn.execute("SELECT id, body FROM pod_facts").fetchall():
        doc = json.loads(body)
        doc.pop("kernel", None)
        conn.execute("UPDATE pod_facts SET body = ? WHERE id = ?", (json.dumps(doc, sort_keys=True), pid))
    conn.execute("DELETE FROM config WHERE kind = 'kernel'")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'format'")
    conn.commit()
    conn.close()


def test_a_format_1_recording_still_replays(tmp_path: Path) -> None:
    path = str(tmp_path / "old.sqlite")
    generate(path, pods=20, hours=0.1, step_s=10.0)
    _as_format_1(path)
    rec = Recording(path)
    try:
        frames = list(rec.frames())
        run = replay(rec, ReplayConfig("recorded"))
        proposed = replay(rec, ReplayConfig("proposed", Proposal(slo={"resourceUsedThresholdWithBE": {
            "cpuSuppressThresholdPercent": 90}}), as_recorded=False))
    finally:
        rec.close()
    # no container part, so nothing of CPU burst or memory QoS to assume (it was marked on every frame)
    assert any(proposed.diverged) and not any("CFS quota" in d or "memory.min" in d for d in proposed.diverged)
    assert frames and all(not f.snapshot.kernel.pods and f.states is None for f in frames)
    assert run.mismatches == [] and run.matched == 3 * len(frames)  # suppress and the evictors, as before
    assert set(run.ls_quota_cores) == {None} and set(run.memory_min_bytes) == {None}


def test_the_writer_upgrades_a_format_1_file_in_place(tmp_path: Path) -> None:
    path = str(tmp_path / "old.sqlite")
    generate(path, pods=10, hours=0.02, step_s=10.0)
    _as_format_1(path)
    world = SyntheticNode(pods=10, seed=1, start=2_000_000_000.0)
    writer = FlightRecorder(path)
    writer.record_frame(world.build(), [])
    writer.close()
    rec = Recording(path)
    try:
        assert rec.meta["format"] == str(FORMAT_VERSION)
        frames = list(rec.frames())
    finally:
        rec.close()
    assert not frames[0].snapshot.kernel.pods  # the old frames read as they were
    assert len(frames[-1].snapshot.kernel.pods) == 10  # the new one carries its containers


def test_a_new_recording_carries_each_containers_usage(tmp_path: Path) -> None:
    world = SyntheticNode(pods=12, seed=4)
    snap = world.build()
    pk = next(iter(snap.kernel.pods.values()))
    container = replace(pk.containers[0], cpu_usage_cores=0.1 + 0.2, memory_usage_bytes=123456789.5,
                        throttled_ratio=None, burst_us=None)
    snap = replace(snap, kernel=replace(snap.kernel, pods={**snap.kernel.pods,
                                                           pk.uid: replace(pk, containers=(container,))}))
    path = str(tmp_path / "r.sqlite")
    writer = FlightRecorder(path)
    writer.record_frame(snap, [])
    writer.close()
    rec = Recording(path)
    try:
        got = next(iter(rec.frames())).snapshot.kernel
    finally:
        rec.close()
    assert got.pods == snap.kernel.pods and got.cgroup_files == snap.kernel.cgroup_files
    back = got.pods[pk.uid].containers[0]
    assert (back.cpu_usage_cores, back.memory_usage_bytes, back.throttled_ratio, back.burst_us) == (
        0.1 + 0.2, 123456789.5, None, None)


def test_container_values_that_do_not_fit_their_pods_are_one_line(tmp_path: Path) -> None:
    """A frame whose container blob is short (or long) for the pods' recorded containers is a RecordingError
    naming the frame, never a traceback or containers silently given another pod's values."""
    import zlib

    import pytest

    from hookserver.recorder.schema import RecordingError

    path = str(tmp_path / "r.sqlite")
    generate(path, pods=6, hours=0.01, step_s=10.0)
    conn = sqlite3.connect(path)
    ts, blob = conn.execute("SELECT ts, kernel FROM frames ORDER BY ts LIMIT 1").fetchone()
    raw = zlib.decompress(blob)
    for bad in (raw[:-8], raw + raw[-8:]):
        conn.execute("UPDATE frames SET kernel = ? WHERE ts = ?", (zlib.compress(bad), ts))
        conn.commit()
        rec = Recording(path)
        with pytest.raises(RecordingError, match=r"cannot decode the frame at"):
            list(rec.frames())
        rec.close()
    conn.close()
