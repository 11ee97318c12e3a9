"""The CPU-priority rule by QoS class (koordlet's GroupIdentity `rule.go`, and core-sched's `IsCPUIdle` for BE
pods' `cpu.idle`), read from the NodeSLO: one rule, two users.

The QoS reconciler `qos.group_identity.GroupIdentity` applies it to every running pod each round, and the hook
plugin `hookserver.hooks.plugins.group_identity` applies it to a new pod at PreRunPodSandbox, as koordlet's
bvt hook does, so a pod starts with its priority instead of one QoS round later. Both read the values here,
so the two can never disagree about a pod.

bvt (`cpu.bvt_warp_ns`, Anolis kernels), when `resourceQOSStrategy.policies.cpuPolicy` is groupIdentity (the
default) and a class's `cpuQOS.enable` is on; a class not enabled gets 0:
  * pods by koordinator class: LSE and LSR the lsrClass value, LS lsClass, BE beClass; pods without one of those
    classes (SYSTEM and unlabelled) by kube QoS: Guaranteed LSR's (or LS's) value, Burstable LS's, BestEffort BE's;
  * the kubelet's tiers: kubepods (Guaranteed) 0, burstable LS's, besteffort BE's.

cpu.idle (mainline kernels, 5.15+): with `cpuPolicy: coreSched` and `beClass.cpuQOS.schedIdle: 1`, BE pods (the
label, or no label and the besteffort tier) get 1, at pod level only (koordinator#2732/#2775).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookserver.slo.model import NodeSLOSpec

__all__ = ["NONE_VALUE", "BvtRule", "be_idle_chosen", "bvt_rule", "pod_idle_wanted"]

NONE_VALUE = 0  # koordinator's NoneCPUQOS().GroupIdentity


@dataclass(frozen=True, slots=True)
class BvtRule:
    enabled: bool
    pod_by_class: Mapping[str, int]
    pod_by_kube_qos: Mapping[str, int]  # "Guaranteed" | "Burstable" | "BestEffort"
    tier: Mapping[str, int]  # "kubepods" | "burstable" | "besteffort"

    def pod_value(self, qos: str, kube_qos: str) -> int:
        """koordlet's `getPodBvtValue`: the koordinator class first, else the kube QoS."""
        if qos in self.pod_by_class:
            return self.pod_by_class[qos]
        return self.pod_by_kube_qos.get(kube_qos, NONE_VALUE)

    def host_app_value(self, qos: str) -> int:
        """koordlet's `getHostQOSBvtValue`: a host application's class value, 0 for a class the rule does not name."""
        return self.pod_by_class.get(qos, NONE_VALUE)


def bvt_rule(slo: NodeSLOSpec) -> BvtRule:
    """koordlet's `parseRule` for GroupIdentity."""
    strategy = slo.resource_qos_strategy
    by_policy = strategy.policies.uses_group_identity()

    def value(cls: Any) -> tuple[bool, int]:
        on = by_policy and cls.cpu_qos.enable
        gi = cls.cpu_qos.group_identity
        return on, (gi if on and gi is not None else NONE_VALUE)

    lsr_on, lsr = value(strategy.lsr_class)
    ls_on, ls = value(strategy.ls_class)
    be_on, be = value(strategy.be_class)
    guaranteed_pod = lsr if lsr_on else ls if ls_on else NONE_VALUE
    return BvtRule(
        enabled=lsr_on or ls_on or be_on,
        pod_by_class={"LSE": lsr, "LSR": lsr, "LS": ls, "BE": be},
        pod_by_kube_qos={"Guaranteed": guaranteed_pod, "Burstable": ls, "BestEffort": be},
        tier={"kubepods": NONE_VALUE, "burstable": ls, "besteffort": be},
    )


def be_idle_chosen(slo: NodeSLOSpec) -> bool:
    """koordlet's core-sched `IsCPUIdle` for the BE class: cpuPolicy coreSched and beClass schedIdle 1."""
    return slo.resource_qos_strategy.be_sched_idle()


def pod_idle_wanted(qos_label: str, kube_qos: str) -> bool:
    """Whether a pod is one that BE idle covers: labelled BE, or unlabelled in the kubelet's besteffort tier."""
    return qos_label == "BE" or (not qos_label and kube_qos == "BestEffort")
