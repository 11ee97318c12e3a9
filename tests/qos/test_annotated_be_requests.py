"""The snapshot's PodFacts of a spec-less BE pod carry the batch-cpu request its extended-resource-spec
annotation states (issue 39), and follow the annotation when it arrives after the containers (a request
whose annotations a proxy failover lost, filled in later): the builder's request cache is keyed by it.

Hand-worked inputs: containers `a` (batch-cpu 500) and `b` (1500), both announced with the kubelet's BE
values (shares 2, no quota): 2000 milli-cores from the annotation, 0 from the runtime alone.
"""

from __future__ import annotations

import dataclasses
import json

from hookserver.koord_resources import ANNOTATION_EXTENDED_RESOURCE_SPEC as SPEC, BATCH_CPU
from hookserver.resources import Resources
from hookserver.store import StateStore
from hookserver.store.records import ContainerRecord, PodRecord
from qos.snapshot.builder import SnapshotBuilder

ANNOTATION = json.dumps({"containers": {"a": {"requests": {BATCH_CPU: "500"}}, "b": {"requests": {BATCH_CPU: "1500"}}}})


def _pod(annotations: dict[str, str]) -> PodRecord:
    return PodRecord(uid="u-be", namespace="batch", name="job", labels={"koordinator.sh/qosClass": "BE"},
                     qos_class="BE", annotations=annotations, source="proxy", phase="Running",
                     cgroup_parent="/kubepods/besteffort/podu-be")


def _store(annotations: dict[str, str]) -> StateStore:
    store = StateStore(clock=lambda: 100.0)
    store.upsert_pod(_pod(annotations))
    for name in ("a", "b"):
        store.upsert_container(ContainerRecord(id=f"c-{name}", pod_uid="u-be", name=name, source="proxy",
                                               updated_at=1.0, resources=Resources(cpu_shares=2)))
    return store


def test_the_pod_facts_carry_the_annotations_batch_cpu_request() -> None:
    (be,) = SnapshotBuilder(_store({SPEC: ANNOTATION}), cgroups=None).build(evicted=frozenset()).pods
    assert (be.qos, be.batch_cpu_request_milli, be.cpu_request_milli) == ("BE", 2000, 0)
    assert {c.name: dict(c.requests) for c in be.containers} == {"a": {BATCH_CPU: "500"}, "b": {BATCH_CPU: "1500"}}


def test_an_annotation_that_arrives_later_is_counted_on_the_next_build() -> None:
    store = _store({})
    builder = SnapshotBuilder(store, cgroups=None)
    (before,) = builder.build(evicted=frozenset()).pods
    assert before.batch_cpu_request_milli == 0
    stored = store.snapshot().pods["u-be"]
    store.upsert_pod(dataclasses.replace(stored, annotations={SPEC: ANNOTATION}))  # as a merge fills the gap
    (after,) = builder.build(evicted=frozenset()).pods
    assert after.batch_cpu_request_milli == 2000
