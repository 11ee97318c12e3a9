"""The containers a proposed configuration runs on: CPU burst's CFS files and the part-2 reconcilers' state.

Like `world.ProposedWorld` for the BE tier: while the proposal decides what the agent decided, its node is the
recorded one (the CFS quota and burst the frame shows, and the round-start state the recorder kept,
`states.py`), so a null proposal reproduces the recording bit for bit. From the first frame where CPU burst
decides otherwise, the containers' CFS files are the proposal's own (each round's writes applied to them)
until the recording shows the same files again; the planner's state is its own until it decides as the agent
did on the recorded files. Memory QoS writes nothing it reads back, so only its state follows.

What the recording cannot say (a container with more quota would have used more CPU; memory.high would have
reclaimed memory) is named per frame in `Divergence.part2`, where it acts on the node: the proposal's own CFS
files, other memory.min/low totals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from hookserver.executor.plan import CgroupResource

from qos.cpu.burst import CPUBurst
from qos.framework.plan import QoSPlan
from qos.memory_qos import MemoryQoS
from qos.snapshot.kernel import KernelFacts, PodKernel
from qos.snapshot.model import QoSSnapshot

from hookserver.recorder.decisions import Decision, comparable, decision_of

__all__ = ["ASSUMED", "ProposedContainers", "files_after", "ls_cfs_cores"]

# (quota µs, burst µs) by cgroup dir (containers and pods; a pod's burst is None)
Files = Mapping[str, tuple[int | None, int | None]]

# What the replay assumes where a part-2 reconciler's world is the proposal's, for the report.
ASSUMED = {
    CPUBurst.name: "LS containers' CFS quota and burst are the proposal's; their CPU usage is the recorded one",
    MemoryQoS.name: "memory.min/low/high given to pods are the proposal's; memory usage is the recorded one",
}


def _files_of(kernel: KernelFacts) -> dict[str, tuple[int | None, int | None]]:
    out: dict[str, tuple[int | None, int | None]] = {}
    for pk in kernel.pods.values():
        out[pk.dir] = (pk.quota_us, None)
        for c in pk.containers:
            out[c.dir] = (c.quota_us, c.burst_us)
    return out


def files_after(files: Files, plan: QoSPlan) -> dict[str, tuple[int | None, int | None]]:
    """`files` once the executor carried out `plan`'s CFS quota and burst writes."""
    out = dict(files)
    for resource_plan in plan.writes:
        for level in resource_plan.levels:
            for write in level:
                quota, burst = out.get(write.cgroup_dir, (None, None))
                if write.resource == CgroupResource.CPU_CFS_QUOTA:
                    out[write.cgroup_dir] = (int(write.value), burst)
                elif write.resource == CgroupResource.CPU_CFS_BURST:
                    out[write.cgroup_dir] = (quota, int(write.value))
    return out


def _with_files(kernel: KernelFacts, files: Files) -> KernelFacts:
    pods: dict[str, PodKernel] = {}
    for uid, pk in kernel.pods.items():
        containers = tuple(
            c if (c.quota_us, c.burst_us) == files.get(c.dir, (c.quota_us, c.burst_us))
            else replace(c, quota_us=files[c.dir][0], burst_us=files[c.dir][1])
            for c in pk.containers)
        quota = files.get(pk.dir, (pk.quota_us, None))[0]
        pods[uid] = pk if quota == pk.quota_us and containers == pk.containers else replace(
            pk, quota_us=quota, containers=containers)
    return replace(kernel, pods=MappingProxyType(pods))


def ls_cfs_cores(snap: QoSSnapshot, plan: QoSPlan | None) -> tuple[float | None, float | None]:
    """The LS containers' CFS quota and CFS burst once `plan` is carried out, each together in cores (unlimited
    quotas and unknown bursts left out); (None, None) when the frame has no container facts. The burst is its
    own series because a policy that changes only `cpu.cfs_burst_us` (CPU burst `auto` -> `none`) moves no
    quota: before, such a proposal showed "no change" in every row while it marked every frame."""
    if not snap.kernel.pods:
        return None, None
    quotas: dict[str, int] = {}
    bursts: dict[str, int] = {}
    if plan is not None:
        for resource_plan in plan.writes:
            for level in resource_plan.levels:
                for write in level:
                    if write.resource == CgroupResource.CPU_CFS_QUOTA:
                        quotas[write.cgroup_dir] = int(write.value)
                    elif write.resource == CgroupResource.CPU_CFS_BURST:
                        bursts[write.cgroup_dir] = int(write.value)
    quota_total = burst_total = 0.0
    pods = snap.kernel.pods
    for pod in snap.pods:
        pk = pods.get(pod.uid) if pod.qos == "LS" and pod.active else None
        if pk is None:
            continue
        for c in pk.containers:
            quota = quotas.get(c.dir, c.quota_us)
            if quota is not None and quota > 0:
                quota_total += quota / c.period_us
            burst = bursts.get(c.dir, c.burst_us)
            if burst is not None and burst > 0:
                burst_total += burst / c.period_us
    return quota_total, burst_total


class ProposedContainers:
    """The proposed run's part-2 world, frame by frame (module docstring)."""

    def __init__(self, *, memory_proposed: bool = True) -> None:
        self.files: dict[str, tuple[int | None, int | None]] | None = None  # None: the recorded files hold
        self.following = {CPUBurst.name: True, MemoryQoS.name: True}  # planning from the recorded state
        # memory QoS gives pods other memory.min/low/high totals than the agent did (what a frame is marked for).
        # Only a proposal that names memory QoS (`memory_proposed`) can: its values are a pure function of the
        # config and each pod's request and limit, so without it every pod still on the node gets the agent's
        # values, and totals that differ only by the pods the proposal evicted (memory.high of evicted BE pods)
        # are not the proposal's memory limits.
        self.memory_proposed = memory_proposed
        self.memory_differs = False

    def follows(self, name: str) -> bool:
        """Whether `name` plans this frame from the state the recording kept (its world is the recorded one)."""
        return self.following.get(name, True)

    def snapshot(self, snap: QoSSnapshot) -> QoSSnapshot:
        """The frame with the proposal's CFS files, or the recorded ones again once they are the same."""
        if self.files is None:
            return snap
        recorded = _files_of(snap.kernel)
        if all(recorded.get(d, v) == v for d, v in self.files.items()):
            self.files = None
            return snap
        return replace(snap, kernel=_with_files(snap.kernel, self.files))

    def planned(self, name: str, snap: QoSSnapshot, plan: QoSPlan, recorded: Decision | None) -> None:
        """`name` planned `plan` on `snap`: it follows the recording while it decides as the agent did there. A
        frame without the agent's decision (a format-1 recording; a round the reconciler was not due) says
        nothing either way: the run stays where it was."""
        if recorded is None:
            if name == CPUBurst.name and self.files is not None:
                self.files = files_after(self.files, plan)
            return
        mine = comparable(decision_of(plan), recorded)
        same = mine.text() == recorded.text()
        if name == MemoryQoS.name:
            totals = ("min_total", "low_total", "high_total")
            self.memory_differs = self.memory_proposed and (
                [mine.numbers.get(k) for k in totals] != [recorded.numbers.get(k) for k in totals])
        if name == CPUBurst.name:
            if self.files is not None or not same:
                self.files = files_after(self.files if self.files is not None else _files_of(snap.kernel), plan)
            same = same and self.files is None
        self.following[name] = same

    def assumed(self) -> tuple[str, ...]:
        """What this frame's replay assumed: where the containers' CFS files are the proposal's, and where memory
        QoS gives other totals. A decision that differs only in numbers with no effect on the node (the share
        pool's ratio after the proposal's evictions freed CPU) is not marked; its state is still its own."""
        out = []
        if self.files is not None:
            out.append(ASSUMED[CPUBurst.name])
        if self.memory_differs:
            out.append(ASSUMED[MemoryQoS.name])
        return tuple(out)
