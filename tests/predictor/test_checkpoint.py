"""Checkpoint files: round trip, corruption, truncation, foreign files, leftovers, kill -9 mid-write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from prometheus_client import CollectorRegistry

from hookserver.predictor.checkpoint import Checkpointer, decode_checkpoint, encode_checkpoint
from hookserver.predictor.metrics import PredictorMetrics
from hookserver.predictor.models import ModelTable
from hookserver.predictor.service import PredictorService
from hookserver.predictor.settings import PredictorSettings
from hookserver.store.state import StateStore
from tests.predictor.helpers import GI, NOW

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def table() -> ModelTable:
    return ModelTable(cpu_half_life_s=43200.0, memory_half_life_s=86400.0)


def trained(uid: str = "pod-1"):
    model = table().new_model(uid)
    for k in range(120):
        model.add(0.05 * (k % 30), (k % 9 + 1) * 0.5 * GI, NOW + k * 60.0)
    return model


def test_round_trip_in_koordlets_format(tmp_path):
    model = trained()
    data = encode_checkpoint(model)
    doc = json.loads(data)
    assert set(doc) == {"UID", "CPU", "Memory", "LastUpdated", "FirstSample", "Samples"}
    assert set(doc["CPU"]) == {"referenceTimestamp", "bucketWeights", "totalWeight"}
    assert max(doc["Memory"]["bucketWeights"].values()) == 10000
    back = decode_checkpoint(data, name="pod-1.json", table=table())
    assert back.predict().cpu_milli == model.predict().cpu_milli
    assert back.predict().memory_bytes == model.predict().memory_bytes
    assert (back.samples, back.first_sample, back.last_updated) == (120, NOW, NOW + 119 * 60.0)


def write_good(directory, uid="pod-1"):
    checkpointer = Checkpointer(str(directory))
    checkpointer.ensure_dir()
    checkpointer.save(uid, encode_checkpoint(trained(uid)))
    return checkpointer


def test_corrupt_truncated_and_foreign_files_are_set_aside_and_reported(tmp_path):
    directory = tmp_path / "predictor"
    checkpointer = write_good(directory, "good")
    good = (directory / "good.json").read_bytes()
    (directory / "garbage.json").write_bytes(b"\x00\xffnot json")
    (directory / "trunc.json").write_bytes(good.replace(b'"UID":"good"', b'"UID":"trunc"')[: len(good) // 2])
    (directory / "other.json").write_text(json.dumps({"apiVersion": "v1", "kind": "ConfigMap"}))
    (directory / "renamed.json").write_bytes(good)  # holds UID "good": not this file's model
    (directory / "notes.txt").write_text("hello")
    (directory / "half.json.tmp").write_bytes(good[:10])
    badweights = json.loads(good)
    badweights["UID"] = "weights"
    badweights["CPU"]["bucketWeights"] = {"900": 5}
    (directory / "weights.json").write_text(json.dumps(badweights))
    result = checkpointer.restore(table(), now=NOW)
    assert [m.uid for m in result.models] == ["good"]
    assert result.tmp_removed == 1 and not (directory / "half.json.tmp").exists()
    reasons = {p.file: p.reason for p in result.problems}
    assert reasons == {"garbage.json": "corrupt", "trunc.json": "corrupt", "other.json": "foreign",
                       "renamed.json": "foreign", "notes.txt": "foreign", "weights.json": "corrupt"}
    for name in reasons:
        assert not (directory / name).exists() and (directory / "rejected" / name).exists()
    # a second restore finds only the good file: nothing is reported twice
    assert checkpointer.restore(table(), now=NOW).problems == []


def test_service_reports_problems_in_metrics_and_hookctl_view(tmp_path):
    directory = tmp_path / "predictor"
    write_good(directory, "good")
    (directory / "bad.json").write_text("{")
    registry = CollectorRegistry()
    service = PredictorService(PredictorSettings(), store=StateStore(), checkpoint_dir=str(directory),
                               metrics=PredictorMetrics(registry, node="n"))
    assert service.restore() == 1
    assert registry.get_sample_value("hookserver_predictor_checkpoints_rejected_total", {"reason": "corrupt"}) == 1
    problems = service.problem_list()
    assert problems[0]["file"] == "bad.json" and problems[0]["reason"] == "corrupt"
    assert problems[0]["set_aside_to"].endswith("rejected/bad.json")


def test_unwritable_directory_counts_failures_and_does_not_raise(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    registry = CollectorRegistry()
    store = StateStore()
    service = PredictorService(PredictorSettings(), store=store, checkpoint_dir=str(blocker / "predictor"),
                               metrics=PredictorMetrics(registry, node="n"))
    service.restore()
    service.table.train([("pod-1", 1.0, 1.0)], NOW)
    assert service.checkpoint_once(NOW) == []
    assert registry.get_sample_value("hookserver_predictor_checkpoint_failures_total", {"operation": "save"}) == 1


def test_uid_that_cannot_name_a_file_is_refused(tmp_path):
    checkpointer = Checkpointer(str(tmp_path))
    with pytest.raises(Exception, match="cannot name"):
        checkpointer.save("../escape", b"{}")


@pytest.mark.slow
def test_kill_9_mid_round_leaves_old_or_new_files(tmp_path):
    directory = tmp_path / "predictor"
    proc = subprocess.Popen([sys.executable, os.path.join(REPO, "tests", "predictor", "ckpt_writer.py"),
                             str(directory)], stdout=subprocess.PIPE, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": REPO})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.3)  # well inside a later round
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    names = os.listdir(directory)
    finals = [n for n in names if n.endswith(".json")]
    assert len(finals) == 200
    for name in finals:  # every final file decodes: a rename is atomic, the tmp was fsynced before it
        decode_checkpoint((directory / name).read_bytes(), name=name, table=table())
    leftovers = [n for n in names if n.endswith(".tmp")]
    assert set(names) == set(finals) | set(leftovers)
    result = Checkpointer(str(directory)).restore(table(), now=NOW)
    assert len(result.models) == 200 and result.problems == []
    assert result.tmp_removed == len(leftovers)
    assert not [n for n in os.listdir(directory) if n.endswith(".tmp")]
