"""The state store's hot-path readers."""

from __future__ import annotations

from hookserver.store.records import PodRecord
from hookserver.store.state import StateStore


def test_pods_snapshot_skips_the_container_copy_but_never_serves_stale_pods() -> None:
    from hookserver.store.records import ContainerRecord

    store = StateStore()
    store.upsert_pod(PodRecord(uid="u1", namespace="ns", name="a"))
    full = store.snapshot()
    store.upsert_container(ContainerRecord(id="c1", pod_uid="u1", name="main"))
    fast = store.pods_snapshot()
    assert fast is full  # only containers changed: no rebuild, no O(containers) copy
    assert store.container("c1") is not None and "c1" not in fast.containers
    store.upsert_pod(PodRecord(uid="u2", namespace="ns", name="b"))
    after = store.pods_snapshot()
    assert set(after.pods) == {"u1", "u2"} and "c1" in after.containers  # a pod change rebuilds everything


def test_the_store_counts_pending_container_records_through_every_removal() -> None:
    from hookserver.store.records import ContainerRecord, pending_container_id

    store = StateStore()
    store.upsert_pod(PodRecord(uid="u1", namespace="ns", name="p"))
    pending = pending_container_id("u1", "a")
    assert pending.startswith("pending:") and store.pending_containers == 0
    store.upsert_container(ContainerRecord(id=pending, pod_uid="u1", name="a"))
    store.upsert_container(ContainerRecord(id=pending, pod_uid="u1", name="a"))  # a rewrite is not a second one
    store.upsert_container(ContainerRecord(id="abc", pod_uid="u1", name="a"))
    assert store.pending_containers == 1
    store.remove_container(pending)
    store.remove_container(pending)  # already gone
    assert store.pending_containers == 0
    store.upsert_container(ContainerRecord(id=pending_container_id("u1", "b"), pod_uid="u1", name="b"))
    assert store.pending_containers == 1
    store.remove_pod("u1")  # takes its containers, pending ones included
    assert store.pending_containers == 0 and store.snapshot().containers == {}


def test_readers_group_only_the_containers_the_runtime_has_named() -> None:
    from hookserver.store.records import ContainerRecord, named_containers_by_pod, pending_container_id

    records = [
        ContainerRecord(id="abc", pod_uid="u1", name="a"),
        ContainerRecord(id=pending_container_id("u1", "b"), pod_uid="u1", name="b"),  # not named yet
        ContainerRecord(id="", pod_uid="u2", name="c"),  # no ID at all
        ContainerRecord(id="def", pod_uid="u2", name="d"),
    ]
    grouped = named_containers_by_pod(records)
    assert {uid: [c.id for c in cs] for uid, cs in grouped.items()} == {"u1": ["abc"], "u2": ["def"]}
