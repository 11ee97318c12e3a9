"""The containers a proposed configuration runs on: CPU burst's CFS files and the part-2 reconcilers' state.

Like `world.ProposedWorld` for the BE tier: while the proposal decides what the agent decided, its node is the
recorded one (the CFS quota and burst the frame shows, and the round-start state the recorder kept,
`states.py`), so a null proposal reproduces the recording bit for bit.

File by file: a container's CFS quota or burst is the proposal's own from the first round where the
proposal writes another value there than the agent's round wrote (the agent's round is planned again, on the
recorded frame, from the recorded state and config), and the recorded one again once the recording shows the
proposal's value. A file the proposal sets as the agent did follows the recording, so what it becomes between
two frames is what the agent's per-second rounds made of it, and a proposal that changes only
`cpuBurstPercent` leaves every quota as recorded. While some files are the proposal's own, CPU burst's rounds
between two frames are replayed at the agent's cadence on the earlier frame's inputs (`catch_up`; quota
burst scales a quota x1.2 a round), and act on those files only. The planner's state is its own until it
decides as the agent did with no file of its own. Memory QoS writes nothing it reads back, so only its state
follows.

What the recording cannot say (a container with more quota would have used more CPU; memory.high would have
reclaimed memory) is named per frame in `Divergence.part2`, where it acts on the node: the proposal's own CFS
files, other memory.min/low/high totals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from hookserver.executor.plan import CgroupResource

from qos.cpu.burst import CPUBurst
from qos.framework.plan import QoSPlan
from qos.memory_qos import MemoryQoS
from qos.snapshot.kernel import KernelFacts, PodKernel
from qos.snapshot.model import QoSSnapshot

from hookserver.recorder.decisions import Decision, comparable, decision_of

__all__ = ["ASSUMED", "WRITE_COUNTS", "Files", "ProposedContainers", "files_after", "ls_cfs_cores"]

# (quota µs, burst µs) by cgroup dir (containers and pods; a pod's burst is None)
Files = Mapping[str, tuple[int | None, int | None]]
# A round of CPU burst on one snapshot: the plan, and the state to carry to the next round.
Round = Callable[[QoSSnapshot, Any], tuple[QoSPlan, Any]]

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


# The proposal's own files: (cgroup dir, 0 for the CFS quota or 1 for the burst) -> its value there.
Own = dict[tuple[str, int], int | None]


def _overlay(files: Files, own: Own) -> dict[str, tuple[int | None, int | None]]:
    """`files` with the proposal's own values in place."""
    out = dict(files)
    for (directory, kind), value in own.items():
        quota, burst = out.get(directory, (None, None))
        out[directory] = (value, burst) if kind == 0 else (quota, value)
    return out


# The numbers of CPU burst's decision that count its writes: CFS bursts, quotas scaled up, quotas scaled down.
WRITE_COUNTS = ("burst_writes", "scaled_up", "scaled_down")


def _quiet(recorded: Decision) -> bool:
    """The agent's CPU burst round wrote no file (its decision counts every write, `WRITE_COUNTS`)."""
    return not any(recorded.numbers.get(k) for k in WRITE_COUNTS)


def _differing(mine: Files, agent: Files) -> Own:
    """The files where the proposal's round left another value than the agent's."""
    own: Own = {}
    for directory, values in mine.items():
        theirs = agent.get(directory, (None, None))
        for kind in (0, 1):
            if values[kind] != theirs[kind]:
                own[(directory, kind)] = values[kind]
    return own


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
        self.own: Own = {}  # the CFS files that are the proposal's own
        self.following = {CPUBurst.name: True, MemoryQoS.name: True}  # planning from the recorded state
        # memory QoS gives pods other memory.min/low/high totals than the agent did (what a frame is marked for).
        # Only a proposal that names memory QoS (`memory_proposed`) can: its values are a pure function of the
        # config and each pod's request and limit, so without it every pod still on the node gets the agent's
        # values, and totals that differ only by the pods the proposal evicted (memory.high of evicted BE pods)
        # are not the proposal's memory limits.
        self.memory_proposed = memory_proposed
        self.memory_differs = False
        self._last: QoSSnapshot | None = None  # the previous frame as CPU burst planned it (for the rounds between)
        self._after: dict[str, tuple[int | None, int | None]] = {}  # every file once its round was carried out

    def follows(self, name: str) -> bool:
        """Whether `name` plans this frame from the state the recording kept (its world is the recorded one)."""
        return self.following.get(name, True)

    def catch_up(self, now: float, burst_round: Round, state: Any, round_s: float) -> Any:
        """CPU burst's rounds between the previous frame and `now` (every `round_s`, the agent's interval), on the
        previous frame's inputs, while some files are the proposal's own: quota burst scales a quota by x1.2
        or x0.8 a round, so one round a frame would scale ten times too slowly. Only the proposal's own files
        take the rounds' writes (the others follow the recording, which shows what the agent's rounds made of
        them). Stops at a round that changes none of them (the rest would repeat it; the token buckets count
        the time since their last step, so a skipped round's time is not lost). Returns CPU burst's state."""
        last = self._last
        if not self.own or last is None or round_s <= 0:
            return state
        files = self._after
        rounds = math.ceil((now - last.now) / round_s - 1e-9) - 1
        for i in range(1, rounds + 1):
            snap = replace(last, now=last.now + i * round_s, kernel=_with_files(last.kernel, files))
            plan, state = burst_round(snap, state)
            after = files_after(files, plan)
            moved: Own = {}
            for key, value in self.own.items():
                new = after.get(key[0], (None, None))[key[1]]
                if new != value:
                    moved[key] = new
            if not moved:
                break
            self.own.update(moved)
            files = _overlay(after, self.own)
        self._after = files
        return state

    def snapshot(self, snap: QoSSnapshot) -> QoSSnapshot:
        """The frame with the proposal's own CFS files; one the recording now shows as well is the recording's
        again."""
        if not self.own:
            return snap
        recorded = _files_of(snap.kernel)
        self.own = {key: v for key, v in self.own.items()
                    if key[0] in recorded and recorded[key[0]][key[1]] != v}
        if not self.own:
            return snap
        return replace(snap, kernel=_with_files(snap.kernel, _overlay(recorded, self.own)))

    @staticmethod
    def agent_files(recorded: Decision, frame: QoSSnapshot, agent_plan: Callable[[], QoSPlan]) -> Files:
        """The CFS files once the agent's round on the recorded `frame` was carried out. A round whose recorded
        decision wrote nothing left the frame's files (most rounds: the agent's round is then not planned
        again); otherwise `agent_plan()` plans it."""
        if _quiet(recorded):
            return _files_of(frame.kernel)
        return files_after(_files_of(frame.kernel), agent_plan())

    def planned(self, name: str, snap: QoSSnapshot, plan: QoSPlan, recorded: Decision | None,
                agent: Callable[[], Files] | None = None) -> None:
        """`name` planned `plan` on `snap`: it follows the recording while it decides as the agent did there.
        `agent()`: the files after the agent's round on the recorded frame (`agent_files`), asked for only where
        the proposal decided otherwise or has files of its own, to tell which files are its own. A frame without
        the agent's decision (a format-1 recording; a round the reconciler was not due) says nothing either way:
        the run stays where it was."""
        if recorded is None:
            if name == CPUBurst.name and self.own:
                after = files_after(_files_of(snap.kernel), plan)
                self.own = {key: after.get(key[0], (None, None))[key[1]] for key in self.own}
                self._last, self._after = snap, after
            return
        mine = comparable(decision_of(plan), recorded)
        same = mine.text() == recorded.text()
        if name == MemoryQoS.name:
            totals = ("min_total", "low_total", "high_total")
            self.memory_differs = self.memory_proposed and (
                [mine.numbers.get(k) for k in totals] != [recorded.numbers.get(k) for k in totals])
        if name == CPUBurst.name:
            self._last = snap
            if (not same or self.own) and (self.own or plan.writes or not _quiet(recorded)):
                # (neither round wrote anything and no file is the proposal's: the files stay the frame's, as
                # after a proposal's evictions, which change the share pool's ratio and nothing else)
                self._after = files_after(_files_of(snap.kernel), plan)
                self.own = _differing(self._after, agent() if agent is not None else _files_of(snap.kernel))
            same = same and not self.own
        self.following[name] = same

    def assumed(self) -> tuple[str, ...]:
        """What this frame's replay assumed: where some CFS files are the proposal's own, and where memory QoS
        gives other totals. A decision that differs only in numbers with no effect on the node (the share
        pool's ratio after the proposal's evictions freed CPU) is not marked; its state is still its own."""
        out = []
        if self.own:
            out.append(ASSUMED[CPUBurst.name])
        if self.memory_differs:
            out.append(ASSUMED[MemoryQoS.name])
        return tuple(out)
