"""The real part-2 stack for integration tests: a store with pods, containers and NodeSLO, the kernel
reader over a cgroup root (real subtree or fixture tree), the runner with the real cgroup and system-file
executors, and a settable clock."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from hookserver.executor.settings import CgroupSettings
from hookserver.executor import build_executor
from hookserver.executor.executor import CgroupExecutor
from hookserver.executor.sysfiles import SystemFileExecutor
from hookserver.slo.document import spec_from_json
from hookserver.store import StateStore
from hookserver.store.originals import NodeOriginals
from hookserver.store.records import ContainerRecord, NodeRecord, PodRecord
from hookserver.store.timeseries_types import make_labels
from hookserver.system import SystemRoots
from qos.framework.evictions import EvictionGuard, ReportOnlyBackend
from hookserver.featuregates import GateRegistry
from qos.snapshot.kernel_reader import KernelReader
from qos.snapshot import CgroupView, SnapshotBuilder
from qos.framework.reconciler import Reconciler
from qos.framework.runner import QoSRunner


@dataclass
class Stack:
    store: StateStore
    executor: CgroupExecutor
    files: SystemFileExecutor
    originals: NodeOriginals
    runner: QoSRunner
    reader: KernelReader
    clock: list[float] = field(default_factory=lambda: [1000.0])

    def tick(self, seconds: float = 1.0) -> list[Any]:
        self.clock[0] += seconds
        return self.runner.round()

    def set_slo(self, spec: dict[str, Any]) -> None:
        resolved = spec_from_json(spec, origin="test")
        self.store.set_node_slo(resolved.spec, resolved.sources)


def build_stack(
    cgroup_root: str, *reconcilers: Reconciler, gates: dict[str, bool], state_dir: str = "", proc_root: str = "/proc",
    sys_root: str = "/sys", version: str = "v1", spec: dict[str, Any] | None = None, driver: str = "cgroupfs",
) -> Stack:
    clock = [1000.0]
    store = StateStore(clock=lambda: clock[0])
    store.set_node(NodeRecord(name="node-a", capacity={"cpu": "8", "memory": "16Gi"}, allocatable={"cpu": "8", "memory": "16Gi"}))
    executor = build_executor(CgroupSettings(root=cgroup_root, version=version, driver=driver), store=store,
                              roots=SystemRoots(proc=proc_root, sys=sys_root, cgroup=cgroup_root))
    layout = executor.layout
    view = CgroupView(hierarchy_root=layout.hierarchy_root, v2=layout.writes_v2, driver=layout.driver)
    originals = NodeOriginals(state_dir)
    files = SystemFileExecutor({"proc_sys": os.path.join(proc_root, "sys"), "sys": sys_root,
                                "resctrl": os.path.join(sys_root, "fs", "resctrl"), "proc": proc_root},
                               store=store, originals=originals)
    values = GateRegistry(g for r in reconcilers for g in r.gates).resolve([("test", gates)])
    snapshots = SnapshotBuilder.for_node(store, view, proc_root=proc_root, sys_root=sys_root, originals=originals,
                                         gate_on=values.enabled)
    reader = snapshots.kernel
    assert isinstance(reader, KernelReader)
    runner = QoSRunner(list(reconcilers), gates=values, snapshots=snapshots, store=store, executor=executor,
                       evictions=EvictionGuard(ReportOnlyBackend(), cooldown_s=60), clock=lambda: clock[0],
                       mono=lambda: clock[0], system_files=files)
    stack = Stack(store, executor, files, originals, runner, reader, clock)
    stack.set_slo(spec or {})
    return stack


def add_pod(store: StateStore, name: str, *, kube_qos: str, qos: str, containers: dict[str, tuple[dict[str, str], dict[str, str]]],
            annotations: dict[str, str] | None = None) -> PodRecord:
    uid = f"{name}-0000-1111"
    pod = PodRecord(uid=uid, namespace="default", name=name, qos_class=qos, kube_qos=kube_qos, phase="Running",
                    container_specs=containers, annotations=annotations or {})
    store.upsert_pod(pod)
    for cname in containers:
        store.upsert_container(ContainerRecord(id=f"{name}{cname}", pod_uid=uid, name=cname, state="running"))
    return pod


def sample(store: StateStore, metric: str, value: float, **labels: str) -> None:
    store.series.append((metric, make_labels(**labels)), value, ts=store.clock())
