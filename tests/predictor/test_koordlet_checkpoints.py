"""koordlet's prediction checkpoints read where koordlet leaves them: `<uid>` files (no suffix) in its
checkpoint directory, for models hookserver has no checkpoint of; never written, moved or deleted there."""

from __future__ import annotations

import json
import os
from pathlib import Path

from prometheus_client import CollectorRegistry

from hookserver.predictor.checkpoint import encode_checkpoint
from hookserver.predictor.metrics import PredictorMetrics
from hookserver.predictor.service import PredictorService
from hookserver.predictor.settings import PredictorSettings
from hookserver.store.state import StateStore
from tests.predictor.test_checkpoint import trained, write_good


def koordlet_file(directory: Path, uid: str, *, scale: int = 1) -> bytes:
    """A file as koordlet's fileCheckpointer writes it: json.Encoder output of ModelCheckpoint (UID, CPU, Memory,
    LastUpdated; no FirstSample or Samples), newline-terminated, named by the UID alone."""
    doc = json.loads(encode_checkpoint(trained(uid)))
    doc = {k: doc[k] for k in ("UID", "CPU", "Memory", "LastUpdated")}
    if scale != 1:  # a different model under the same UID
        doc["CPU"]["bucketWeights"] = {k: v for k, v in list(doc["CPU"]["bucketWeights"].items())[:1]}
    data = (json.dumps(doc) + "\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / uid).write_bytes(data)
    return data


def listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def service(tmp_path: Path, koordlet_dir: Path | str, registry: CollectorRegistry | None = None) -> PredictorService:
    return PredictorService(
        PredictorSettings(koordlet_checkpoint_dir=str(koordlet_dir)), store=StateStore(),
        checkpoint_dir=str(tmp_path / "state" / "predictor"),
        metrics=PredictorMetrics(registry, node="n") if registry is not None else None,
    )


def test_koordlets_files_restore_and_are_left_as_they_are(tmp_path: Path) -> None:
    kdir = tmp_path / "prediction-checkpoints"
    koordlet_file(kdir, "pod-1")
    koordlet_file(kdir, "node")
    (kdir / "pod-2.tmp").write_text("half")  # koordlet's leftover: not ours to remove
    before = listing(kdir)
    svc = service(tmp_path, kdir)
    assert svc.restore() == 0  # none of our own
    assert sorted(svc.table.uids()) == ["node", "pod-1"]
    expected = trained("pod-1").predict()
    got = svc.table.with_model("pod-1", lambda m: m.predict())
    assert (got.cpu_milli, got.memory_bytes) == (expected.cpu_milli, expected.memory_bytes)
    assert svc.restored["koordlet_models"] == 2 and svc.restored["koordlet_skipped"] == 0
    # the next checkpoint round writes them into our directory; koordlet's is untouched
    svc.checkpoint_once(now=svc.clock())
    assert sorted(os.listdir(tmp_path / "state" / "predictor")) == ["node.json", "pod-1.json"]
    assert listing(kdir) == before


def test_our_own_checkpoint_wins_over_koordlets(tmp_path: Path) -> None:
    kdir = tmp_path / "prediction-checkpoints"
    koordlet_file(kdir, "pod-1", scale=2)  # differs from ours
    koordlet_file(kdir, "pod-3")
    write_good(tmp_path / "state" / "predictor", "pod-1")
    svc = service(tmp_path, kdir)
    assert svc.restore() == 1
    ours = trained("pod-1").predict()
    got = svc.table.with_model("pod-1", lambda m: m.predict())
    assert got.cpu_milli == ours.cpu_milli
    assert sorted(svc.table.uids()) == ["pod-1", "pod-3"] and svc.restored["koordlet_models"] == 1


def test_a_file_that_does_not_decode_is_reported_and_left_in_place(tmp_path: Path) -> None:
    kdir = tmp_path / "prediction-checkpoints"
    koordlet_file(kdir, "good")
    (kdir / "torn").write_text('{"UID": "torn", "CPU": {')
    (kdir / "other").write_text('{"UID": "someone-else", "CPU": {}, "Memory": {}}')
    before = listing(kdir)
    registry = CollectorRegistry()
    svc = service(tmp_path, kdir, registry)
    svc.restore()
    assert svc.table.uids() == ["good"]
    problems = {p["file"]: p for p in svc.problem_list()}
    assert problems[str(kdir / "torn")]["reason"] == "corrupt"
    assert problems[str(kdir / "other")]["reason"] == "foreign"
    assert all(p["set_aside_to"] == "" for p in problems.values())
    assert svc.restored["koordlet_skipped"] == 2
    assert registry.get_sample_value("hookserver_predictor_checkpoints_rejected_total", {"reason": "corrupt"}) == 1
    assert listing(kdir) == before and not (kdir / "rejected").exists()


def test_no_directory_or_none_configured_reads_nothing(tmp_path: Path) -> None:
    svc = service(tmp_path, tmp_path / "absent")
    svc.restore()
    assert svc.table.uids() == [] and svc.problem_list() == []
    kdir = tmp_path / "prediction-checkpoints"
    koordlet_file(kdir, "pod-1")
    off = service(tmp_path, "")
    off.restore()
    assert off.table.uids() == [] and "koordlet_models" not in off.restored
