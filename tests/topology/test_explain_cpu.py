"""`hookctl explain` says where each container's cpuset and the pod's CPU priority came from: the
CPUSetAllocator decision per container and GroupIdentity's latest bvt / cpu.idle write."""

from __future__ import annotations

from hookserver.debug.render import render
from hookserver.debug.views import explain_view
from hookserver.dispatch import HookDispatcher
from hookserver.hooks import ContainerRequest, HookRegistry, PodRequest, Stage
from hookserver.hooks.plugins import CPUSetAllocatorPlugin
from hookserver.store import StateStore
from hookserver.store.audit import WriteRecord
from hookserver.system.topology import CpuInfo
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from tests.reference_example import PlanRecorder

CPUS = tuple(CpuInfo(cpu=i, core=i, socket=0, numa_node=0, l3=0, online=True) for i in range(4))


def test_explain_names_the_cpuset_and_bvt_sources() -> None:
    store = StateStore()
    dispatcher = HookDispatcher(registry=HookRegistry([CPUSetAllocatorPlugin(cpus=CPUS)]), store=store,  # type: ignore[list-item]
                                executor=PlanRecorder())
    uid = "0c5d3a52-1111-2222-3333-444455556666"
    pod = PodRequest("shop", "db", uid, labels={"koordinator.sh/qosClass": "LSR"},
                     annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"2-3"}'},
                     cgroup_parent=f"/kubepods/pod{uid}")
    for name in ("init", "db"):
        dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod, name=name),
                                      door="nri", rpc="CreateContainer")
    store.audit.record_write(WriteRecord(ts=1.0, path=f"/sys/fs/cgroup/cpu/kubepods/pod{uid}/cpu.bvt_warp_ns",
                                         value="2", ok=True, owner="GroupIdentity",
                                         reason="groupIdentity per class: shop/db (LSR) -> 2"))
    doc = explain_view(store, "shop", "db")
    assert doc["cpu"]["cpuset"] == [
        {"container": "init", "cpuset": "2-3", "door": "nri",
         "from": "LSR pod bound by koord-scheduler: cpuset 2-3 from resource-status; CFS quota unset (-1)"},
        {"container": "db", "cpuset": "2-3", "door": "nri",
         "from": "LSR pod bound by koord-scheduler: cpuset 2-3 from resource-status; CFS quota unset (-1)"},
    ]
    assert doc["cpu"]["priority"] == [{"file": f"/sys/fs/cgroup/cpu/kubepods/pod{uid}/cpu.bvt_warp_ns", "value": "2",
                                       "from": "groupIdentity per class: shop/db (LSR) -> 2", "ok": True}]
    text = render(doc)
    cpu = text[text.index("cpu:"):text.index("writes:")]
    assert "db         2-3     LSR pod bound by koord-scheduler" in cpu and "cpu.bvt_warp_ns  2      groupIdentity" in cpu
