"""Scripted snapshots and small fakes for QoS tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hookserver.eviction import EvictionRequest, EvictionResult, EvictionStatus
from hookserver.slo.model import NodeSLOSpec
from qos.snapshot.model import BEStats, BETier, NodeFacts, NodeUsage, PodFacts, QoSSnapshot

__all__ = ["FixedSnapshots", "RecordingBackend", "node", "pod", "slo", "snapshot"]


def slo(**threshold: Any) -> NodeSLOSpec:
    """A NodeSLO with `resourceUsedThresholdWithBE` set from camelCase keys."""
    return NodeSLOSpec.model_validate({"resourceUsedThresholdWithBE": threshold})


def node(cpu_milli: int = 8000, memory: int = 32 << 30, **extra: Any) -> NodeFacts:
    return NodeFacts(name="node-a", cpu_capacity_milli=cpu_milli, memory_capacity_bytes=memory,
                     cpu_allocatable_milli=extra.pop("cpu_allocatable_milli", cpu_milli),
                     memory_allocatable_bytes=extra.pop("memory_allocatable_bytes", memory), **extra)


def pod(name: str, qos: str = "BE", *, cpu: float | None = None, mem: float | None = None, priority: int | None = None,
        batch_milli: int = 0, cpu_milli: int = 0, labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None, terminating: bool = False, cpuset: frozenset[int] = frozenset(),
        namespace: str = "default") -> PodFacts:
    return PodFacts(
        uid=f"uid-{name}", namespace=namespace, name=name, qos=qos, qos_label=qos, priority=priority, phase="Running",
        terminating=terminating, labels=MappingProxyType(dict(labels or {})),
        annotations=MappingProxyType(dict(annotations or {})), cpu_usage_cores=cpu, memory_usage_bytes=mem,
        batch_cpu_request_milli=batch_milli, cpu_request_milli=cpu_milli, cpuset=cpuset,
        cgroup_dirs=(f"kubepods/besteffort/pod{name}",),
    )


def snapshot(**kw: Any) -> QoSSnapshot:
    values: dict[str, Any] = {"now": 1000.0, "slo": slo(enable=True), "node": node()}
    values.update(kw)
    return QoSSnapshot(**values)


@dataclass
class FixedSnapshots:
    """A SnapshotSource returning a scripted snapshot (swap `.snap` between rounds). With `clock`, the
    snapshot's `now` follows it; with `mark_evicted`, pods the guard evicted count as terminating (as the
    real builder does)."""

    snap: QoSSnapshot
    calls: int = 0
    evicted_seen: list[frozenset[str]] = field(default_factory=list)
    clock: list[float] | None = None
    mark_evicted: bool = False

    def build(self, *, evicted: frozenset[str] = frozenset()) -> QoSSnapshot:
        from dataclasses import replace

        self.calls += 1
        self.evicted_seen.append(evicted)
        snap = self.snap
        if self.clock is not None:
            snap = replace(snap, now=self.clock[0])
        if self.mark_evicted and evicted:
            snap = replace(snap, pods=tuple(replace(p, terminating=p.terminating or p.uid in evicted) for p in snap.pods))
        return snap


class RecordingBackend:
    """An eviction backend that records requests; `answers` maps pod name -> status (default EVICTED)."""

    kind = "recording"

    def __init__(self, answers: Mapping[str, EvictionStatus] | None = None) -> None:
        self.answers = dict(answers or {})
        self.requests: list[EvictionRequest] = []

    def evict(self, request: EvictionRequest) -> EvictionResult:
        self.requests.append(request)
        return EvictionResult(request, self.answers.get(request.name, EvictionStatus.EVICTED))


__all__ += ["BEStats", "BETier", "NodeUsage"]


def topology(ncpus: int = 8, *, sockets: int = 1) -> Any:
    """`ncpus` logical CPUs, two hyper-threads per core, Linux numbering: cpu i and i + ncpus/2 are siblings."""
    from hookserver.system.topology import CpuInfo, NodeTopology

    half = ncpus // 2
    per_socket = max(half // sockets, 1)
    cpus = []
    for cpu in range(ncpus):
        core = cpu % half
        socket = core // per_socket
        cpus.append(CpuInfo(cpu=cpu, core=core, socket=socket, numa_node=socket, l3=socket, online=True))
    return NodeTopology(cpus=tuple(cpus), numa=())


TIER = "kubepods/besteffort"
LEVELS = ((TIER,), (f"{TIER}/poda", f"{TIER}/podb"), (f"{TIER}/poda/c1", f"{TIER}/podb/c2"))


def run_round(runner: Any) -> list[Any]:
    """One runner round, then wait for the evictions it handed to its worker thread."""
    plans = runner.round()
    runner.wait_evictions(timeout_s=30)
    return list(plans)
