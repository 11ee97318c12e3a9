"""The snapshot's pod indexes (by key, by sandbox id) are kept as pods change instead of rebuilt per snapshot;
whatever the order of upserts, merges and removals, they hold exactly what a rebuild from the pods would,
including pods that share a key or a sandbox id (the last in the pod map's order wins)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.store.records import PodRecord
from hookserver.store.state import StateStore

_op = st.tuples(
    st.sampled_from(["upsert", "merge", "remove"]),
    st.sampled_from(["u1", "u2", "u3", "u4"]),      # few uids, names and sandboxes: collisions are common
    st.sampled_from(["a", "b", ""]),
    st.sampled_from(["sb-1", "sb-2", ""]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_op, max_size=40))
def test_the_indexes_match_a_rebuild_after_any_sequence_of_changes(ops: list[tuple[str, str, str, str]]) -> None:
    store = StateStore(clock=lambda: 1.0)
    for kind, uid, name, sandbox in ops:
        record = PodRecord(uid=uid, namespace="ns", name=name, sandbox_id=sandbox)
        if kind == "upsert":
            store.upsert_pod(record)
        elif kind == "merge":
            store.merge_pod(record, authoritative=frozenset({"name", "sandbox_id"}))
        else:
            store.remove_pod(uid)
        snap = store.snapshot()
        pods = list(snap.pods.values())
        assert dict(snap.pods_by_key) == {p.key: p for p in pods}
        assert dict(snap.pods_by_sandbox) == {p.sandbox_id: p for p in pods if p.sandbox_id}


def test_a_removed_pod_hands_its_key_back_to_the_pod_that_shares_it() -> None:
    store = StateStore()
    store.upsert_pod(PodRecord(uid="old", namespace="ns", name="web", sandbox_id="sb-old"))
    store.upsert_pod(PodRecord(uid="new", namespace="ns", name="web", sandbox_id="sb-new"))
    assert store.snapshot().pods_by_key["ns/web"].uid == "new"
    store.remove_pod("new")
    assert store.snapshot().pods_by_key["ns/web"].uid == "old"
    store.remove_pod("old")
    assert "ns/web" not in store.snapshot().pods_by_key and not store.snapshot().pods_by_sandbox
