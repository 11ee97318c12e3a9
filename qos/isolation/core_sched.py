"""CoreSched (koordlet's `runtimehooks/hooks/coresched`, gate CoreSched, off by default): core-scheduling cookies
per group of pods, so that a pod shares a physical core's hyperthreads only with pods of its own group.

koordlet's rules (facts from koordinator, not its code):
  * On when NodeSLO `resourceQOSStrategy.policies.cpuPolicy` is `coreSched` and some class's `cpuQOS.enable`
    is true; a pod is enabled by its class's `cpuQOS.enable` (LSE and LSR take the LSR class's; a pod without a
    koordinator class follows its kube QoS: BestEffort as BE, else LS). SYSTEM pods are never touched (they keep
    the default cookie 0, as the agent does).
  * The group is the pod's `koordinator.sh/core-sched-group-id` label ("" when unset: every such pod of the
    enabled classes shares one group); `koordinator.sh/core-sched-policy: exclusive` makes the pod's uid its
    group, `none` disables it. A class with `cpuQOS.coreExpeller: true` appends `-expeller` to its groups, so
    its pods never share a cookie with the other classes' pods of the same group id.
  * Every process of a group's containers holds the group's one cookie: the first process of a group without
    one gets a new cookie (CREATE) and the others take it from a holder (SHARE); a disabled pod's processes are
    reset to the default cookie. When a group's processes hold several cookies, the one already remembered for
    the group wins (else the most held), and the others are moved to it.
  * The cookie cache (koordlet: 300 s expiry) is this reconciler's state: group -> (cookie, last seen); a group
    not seen for `COOKIE_EXPIRY_S` is forgotten, and its cookie never reused for another group.

Where this agent differs, and why: koordlet also sets the pod sandbox's (pause) cookie; the snapshot has no
sandbox cgroup here, so only the containers' processes are set (the pause process only sleeps). koordlet runs
this from its reconciler only (its NRI hooks are a TODO there); here too, so a new container joins its group's
cookie within one round (1 s). Where the kernel has no PR_SCHED_CORE or the node no SMT, the round is one
"unavailable" status line and nothing is read or written.

Knob (qos.framework.knobs): the core-sched cookie of pods' processes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hookserver.executor.plan import CookieOp
from hookserver.featuregates import FeatureGate
from hookserver.slo.qos import CPUQOS, ResourceQOSStrategy
from qos.framework.plan import QoSPlan, kernel_part_skip, numbers
from qos.framework.reconciler import Reconciler, Verdict
from qos.snapshot.model import PodFacts, QoSSnapshot

__all__ = ["COOKIE_EXPIRY_S", "CookieCache", "CoreSched", "LABEL_CORE_SCHED_GROUP", "LABEL_CORE_SCHED_POLICY",
           "group_of", "pod_group"]

LABEL_CORE_SCHED_GROUP = "koordinator.sh/core-sched-group-id"
LABEL_CORE_SCHED_POLICY = "koordinator.sh/core-sched-policy"
EXPELLER_SUFFIX = "-expeller"
COOKIE_EXPIRY_S = 300.0


@dataclass(frozen=True, slots=True)
class CookieCache:
    """group -> (cookie, when last seen held by a process of the group)."""

    groups: Mapping[str, tuple[int, float]] = field(default_factory=lambda: MappingProxyType({}))


def _class_cfg(strategy: ResourceQOSStrategy, qos: str) -> CPUQOS | None:
    """The cpuQOS of the pod's class (LSE/LSR: the LSR class's; no class: LS, as the snapshot's kube-QoS
    fallback already made BestEffort pods BE); None for SYSTEM and anything else."""
    s = strategy
    by_qos = {"LSE": s.lsr_class, "LSR": s.lsr_class, "LS": s.ls_class, "": s.ls_class, "BE": s.be_class}
    cls = by_qos.get(qos)
    return cls.cpu_qos if cls is not None else None


def group_of(strategy: ResourceQOSStrategy, qos: str, uid: str, labels: Mapping[str, str]) -> str | None:
    """The core-sched group of a pod of koordinator class `qos` (koordlet's getPodEnabledAndGroup), or None when
    core scheduling is off for it. Does not look at `policies.cpuPolicy`: that is the reconciler's verdict."""
    cfg = _class_cfg(strategy, qos)
    if cfg is None or not cfg.enable:
        return None
    policy = labels.get(LABEL_CORE_SCHED_POLICY, "")
    if policy == "none":
        return None
    group = uid if policy == "exclusive" else labels.get(LABEL_CORE_SCHED_GROUP, "")
    return group + EXPELLER_SUFFIX if cfg.core_expeller else group


def pod_group(snap: QoSSnapshot, pod: PodFacts) -> str | None:
    """`group_of` for a pod of the snapshot."""
    return group_of(snap.slo.resource_qos_strategy, pod.qos, pod.uid, pod.labels)


class CoreSched(Reconciler):
    name = "CoreSched"
    gate = FeatureGate("CoreSched", False, "core-scheduling cookies per pod group (NodeSLO cpuPolicy coreSched)")
    default_interval_s = 1.0
    acts_on = ("core_sched",)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        strategy = snap.slo.resource_qos_strategy
        if strategy.policies.cpu_policy != "coreSched":
            return Verdict(False, f"NodeSLO cpuPolicy is {strategy.policies.cpu_policy}, not coreSched")
        on = [n for n, c in (("LSR", strategy.lsr_class), ("LS", strategy.ls_class), ("BE", strategy.be_class))
              if c.cpu_qos.enable]
        if not on:
            return Verdict(False, "NodeSLO cpuPolicy coreSched, but cpuQOS is disabled for every class")
        return Verdict(True, f"cpuPolicy coreSched for {', '.join(on)}")

    def initial_state(self, now: float) -> Any:
        return CookieCache()

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        facts = snap.kernel.core_sched
        skipped = kernel_part_skip(self.name, state, read=snap.kernel.read, part="core_sched", what="cookies",
                                   problem=facts.problem, word="unavailable")
        if skipped is not None:
            return skipped
        cache = state if isinstance(state, CookieCache) else CookieCache()
        members: dict[str, list[tuple[int, int]]] = {}  # group -> (pid, cookie)
        keys: dict[str, str] = {}
        to_clear: list[int] = []
        for pod in snap.pods:
            pk = snap.kernel.pods.get(pod.uid)
            if pk is None or not pod.active or pod.qos == "SYSTEM":
                continue
            group = pod_group(snap, pod)
            procs = [p for c in pk.containers for p in facts.processes.get(c.id, ())]
            if group is None:
                to_clear += [pid for pid, cookie in procs if cookie != 0]
                continue
            members.setdefault(group, []).extend(procs)
            keys.setdefault(group, pod.key)
        ops: list[CookieOp] = []
        seen: dict[str, tuple[int, float]] = {}
        taken = {c for g, (c, _) in cache.groups.items()}
        for group, procs in sorted(members.items()):
            if not procs:
                continue
            target = self._target(group, procs, cache, taken)
            if target == 0:
                first, *rest = [pid for pid, _ in procs]
                ops.append(CookieOp("create", first, tuple(rest), group=group, owner=self.name,
                                    reason=f"group {group!r} ({keys[group]}): new cookie for {len(procs)} processes"))
                continue
            holder = next(pid for pid, cookie in procs if cookie == target)
            behind = tuple(pid for pid, cookie in procs if cookie != target)
            seen[group] = (target, snap.now)
            if behind:
                ops.append(CookieOp("assign", holder, behind, group=group, owner=self.name,
                                    reason=f"group {group!r}: cookie {target:#x} from pid {holder} to {len(behind)} processes"))
        if to_clear:
            ops.append(CookieOp("clear", 0, tuple(sorted(to_clear)), group="", owner=self.name,
                                reason=f"{len(to_clear)} processes of pods without core scheduling back to the default cookie"))
        kept = {g: v for g, v in cache.groups.items() if snap.now - v[1] < COOKIE_EXPIRY_S and g not in seen}
        new_state = CookieCache(MappingProxyType({**kept, **seen}))
        summary = (f"{len(members)} groups, {sum(len(p) for p in members.values())} processes; "
                   f"{len(ops)} cookie changes")
        return QoSPlan(self.name, summary, numbers(groups=len(members), changes=len(ops), cleared=len(to_clear)),
                       cookies=tuple(ops), state=new_state)

    @staticmethod
    def _target(group: str, procs: list[tuple[int, int]], cache: CookieCache, taken: set[int]) -> int:
        """The group's cookie: the remembered one if a process still holds it, else the one most of its
        processes hold that no other group owns; 0 when none (a new one is made)."""
        held = Counter(cookie for _, cookie in procs if cookie != 0)
        remembered = cache.groups.get(group)
        if remembered is not None and remembered[0] in held:
            return remembered[0]
        others = taken - ({remembered[0]} if remembered else set())
        for cookie, _ in held.most_common():
            if cookie not in others:
                return cookie
        return 0

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        """Turned off by NodeSLO (the cookies are read while the gate is on): every pod process with a cookie goes
        back to the default, once, when this agent had given cookies (its cache is not empty)."""
        facts = snap.kernel.core_sched
        ours = isinstance(state, CookieCache) and bool(state.groups)  # only cookies this agent gave
        pids = sorted(pid for procs in facts.processes.values() for pid, cookie in procs if cookie != 0) if ours else []
        if not pids:
            return QoSPlan.skip(self.name, why, state=CookieCache())
        return QoSPlan(self.name, f"disabled ({why}); {len(pids)} processes back to the default cookie",
                       cookies=(CookieOp("clear", 0, tuple(pids), owner=self.name, reason=f"core scheduling off ({why})"),),
                       state=CookieCache())
