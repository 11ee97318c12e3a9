"""A container's spec from the runtime's announced resources when the pod spec is missing (issue 21)."""

from __future__ import annotations

from hookserver.resources import Resources
from hookserver.store.records import ContainerRecord, PodRecord
from hookserver.store.specs import announced_spec, container_spec


def test_quota_over_period_is_the_limit_shares_the_request_and_the_memory_limit() -> None:
    requests, limits = announced_spec(Resources(cpu_shares=1024, cpu_quota_us=150_000, cpu_period_us=100_000,
                                                memory_limit_bytes=1 << 30))
    assert requests == {"cpu": "1000m"} and limits == {"cpu": "1500m", "memory": str(1 << 30)}


def test_unlimited_and_the_kubelets_minimum_shares_mean_nothing_announced() -> None:
    assert announced_spec(Resources(cpu_shares=2, cpu_quota_us=-1, memory_limit_bytes=-1)) == ({}, {})


def test_a_be_pod_reads_its_announced_values_as_batch_resources() -> None:
    pod = PodRecord(uid="u", namespace="n", name="be", qos_class="BE")
    c = ContainerRecord(id="c1", pod_uid="u", name="c", source="nri",
                        resources=Resources(cpu_quota_us=200_000, cpu_period_us=100_000, memory_limit_bytes=1 << 20))
    spec = container_spec(pod, "c", c)
    assert spec.source == "runtime (nri)"
    assert spec.limits == {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": str(1 << 20)}


def test_no_spec_and_nothing_announced_is_none() -> None:
    pod = PodRecord(uid="u", namespace="n", name="p")
    assert container_spec(pod, "c", ContainerRecord(id="c1", pod_uid="u", name="c")).source == "none"
