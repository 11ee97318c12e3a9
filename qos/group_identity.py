"""Group identity (koordlet's GroupIdentity, `pkg/koordlet/runtimehooks/hooks/groupidentity/{bvt,rule}.go`) and
BE idle (`cpu.idle`, koordlet's core-sched rule `IsCPUIdle`): CPU priority between QoS classes.

bvt (`cpu.bvt_warp_ns`, Anolis / Alibaba Cloud Linux), when the NodeSLO's `resourceQOSStrategy.policies.cpuPolicy`
is groupIdentity (the default) and a class's `cpuQOS.enable` is on; a class not enabled gets 0:
  * pods by koordinator class: LSE and LSR the lsrClass value (default 2), LS lsClass (2), BE beClass (-1);
    pods without a class by kube QoS: Guaranteed LSR's (or LS's) value, Burstable LS's, BestEffort BE's;
    their containers as the pod;
  * the kubelet's tiers: kubepods (Guaranteed) 0, burstable LS's, besteffort BE's.
When every class is off, what this agent set is put back to 0 once.

cpu.idle (mainline kernels, 5.15+), where the kernel has no bvt: with `cpuPolicy: coreSched` and
`beClass.cpuQOS.schedIdle: 1`, every BE pod's cgroup gets `cpu.idle = 1` (and 0 once it is no longer asked).
Never the besteffort tier: the kernel refuses `cpu.shares` on an idle group, and the kubelet rewrites the
tier's shares at every start, so an idle tier keeps it from starting (koordinator#2732; the fix moved the knob
to pod level, koordinator#2775). For the same reason BatchResource leaves BE pods' shares alone while BE idle is
chosen (an idle group's weight is not used anyway).

A kernel with neither file is one status line ("unsupported on this kernel"), not an error per pod.
The rule itself is `hookserver.slo.cpu_priority`, shared with the PreRunPodSandbox hook
(`hookserver.hooks.plugins.group_identity`), which gives a new pod the same value before this reconciler's round.
Knobs (qos.framework.knobs): cpu.bvt_warp_ns at tier, pod and container level, every class; cpu.idle at pod level, BE.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.slo.cpu_priority import BvtRule, be_idle_chosen, bvt_rule, pod_idle_wanted

from hookserver.featuregates import FeatureGate
from qos.framework.plan import QoSPlan, numbers
from qos.framework.reconciler import Reconciler, Verdict
from qos.snapshot.model import QoSSnapshot

__all__ = ["BvtRule", "GroupIdentity", "GroupIdentityState", "be_idle_chosen", "bvt_rule"]

BVT = CgroupResource.CPU_BVT_WARP_NS
IDLE = CgroupResource.CPU_IDLE


@dataclass(frozen=True, slots=True)
class GroupIdentityState:
    """`bvt`: this agent has written bvt values (so turning every class off resets them once); `idle`: the
    BE pod dirs it set cpu.idle=1 on."""

    bvt: bool = False
    idle: frozenset[str] = frozenset()


def _kube_qos(pod_dir: str, tiers: Mapping[str, str]) -> str:
    for tier, kube in (("besteffort", "BestEffort"), ("burstable", "Burstable")):
        base = tiers.get(tier, "")
        if base and (pod_dir == base or pod_dir.startswith(base + "/")):
            return kube
    return "Guaranteed"


class GroupIdentity(Reconciler):
    name = "GroupIdentity"
    gate = FeatureGate("GroupIdentity", True, "CPU priority by QoS class: bvt where the kernel has it, else BE cpu.idle")
    default_interval_s = 1.0
    acts_on = ("cgroup",)


    def enabled(self, snap: QoSSnapshot) -> Verdict:
        slo = snap.slo
        if bvt_rule(slo).enabled:
            return Verdict(True, "NodeSLO cpuQOS enabled with cpuPolicy groupIdentity")
        if be_idle_chosen(slo):
            return Verdict(True, "NodeSLO cpuPolicy coreSched with beClass schedIdle 1 (BE cpu.idle)")
        return Verdict(False, "NodeSLO resourceQOSStrategy: cpuQOS off for every class and no BE schedIdle")

    def initial_state(self, now: float) -> Any:
        return GroupIdentityState()

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        st = state if isinstance(state, GroupIdentityState) else GroupIdentityState()
        if not st.bvt and not st.idle:
            return QoSPlan.skip(self.name, why, state=st)
        plan = self.plan(snap, st)
        return QoSPlan(self.name, f"disabled ({why}); putting CPU QoS back", plan.numbers, writes=plan.writes,
                       notes=plan.notes, skipped=plan.skipped, state=plan.state)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        st = state if isinstance(state, GroupIdentityState) else GroupIdentityState()
        files = snap.kernel.cgroup_files
        rule = bvt_rule(snap.slo)
        idle = be_idle_chosen(snap.slo)
        if rule.enabled or st.bvt:
            if "cpu.bvt_warp_ns" in files:
                return self._bvt(snap, rule, st)
            missing = "cpu.bvt_warp_ns"
        elif idle or st.idle:
            if "cpu.idle" in files:
                return self._idle(snap, idle, st)
            missing = "cpu.idle"
        else:
            return QoSPlan.skip(self.name, "nothing asked by the NodeSLO", state=st)
        return QoSPlan.skip(self.name, f"{missing} unsupported on this kernel: CPU QoS by class not applied", state=st)

    def _bvt(self, snap: QoSSnapshot, rule: BvtRule, st: GroupIdentityState) -> QoSPlan:
        tiers = snap.kernel.tiers
        reason = "groupIdentity " + ("per class" if rule.enabled else "off: reset to 0")
        tier_writes = [CgroupWrite(tiers[t], BVT, rule.tier[t], owner=self.name, reason=f"{reason} ({t} tier)")
                       for t in ("kubepods", "burstable", "besteffort") if tiers.get(t)]
        pod_writes: list[CgroupWrite] = []
        cont_writes: list[CgroupWrite] = []
        facts = {p.uid: p for p in snap.pods}
        for uid, pk in sorted(snap.kernel.pods.items()):
            pod = facts.get(uid)
            if pod is None or not pod.active:
                continue
            kube_qos = _kube_qos(pk.dir, tiers)
            value = rule.pod_value(pod.qos_label, kube_qos)  # koordlet reads the label (GetPodQoSClassRaw)
            why = f"{reason}: {pod.key} ({pod.qos_label or kube_qos}) -> {value}"
            pod_writes.append(CgroupWrite(pk.dir, BVT, value, owner=self.name, reason=why))
            cont_writes += [CgroupWrite(c.dir, BVT, value, owner=self.name, reason=why) for c in pk.containers]
        levels = tuple(level for level in (tuple(tier_writes), tuple(pod_writes), tuple(cont_writes)) if level)
        plan = ResourcePlan(levels=levels, leveled=False) if levels else None
        summary = (f"bvt: tiers kubepods/burstable/besteffort {rule.tier['kubepods']}/{rule.tier['burstable']}/"
                   f"{rule.tier['besteffort']}, {len(pod_writes)} pods")
        return QoSPlan(self.name, summary, numbers(pods=len(pod_writes), containers=len(cont_writes)),
                       writes=(plan,) if plan is not None else (), state=GroupIdentityState(bvt=rule.enabled))

    def _idle(self, snap: QoSSnapshot, wanted: bool, st: GroupIdentityState) -> QoSPlan:
        tiers = snap.kernel.tiers
        facts = {p.uid: p for p in snap.pods}
        be_dirs = {pk.dir for uid, pk in snap.kernel.pods.items()
                   if (pod := facts.get(uid)) is not None and pod.active
                   and pod_idle_wanted(pod.qos_label, _kube_qos(pk.dir, tiers))}
        writes = []
        target = frozenset(be_dirs) if wanted else frozenset()
        for d in sorted(target):
            writes.append(CgroupWrite(d, IDLE, 1, owner=self.name,
                                      reason="BE cpu.idle=1 (cpuPolicy coreSched, beClass schedIdle 1), pod level"))
        present = {pk.dir for pk in snap.kernel.pods.values()}
        for d in sorted((st.idle - target) & present):  # a pod that is gone took its cgroup with it
            writes.append(CgroupWrite(d, IDLE, 0, owner=self.name, reason="BE cpu.idle no longer asked: 0"))
        plan = ResourcePlan.single(writes) if writes else None
        summary = f"cpu.idle=1 on {len(target)} BE pods" if wanted else "cpu.idle reset to 0"
        return QoSPlan(self.name, summary, numbers(pods=len(target)), writes=(plan,) if plan is not None else (),
                       state=GroupIdentityState(idle=target))
