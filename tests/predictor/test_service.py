"""Training from the store, GC, checkpoint rounds and restart through the service."""

from __future__ import annotations

import os

import pytest

from hookserver.predictor.models import NODE_UID, SYSTEM_UID, priority_uid
from hookserver.predictor.training import p90
from hookserver.store.timeseries import percentile
from tests.predictor.conftest import feed, feed_node
from tests.predictor.helpers import GI, NOW, pod

PROD = {"koordinator.sh/priority-class": "koord-prod"}
BATCH = {"koordinator.sh/priority-class": "koord-batch"}


def test_p90_is_the_store_percentile():
    values = [float(i) for i in range(1, 61)]
    assert p90(list(values)) == percentile(sorted(values), 0.9) == pytest.approx(54.1)


def test_training_round_samples_pods_classes_node_and_system(store, make_service, clock):
    store.upsert_pod(pod("a", labels=PROD))
    store.upsert_pod(pod("b", labels=BATCH))
    store.upsert_pod(pod("quiet", labels=PROD))  # no samples: skipped
    cpu_a = [0.1 * (i % 10) for i in range(60)]
    feed(store, uid="uid-a", cpu=cpu_a, memory=[1.0 * GI] * 60, end=NOW)
    feed(store, uid="uid-b", cpu=[2.0] * 60, memory=[2.0 * GI] * 60, end=NOW)
    feed(store, uid="uid-b", cpu=[9.0] * 5, memory=[9.0 * GI] * 5, end=NOW - 61)  # outside the window
    feed_node(store, cpu=[2.5] * 60, memory=[10.0 * GI] * 60, end=NOW)
    service = make_service()
    round_ = service.train_once(NOW)
    assert round_.pods_trained == 2 and round_.pods_without_samples == 1 and round_.node_trained
    a90 = p90(list(cpu_a))
    samples = {uid: (c, m) for uid, c, m in round_.samples}
    assert samples["uid-a"] == (pytest.approx(a90), 1.0 * GI)
    assert samples["uid-b"] == (2.0, 2.0 * GI)
    assert samples[priority_uid("koord-prod")] == (pytest.approx(a90), 1.0 * GI)
    assert samples[priority_uid("koord-batch")] == (2.0, 2.0 * GI)
    assert samples[priority_uid("koord-mid")] == (0.0, 0.0)  # no pods: a sample of 0
    assert samples[priority_uid("")] == (0.0, 0.0)
    # system = node - all pods, floored at 0 (CPU: 2.5 - 2.0 - 0.81 < 0)
    assert samples[SYSTEM_UID] == (0.0, pytest.approx(10.0 * GI - 3.0 * GI))
    assert samples[NODE_UID] == (2.5, 10.0 * GI)
    assert len(service.table) == 2 + 1 + 5 + 1
    got = service.table.predict("uid-b")
    assert got is not None and got.samples == 1 and got.last_updated == NOW


def test_no_node_sample_skips_the_system_model(store, make_service):
    store.upsert_pod(pod("a", labels=PROD))
    feed(store, uid="uid-a", cpu=[1.0] * 3, memory=[GI] * 3, end=NOW)
    service = make_service()
    round_ = service.train_once(NOW)
    assert not round_.node_trained
    assert service.table.predict(SYSTEM_UID) is None and service.table.predict(NODE_UID) is None


def test_gc_drops_stale_models_and_their_checkpoints(store, make_service, clock):
    store.upsert_pod(pod("a"))
    feed(store, uid="uid-a", cpu=[1.0], memory=[GI], end=NOW)
    service = make_service()
    service.train_once(NOW)
    service.checkpoint_once(NOW)
    path = service.checkpoint_path("uid-a")
    assert os.path.exists(path)
    store.remove_pod("uid-a")
    clock.now = NOW + 1700
    service.train_once()  # the pod is gone: its model is not updated any more
    assert service.gc_once() == []  # 1700 s < 30 min
    clock.now = NOW + 1801
    dead = service.gc_once()
    assert "uid-a" in dead and not os.path.exists(path)
    assert service.table.predict("uid-a") is None


def test_gc_waits_for_the_first_training_round_after_a_restore(store, make_service, clock):
    store.upsert_pod(pod("a"))
    feed(store, uid="uid-a", cpu=[1.0], memory=[GI], end=NOW)
    first = make_service()
    first.train_once(NOW)
    first.flush()
    clock.now = NOW + 3600  # the agent was down for an hour
    second = make_service()
    second.restore()
    assert second.gc_once() == []  # not before training: the pod may still be running
    feed(store, uid="uid-a", cpu=[1.0], memory=[GI], end=clock.now)
    second.train_once()
    assert "uid-a" not in second.gc_once()  # trained again: kept, with its history
    assert second.table.predict("uid-a").samples == 2


def test_checkpoint_rounds_are_bounded_oldest_first_and_rate_limited(store, make_service, clock):
    for i in range(30):
        store.upsert_pod(pod(f"p{i:02d}"))
        feed(store, uid=f"uid-p{i:02d}", cpu=[0.5], memory=[GI], end=NOW)
    service = make_service()
    service.train_once(NOW)
    total = len(service.table)  # 30 pods + 5 priority classes (no node samples)
    first = service.checkpoint_once(NOW)
    assert len(first) == 12  # at most 12 a round
    second = service.checkpoint_once(NOW + 60)
    assert len(second) == 12 and not set(first) & set(second)  # never-checkpointed models go first
    third = service.checkpoint_once(NOW + 120)
    assert len(third) == total - 24
    assert service.checkpoint_once(NOW + 180) == []  # every model was written less than 10 min ago
    again = service.checkpoint_once(NOW + 60 + 600)
    assert again == first  # oldest checkpoint first, once its 10 min are up
    files = sorted(os.listdir(service.checkpointer.directory))
    assert len(files) == total and all(f.endswith(".json") for f in files)


def test_restart_restores_the_same_percentiles(store, make_service, clock, tmp_path):
    store.upsert_pod(pod("a", labels=PROD))
    service = make_service()
    for minute in range(30):
        end = NOW + minute * 60
        feed(store, uid="uid-a", cpu=[0.2 + 0.05 * (minute % 7)] * 60, memory=[(1 + minute % 5) * GI] * 60, end=end)
        feed_node(store, cpu=[3.0] * 60, memory=[12.0 * GI] * 60, end=end)
        service.train_once(end)
    clock.now = NOW + 30 * 60
    assert service.flush() == len(service.table)
    before = {uid: service.table.predict(uid) for uid in service.table.uids()}
    again = make_service()
    assert again.restore() == len(before)
    for uid, p in before.items():
        q = again.table.predict(uid)
        assert q is not None
        assert (q.cpu_milli, q.memory_bytes, q.samples) == (p.cpu_milli, p.memory_bytes, p.samples), uid
        assert q.first_sample == p.first_sample and q.last_updated == p.last_updated
    assert again.restored["models"] == len(before) and again.restored["rejected"] == 0
    assert again.flush() == 0  # nothing changed since: nothing rewritten


def test_a_training_round_trains_in_slices_and_never_holds_the_table_lock_across_a_hot_gate_pause(
    store, make_service, monkeypatch
):
    """500 pods' models trained under one hold of the table's lock were ~25 ms of the GIL with no pause for
    a hook; the round now trains `_TRAIN_SLICE` models per hold, with the hot gate's pause between holds
    (and the lock free at each pause: a reader such as the capacity publisher must not wait on a pause)."""
    from hookserver.predictor import service as service_module

    for i in range(100):
        store.upsert_pod(pod(f"p{i:03d}", labels=PROD))
        feed(store, uid=f"uid-p{i:03d}", cpu=[1.0] * 3, memory=[GI] * 3, end=NOW)
    service = make_service()
    trained_at_pause: list[int] = []

    def pause() -> None:
        assert not service.table._lock.locked()  # never paused while holding the table
        trained_at_pause.append(sum(1 for uid in service.table.uids() if uid.startswith("uid-")))

    monkeypatch.setattr(service_module, "pause", pause)
    round_ = service.train_once(NOW)
    assert round_.pods_trained == 100
    marks = [*trained_at_pause, 100]
    assert len(trained_at_pause) >= 100 // service_module._TRAIN_SLICE
    assert max(b - a for a, b in zip(marks, marks[1:], strict=False)) <= service_module._TRAIN_SLICE
    assert all(service.table.predict(f"uid-p{i:03d}") is not None for i in range(100))
