"""A NodeSLO host application without `qos` has koordinator's empty QoS class (`qos,omitempty`), not LS: koordlet
refuses its cpuset (only LS is pinned), gives it bvt 0 and puts it at `<name>` under the hierarchy root."""

from __future__ import annotations

from types import MappingProxyType

from hookserver.hooks.plugins import CPUSetAllocatorPlugin
from hookserver.slo import HostApplicationSpec
from hookserver.slo.host_apps import host_app_cgroup_dir
from hookserver.store.records import NodeRecord
from hookserver.system.cgroupnames import CgroupDriver
from hookserver.system.topology import CpuInfo
from hookserver.view import NodeView

CPUS = tuple(CpuInfo(cpu=i, core=i, socket=0, numa_node=0, l3=0, online=True) for i in range(4))


def test_an_app_without_qos_is_not_pinned_and_sits_at_its_name() -> None:
    app = HostApplicationSpec.model_validate({"name": "nginx"})
    assert app.qos == ""
    assert host_app_cgroup_dir(app, CgroupDriver.CGROUPFS) == "nginx"
    view = NodeView.build(node=NodeRecord(name="n", annotations=MappingProxyType({})), pods=MappingProxyType({}))
    result = CPUSetAllocatorPlugin(cpus=CPUS).host_app(app, view)
    assert not result.applied and result.resources.cpuset_cpus is None
    assert result.reason.startswith("error:") and "only LS is supported" in result.reason
    pinned = CPUSetAllocatorPlugin(cpus=CPUS).host_app(HostApplicationSpec.model_validate({"name": "a", "qos": "LS"}),
                                                       view)
    assert pinned.applied and pinned.resources.cpuset_cpus == "0-3"
