"""The one input every planner gets: a frozen picture of the node at the start of a round.

Built by `qos.readers.SnapshotBuilder` from the store (pods, node, NodeSLO, the collectors' time series)
and a few cgroup reads (the BE tier's current cpuset and quota, its directories). Planners read only
this, so a test scripts a snapshot with the reference's numbers and checks the plan, and `hookctl qos
plan` can replay a planner on the live snapshot under another NodeSLO (`with_slo`).

Units: CPU in milli-cores (int) or cores (float, named `_cores`), memory in bytes, times in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from hookserver.slo.model import NodeSLOSpec
from hookserver.system.topology import NodeTopology

from qos.snapshot.kernel import KernelFacts

__all__ = [
    "ANNOTATION_EVICTION_POLICY",
    "ANNOTATION_EVICTION_PRIORITY",
    "ANNOTATION_RESOURCE_STATUS",
    "BEStats",
    "BETier",
    "ContainerFacts",
    "HostAppUsage",
    "NodeFacts",
    "NodeUsage",
    "PodFacts",
    "QoSSnapshot",
]

ANNOTATION_EVICTION_POLICY = "koordinator.sh/eviction-policy"
ANNOTATION_EVICTION_PRIORITY = "koordinator.sh/eviction-priority"
ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
LABEL_EVICTION_ENABLED = "koordinator.sh/eviction-enabled"

_EMPTY: Mapping[str, str] = MappingProxyType({})
_EMPTY_INT: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ContainerFacts:
    """A running container of a pod: its cgroup dir (relative to each hierarchy root; "" when unknown) and
    its spec's requests and limits (resource name -> quantity text, as the pod spec says; empty in standalone
    mode, where only the runtime's view is known)."""

    id: str
    name: str
    cgroup_dir: str = ""
    requests: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    limits: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class PodFacts:
    """A pod as the planners see it. `qos` is the koordinator class (LSE, LSR, LS, BE, SYSTEM, "" unknown);
    usage is the collectors' latest sample (None: no fresh sample). `cpuset` is the CPUs the scheduler
    bound the pod to (resource-status annotation), empty when none. `cgroup_dirs` is the pod's dir first,
    then its containers'."""

    uid: str
    namespace: str
    name: str
    qos: str = ""
    # The `koordinator.sh/qosClass` label itself ("" without one). Evictions act on pods labelled BE only
    # (koordlet's GetPodQoSClassRaw): a plain kube-BestEffort pod counts as BE for suppress, never as prey.
    qos_label: str = ""
    priority: int | None = None
    priority_class: str = ""
    phase: str = ""
    terminating: bool = False
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    cpu_usage_cores: float | None = None
    memory_usage_bytes: float | None = None
    batch_cpu_request_milli: int = 0
    cpu_request_milli: int = 0
    # Requests summed over the containers, by resource: `cpu` in milli-cores, `kubernetes.io/batch-cpu` and
    # `kubernetes.io/mid-cpu` as their own counts (already milli-cores), memory resources in bytes. Only the
    # resources the eviction modes read (qos.priority.REQUEST_RESOURCES); absent means none requested.
    requests: Mapping[str, int] = field(default_factory=lambda: _EMPTY_INT)
    cpuset: frozenset[int] = frozenset()
    cgroup_dirs: tuple[str, ...] = ()
    containers: tuple[ContainerFacts, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_be(self) -> bool:
        return self.qos == "BE"

    @property
    def active(self) -> bool:
        return not self.terminating and self.phase not in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """Capacity and allocatable from the Node (or the host in standalone mode). `reserved_cpu_milli` is
    max(kubelet reservation = capacity − allocatable, the koordinator reservation annotation);
    `reserved_cpus` the CPUs the reservation annotation pins; `batch_cpu_allocatable_milli` the node's
    `kubernetes.io/batch-cpu` allocatable (-1 when the node has none)."""

    name: str
    cpu_capacity_milli: int
    memory_capacity_bytes: int
    cpu_allocatable_milli: int = 0
    memory_allocatable_bytes: int = 0
    reserved_cpu_milli: int = 0
    reserved_cpus: frozenset[int] = frozenset()
    system_exclusive_cpus: frozenset[int] = frozenset()
    batch_cpu_allocatable_milli: int = -1
    # The koordinator extended resources the node offers (`kubernetes.io/batch-cpu`, `batch-memory`,
    # `mid-cpu`, `mid-memory`) as published in its allocatable; a resource the node does not list is absent
    # (the allocatable eviction modes tell "missing" from "0").
    extended_allocatable: Mapping[str, int] = field(default_factory=lambda: _EMPTY_INT)
    kubelet_cpu_manager_policy: str = "none"
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class HostAppUsage:
    name: str
    qos: str
    cpu_usage_cores: float


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """The collectors' latest node samples (None: no sample within `max_age_s` of the round)."""

    cpu_cores: float | None = None
    # Node CPU usage averaged over koordlet's CPU-evict window (`cpuEvictTimeWindowSeconds`, at least the
    # collect interval), with the number of samples behind it; what CPUEvict compares to its threshold.
    cpu_cores_avg: float | None = None
    cpu_avg_count: int = 0
    cpu_window_s: float = 0.0
    memory_bytes: float | None = None
    memory_total_bytes: float | None = None
    system_cpu_cores: float | None = None
    host_apps: tuple[HostAppUsage, ...] = ()


@dataclass(frozen=True, slots=True)
class BEStats:
    """BE CPU usage, request and real limit in milli-cores: averaged over `window_s` (with the number of
    samples behind each average) and the latest samples (None when missing)."""

    window_s: float = 0.0
    avg_usage_milli: float = 0.0
    avg_request_milli: float = 0.0
    avg_limit_milli: float = 0.0
    count: int = 0
    last_usage_milli: float | None = None
    last_request_milli: float | None = None
    last_limit_milli: float | None = None


@dataclass(frozen=True, slots=True)
class BETier:
    """The kubelet's BestEffort tier as it is now. `dir` is relative to each hierarchy root
    (`kubepods/besteffort` or `kubepods.slice/kubepods-besteffort.slice`). `cpuset_levels` are the tier's
    cpuset directories by depth: (tier,), (pods…), (containers…), as found on disk. `cpuset` and
    `quota_us` are what the tier's files hold now (None: unreadable); `period_us` its CFS period.
    `missing_controllers`: of cpu and cpuset, those the tier does not have (v2: its parent does not hand them
    down; v1: no tier directory in that hierarchy): planners leave their knobs alone there, calmly."""

    dir: str
    cpuset: frozenset[int] | None = None
    quota_us: int | None = None
    period_us: int = 100_000
    cpuset_levels: tuple[tuple[str, ...], ...] = ()
    v2: bool = False
    missing_controllers: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class QoSSnapshot:
    now: float
    slo: NodeSLOSpec
    node: NodeFacts | None
    pods: tuple[PodFacts, ...] = ()
    usage: NodeUsage = field(default_factory=NodeUsage)
    be: BEStats = field(default_factory=BEStats)
    be_tier: BETier | None = None
    topology: NodeTopology | None = None
    collect_interval_s: float = 1.0
    slo_sources: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    slo_origin: str = "store"  # "store", or the file a replay was asked to plan under
    stale: bool = False
    # Per-pod CFS files, optional kernel files, sysctls, block devices and resctrl (part-2 reconcilers).
    kernel: KernelFacts = field(default_factory=KernelFacts)
    # The feature gates as the runner resolved them, for reconcilers that declare several (one per mode).
    # None: not told (a planner test calls `plan` directly), every mode of the reconciler counts as on.
    feature_gates: Mapping[str, bool] | None = None

    def gate_on(self, name: str) -> bool:
        return True if self.feature_gates is None else bool(self.feature_gates.get(name, False))

    def with_slo(self, slo: NodeSLOSpec, *, origin: str, sources: Mapping[str, str] | None = None) -> QoSSnapshot:
        """The same node under another NodeSLO (replay)."""
        return replace(self, slo=slo, slo_origin=origin, slo_sources=MappingProxyType(dict(sources or {})))

    def be_pods(self) -> list[PodFacts]:
        return [p for p in self.pods if p.is_be]

    def evictable_be_pods(self) -> list[PodFacts]:
        """Pods labelled BE that are still running and not already on their way out."""
        return [p for p in self.pods if p.qos_label == "BE" and p.active]
