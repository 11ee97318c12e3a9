"""The node's CPU pools, computed the way koordlet's NodeResourceTopology informer computes them
(`pkg/koordlet/statesinformer/impl/states_noderesourcetopology.go`, `calCPUSharePools`,
`removeNodeReservedCPUs`, `removeSystemQOSCPUs`, `covertCPUsToSharePool`):

* LS share pool: the online CPUs minus every pod's `resource-status` cpuset (LSE and LSR alike), minus the
  node's `reservation.reservedCPUs`, minus exclusive SYSTEM QoS CPUs;
* BE share pool: the same but only LSE pods' CPUs come out (BE may run on LSR CPUs, as koordlet allows);
* both pools also lose the CPUs the kubelet's static CPU manager gave guaranteed pods (`kubelet_allocated`,
  from `cpu_manager_state`: koordlet deletes them from the shared-pool CPUs before splitting LS and BE);
* each pool split per (socket, NUMA node), sorted by (socket, node): koordinator's `CPUSharedPool` list.

Pods that are over (Succeeded, Failed) hold no CPUs: the kubelet lists them until they are deleted, and
their CPUs are free. A pod whose annotation does not decode holds none either, and is named in `problems`.
Pure and deterministic (sorted everywhere), so the same inputs give the same pools and the same JSON: the
report writes nothing when nothing changed (koordinator#2942).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hookserver.store.records import PodRecord
from hookserver.system.cpulist import format_cpu_list
from hookserver.system.topology import CpuInfo
from hookserver.topology.annotations import (
    ResourceStatusError,
    node_reserved_cpus,
    pod_cpuset,
    system_qos_exclusive_cpus,
)

__all__ = ["CpuPools", "SharePool", "compute_pools"]

_LABEL_QOS_CLASS = "koordinator.sh/qosClass"
_OVER = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class SharePool:
    """koordinator's `CPUSharedPool`: `{"socket": s, "node": n, "cpuset": "..."}`."""

    socket: int
    node: int
    cpus: frozenset[int]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"socket": self.socket, "node": self.node}
        if self.cpus:
            out["cpuset"] = format_cpu_list(self.cpus)  # omitempty, as the Go struct
        return out


@dataclass(frozen=True, slots=True)
class CpuPools:
    """The pools for one (topology, pods, node annotations). `exclusive` is pod UID -> the CPUs bound to it
    (with its QoS class); `problems` names pods and annotations that could not be read."""

    online: frozenset[int]
    ls: tuple[SharePool, ...]
    be: tuple[SharePool, ...]
    exclusive: Mapping[str, tuple[str, frozenset[int]]] = field(default_factory=lambda: MappingProxyType({}))
    reserved: frozenset[int] = frozenset()
    system: frozenset[int] = frozenset()
    kubelet: frozenset[int] = frozenset()  # the kubelet static CPU manager's exclusive CPUs
    problems: tuple[str, ...] = ()

    @property
    def ls_cpus(self) -> frozenset[int]:
        return frozenset().union(*(p.cpus for p in self.ls))

    @property
    def be_cpus(self) -> frozenset[int]:
        return frozenset().union(*(p.cpus for p in self.be))

    def ls_cpuset(self) -> str:
        """koordlet's `strings.Join(allSharePoolCPUs, ",")`, in canonical form."""
        return format_cpu_list(self.ls_cpus)

    def describe(self) -> dict[str, Any]:
        return {
            "online": format_cpu_list(self.online),
            "ls_share_pool": format_cpu_list(self.ls_cpus),
            "be_share_pool": format_cpu_list(self.be_cpus),
            "reserved": format_cpu_list(self.reserved),
            "system_exclusive": format_cpu_list(self.system),
            "kubelet_exclusive": format_cpu_list(self.kubelet),
            "exclusive": {uid: {"qos": qos, "cpuset": format_cpu_list(c)} for uid, (qos, c) in sorted(self.exclusive.items())},
            "problems": list(self.problems),
        }


def compute_pools(
    cpus: Iterable[CpuInfo], pods: Mapping[str, PodRecord], node_annotations: Mapping[str, str],
    *, kubelet_allocated: frozenset[int] = frozenset(),
) -> CpuPools:
    online = [c for c in cpus if c.online]
    exclusive: dict[str, tuple[str, frozenset[int]]] = {}
    problems: list[str] = []
    for uid in sorted(pods):
        pod = pods[uid]
        if pod.phase in _OVER:
            continue
        try:
            bound = pod_cpuset(pod.annotations)
        except ResourceStatusError as exc:
            problems.append(f"pod {pod.namespace}/{pod.name}: {exc}")
            continue
        if bound:
            exclusive[uid] = (pod.labels.get(_LABEL_QOS_CLASS, ""), bound)
    reserved, note = node_reserved_cpus(node_annotations)
    if note:
        problems.append(note)
    system = system_qos_exclusive_cpus(node_annotations)
    taken_ls = frozenset().union(*(c for _, c in exclusive.values()))
    taken_be = frozenset().union(*(c for qos, c in exclusive.values() if qos == "LSE"))
    removed = reserved | system | kubelet_allocated
    return CpuPools(
        online=frozenset(c.cpu for c in online),
        ls=_split(online, taken_ls | removed),
        be=_split(online, taken_be | removed),
        exclusive=MappingProxyType(exclusive),
        reserved=reserved,
        system=system,
        kubelet=kubelet_allocated,
        problems=tuple(problems),
    )


def _split(cpus: list[CpuInfo], taken: frozenset[int]) -> tuple[SharePool, ...]:
    """koordlet's `covertCPUsToSharePool`: one pool per NUMA node (socket from its first CPU), sorted by
    (socket, node); empty pools left out."""
    by_node: dict[int, list[CpuInfo]] = {}
    for c in cpus:
        if c.cpu not in taken:
            by_node.setdefault(c.numa_node, []).append(c)
    pools = [
        SharePool(socket=min(group, key=lambda c: c.cpu).socket, node=node, cpus=frozenset(c.cpu for c in group))
        for node, group in by_node.items()
    ]
    return tuple(sorted(pools, key=lambda p: (p.socket, p.node)))
