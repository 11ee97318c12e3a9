"""The reconciler on the real cgroup v1 hierarchy, in a private subtree that is always removed.

The layout's cpu and memory hierarchies point at `/sys/fs/cgroup/{cpu,memory}/hookserver-test-<random>`, so
the kubelet's names (`kubepods/besteffort/pod<uid>/<container id>`) land inside it and never touch a real
`kubepods` (which a running kubelet owns). Every value is read back from the kernel.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import pytest

from hookserver.reconciler.settings import ReconcilerSettings
from hookserver.executor import CgroupLayout, CgroupResource, CgroupWrite, ResourcePlan
from hookserver.reconciler import Reconciler
from hookserver.slo import NodeSLOSpec
from hookserver.store import NodeRecord
from hookserver.system import SystemRoots
from tests.reconciler.conftest import KUBELET_BE, WANT, World, make_world

pytestmark = pytest.mark.cgroup

ROOT = "/sys/fs/cgroup"
SUBSYSTEMS = ("cpu", "memory")
SUPPRESS = NodeSLOSpec.model_validate({"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}})


def _unusable() -> str:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for sub in SUBSYSTEMS:
        path = os.path.join(ROOT, sub)
        if not os.path.isfile(os.path.join(path, "cgroup.procs")) or not os.access(path, os.W_OK):
            return f"no writable cgroup v1 {sub} hierarchy at {path}"
    return ""


class Real:
    """The private subtree and what a kubelet would have made in it."""

    def __init__(self, world: World, top: str) -> None:
        self.world = world
        self.top = top

    def path(self, rel: str, name: str) -> str:
        return os.path.join(ROOT, name.split(".")[0], self.top, rel, name)

    def read(self, rel: str) -> dict[str, str]:
        return {name: Path(self.path(rel, name)).read_text().strip() for name in WANT}

    def write(self, rel: str, values: dict[str, str]) -> None:
        for name, value in values.items():
            Path(self.path(rel, name)).write_text(value)

    def make(self, rel: str, values: dict[str, str]) -> None:
        for sub in SUBSYSTEMS:
            os.makedirs(os.path.join(ROOT, sub, self.top, rel), exist_ok=True)
        self.write(rel, values)

    def rmdir(self, rel: str) -> None:
        for sub in SUBSYSTEMS:
            os.rmdir(os.path.join(ROOT, sub, self.top, rel))

    def kubelet_pod(self, name: str, containers: int = 1) -> tuple[str, list[str]]:
        """A BE pod as the kubelet leaves it without an agent: shares 2, no quota, no memory limit."""
        pod = self.world.be_pod(name, containers=containers, make_dirs=False)
        rel = self.world.pod_dir(pod)
        self.make(rel, KUBELET_BE)
        dirs = []
        for raw in pod.container_ids.values():
            crel = self.world.container_dir(pod, raw)
            self.make(crel, KUBELET_BE)
            dirs.append(crel)
        return rel, dirs


def _remove_tree(top: str) -> None:
    for sub in SUBSYSTEMS:
        base = os.path.join(ROOT, sub, top)
        if not os.path.isdir(base):
            continue
        for dirpath, _dirs, _files in sorted(os.walk(base), key=lambda t: -t[0].count("/")):
            os.rmdir(dirpath)


@pytest.fixture
def real(tmp_path: Path) -> Iterator[Real]:
    reason = _unusable()
    if reason:
        pytest.skip(reason)
    top = f"hookserver-test-{uuid.uuid4().hex[:12]}"
    for sub in SUBSYSTEMS:
        os.makedirs(os.path.join(ROOT, sub, top))
    layout = CgroupLayout(
        version="v1", driver="cgroupfs", roots=SystemRoots(), cgroup_root=ROOT,  # type: ignore[arg-type]
        hierarchies={sub: os.path.join(ROOT, sub, top) for sub in SUBSYSTEMS},
    )
    try:
        yield Real(make_world(tmp_path / "unused", layout=layout), top)
    finally:
        _remove_tree(top)


def test_pod_created_while_the_agent_was_stopped_is_corrected_after_start(real: Real) -> None:
    pod_dir, (ctr_dir,) = real.kubelet_pod("made-while-down")
    assert real.read(pod_dir) == KUBELET_BE and real.read(ctr_dir) == KUBELET_BE

    async def start_agent() -> None:
        reconciler = Reconciler(ReconcilerSettings(), store=real.world.store, engine=real.world.engine)
        stop = asyncio.Event()
        task = asyncio.create_task(reconciler.run(stop))
        deadline = time.monotonic() + 5
        while reconciler.last is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, 2)
        assert reconciler.status()["last_pass"]["corrections"] == 6

    asyncio.run(start_agent())
    assert real.read(pod_dir) == WANT  # the kernel holds them
    assert real.read(ctr_dir) == WANT


def test_policy_and_ratio_switches_reapply_quota_to_every_be_pod_leveled(real: Real) -> None:
    pods = [real.kubelet_pod(f"be-{i}", containers=1) for i in range(3)]
    world = real.world
    world.engine.run(trigger="start")

    def quotas() -> set[str]:
        return {real.read(rel)["cpu.cfs_quota_us"] for pod_dir, ctrs in pods for rel in (pod_dir, *ctrs)}

    assert quotas() == {"200000"}
    # The normalization ratio 2 shrinks every quota to ceil(200000 / 2) = 100000. A v1 kernel refuses a
    # parent below its child (EINVAL), so this only works bottom-up; prove that it would fail the other way.
    pod_dir, (ctr_dir,) = pods[0]
    first = world.executor.apply(ResourcePlan.single([CgroupWrite(pod_dir, CgroupResource.CPU_CFS_QUOTA, 100000)],
                                                     cacheable=False))
    assert not first.ok and "EINVAL" in first.results[0].error
    world.store.set_node(NodeRecord(name="n", annotations=MappingProxyType(
        {"node.koordinator.sh/cpu-normalization-ratio": "2"})))
    report = world.engine.run(trigger="rules")
    assert report.error_count == 0 and report.corrections == 6 and quotas() == {"100000"}
    # NodeSLO switches BE suppression to cfsQuota: every BE quota unlimited at once.
    world.store.set_node_slo(SUPPRESS)
    report = world.engine.run(trigger="rules")
    assert report.error_count == 0 and report.corrections == 6 and quotas() == {"-1"}
    # And back (no rule, no ratio): 200000 again. A child above its parent is refused too, so this only
    # works top-down.
    world.store.set_node_slo(None)
    world.store.set_node(NodeRecord(name="n"))
    world.executor.apply(ResourcePlan.single([CgroupWrite(pod_dir, CgroupResource.CPU_CFS_QUOTA, 100000)],
                                             cacheable=False))
    report = world.engine.run(trigger="rules")
    assert report.error_count == 0 and quotas() == {"200000"}
    shares = {real.read(rel)["cpu.shares"] for pod_dir, ctrs in pods for rel in (pod_dir, *ctrs)}
    assert shares == {"1024"}  # only the quota rule changed


def test_unchanged_pass_writes_nothing_on_the_real_hierarchy(real: Real) -> None:
    for i in range(3):
        real.kubelet_pod(f"p{i}")
    world = real.world
    world.engine.run(trigger="start")
    world.files.writes.clear()
    world.clock.now += 10
    assert world.engine.run(trigger="periodic").planned == 0
    world.clock.now += 61  # past the forced-rewrite window: read, compare, leave alone
    report = world.engine.run(trigger="periodic")
    assert report.planned == 18 and report.written == 0 and report.corrections == 0
    assert world.files.writes == []


def test_a_vanished_cgroup_is_skipped_quietly(real: Real) -> None:
    pod_dir, (ctr_dir,) = real.kubelet_pod("short")
    other_dir, _ = real.kubelet_pod("other")
    world = real.world
    world.engine.run(trigger="start")
    real.rmdir(ctr_dir)  # the container ended; its pod goes next
    world.clock.now += 61
    report = world.engine.run(trigger="periodic")
    assert report.error_count == 0 and report.skipped == {"container_cgroup_absent": 1}
    real.rmdir(pod_dir)
    real.write(other_dir, {"cpu.shares": "2"})
    report = world.engine.run(trigger="periodic")
    assert report.error_count == 0 and report.skipped == {"no_cgroup": 1}
    assert report.corrections == 1 and real.read(other_dir)["cpu.shares"] == "1024"
