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


def test_the_tier_layout_keeps_its_missing_controllers() -> None:
    """A replay of a node whose BE tier lacked cpuset plans as the live round did (no cpuset writes)."""
    from hookserver.recorder.codec import tier_from_json, tier_to_json
    from qos.snapshot.model import BETier

    tier = BETier("kubepods.slice/kubepods-besteffort.slice", v2=True, missing_controllers=frozenset({"cpuset"}))
    body = tier_to_json(tier)
    assert body is not None and body["missing_controllers"] == ["cpuset"]
    back = tier_from_json(body, None, -1)
    assert back is not None and back.missing_controllers == frozenset({"cpuset"})
    plain = tier_to_json(BETier("kubepods/besteffort"))
    assert plain is not None and "missing_controllers" not in plain  # older recordings read the same
    old = tier_from_json(plain, [0, 1], -1)
    assert old is not None and old.missing_controllers == frozenset()
