"""CPU suppress and CPUSetAllocator agree on which CPUs are whose: what BE may use unsuppressed is exactly the
BE share pool the NRT reports (LSE CPUs, reserved and system-qos CPUs out; LSR CPUs in), and a suppressed BE
cpuset never touches a CPU an LSE pod is bound to, while LS containers are pinned to the LS pool."""

from __future__ import annotations

import json
from types import MappingProxyType

from hookserver.hooks import ContainerRequest, PodRequest
from hookserver.hooks.plugins import CPUSetAllocatorPlugin
from hookserver.store import NodeRecord, PodRecord
from hookserver.system.topology import CpuInfo
from hookserver.topology import ANNOTATION_RESOURCE_STATUS, compute_pools
from hookserver.view import NodeView
from qos.cpu.cpuset_pick import allowed_cpus, logical_cores, split_pools, suppress_cpuset

CPUS = tuple(CpuInfo(cpu=i, core=i % 4, socket=0, numa_node=i // 8, l3=0, online=True) for i in range(16))
NODE = {"node.koordinator.sh/reservation": '{"reservedCPUs":"15"}'}


def _pod(uid: str, qos: str, cpuset: str) -> PodRecord:
    return PodRecord(uid=uid, namespace="ns", name=uid, labels=MappingProxyType({"koordinator.sh/qosClass": qos}),
                     annotations=MappingProxyType({ANNOTATION_RESOURCE_STATUS: json.dumps({"cpuset": cpuset})}),
                     phase="Running")


def test_suppress_and_the_share_pools_agree() -> None:
    pods = {"lse": _pod("lse", "LSE", "0-3"), "lsr": _pod("lsr", "LSR", "8-9")}
    pools = compute_pools(CPUS, pods, NODE)
    lse = frozenset({0, 1, 2, 3})
    assert allowed_cpus(CPUS, excluded=pools.reserved | pools.system, lse=lse) == pools.be_cpus
    pool_of = {c: qos for qos, cpus in (("LSE", lse), ("LSR", frozenset({8, 9}))) for c in cpus}
    lsr, ls = split_pools(CPUS, excluded=pools.reserved | pools.system, pool_of=pool_of)
    for count in range(2, 12):
        be = frozenset(suppress_cpuset(count, lsr, ls, core_rank=logical_cores(CPUS)))
        assert not be & lse and 15 not in be
    view = NodeView.build(node=NodeRecord(name="n", annotations=MappingProxyType(NODE)), pods=MappingProxyType(pods))
    ls_pod = PodRequest("ns", "web", "web", labels={"koordinator.sh/qosClass": "LS"})
    pinned = CPUSetAllocatorPlugin(cpus=CPUS).pre_create_container(ContainerRequest(pod=ls_pod, name="c"), view)
    assert pinned.resources.cpuset_cpus == "4-7,10-14"
