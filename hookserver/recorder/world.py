"""The node a proposed configuration runs on: the recording's own node until the proposal acts differently.

A recording holds a frame every `recorder.interval_s` (10 s) where the agent planned every second. What
happened between two frames is known only through the next frame: the BE tier's cpuset and quota there are
what the agent's ten rounds wrote. So a proposal that writes what the agent wrote, and evicts whom the agent
evicted, runs on the recorded node exactly, and a null proposal reproduces the recording bit for bit (the
delta a proposal shows is the proposal's alone).

Once the proposal writes something else to the tier, the tier is its own: each round's writes are applied to
it, and the rounds between two frames are replayed at the agent's cadence (`CPUSuppress`'s interval) on the
earlier frame's inputs, so suppress's per-round growth cap and its quota hysteresis act per second, as on the
node, not per frame. When the proposal writes again what the agent wrote, the node is the recorded one again.

A pod the proposal evicts and the agent did not evict in that round is terminating for `LEAVE_S`, then gone
with its usage, for the rest of the run (even if the agent evicted it later). What the others would
have done with the room, and what a pod the agent evicted and the proposal kept would have used, the
recording cannot say: `Divergence` names each such frame, for the report.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from hookserver.executor.plan import CgroupResource
from hookserver.system.cpulist import format_cpu_list, parse_cpu_list

from qos.framework.plan import QoSPlan
from qos.snapshot.model import BETier, PodFacts, QoSSnapshot

from hookserver.recorder.decisions import Decision, decision_of

__all__ = ["LEAVE_S", "Divergence", "ProposedWorld", "tier_after", "tier_effect"]

LEAVE_S = 30.0  # how long a pod the proposal evicted takes to go (the Eviction API's grace, roughly)
_SAME_ROUND_S = 1.0  # an agent's eviction stamped this soon after a round is that round's

# A round of CPU suppress on one snapshot: the plan, and the state to carry to the next round.
SuppressRound = Callable[[QoSSnapshot, Any], tuple[QoSPlan, Any]]


def tier_after(tier: BETier, plan: QoSPlan) -> BETier:
    """The tier once the executor carried out `plan`'s writes to the tier directory itself."""
    cpuset, quota = tier.cpuset, tier.quota_us
    for resource_plan in plan.writes:
        for level in resource_plan.levels:
            for write in level:
                if write.cgroup_dir != tier.dir:
                    continue
                if write.resource == CgroupResource.CPUSET_CPUS:
                    cpuset = parse_cpu_list(str(write.value))
                elif write.resource == CgroupResource.CPU_CFS_QUOTA:
                    quota = int(write.value)
    if cpuset == tier.cpuset and quota == tier.quota_us:
        return tier
    return replace(tier, cpuset=cpuset, quota_us=quota)


def tier_effect(skipped: str, numbers: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a CPU suppress decision leaves the tier with: its cpuset, its quota, everything back (suppress
    off), or what it already had (a skipped round). Two decisions with one effect wrote the same."""
    policy = numbers.get("policy")
    if policy == "cpuset" and isinstance(numbers.get("cpuset"), str):
        return ("cpuset", numbers["cpuset"])
    if policy == "cfsQuota" and isinstance(numbers.get("quota_us"), int):
        return ("cfsQuota", numbers["quota_us"])
    if not numbers and not skipped:
        return ("restore",)
    return ("keep",)


def _effect_on(tier: BETier | None, effect: tuple[Any, ...]) -> bool:
    """Whether the tier already holds what `effect` asks (a recording without the agent's decision)."""
    if effect == ("keep",):
        return True
    if tier is None:
        return False
    if effect[0] == "cpuset":
        return tier.cpuset is not None and format_cpu_list(tier.cpuset) == str(effect[1])
    if effect[0] == "cfsQuota":
        return tier.quota_us is not None and tier.quota_us == int(effect[1])
    return tier.quota_us in (None, -1)


@dataclass(frozen=True, slots=True)
class Divergence:
    """Why one frame of the proposed run is not the recorded node: what the replay had to assume."""

    tier: bool = False  # the BE tier is the proposal's own (BE usage is the recorded, under other limits)
    removed: tuple[str, ...] = ()  # pods the proposal evicted and the agent kept, taken off the node
    kept: tuple[str, ...] = ()  # pods the agent evicted and the proposal kept, absent here with no usage
    part2: tuple[str, ...] = ()  # what CPU burst and memory QoS assumed (`kernel_world.ASSUMED`)
    assumed: tuple[str, ...] = ()  # what else the replay computed again from frames (`cpu_window.ASSUMED`)

    def __bool__(self) -> bool:
        return self.tier or bool(self.removed) or bool(self.kept) or bool(self.part2) or bool(self.assumed)

    def text(self) -> str:
        parts = []
        if self.tier:
            parts.append("BE tier limits are the proposal's; BE usage is the recorded one")
        if self.removed:
            parts.append(f"{len(self.removed)} pod(s) the proposal evicted taken off with their usage")
        if self.kept:
            parts.append(f"{len(self.kept)} pod(s) the agent evicted and the proposal kept: absent, usage unknown")
        parts.extend(self.part2)
        parts.extend(self.assumed)
        return "; ".join(parts)


class ProposedWorld:
    """The proposed run's node, frame by frame (module docstring). `agent_evicted`: pod UID -> when the
    agent first evicted it (the recording's evictions); `round_s`: CPU suppress's interval on the agent."""

    def __init__(self, agent_evicted: Mapping[str, float], round_s: float) -> None:
        self.agent_evicted = dict(agent_evicted)
        self.round_s = round_s if round_s > 0 else 1.0
        self.tier: BETier | None = None  # the proposal's own tier; None while the recorded one holds
        self.gone: dict[str, float] = {}  # pods the proposal evicted before the agent did, and when
        self.evicted_here: set[str] = set()  # every pod the proposal evicted
        self._last: QoSSnapshot | None = None  # the previous frame, as planned (for the rounds in between)

    # -- before planning a frame ---------------------------------------------------------------------------
    def catch_up(self, now: float, suppress_round: SuppressRound, state: Any) -> Any:
        """The agent's rounds between the previous frame and `now`, on the previous frame's inputs, while the
        tier is the proposal's own. Stops at a round that writes nothing to the tier (the rest would repeat
        it). Returns CPU suppress's state after them."""
        last = self._last
        if self.tier is None or last is None:
            return state
        rounds = math.ceil((now - last.now) / self.round_s - 1e-9) - 1
        for i in range(1, rounds + 1):
            snap = replace(last, now=last.now + i * self.round_s, be_tier=self.tier)
            plan, state = suppress_round(snap, state)
            after = tier_after(self.tier, plan)
            if after is self.tier:
                break
            self.tier = after
        return state

    def snapshot(self, snap: QoSSnapshot) -> tuple[QoSSnapshot, Divergence]:
        """The frame as the proposal's node: its tier, its evictions."""
        out = snap
        if self.tier is not None and snap.be_tier is not None:
            out = replace(out, be_tier=replace(snap.be_tier, cpuset=self.tier.cpuset, quota_us=self.tier.quota_us))
        removed: tuple[str, ...] = ()
        if self.gone:
            out, removed = _without(out, self.gone)
        kept = tuple(sorted(uid for uid, at in self.agent_evicted.items()
                            if at < snap.now and uid not in self.evicted_here))
        return out, Divergence(tier=self.tier is not None, removed=removed, kept=kept)

    # -- after planning a frame ----------------------------------------------------------------------------
    def suppressed(self, snap: QoSSnapshot, plan: QoSPlan, recorded: Decision | None) -> None:
        """CPU suppress planned `plan` on `snap` (the proposal's node): the tier follows the recording when the
        plan writes what the agent wrote, and is the proposal's own otherwise."""
        mine = decision_of(plan)
        effect = tier_effect(mine.skipped, mine.numbers)
        same = (tier_effect(recorded.skipped, recorded.numbers) == effect if recorded is not None
                else _effect_on(snap.be_tier, effect))
        if same or snap.be_tier is None:
            self.tier = None
        else:
            self.tier = tier_after(snap.be_tier, plan)
        self._last = snap

    def evicted(self, uids: list[str], now: float, agent: Collection[str] = ()) -> None:
        """The proposal's evictions this frame. One the agent made too in this round (`agent`: the pods the
        recorded decision evicts; without it, an audit entry by this round) is the recording's business: the
        frames after it show the pod as the agent's eviction left it. Any other pod is gone for good from this
        run, whatever the recording shows of it later (the agent evicting it hours on must not bring it back).

        The recorded decision comes first because the audit stamps an eviction when it is done, not when it was
        decided: a SIGKILL eviction whose freeze timed out was stamped 1.01 s after its round on a real node,
        and the null replay then took the pod off as if the proposal alone had evicted it."""
        for uid in uids:
            if uid not in agent and self.agent_evicted.get(uid, math.inf) > now + _SAME_ROUND_S:
                self.gone.setdefault(uid, now)
            self.evicted_here.add(uid)


def _without(snap: QoSSnapshot, gone: Mapping[str, float]) -> tuple[QoSSnapshot, tuple[str, ...]]:
    """A pod in `gone` is terminating for `LEAVE_S`, then gone, its usage taken off the node's."""
    if not gone:
        return snap, ()
    pods: list[PodFacts] = []
    removed: list[str] = []
    freed_cpu = freed_mem = 0.0
    for p in snap.pods:
        at = gone.get(p.uid)
        if at is None:
            pods.append(p)
        elif snap.now - at < LEAVE_S:
            pods.append(replace(p, terminating=True))
            removed.append(p.uid)
        else:
            freed_cpu += p.cpu_usage_cores or 0.0
            freed_mem += p.memory_usage_bytes or 0.0
            removed.append(p.uid)
    if not removed:
        return snap, ()
    u = snap.usage
    usage = replace(
        u, cpu_cores=None if u.cpu_cores is None else max(u.cpu_cores - freed_cpu, 0.0),
        cpu_cores_avg=None if u.cpu_cores_avg is None else max(u.cpu_cores_avg - freed_cpu, 0.0),
        memory_bytes=None if u.memory_bytes is None else max(u.memory_bytes - freed_mem, 0.0))
    return replace(snap, pods=tuple(pods), usage=usage), tuple(removed)
