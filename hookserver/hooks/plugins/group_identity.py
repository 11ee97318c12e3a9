"""GroupIdentity at PreRunPodSandbox: a new pod's CPU priority (bvt, or BE `cpu.idle`) before its first container.

koordlet registers its bvt hook at PreRunPodSandbox (`runtimehooks/hooks/groupidentity/bvt.go`,
`SetPodBvtValue`), so a pod's cgroup has its `cpu.bvt_warp_ns` before any of its processes runs. hookserver's
QoS reconciler (`qos.group_identity.GroupIdentity`) keeps every running pod right, but alone it leaves a new pod
at the kernel's default (0) until its next round; a BE pod meanwhile competes with LS pods as an equal.

This plugin decides the pod-level value from the same rule (`hookserver.slo.cpu_priority`), so the hook and the
reconciler can never disagree: bvt by class when the NodeSLO's cpuPolicy is groupIdentity and a class's cpuQOS is
on (LSE/LSR lsrClass, LS lsClass, BE beClass, otherwise by kube QoS); `cpu.idle = 1` for BE pods when the
cpuPolicy is coreSched with beClass schedIdle 1. The dispatcher writes the value to the pod cgroup, as it writes
every PreRunPodSandbox value (proxy and NRI alike; neither protocol carries it). Containers inherit nothing from
a pod's bvt, so container-level bvt stays the reconciler's, as in koordlet (its bvt hook has no container stage).
NodeSLO host applications get their class's bvt on the hook reconciler's passes (`host_app`, koordlet's
`SetHostAppBvtValue`).

Gated as the reconciler: the `GroupIdentity` feature gate, and then the NodeSLO. Which file the kernel has is
told at construction (`kernel_files`, probed once at start by the wiring): a kernel without the file gets a
not-applied result naming it, never a write the kernel would refuse.
"""

from __future__ import annotations

import threading
from types import MappingProxyType

from hookserver.hooks.context import LABEL_QOS_CLASS, PodRequest
from hookserver.hooks.outcome import HookResult
from hookserver.resources import Resources
from hookserver.slo import HostApplicationSpec, NodeSLOSpec
from hookserver.slo.cpu_priority import BvtRule, be_idle_chosen, bvt_rule, pod_idle_wanted
from hookserver.system.cgroupnames import KubeQoS, kube_qos_of_cgroup_parent
from hookserver.view import NodeView

__all__ = ["CPU_PRIORITY_FILES", "GroupIdentityPlugin", "kube_qos_name"]

# The files this plugin may write, by their v1 name (cgroup v2 has the same names).
CPU_PRIORITY_FILES = ("cpu.bvt_warp_ns", "cpu.idle")

_GATE_OFF = HookResult.skip("feature gate GroupIdentity is off")
_KUBE_QOS_NAMES = {KubeQoS.BESTEFFORT: "BestEffort", KubeQoS.BURSTABLE: "Burstable"}


def kube_qos_name(cgroup_parent: str) -> str:
    """koordlet's `GetKubeQoSByCgroupParent`: the kubelet's tier in the pod's cgroup parent, Guaranteed otherwise."""
    tier = kube_qos_of_cgroup_parent(cgroup_parent)
    return _KUBE_QOS_NAMES.get(tier, "Guaranteed") if tier is not None else "Guaranteed"


class GroupIdentityPlugin:
    name = "GroupIdentity"
    feature_gate = "GroupIdentity"
    pure_decision = True  # reads only the request and the view's NodeSLO (and it has no container stage)

    def __init__(self, *, enabled: bool = True, kernel_files: frozenset[str] = frozenset()) -> None:
        self.enabled = enabled
        self.bvt_supported = "cpu.bvt_warp_ns" in kernel_files
        self.idle_supported = "cpu.idle" in kernel_files
        self._lock = threading.Lock()
        self._memo: tuple[NodeSLOSpec, BvtRule, bool] | None = None

    def _rule(self, slo: NodeSLOSpec) -> tuple[BvtRule, bool]:
        """The bvt rule and whether BE idle is chosen, computed once per NodeSLO object."""
        memo = self._memo
        if memo is not None and memo[0] is slo:
            return memo[1], memo[2]
        rule, idle = bvt_rule(slo), be_idle_chosen(slo)
        with self._lock:
            self._memo = (slo, rule, idle)
        return rule, idle

    def pre_run_pod_sandbox(self, request: PodRequest, view: NodeView) -> HookResult:
        if not self.enabled:
            return _GATE_OFF
        rule, idle = self._rule(view.node_slo)
        qos_label = request.labels.get(LABEL_QOS_CLASS, "")
        kube_qos = kube_qos_name(request.cgroup_parent)
        inputs = {"qos_class": qos_label, "kube_qos": kube_qos}
        if rule.enabled:
            if not self.bvt_supported:
                return HookResult.skip("cpu.bvt_warp_ns unsupported on this kernel: no group identity", **inputs)
            value = rule.pod_value(qos_label, kube_qos)
            return HookResult(
                resources=Resources(cpu_bvt_warp_ns=value),
                reason=f"groupIdentity: {qos_label or kube_qos} pod -> cpu.bvt_warp_ns {value}",
                inputs=MappingProxyType(inputs),
            )
        if idle:
            if not pod_idle_wanted(qos_label, kube_qos):
                return HookResult.skip("BE cpu.idle chosen, and this is not a BE pod", **inputs)
            if not self.idle_supported:
                return HookResult.skip("cpu.idle unsupported on this kernel: BE pod not made idle", **inputs)
            return HookResult(
                resources=Resources(cpu_idle=1),
                reason="BE cpu.idle=1 (cpuPolicy coreSched, beClass schedIdle 1), pod level",
                inputs=MappingProxyType(inputs),
            )
        return HookResult.skip("NodeSLO: cpuQOS off for every class and no BE schedIdle", **inputs)

    def host_app(self, app: HostApplicationSpec, view: NodeView) -> HookResult:
        """koordlet's `SetHostAppBvtValue`: a NodeSLO host application's bvt by its class (`getHostQOSBvtValue`:
        the class value, 0 for a class the rule does not name), on the reconciler's passes. bvt only: koordlet
        has no host-application cpu.idle."""
        if not self.enabled:
            return _GATE_OFF
        rule, _ = self._rule(view.node_slo)
        if not rule.enabled:
            return HookResult.skip("NodeSLO: group identity off", qos_class=app.qos)
        if not self.bvt_supported:
            return HookResult.skip("cpu.bvt_warp_ns unsupported on this kernel: no group identity", qos_class=app.qos)
        value = rule.host_app_value(app.qos)
        return HookResult(resources=Resources(cpu_bvt_warp_ns=value),
                          reason=f"groupIdentity: {app.qos} host application {app.name} -> cpu.bvt_warp_ns {value}",
                          inputs=MappingProxyType({"qos_class": app.qos}))
