"""A snapshot written and read back plans the same: every field the replayed planners read survives exactly."""

from __future__ import annotations

from dataclasses import replace

from hookserver.recorder.codec import PodUsage, pack_pods, unpack_pods
from hookserver.recorder.reader import Recording
from hookserver.recorder.scenarios.synthetic import SyntheticNode
from hookserver.recorder.writer import FlightRecorder


def test_snapshot_round_trips_exactly(tmp_path) -> None:
    world = SyntheticNode(pods=30, seed=3)
    snaps = []
    rec = FlightRecorder(str(tmp_path / "r.sqlite"), created_at=world.created_at)
    for _ in range(3):
        snap = replace(world.build(), feature_gates={"BECPUSuppress": True})
        rec.record_frame(snap, [])
        snaps.append(snap)
        world.now += 10
    rec.close()
    frames = list(Recording(str(tmp_path / "r.sqlite")).frames())
    assert len(frames) == 3
    for want, got in zip(snaps, frames):
        assert replace(got.snapshot, slo_origin=want.slo_origin) == want
        assert got.snapshot.pods[0].cpu_usage_cores == want.pods[0].cpu_usage_cores  # bit-exact floats


def test_pod_usage_blob_keeps_missing_samples() -> None:
    pods = [PodUsage(1, 0.1 + 0.2, None), PodUsage(2, None, 12345.5), PodUsage(7, 3.0, 4.0)]
    assert unpack_pods(pack_pods(pods)) == pods
