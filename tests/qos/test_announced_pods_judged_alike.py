"""A pod known only from the runtime (koord-runtime-proxy, NRI, standalone: no pod spec, no status qosClass) is
judged like an apiserver pod by the pod classifier, the eviction ledgers and ordering, the collectors and
capacity (issue 37, item 3), as the QoS readers already judge its containers (hookserver.store.specs).

Hand-worked inputs: a pod in the kubelet's best-effort tier (its cgroup parent says so), no qos label, two
containers the runtime created with cpu.shares 2048 (2000m request) and 512 (500m), quota 400000 / 100000
(4 cores limit) and a 1 GiB memory limit on the first. BE: announced under batch-cpu (milli-cores).
"""

from __future__ import annotations

from types import MappingProxyType

from collectors.targets import _cpu_request_cores
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
from hookserver.podclass import effective_requests, pod_priority_class, pod_qos_class
from hookserver.reconciler.targets import kube_qos_of
from hookserver.resources import Resources
from hookserver.store import StateStore
from hookserver.store.records import ContainerRecord, PodRecord
from hookserver.system.cgroupnames import KubeQoS
from qos.snapshot.builder import SnapshotBuilder, pod_requests

BE_PARENT = "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podu_be.slice"
LS_PARENT = "/kubepods/burstable/podu-ls"


def _pod(uid: str, parent: str) -> PodRecord:
    return PodRecord(uid=uid, namespace="ns", name=uid, cgroup_parent=parent, source="proxy", phase="Running")


def _containers(uid: str) -> list[ContainerRecord]:
    return [
        ContainerRecord(id=f"{uid}-a", pod_uid=uid, name="a", source="proxy", updated_at=1.0,
                        resources=Resources(cpu_shares=2048, cpu_quota_us=400_000, cpu_period_us=100_000,
                                            memory_limit_bytes=1 << 30)),
        ContainerRecord(id=f"{uid}-b", pod_uid=uid, name="b", source="proxy", updated_at=1.0,
                        resources=Resources(cpu_shares=512)),
    ]


def test_the_classifier_reads_the_kubelets_tier() -> None:
    be, ls = _pod("u-be", BE_PARENT), _pod("u-ls", LS_PARENT)
    assert (pod_qos_class(be), pod_priority_class(be)) == ("BE", "koord-batch")
    assert (pod_qos_class(ls), pod_priority_class(ls)) == ("LS", "koord-prod")
    assert kube_qos_of(be) is KubeQoS.BESTEFFORT and kube_qos_of(_pod("g", "/kubepods/podg")) is KubeQoS.GUARANTEED
    assert pod_qos_class(_pod("x", "/system.slice/x")) == ""  # nothing says: still unknown


def test_the_eviction_ledgers_count_the_announced_requests() -> None:
    be = _pod("u-be", BE_PARENT)
    assert pod_requests(be, _containers("u-be")) == {BATCH_CPU: 2500}  # no memory request is announced
    ls = _pod("u-ls", LS_PARENT)
    assert pod_requests(ls, _containers("u-ls")) == {"cpu": 2500}
    # a pod with a spec keeps its spec: the announced values are only a stand-in
    spec = PodRecord(uid="u-s", namespace="ns", name="s", container_specs=MappingProxyType(
        {"a": (MappingProxyType({"cpu": "100m", BATCH_MEMORY: "1Gi"}), MappingProxyType({}))}))
    assert pod_requests(spec, _containers("u-s")) == {"cpu": 100, BATCH_MEMORY: 1 << 30}


def test_the_snapshot_judges_the_proxy_pod_like_an_apiserver_pod() -> None:
    store = StateStore(clock=lambda: 100.0)
    store.upsert_pod(_pod("u-be", BE_PARENT))
    for c in _containers("u-be"):
        store.upsert_container(c)
    (be,) = SnapshotBuilder(store, cgroups=None).build(evicted=frozenset()).pods
    assert (be.qos, be.batch_cpu_request_milli, be.cpu_request_milli) == ("BE", 2500, 0)
    assert dict(be.requests) == {BATCH_CPU: 2500}


def test_the_collectors_and_capacity_count_them() -> None:
    assert _cpu_request_cores(_pod("u-be", BE_PARENT), True, _containers("u-be")) == 2.5
    got = effective_requests(_pod("u-ls", LS_PARENT), _containers("u-ls"))
    assert (got.cpu_milli, got.memory_bytes) == (2500, 0)
