"""CPUSetAllocator (koordlet's cpuset hook): the scheduler's CPUs for bound pods with their quota unset, the
LS share pool for the rest, BE left to CPU suppress, and bad annotations reported without failing the call."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest

from hookserver.hooks import ContainerRequest, HookRegistry, PodRequest, Stage, run_stage
from hookserver.hooks.plugins import CPUSetAllocatorPlugin, default_plugins
from hookserver.resources import Resources
from hookserver.store.records import NodeRecord, PodRecord
from hookserver.system.topology import CpuInfo
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from hookserver.view import NodeView

CPUS = tuple(CpuInfo(cpu=i, core=i // 2, socket=0, numa_node=i // 4, l3=0, online=True) for i in range(8))
STATUS = ANNOTATION_RESOURCE_STATUS


def _pod(qos: str, status: str | None = None, uid: str = "u1", parent: str = "kubepods/burstable/podu1") -> PodRequest:
    annotations = {STATUS: status} if status is not None else {}
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    return PodRequest("ns", "p-" + uid, uid, labels=labels, annotations=annotations, cgroup_parent=parent)


def _record(uid: str, qos: str, cpuset: str) -> PodRecord:
    return PodRecord(uid=uid, namespace="ns", name=uid, labels={"koordinator.sh/qosClass": qos},
                     annotations={STATUS: json.dumps({"cpuset": cpuset})}, phase="Running")


def _view(*pods: PodRecord, node_annotations: dict[str, str] | None = None) -> NodeView:
    node = NodeRecord(name="n", annotations=MappingProxyType(node_annotations or {}))
    return NodeView.build(node=node, pods=MappingProxyType({p.uid: p for p in pods}))


PLUGIN = CPUSetAllocatorPlugin(cpus=CPUS)


def test_bound_pod_gets_the_schedulers_cpus_and_no_quota_in_every_container() -> None:
    pod = _pod("LSR", '{"cpuset":"2-3","numaNodeResources":[{"node":0,"resources":{"cpu":"2"}}]}')
    view = _view(_record("u1", "LSR", "2-3"))
    for name in ("init-setup", "app"):  # init containers too, as koordlet's hook sees every CreateContainer
        result = PLUGIN.pre_create_container(ContainerRequest(pod=pod, name=name), view)
        assert result.applied and result.resources == Resources(cpuset_cpus="2-3", cpu_quota_us=-1)
        assert "from resource-status" in result.reason
    update = PLUGIN.pre_update_container_resources(ContainerRequest(pod=pod, name="app"), view)
    assert update.resources == Resources(cpuset_cpus="2-3", cpu_quota_us=-1)
    sandbox = PLUGIN.pre_run_pod_sandbox(pod, view)  # the pod's quota, and its sandbox's cpuset (issue 37)
    assert sandbox.applied and sandbox.resources == Resources(cpuset_cpus="2-3", cpu_quota_us=-1)
    assert "sandbox cpuset 2-3" in sandbox.reason


def test_disable_unset_cpu_quota_keeps_the_quota() -> None:
    plugin = CPUSetAllocatorPlugin(cpus=CPUS, unset_cpu_quota=False)
    pod = _pod("LSE", '{"cpuset":"4-5"}')
    result = plugin.pre_create_container(ContainerRequest(pod=pod, name="app"), _view())
    assert result.resources == Resources(cpuset_cpus="4-5")
    assert plugin.pre_run_pod_sandbox(pod, _view()).resources == Resources(cpuset_cpus="4-5")  # the sandbox's


def test_ls_and_unlabelled_pods_get_the_share_pool_without_bound_and_reserved_cpus() -> None:
    view = _view(_record("a", "LSE", "0-1"), _record("b", "LSR", "6"),
                 node_annotations={"node.koordinator.sh/reservation": '{"reservedCPUs":"7"}'})
    for qos in ("LS", ""):
        result = PLUGIN.pre_create_container(ContainerRequest(pod=_pod(qos, uid="c"), name="app"), view)
        assert result.applied and result.resources == Resources(cpuset_cpus="2-5"), qos
        assert "minus bound 0-1,6 (2 pods)" in result.reason and "minus reserved 7" in result.reason
    # the pool follows the pods: once the LSE pod is gone its CPUs are shared again
    later = _view(_record("b", "LSR", "6"))
    assert PLUGIN.pre_create_container(ContainerRequest(pod=_pod("LS", uid="c"), name="app"), later).resources \
        == Resources(cpuset_cpus="0-5,7")


def test_system_pods_use_the_system_qos_cpuset() -> None:
    view = _view(node_annotations={"node.koordinator.sh/system-qos-resource": '{"cpuset":"0-1"}'})
    result = PLUGIN.pre_create_container(ContainerRequest(pod=_pod("SYSTEM"), name="agent"), view)
    assert result.resources == Resources(cpuset_cpus="0-1")


def test_be_and_kube_besteffort_pods_are_left_to_cpu_suppress() -> None:
    assert not PLUGIN.pre_create_container(ContainerRequest(pod=_pod("BE", '{"cpuset":"1"}'), name="a"), _view()).applied
    besteffort = _pod("", parent="kubepods/besteffort/podu1")
    assert not PLUGIN.pre_create_container(ContainerRequest(pod=besteffort, name="a"), _view()).applied
    static = ContainerRequest(pod=_pod(""), name="a", resources=Resources(cpuset_cpus="3"))
    assert "static CPU manager" in PLUGIN.pre_create_container(static, _view()).reason


def test_unbound_lsr_pod_gets_the_share_pool_and_the_audit_says_it_was_not_bound() -> None:
    result = PLUGIN.pre_create_container(ContainerRequest(pod=_pod("LSR"), name="app"), _view())
    assert result.applied and result.resources == Resources(cpuset_cpus="0-7")
    assert "not bound" in result.inputs["error"]


@pytest.mark.parametrize("status, words", [
    ("{broken", "not JSON"),
    ('{"cpuset":"x"}', "not a cpu list"),
    ('{"cpuset":"6-9"}', "does not have online (8-9; online 0-7)"),
])
def test_bad_annotation_is_a_clear_error_and_the_container_is_still_created(status: str, words: str) -> None:
    registry = HookRegistry(default_plugins(cpus=CPUS))  # type: ignore[arg-type]
    request = ContainerRequest(pod=_pod("LSE", status), name="app")
    out = run_stage(registry, Stage.PRE_CREATE_CONTAINER, request, _view(), stop_on_error=True)
    # not a failed stage (so neither failure policy refuses the container) and no value at all
    assert not out.failed and out.resources.is_empty()
    mine = next(o for o in out.outcomes if o.plugin == "CPUSetAllocator")
    assert mine.result is not None and not mine.result.applied
    assert mine.result.reason.startswith("error: ") and words in mine.result.reason


def test_unknown_topology_pins_only_bound_pods() -> None:
    plugin = CPUSetAllocatorPlugin()
    assert plugin.pre_create_container(ContainerRequest(pod=_pod("LSR", '{"cpuset":"40"}'), name="a"), _view()).resources \
        == Resources(cpuset_cpus="40", cpu_quota_us=-1)
    assert "topology unknown" in plugin.pre_create_container(ContainerRequest(pod=_pod("LS"), name="a"), _view()).reason


def test_gate_off_answers_nothing() -> None:
    plugin = CPUSetAllocatorPlugin(enabled=False, cpus=CPUS)
    assert not plugin.pre_create_container(ContainerRequest(pod=_pod("LSR", '{"cpuset":"1"}'), name="a"), _view()).applied
    assert not plugin.pre_run_pod_sandbox(_pod("LSR", '{"cpuset":"1"}'), _view()).applied


def test_the_kubelets_exclusive_cpus_leave_the_share_pool_and_follow_its_state() -> None:
    """The static CPU manager's CPUs (the NRT publisher's read of cpu_manager_state) are never an LS
    container's: without this an LS pod could be pinned onto a guaranteed pod's exclusive CPU."""
    allocated = {"cpus": frozenset({2, 3})}
    plugin = CPUSetAllocatorPlugin(cpus=CPUS, kubelet_allocated=lambda: allocated["cpus"])
    view = _view(_record("b", "LSR", "6"))
    request = ContainerRequest(pod=_pod("LS", uid="c"), name="app")
    assert plugin.pre_create_container(request, view).resources == Resources(cpuset_cpus="0-1,4-5,7")
    allocated["cpus"] = frozenset({2})  # the kubelet released CPU 3: the same view, a new pool
    assert plugin.pre_create_container(request, view).resources == Resources(cpuset_cpus="0-1,3-5,7")


def test_default_plugins_hand_the_kubelets_cpus_to_the_cpuset_hook() -> None:
    plugins = default_plugins(cpus=CPUS, kubelet_allocated=lambda: frozenset({0, 1}))
    plugin = next(p for p in plugins if isinstance(p, CPUSetAllocatorPlugin))
    result = plugin.pre_create_container(ContainerRequest(pod=_pod("", uid="c"), name="app"), _view())
    assert result.resources == Resources(cpuset_cpus="2-7")
