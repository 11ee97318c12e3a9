"""What the NRT says about the kubelet's CPU manager: its policy (`kubelet.koordinator.sh/cpu-manager-policy`) and,
under the static policy, the CPUs it gave guaranteed pods (`node.koordinator.sh/pod-cpu-allocs`), so that
koord-scheduler does not hand the same CPUs to an LSE/LSR pod and the share pools leave them out.

koordlet asks the kubelet's /configz for the policy and reads `cpu_manager_state` for the allocations
(`calcNodeTopo`, `calGuaranteedCpu` in `pkg/koordlet/statesinformer/impl/states_noderesourcetopology.go`).
hookserver has no /configz client; the checkpoint names the policy the kubelet runs, so it is read from there,
and `topology.kubelet_cpu_manager_policy` is the fallback where the file is missing or unreadable.

koordlet's rules for the allocations, kept here: a pod koordinator manages is skipped (its
`koordinator.sh/qosClass` label is LS or BE, or its `resource-status` has a cpuset); each other pod's containers'
cpusets are joined into one (`PodCPUAlloc{namespace, name, uid, cpuset, managedByKubelet: true}`, namespace and
name only for a pod this agent knows); a pod with no CPUs is left out; the list is sorted by uid; no pod at all is
JSON `null` (Go marshals a nil slice so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hookserver.errors import SystemFileError
from hookserver.store.records import PodRecord
from hookserver.system.cpulist import format_cpu_list
from hookserver.system.kubelet_cpu_state import KubeletCpuManagerState, read_cpu_manager_state
from hookserver.topology.annotations import ResourceStatusError, pod_cpuset

__all__ = ["KubeletCpuManager", "PodCpuAlloc", "kubelet_cpu_manager", "kubelet_pod_cpu_allocs"]

_LABEL_QOS_CLASS = "koordinator.sh/qosClass"
_MANAGED_QOS = frozenset({"LS", "BE"})
STATIC = "static"


@dataclass(frozen=True, slots=True)
class PodCpuAlloc:
    """koordinator's `PodCPUAlloc` (apis/extension/numa_aware.go), every field omitempty."""

    uid: str
    cpus: frozenset[int]
    namespace: str = ""
    name: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.name:
            out["name"] = self.name
        out["uid"] = self.uid
        out["cpuset"] = format_cpu_list(self.cpus)
        out["managedByKubelet"] = True
        return out


def _managed_by_koordinator(pod: PodRecord) -> bool:
    if pod.labels.get(_LABEL_QOS_CLASS, "") in _MANAGED_QOS:
        return True
    try:
        return bool(pod_cpuset(pod.annotations))
    except ResourceStatusError:
        return False  # koordlet: a resource-status that does not decode does not make the pod managed


def kubelet_pod_cpu_allocs(state: KubeletCpuManagerState, pods: Mapping[str, PodRecord]) -> tuple[PodCpuAlloc, ...]:
    """The static policy's exclusive CPUs per pod, koordlet's `calGuaranteedCpu`. `pods`: uid -> record."""
    allocs: list[PodCpuAlloc] = []
    for uid, containers in state.entries.items():
        pod = pods.get(uid)
        if pod is not None and _managed_by_koordinator(pod):
            continue
        cpus = frozenset().union(*containers.values())
        if not cpus:
            continue
        allocs.append(PodCpuAlloc(uid=uid, cpus=cpus, namespace=pod.namespace if pod else "",
                                  name=pod.name if pod else ""))
    return tuple(sorted(allocs, key=lambda a: a.uid))


@dataclass(frozen=True, slots=True)
class KubeletCpuManager:
    """One round's view of the kubelet's CPU manager: the policy and where it came from, the allocations,
    and what went wrong reading the checkpoint ("" when nothing did)."""

    policy: str
    source: str
    allocs: tuple[PodCpuAlloc, ...] = ()
    problem: str = ""
    file_missing: bool = False  # the usual case off a kubelet host: worth a line, not a warning

    @property
    def allocated_cpus(self) -> frozenset[int]:
        """The CPUs the kubelet holds exclusively: out of both share pools (koordlet deletes them from the
        shared-pool map before it splits LS and BE)."""
        return frozenset().union(*(a.cpus for a in self.allocs))

    def allocs_json(self) -> list[dict[str, Any]] | None:
        return [a.to_json() for a in self.allocs] or None

    def describe(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "source": self.source,
            "allocs": {a.uid: format_cpu_list(a.cpus) for a in self.allocs},
            "problem": self.problem or None,
        }


def kubelet_cpu_manager(kubelet_root_dir: str, *, fallback_policy: str,
                        pods: Mapping[str, PodRecord]) -> KubeletCpuManager:
    """Read `cpu_manager_state` under `kubelet_root_dir` ("" reads nothing); the setting's policy, with no
    allocations, where the file is missing or bad. Never raises for the file's sake."""
    setting = "setting topology.kubelet_cpu_manager_policy"
    if not kubelet_root_dir:
        return KubeletCpuManager(fallback_policy, setting)
    try:
        state = read_cpu_manager_state(kubelet_root_dir)
    except SystemFileError as exc:
        return KubeletCpuManager(fallback_policy, setting, problem=f"{exc}; using the setting ({fallback_policy})")
    if state is None:
        return KubeletCpuManager(fallback_policy, setting,
                                 problem=f"no cpu_manager_state under {kubelet_root_dir}; "
                                         f"using the setting ({fallback_policy})", file_missing=True)
    allocs = kubelet_pod_cpu_allocs(state, pods) if state.policy == STATIC else ()
    return KubeletCpuManager(state.policy, state.path, allocs, "; ".join(state.problems))
