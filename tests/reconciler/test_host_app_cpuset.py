"""NodeSLO host applications' cpusets (issue 37), as koordlet's CPUSetAllocator sets them from its host-app
reconciler: an LS application's cgroup gets the LS share pool on the reconciler's full passes; other classes are
refused (koordlet: "only LS is supported"). The cgroup is koordinator's `GetHostAppCgroupRelativePath`, worked
out by hand below. On a v2 systemd fixture tree and on a real cgroup v1 cpuset subtree (the kernel's value)."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.dispatch import HookDispatcher
from hookserver.executor import CgroupExecutor, CgroupLayout
from hookserver.hooks import HookRegistry
from hookserver.hooks.plugins import CPUSetAllocatorPlugin
from hookserver.reconciler import PodReconciler
from hookserver.reconciler.settings import ReconcilerSettings
from hookserver.slo import HostApplicationSpec, NodeSLOSpec
from hookserver.slo.host_apps import host_app_cgroup_dir
from hookserver.store import PodRecord, StateStore
from hookserver.system import SystemRoots
from hookserver.system.cgroupnames import CgroupDriver
from hookserver.system.cpulist import parse_cpu_list
from hookserver.system.topology import CpuInfo
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from tests.hooks.v1_subtree import ROOT, cpuset_host, mkdirs, v1_subtree
from tests.reconciler.conftest import make_world

CPUS = tuple(CpuInfo(cpu=i, core=i // 2, socket=0, numa_node=0, l3=0, online=True) for i in range(4))


def _app(**spec: Any) -> HostApplicationSpec:
    return HostApplicationSpec.model_validate(spec)


@pytest.mark.parametrize("spec, driver, want", [
    ({"name": "nm", "qos": "LS"}, "cgroupfs", "host-latency-sensitive/nm"),
    ({"name": "nm", "qos": "LSR"}, "systemd", "host-latency-sensitive/nm"),
    ({"name": "nm", "qos": "BE"}, "cgroupfs", "host-best-effort/nm"),
    ({"name": "nm", "qos": "SYSTEM"}, "cgroupfs", "nm"),  # koordinator: no default dir for other classes
    ({"name": "nm", "cgroupPath": {"base": "KubepodsBesteffort", "parentDir": "yarn", "relativePath": "nm"}},
     "cgroupfs", "kubepods/besteffort/yarn/nm"),
    ({"name": "nm", "cgroupPath": {"base": "KubepodsBesteffort", "parentDir": "yarn/", "relativePath": "nm"}},
     "systemd", "kubepods.slice/kubepods-besteffort.slice/yarn/nm"),
    ({"name": "nm", "cgroupPath": {"base": "Kubepods", "relativePath": "nm"}}, "systemd", "kubepods.slice/nm"),
    # a cgroupPath fills nothing in: no default parentDir, no name
    ({"name": "nm", "qos": "BE", "cgroupPath": {"parentDir": "/host/"}}, "cgroupfs", "host"),
])
def test_host_app_cgroup_is_koordinators_relative_path(spec: dict[str, Any], driver: str, want: str) -> None:
    assert host_app_cgroup_dir(_app(**spec), CgroupDriver(driver)) == want


def test_a_path_naming_the_hierarchy_root_is_refused() -> None:
    with pytest.raises(ValueError, match="hierarchy root"):
        host_app_cgroup_dir(_app(name="nm", cgroupPath={"base": "CgroupRoot"}), CgroupDriver.CGROUPFS)


def _bound_pod(store: StateStore, cpuset: str) -> None:
    store.upsert_pod(PodRecord(
        uid=str(uuid.uuid4()), namespace="default", name="lsr", labels=MappingProxyType({"koordinator.sh/qosClass": "LSR"}),
        annotations=MappingProxyType({ANNOTATION_RESOURCE_STATUS: f'{{"cpuset":"{cpuset}"}}'}), qos_class="LSR",
        kube_qos="Guaranteed", phase="Running", source="apiserver",
    ))


def test_ls_host_app_gets_the_share_pool_on_a_v2_fixture_tree_and_be_is_refused(tmp_path: Path) -> None:
    world = make_world(tmp_path / "cg", version="v2", driver="systemd", plugins=[CPUSetAllocatorPlugin(cpus=CPUS)])
    world.store.set_node_slo(NodeSLOSpec.model_validate({"hostApplications": [
        {"name": "nginx", "qos": "LS"},
        {"name": "yarn", "qos": "BE"},
    ]}))
    _bound_pod(world.store, "2-3")
    for rel in ("host-latency-sensitive/nginx", "host-best-effort/yarn"):
        world.tree.cgroup(rel, **{"cpuset.cpus": "0-3"})
    report = world.engine.run(trigger="periodic")
    assert world.tree.read("host-latency-sensitive/nginx", "cpuset.cpus") == "0-1"  # every CPU but the bound ones
    assert world.tree.read("host-best-effort/yarn", "cpuset.cpus") == "0-3"
    assert any("yarn" in e and "only LS is supported" in e for e in report.errors), report.errors
    writes = world.store.audit.writes(path_contains="host-latency-sensitive/nginx")
    assert [(w.owner, w.value) for w in writes if w.ok] == [("CPUSetAllocator", "0-1")]
    # pods-only passes (a pod sync) leave host applications to the ticker; the ticker's next pass finds nothing new
    assert world.engine.run(uids=[], trigger="pods").written == 0
    assert world.engine.run(trigger="periodic").written == 0


@pytest.mark.cgroup
def test_ls_host_app_cpuset_on_a_real_v1_cgroup(tmp_path: Path) -> None:
    online, cpus = cpuset_host(("cpuset",))
    with v1_subtree(("cpuset",)) as top:
        app_dir = mkdirs("cpuset", f"{top}/nm")
        try:
            store = StateStore()
            layout = CgroupLayout(version="v1", driver="cgroupfs", roots=SystemRoots(cgroup=str(ROOT)))  # type: ignore[arg-type]
            executor = CgroupExecutor(layout, store=store)
            dispatcher = HookDispatcher(registry=HookRegistry([CPUSetAllocatorPlugin(cpus=cpus)]), store=store,
                                        executor=executor)
            engine = PodReconciler(store=store, dispatcher=dispatcher, executor=executor, settings=ReconcilerSettings())
            store.set_node_slo(NodeSLOSpec.model_validate({"hostApplications": [
                {"name": "nm", "qos": "LS", "cgroupPath": {"base": "CgroupRoot", "parentDir": top, "relativePath": "nm"}},
            ]}))
            _bound_pod(store, str(online[-1]))
            report = engine.run(trigger="periodic")
            assert report.errors == []
            assert parse_cpu_list((app_dir / "cpuset.cpus").read_text()) == frozenset(online[:-1])  # the kernel's
        finally:
            app_dir.rmdir()


def test_host_apps_get_their_class_bvt_on_the_reconcilers_passes(tmp_path: Path) -> None:
    """koordlet's bvt hook also registers a host-app reconciler (`SetHostAppBvtValue`): the class value, LS 2 and
    BE -1 here, SYSTEM 0 (a class the rule does not name)."""
    from hookserver.hooks.plugins import GroupIdentityPlugin

    plugins = [CPUSetAllocatorPlugin(cpus=CPUS), GroupIdentityPlugin(kernel_files=frozenset({"cpu.bvt_warp_ns"}))]
    world = make_world(tmp_path / "cg", version="v1", driver="cgroupfs", plugins=plugins)
    world.store.set_node_slo(NodeSLOSpec.model_validate({
        "resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
                                "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}}},
        "hostApplications": [{"name": "nginx", "qos": "LS"}, {"name": "yarn", "qos": "BE"},
                             {"name": "agent", "qos": "SYSTEM"}],
    }))
    dirs = {"nginx": "host-latency-sensitive/nginx", "yarn": "host-best-effort/yarn", "agent": "agent"}
    for rel in dirs.values():
        world.tree.cgroup(rel, **{"cpuset.cpus": "0-3"})
        world.tree.path(rel, "cpu.bvt_warp_ns").write_text("1\n")
    world.engine.run(trigger="periodic")
    assert {name: world.tree.read(rel, "cpu.bvt_warp_ns") for name, rel in dirs.items()} == \
        {"nginx": "2", "yarn": "-1", "agent": "0"}
    assert world.tree.read(dirs["nginx"], "cpuset.cpus") == "0-3"  # CPUSetAllocator's share pool: nothing bound
