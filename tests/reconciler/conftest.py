"""A reconciler over a fixture cgroup tree (or a real v1 subtree): store, dispatcher, executor, engine."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.reconciler.settings import ReconcilerSettings
from hookserver.dispatch import HookDispatcher
from hookserver.executor import CgroupExecutor, CgroupLayout, OsCgroupFiles
from hookserver.hooks import HookRegistry
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.reconciler import PodReconciler
from hookserver.store import PodRecord, StateStore
from hookserver.system import SystemRoots
from tests.executor.conftest import FakeClock, Tree
from tests.reference_example import BE_LABELS, SPEC_KEY

# One container "main": batch-cpu request 1000 (milli) and limit 2000, batch-memory 1Gi.
# Expected (hand-computed, reference §4.3-4.5): shares 1000*1024/1000 = 1024; quota 2000*100 = 200000;
# memory 1073741824, for the pod (sums over one container) and the container alike.
MAIN_SPEC = json.dumps({"containers": {"main": {
    "requests": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"},
    "limits": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "1Gi"},
}}})
WANT = {"cpu.shares": "1024", "cpu.cfs_quota_us": "200000", "memory.limit_in_bytes": "1073741824"}
# What the kubelet gives a BestEffort pod (and what a pod created while the agent was down keeps).
KUBELET_BE = {"cpu.shares": "2", "cpu.cfs_quota_us": "-1", "memory.limit_in_bytes": "9223372036854771712"}


@dataclass
class World:
    tree: Tree
    store: StateStore
    executor: CgroupExecutor
    dispatcher: HookDispatcher
    engine: PodReconciler
    clock: FakeClock
    layout: CgroupLayout
    files: CountingFiles

    def be_pod(self, name: str, *, uid: str = "", containers: int = 1, source: str = "apiserver",
               cgroup_parent: str = "", kube_qos: str = "BestEffort", spec: str = MAIN_SPEC,
               make_dirs: bool = True, **files: str) -> PodRecord:
        """A BE pod in the store, its cgroup dirs in the tree holding the kubelet's values (unless `files`)."""
        uid = uid or str(uuid.uuid4())
        ids = {("main" if i == 0 else f"c{i}"): f"containerd://{uuid.uuid4().hex}" for i in range(containers)}
        pod = PodRecord(
            uid=uid, namespace="default", name=name, labels=MappingProxyType(dict(BE_LABELS)),
            annotations=MappingProxyType({SPEC_KEY: spec}), qos_class="BE", kube_qos=kube_qos, phase="Running",
            source=source, cgroup_parent=cgroup_parent, container_ids=MappingProxyType(ids),
            container_specs=MappingProxyType({n: (MappingProxyType({}), MappingProxyType({})) for n in ids}),
        )
        self.store.upsert_pod(pod)
        if make_dirs:
            values = {**KUBELET_BE, **files}
            self.tree.cgroup(self.pod_dir(pod), **values)
            for cid in ids.values():
                self.tree.cgroup(self.container_dir(pod, cid), **values)
        return self.store.snapshot().pods[uid]

    def pod_dir(self, pod: PodRecord) -> str:
        return pod.cgroup_parent.strip("/") or self.layout.pod_dir("besteffort", pod.uid)

    def container_dir(self, pod: PodRecord, raw_id: str) -> str:
        return f"{self.pod_dir(pod)}/{raw_id.split('://')[-1]}"

    def values(self, rel: str) -> dict[str, str]:
        return {name: self.tree.read(rel, name) for name in WANT}


class CountingFiles(OsCgroupFiles):
    """The real file access, counting reads and writes (to prove that a pass wrote nothing)."""

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []

    def read(self, path: str) -> str:
        self.reads.append(path)
        return super().read(path)

    def write(self, path: str, data: str) -> None:
        self.writes.append((path, data))
        super().write(path, data)


def make_world(root: Path, *, version: str = "v1", driver: str = "cgroupfs", layout: CgroupLayout | None = None,
               plugins: list[Any] | None = None, lists_pod: Any = None, **settings: Any) -> World:
    tree = Tree(root, version)
    clock = FakeClock()
    roots = SystemRoots(proc=str(root / "no-proc"), cgroup=str(root))
    layout = layout or CgroupLayout(version=version, driver=driver, roots=roots)  # type: ignore[arg-type]
    store = StateStore(clock=clock)
    files = CountingFiles()
    executor = CgroupExecutor(layout, store=store, clock=clock, force_update_seconds=60.0, files=files)
    registry = HookRegistry(plugins if plugins is not None else [BatchResourcePlugin()])
    dispatcher = HookDispatcher(registry=registry, store=store, executor=executor)
    values = {"creation_grace_s": 10.0, "gc_grace_s": 60.0, **settings}
    engine = PodReconciler(
        store=store, dispatcher=dispatcher, executor=executor, settings=ReconcilerSettings(**values), clock=clock,
        lists_pod=lists_pod or (lambda uid: False),
    )
    return World(tree, store, executor, dispatcher, engine, clock, layout, files)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path / "cg")
