"""CPUSetAllocator on the real cgroup v1 hierarchy: a private subtree under
`/sys/fs/cgroup/{cpu,cpuset}/hookserver-test-<random>` (always removed). cpuset.mems and cpuset.cpus are set on
each parent before its child, as the kernel requires; the reconciler's writes are read back from the kernel."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import pytest

from hookserver.executor import CgroupLayout
from hookserver.hooks.plugins import CPUSetAllocatorPlugin
from hookserver.store import PodRecord
from hookserver.system import SystemRoots
from hookserver.system.cpulist import parse_cpu_list
from hookserver.system.topology import read_cpu_topology
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from tests.reconciler.conftest import World, make_world

pytestmark = pytest.mark.cgroup

ROOT = "/sys/fs/cgroup"
SUBSYSTEMS = ("cpu", "cpuset")


def _unusable() -> str:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for sub in SUBSYSTEMS:
        path = os.path.join(ROOT, sub)
        if not os.path.isfile(os.path.join(path, "cgroup.procs")) or not os.access(path, os.W_OK):
            return f"no writable cgroup v1 {sub} hierarchy at {path}"
    return ""


class Real:
    def __init__(self, world: World, top: str, cpus: frozenset[int], mems: str) -> None:
        self.world, self.top, self.cpus, self.mems = world, top, cpus, mems

    def path(self, rel: str, name: str) -> str:
        return os.path.join(ROOT, name.split(".")[0], self.top, rel, name)

    def read(self, rel: str, name: str) -> str:
        return Path(self.path(rel, name)).read_text().strip()

    def make(self, rel: str, cpus: str) -> None:
        """One cgroup in both hierarchies; every cpuset level on the way gets mems then cpus (parents first)."""
        parts = rel.split("/")
        for depth in range(1, len(parts) + 1):
            sub_rel = "/".join(parts[:depth])
            for sub in SUBSYSTEMS:
                os.makedirs(os.path.join(ROOT, sub, self.top, sub_rel), exist_ok=True)
            if not self.read(sub_rel, "cpuset.mems"):
                Path(self.path(sub_rel, "cpuset.mems")).write_text(self.mems)
            if not self.read(sub_rel, "cpuset.cpus"):
                Path(self.path(sub_rel, "cpuset.cpus")).write_text(cpus)


def _remove_tree(top: str) -> None:
    for sub in SUBSYSTEMS:
        base = os.path.join(ROOT, sub, top)
        if os.path.isdir(base):
            for dirpath, _d, _f in sorted(os.walk(base), key=lambda t: -t[0].count("/")):
                os.rmdir(dirpath)


@pytest.fixture
def real(tmp_path: Path) -> Iterator[Real]:
    reason = _unusable()
    if reason:
        pytest.skip(reason)
    cpus = parse_cpu_list(Path(ROOT, "cpuset", "cpuset.effective_cpus").read_text()
                          if Path(ROOT, "cpuset", "cpuset.effective_cpus").exists()
                          else Path(ROOT, "cpuset", "cpuset.cpus").read_text())
    if len(cpus) < 2:
        pytest.skip("needs at least 2 CPUs")
    mems = Path(ROOT, "cpuset", "cpuset.mems").read_text().strip()
    top = f"hookserver-test-{uuid.uuid4().hex[:12]}"
    topology = tuple(c for c in read_cpu_topology(SystemRoots()) if c.cpu in cpus)
    layout = CgroupLayout(
        version="v1", driver="cgroupfs", roots=SystemRoots(), cgroup_root=ROOT,  # type: ignore[arg-type]
        hierarchies={sub: os.path.join(ROOT, sub, top) for sub in (*SUBSYSTEMS, "memory")},
    )
    world = make_world(tmp_path / "unused", layout=layout, plugins=[CPUSetAllocatorPlugin(cpus=topology)])
    r = Real(world, top, cpus, mems)
    for sub in SUBSYSTEMS:
        os.makedirs(os.path.join(ROOT, sub, top))
    Path(r.path("", "cpuset.mems")).write_text(mems)
    Path(r.path("", "cpuset.cpus")).write_text(",".join(map(str, sorted(cpus))))
    try:
        yield r
    finally:
        _remove_tree(top)


def _pod(real: Real, qos: str, annotations: dict[str, str]) -> str:
    uid, cid = str(uuid.uuid4()), uuid.uuid4().hex
    real.world.store.upsert_pod(PodRecord(
        uid=uid, namespace="default", name=f"{qos.lower()}-{uid[:4]}", labels=MappingProxyType({"koordinator.sh/qosClass": qos}),
        annotations=MappingProxyType(annotations), qos_class=qos, kube_qos="Burstable", phase="Running",
        source="apiserver", container_ids=MappingProxyType({"app": f"containerd://{cid}"}),
        container_specs=MappingProxyType({"app": (MappingProxyType({}), MappingProxyType({}))}),
    ))
    pod_rel = real.world.layout.pod_dir("burstable", uid)
    crel = real.world.layout.container_dir(pod_rel, cid)
    every = ",".join(map(str, sorted(real.cpus)))
    real.make(crel, every)  # what the kubelet and runc leave: every CPU at each level
    return crel


def test_the_kernel_takes_the_bound_cpuset_and_the_share_pool(real: Real) -> None:
    first, last = min(real.cpus), max(real.cpus)
    lsr = _pod(real, "LSR", {ANNOTATION_RESOURCE_STATUS: f'{{"cpuset":"{last}"}}'})
    ls = _pod(real, "LS", {})
    real.world.engine.run(trigger="start")
    assert parse_cpu_list(real.read(lsr, "cpuset.cpus")) == {last}
    assert parse_cpu_list(real.read(ls, "cpuset.cpus")) == real.cpus - {last}
    assert real.read(lsr, "cpu.cfs_quota_us") == "-1"
    assert first in parse_cpu_list(real.read(ls, "cpuset.cpus"))


def test_a_cpu_the_node_lacks_is_refused_by_the_hook_not_the_kernel(real: Real) -> None:
    crel = _pod(real, "LSE", {ANNOTATION_RESOURCE_STATUS: '{"cpuset":"4095"}'})
    before = real.read(crel, "cpuset.cpus")
    real.world.engine.run(trigger="start")
    assert real.read(crel, "cpuset.cpus") == before
    plan = real.world.engine.plans.last(next(iter(real.world.store.snapshot().pods)))
    assert plan is not None
    outcome = plan.entries[-1].decided.outcome
    assert outcome is not None and not outcome.failed  # an error the audit shows, not a failed stage
    mine = [o.result.reason for o in outcome.outcomes if o.plugin == "CPUSetAllocator" and o.result is not None]
    assert mine and mine[0].startswith("error:") and "does not have online (4095" in mine[0]
