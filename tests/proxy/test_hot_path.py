"""Guards for the two hot-path optimisations made for the proxy benchmark (shared code, behaviour kept):

* `parse_extended_resource_spec` memoizes parses of the annotation text;
* `StateStore.snapshot()` after a container-only change reuses the previous snapshot's pod maps.

Each is checked against the unoptimised behaviour: fresh results, errors every time, and snapshots that
always equal a plain model of the store after any sequence of writes.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.errors import AnnotationError
from hookserver.extended_resource_spec import (
    ANNOTATION_EXTENDED_RESOURCE_SPEC as KEY,
)
from hookserver.extended_resource_spec import parse_extended_resource_spec
from hookserver.store import ContainerRecord, NodeRecord, PodRecord, StateStore

SPEC = json.dumps({"containers": {"a": {"limits": {"kubernetes.io/batch-cpu": "1k"}}}})


def test_cached_parse_returns_a_fresh_dict_each_time() -> None:
    first = parse_extended_resource_spec({KEY: SPEC})
    assert first is not None and first["a"].cpu_limit_milli == 1000
    first.clear()  # a caller mutating its result must not poison the next call
    second = parse_extended_resource_spec({KEY: SPEC})
    assert second is not None and second["a"].cpu_limit_milli == 1000 and second is not first


def test_parse_errors_are_raised_on_every_call() -> None:
    for _ in range(3):
        with pytest.raises(AnnotationError, match="not valid JSON"):
            parse_extended_resource_spec({KEY: "{oops"})


def test_large_annotations_bypass_the_cache_but_parse_the_same() -> None:
    big = json.dumps({**json.loads(SPEC), "pad": "x" * 20_000})
    assert len(big) > 16 * 1024
    got = parse_extended_resource_spec({KEY: big})
    assert got is not None and got["a"].cpu_limit_milli == 1000


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), st.integers(0, 4)),
        st.tuples(st.just("rm_pod"), st.integers(0, 4)),
        st.tuples(st.just("ctr"), st.integers(0, 6), st.integers(0, 4)),
        st.tuples(st.just("rm_ctr"), st.integers(0, 6), st.just(0)),
        st.tuples(st.just("node"), st.integers(0, 3)),
        st.tuples(st.just("snap"), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_snapshots_always_match_a_plain_model(ops: list[tuple[object, ...]]) -> None:
    store = StateStore(clock=lambda: 1.0)
    pods: dict[str, PodRecord] = {}
    containers: dict[str, ContainerRecord] = {}
    node: NodeRecord | None = None
    version = store.version
    for op in ops:
        kind = op[0]
        if kind == "pod":
            rec = PodRecord(uid=f"u{op[1]}", namespace="ns", name=f"p{op[1]}", sandbox_id=f"s{op[1]}", first_seen=1.0)
            store.upsert_pod(rec)
            pods[rec.uid] = rec
        elif kind == "rm_pod":
            uid = f"u{op[1]}"
            store.remove_pod(uid)
            if pods.pop(uid, None) is not None:
                containers = {k: c for k, c in containers.items() if c.pod_uid != uid}
        elif kind == "ctr":
            ctr = ContainerRecord(id=f"c{op[1]}", pod_uid=f"u{op[2]}", name="main")
            store.upsert_container(ctr)
            containers[ctr.id] = ctr
        elif kind == "rm_ctr":
            store.remove_container(f"c{op[1]}")
            containers.pop(f"c{op[1]}", None)
        elif kind == "node":
            node = NodeRecord(name=f"n{op[1]}")
            store.set_node(node)
        snap = store.snapshot()
        assert snap.version == store.version >= version
        version = snap.version
        assert dict(snap.pods) == pods
        assert dict(snap.pods_by_key) == {p.key: p for p in pods.values()}
        assert dict(snap.pods_by_sandbox) == {p.sandbox_id: p for p in pods.values()}
        assert dict(snap.containers) == containers
        assert snap.node == node


def test_a_container_change_reuses_the_pod_maps_and_a_pod_change_rebuilds_them() -> None:
    store = StateStore()
    store.upsert_pod(PodRecord(uid="u", namespace="ns", name="p"))
    before = store.snapshot()
    store.upsert_container(ContainerRecord(id="c", pod_uid="u", name="main"))
    after = store.snapshot()
    assert after.pods is before.pods and after.pods_by_key is before.pods_by_key  # not rebuilt
    assert "c" in after.containers and "c" not in before.containers  # the old snapshot is unchanged
    store.upsert_pod(PodRecord(uid="v", namespace="ns", name="q"))
    assert set(store.snapshot().pods) == {"u", "v"}
