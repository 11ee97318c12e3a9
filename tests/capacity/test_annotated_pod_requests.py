"""A spec-less BE pod's request, as podclass.request_amounts and its readers count it, includes the batch
requests its extended-resource-spec annotation states (issue 39): before, the kubelet's announced cpu.shares
2 read as "no request" and the BE CPU request collector and the eviction ledgers saw 0.

Hand-worked inputs: containers `a` (batch-cpu 500, batch-memory 256Mi) and `b` (batch-cpu 1500, 1Gi); the
runtime announced both with the kubelet's BE values (shares 2, no quota); `c` is in the annotation but not
yet created. Sum of the created ones: 2000 milli-cores, 1280 MiB.
"""

from __future__ import annotations

import json

from collectors.targets import _cpu_request_cores
from hookserver.koord_resources import ANNOTATION_EXTENDED_RESOURCE_SPEC as SPEC, BATCH_CPU, BATCH_MEMORY
from hookserver.podclass import effective_requests, pod_qos_class, request_amounts
from hookserver.resources import Resources
from hookserver.store.records import ContainerRecord, PodRecord

BE_PARENT = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podu_be.slice"
ANNOTATION = json.dumps({"containers": {
    "a": {"requests": {BATCH_CPU: "500", BATCH_MEMORY: "256Mi"}, "limits": {BATCH_CPU: "500", BATCH_MEMORY: "256Mi"}},
    "b": {"requests": {BATCH_CPU: "1500", BATCH_MEMORY: "1Gi"}, "limits": {BATCH_CPU: "3000", BATCH_MEMORY: "2Gi"}},
    "c": {"requests": {BATCH_CPU: "4000"}},
}})


def _pod(annotations: dict[str, str], labels: dict[str, str] | None = None) -> PodRecord:
    return PodRecord(uid="u-be", namespace="batch", name="job", cgroup_parent=BE_PARENT, source="proxy",
                     labels=labels or {}, annotations=annotations)


def _containers() -> list[ContainerRecord]:
    kubelet_be = Resources(cpu_shares=2, cpu_period_us=100_000)
    return [ContainerRecord(id=f"c-{n}", pod_uid="u-be", name=n, source="proxy", updated_at=1.0, resources=kubelet_be)
            for n in ("a", "b")]


def test_the_annotation_states_the_created_containers_batch_requests() -> None:
    pod = _pod({SPEC: ANNOTATION})
    assert request_amounts(pod, (BATCH_CPU, BATCH_MEMORY, "cpu", "memory"), _containers()) == {
        BATCH_CPU: 2000, BATCH_MEMORY: 1280 << 20}


def test_the_be_cpu_request_collector_counts_them() -> None:
    assert _cpu_request_cores(_pod({SPEC: ANNOTATION}), True, _containers()) == 2.0
    assert _cpu_request_cores(_pod({}), True, _containers()) == 0.0  # the kubelet's shares alone: no request


def test_it_stays_a_be_pod_with_no_cpu_or_memory_request() -> None:
    """Nothing reads it as LS: its class still comes from its label or tier, and the scheduler's cpu/memory
    (capacity's input) are still 0, as a BE pod's spec has them."""
    for pod in (_pod({SPEC: ANNOTATION}), _pod({SPEC: ANNOTATION}, {"koordinator.sh/qosClass": "BE"})):
        assert pod_qos_class(pod) == "BE"
        got = effective_requests(pod, _containers())
        assert (got.cpu_milli, got.memory_bytes) == (0, 0)
