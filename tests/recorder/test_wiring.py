"""What the daemon's recorder reads besides the round: PSI and throttling from the store's series, pods'
creation times, the colocation-config in force, and the audit's evictions."""

from __future__ import annotations

import json
import sqlite3
import zlib

from hookserver.recorder.settings import RecorderSettings
from hookserver.recorder.wiring import build_recorder
from hookserver.slo.colocation import ColocationStrategy, ResolvedColocation
from hookserver.store.audit import EvictionRecord
from hookserver.store.records import PodRecord
from hookserver.store.state import StateStore
from hookserver.store.timeseries import make_labels

from hookserver.recorder.scenarios.synthetic import SyntheticNode


def test_the_recorder_keeps_psi_throttling_creation_colocation_and_evictions(tmp_path) -> None:
    world = SyntheticNode(pods=4)
    now = world.now
    store = StateStore(clock=lambda: now)
    first = world.build().pods[0]
    store.upsert_pod(PodRecord(uid=first.uid, namespace=first.namespace, name=first.name, created_at=now - 7200))
    store.series.append_many(now, [
        (("node_psi", make_labels(psi_resource_type="cpu", psi_degree="some", psi_precision="avg10")), 12.5),
        (("pod_cpu_throttled_ratio", make_labels(pod="a")), 0.2),
        (("pod_cpu_throttled_ratio", make_labels(pod="b")), 0.6),
    ])
    store.set_colocation(ResolvedColocation(ColocationStrategy.model_validate({"enable": True}), True, ("test",)))
    store.audit.record_eviction(EvictionRecord(ts=now - 1, reconciler="MemoryEvict", pod_key="batch/x", pod_uid="x",
                                               reason="EvictPodByNodeMemoryUsage", message="m", status="evicted"))
    rec = build_recorder(RecorderSettings(), state_dir=str(tmp_path), node_name="node-a", store=store,
                         predictor={"safety_margin_percent": 10}, reconcilers={"CPUSuppress": {"interval_s": 1.0}})
    rec.record_frame(world.build(), [])
    rec.close()
    conn = sqlite3.connect(str(tmp_path / "flight-recorder.sqlite"))
    misc = json.loads(zlib.decompress(conn.execute("SELECT misc FROM frames").fetchone()[0]))
    assert misc["extra"] == {"psi:cpu:some:avg10": 12.5, "throttled:mean": 0.4, "throttled:max": 0.6}
    bodies = [json.loads(b) for (b,) in conn.execute("SELECT body FROM pod_facts")]
    assert {b["uid"]: b["created_at"] for b in bodies}[first.uid] == now - 7200
    colocation = json.loads(conn.execute("SELECT body FROM config WHERE kind = 'colocation'").fetchone()[0])
    assert colocation["enable"] is True and colocation["cpuReclaimThresholdPercent"] == 60
    assert conn.execute("SELECT pod_uid, status FROM evictions").fetchall() == [("x", "evicted")]


def test_a_recording_that_cannot_be_opened_is_named_and_never_a_crash(tmp_path) -> None:
    import pytest

    from hookserver.errors import RecorderUnavailable

    (tmp_path / "flight-recorder.sqlite").write_bytes(b"not sqlite at all, " * 200)
    with pytest.raises(RecorderUnavailable) as caught:
        build_recorder(RecorderSettings(), state_dir=str(tmp_path), node_name="node-a", store=StateStore(),
                       predictor={}, reconcilers={})
    assert caught.value.path == str(tmp_path / "flight-recorder.sqlite")
    assert str(tmp_path / "flight-recorder.sqlite") in str(caught.value)
    # Nothing was lost: the foreign file is as it was.
    assert (tmp_path / "flight-recorder.sqlite").read_bytes() == b"not sqlite at all, " * 200


def test_the_daemon_starts_without_its_recorder_when_the_file_cannot_be_opened(tmp_path) -> None:
    """Found by `make soak` (full state dir): the agent exited 1 at start because the recorder's SQLite file
    could not be set up. A recording is for later: the agent serves without it and says why."""
    from hookserver.daemon import Daemon
    from tests.readiness import daemon_settings

    state = tmp_path / "state"
    state.mkdir()
    (state / "flight-recorder.sqlite").write_bytes(b"\x00garbage" * 512)
    daemon = Daemon(daemon_settings(tmp_path, "node-a", standalone=True, qos={"enabled": True},
                                    recorder={"enabled": True}))
    try:
        info = daemon.info()["recorder"]
    finally:
        daemon.http.stop()
    assert info["state"] == "unavailable"
    assert "flight-recorder.sqlite" in info["reason"]
    assert daemon.recorder is None and daemon.qos.recorder is None


def test_the_daemons_status_carries_the_recorders_file_size_and_span(tmp_path) -> None:
    """`hookctl status` reads the daemon's info: the recorder's part is recorder.status (size, frames, span,
    last error), not a reduced copy."""
    from hookserver.daemon import Daemon
    from tests.readiness import daemon_settings

    daemon = Daemon(daemon_settings(tmp_path, "n", standalone=True))
    try:
        status = daemon.info()["recorder"]
    finally:
        if daemon.recorder is not None:
            daemon.recorder.close()
    assert status["file"].startswith(str(tmp_path / "state")) and status["bytes"] > 0
    assert {"oldest_frame_at", "newest_frame_at", "last_error"} <= set(status)
