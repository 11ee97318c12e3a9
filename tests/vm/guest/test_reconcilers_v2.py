"""Every QoS reconciler on the real cgroup v2 kernel, in the slices systemd made as the kubelet's driver does.

The reconcilers run through the real part-2 stack (tests/qos/part2_stack.py: the snapshot builder and kernel
reader over /sys/fs/cgroup, the runner, the real executor with the systemd driver); the values are read back
from the kernel files, and each is compared with the value the planner decided (the audit), so a conversion
the kernel refuses or rewrites shows here. The v1 counterparts are tests/qos/test_part2_real_cgroup.py.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import pytest

from hookserver.store.records import ContainerRecord, NodeRecord, PodRecord
from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from qos.blkio import BlkIO
from qos.cpu.burst import CPUBurst
from qos.cpu.suppress import CPUSuppress
from qos.group_identity import GroupIdentity
from qos.memory_qos import MemoryQoS
from qos.snapshot.builder import NODE_TOPOLOGY_KEY
from qos.framework.reconciler import Reconciler
from tests.qos.helpers import topology
from tests.qos.part2_stack import Stack, build_stack, sample
from tests.vm.guest.kubelet_slices import CGROUP, KubeletSlices, PodSlice

MiB = 1 << 20
CPUS = os.cpu_count() or 1


def _read(path: Path) -> str:
    return path.read_text().strip()


class Node:
    """The kubelet's slices, one BE pod and one LS (burstable) pod, each with one container scope."""

    def __init__(self) -> None:
        self.slices = KubeletSlices()
        try:
            self._start()
        except BaseException:
            self.slices.stop()
            raise

    def _start(self) -> None:
        self.slices.start()
        self.be = self.slices.pod("besteffort", cpu_weight=1)
        self.be_cid = uuid.uuid4().hex * 2
        self.be_scope = self.be.start_container(self.be_cid)
        # 500m CPU limit, 128 MiB request and 256 MiB limit: the quota as the kubelet's driver gives it systemd.
        self.ls = self.slices.pod("burstable", cpu_weight=20, extra=(("CPUQuotaPerSecUSec", "t", "500000"),))
        self.ls_cid = uuid.uuid4().hex * 2
        self.ls_scope = self.ls.start_container(self.ls_cid, "CPUQuota=50%", "MemoryMax=268435456")
        self.tier = CGROUP / "kubepods.slice" / "kubepods-besteffort.slice"

    def stack(self, *reconcilers: Reconciler, gates: dict[str, bool], spec: dict[str, object]) -> Stack:
        stack = build_stack(str(CGROUP), *reconcilers, gates=gates, spec=spec, version="v2", driver="systemd")
        stack.store.set_node(NodeRecord(name="node-a", capacity={"cpu": str(CPUS), "memory": "2Gi"},
                                        allocatable={"cpu": str(CPUS), "memory": "2Gi"}))
        stack.store.series.put_static(NODE_TOPOLOGY_KEY, topology(max(CPUS, 2)))
        self._add(stack, self.be, self.be_cid, "BE", "BestEffort",
                  ({"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "64Mi"},
                   {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "128Mi"}))
        self._add(stack, self.ls, self.ls_cid, "LS", "Burstable",
                  ({"cpu": "250m", "memory": "128Mi"}, {"cpu": "500m", "memory": "256Mi"}))
        return stack

    @staticmethod
    def _add(stack: Stack, pod: PodSlice, cid: str, qos: str, kube_qos: str,
             spec: tuple[dict[str, str], dict[str, str]]) -> None:
        labels = MappingProxyType({"koordinator.sh/qosClass": qos})
        stack.store.upsert_pod(PodRecord(uid=pod.uid, namespace="default", name=f"{qos.lower()}-pod", labels=labels,
                                         qos_class=qos, kube_qos=kube_qos, phase="Running",
                                         container_specs=MappingProxyType({"c": spec})))
        stack.store.upsert_container(ContainerRecord(id=f"containerd://{cid}", pod_uid=pod.uid, name="c",
                                                     state="running"))

    def stop(self) -> None:
        self.slices.stop()


@pytest.fixture
def node() -> Iterator[Node]:
    made = Node()
    try:
        yield made
    finally:
        made.stop()


def planned(stack: Stack, resource: CgroupResource) -> dict[str, str]:
    """What the executor wrote (not skipped), by file path: the audit's values."""
    return {w.path: w.value for w in stack.store.audit.writes() if w.path.endswith(_v2_file(resource))
            and not w.skipped and not w.error}


def _v2_file(resource: CgroupResource) -> str:
    from hookserver.executor.knobs import knob_for

    return knob_for(resource).v2_file


def test_cpu_suppress_cfs_quota_on_the_be_slice(node: Node) -> None:
    spec = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota",
                                             "cpuSuppressThresholdPercent": 65}}
    stack = node.stack(CPUSuppress(), gates={"BECPUSuppress": True}, spec=spec)
    sample(stack.store, "node_cpu_usage", 0.1)
    stack.tick()
    quota, period = _read(node.tier / "cpu.max").split()
    assert quota != "max" and int(quota) > 0 and period == "100000", stack.runner.report()
    written = planned(stack, CgroupResource.CPU_CFS_QUOTA)
    assert written.get(str(node.tier / "cpu.max"), "").split()[0] == quota, written
    # the policy off: the tier's quota is lifted again
    stack.set_slo({})
    stack.tick()
    assert _read(node.tier / "cpu.max").split()[0] == "max"


def test_cpu_suppress_cpuset_on_the_be_slice(node: Node) -> None:
    """The kubelet's slices leave cpuset.cpus empty (inheriting). On this guest the policy's floor of 2 CPUs
    is every CPU, which the tier already inherits: it stays inheriting (the v2 fix; before it, the agent pinned
    `0-1` into the tier, its pods and containers). A narrowing then goes through the same executor onto the real
    files, and cleanup's way back (widen, then empty) leaves them with every CPU."""
    spec = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cpuset",
                                             "cpuSuppressThresholdPercent": 65}}
    stack = node.stack(CPUSuppress(), gates={"BECPUSuppress": True}, spec=spec)
    sample(stack.store, "node_cpu_usage", 0.1)
    stack.tick()
    report = stack.runner.report()
    everything = _read(CGROUP / "cpuset.cpus.effective")
    for d in (node.tier, node.be.path, node.be_scope):
        assert _read(d / "cpuset.cpus") == "", (d, report)
        assert _read(d / "cpuset.cpus.effective") == everything
    cpuset_rows = [w for w in stack.store.audit.writes() if w.path.endswith("/cpuset.cpus")]
    assert cpuset_rows and all(w.skipped for w in cpuset_rows), (cpuset_rows, report)
    tier = str(node.tier.relative_to(CGROUP))
    # The planner's levels: the tier, its pods, their containers (narrowed bottom-up, widened top-down).
    levels = (tier, str(node.be.path.relative_to(CGROUP)), str(node.be_scope.relative_to(CGROUP)))

    def plan(value: str) -> ResourcePlan:
        return ResourcePlan(levels=tuple((CgroupWrite(d, CgroupResource.CPUSET_CPUS, value),) for d in levels),
                            leveled=True, cacheable=False)

    assert stack.executor.apply(plan("0")).ok
    assert [_read(d / "cpuset.cpus") for d in (node.tier, node.be.path, node.be_scope)] == ["0"] * 3
    # What cleanup does for a tier that inherited: widen top-down, then empty bottom-up. Linux 6.1 refuses to
    # empty the cpuset of a cgroup with tasks (ENOSPC; the scope holds one, the slices above it count too):
    # those get the set they would inherit, and the executor says so.
    assert stack.executor.apply(plan(everything)).ok
    assert stack.executor.apply(plan("")).ok
    for d in (node.tier, node.be.path, node.be_scope):
        assert _read(d / "cpuset.cpus") == everything and _read(d / "cpuset.cpus.effective") == everything
    notes = [w.reason for w in stack.store.audit.writes() if w.path == str(node.be_scope / "cpuset.cpus")]
    assert any("set to what it would inherit" in n for n in notes), notes


def test_group_identity_sets_cpu_idle_on_the_be_pod_slice(node: Node) -> None:
    spec = {"resourceQOSStrategy": {"policies": {"cpuPolicy": "coreSched"}, "beClass": {"cpuQOS": {"schedIdle": 1}}}}
    stack = node.stack(GroupIdentity(), gates={"GroupIdentity": True}, spec=spec)
    stack.tick()
    assert _read(node.be.path / "cpu.idle") == "1", stack.runner.report()
    assert _read(node.ls.path / "cpu.idle") == "0"
    assert _read(node.tier / "cpu.idle") == "0"
    stack.set_slo({})
    stack.tick()
    assert _read(node.be.path / "cpu.idle") == "0"


def test_memory_qos_min_low_high_on_the_pod_slices_and_scopes(node: Node) -> None:
    spec = {"resourceQOSStrategy": {
        "lsClass": {"memoryQOS": {"enable": True, "minLimitPercent": 100, "lowLimitPercent": 100,
                                  "throttlingPercent": 80}},
        "beClass": {"memoryQOS": {"enable": True, "minLimitPercent": 50}}}}
    stack = node.stack(MemoryQoS(), gates={"CgroupReconcile": True}, spec=spec)
    stack.tick()
    report = stack.runner.report()
    assert int(_read(node.ls.path / "memory.min")) == 128 * MiB, report
    assert int(_read(node.ls.path / "memory.low")) == 128 * MiB
    high = _read(node.ls.path / "memory.high")
    assert high != "max" and 128 * MiB < int(high) <= 256 * MiB
    assert int(_read(node.ls_scope / "memory.min")) == 128 * MiB
    for path, value in planned(stack, CgroupResource.MEMORY_MIN).items():
        assert _read(Path(path)) == value, path
    stack.set_slo({})
    stack.tick()
    assert _read(node.ls.path / "memory.min") == "0" and _read(node.ls.path / "memory.high") == "max"


def test_cpu_burst_writes_cpu_max_burst_on_the_container_scope(node: Node) -> None:
    assert _read(node.ls_scope / "cpu.max") == "50000 100000"  # systemd applied the unit's CPUQuota
    stack = node.stack(CPUBurst(), gates={"CPUBurst": True},
                       spec={"cpuBurstStrategy": {"policy": "cpuBurstOnly", "cpuBurstPercent": 50}})
    sample(stack.store, "node_cpu_usage", 0.1)
    stack.tick()
    # 500m × 50 % × 100 ms = 25000 µs
    assert _read(node.ls_scope / "cpu.max.burst") == "25000", stack.runner.report()
    stack.set_slo({"cpuBurstStrategy": {"policy": "none"}})
    stack.tick()
    assert _read(node.ls_scope / "cpu.max.burst") == "0"


def test_blkio_throttles_and_weight_on_the_virtio_disk(node: Node) -> None:
    devno = _read(Path("/sys/class/block/vda/dev"))
    spec = {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": True, "blocks": [
        {"name": "/dev/vda", "type": "device",
         "ioCfg": {"readBPS": 1048576, "writeIOPS": 300, "ioWeightPercent": 50}}]}}}}
    stack = node.stack(BlkIO(), gates={"BlkIOReconcile": True}, spec=spec)
    stack.tick()
    line = next((ln for ln in _read(node.tier / "io.max").splitlines() if ln.startswith(devno)), "")
    assert "rbps=1048576" in line and "wiops=300" in line, (line, stack.runner.report())
    weights = planned(stack, CgroupResource.BLKIO_COST_WEIGHT) | planned(stack, CgroupResource.BLKIO_WEIGHT)
    for path, value in weights.items():
        assert value in _read(Path(path)), (path, value)
    stack.set_slo({})
    stack.tick()
    assert devno not in _read(node.tier / "io.max")
