"""The typed inputs of the capacity formula: the node, its pods and their usage. Pure values, no I/O.

Built by `node_facts.py` (from the Node record) and `usage.py` (from the store's pods and time series); the
formula (`formula.py`) reads nothing else, so a test can script any node by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.capacity.quantities import ZERO, Pair
from hookserver.fastinit import fast_frozen_init

__all__ = ["HostAppUsage", "NodeFacts", "PodInput", "UsageFacts", "WindowedUsage"]

_NO_VALUES: Mapping[str, int] = MappingProxyType({})
_NO_OWNERS: Mapping[str, tuple[str, ...]] = MappingProxyType({})


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class WindowedUsage:
    """Usage averaged over the report window (what koord-manager reads from NodeMetric) and over the short
    fast window (None when it is off or holds no sample). The formula counts `effective`, the larger of the
    two per resource: a step up in usage shrinks the offer within the fast window, a step down grows it only
    as the long average follows. Build it with `WindowedUsage.of`."""

    avg: Pair
    fast: Pair | None
    effective: Pair
    set_by: str  # window | fast: which window set the effective figure (either resource)

    @classmethod
    def of(cls, avg: Pair, fast: Pair | None = None) -> WindowedUsage:
        if fast is None or (fast.cpu <= avg.cpu and fast.memory <= avg.memory):
            return cls(avg, fast, avg, "window")
        if fast.cpu >= avg.cpu and fast.memory >= avg.memory:
            return cls(avg, fast, fast, "fast")
        return cls(avg, fast, avg.max(fast), "fast")


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the Node object says. Reserved parts are already max(0, ...)."""

    name: str
    capacity: Pair
    allocatable: Pair
    annotation_reserved: Pair | None = None  # node.koordinator.sh/reservation, None when absent or unreadable
    cpu_normalization_ratio: float | None = None  # node.koordinator.sh/cpu-normalization-ratio
    third_party_batch: Pair = ZERO  # node.koordinator.sh/thirdPartyAllocations, koord-batch entries
    current: Mapping[str, int] = field(default_factory=lambda: _NO_VALUES)  # published resources now on the node
    owners: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _NO_OWNERS)
    notes: tuple[str, ...] = ()  # annotations that did not parse and were ignored

    @property
    def kubelet_reserved(self) -> Pair:
        return (self.capacity - self.allocatable).clamp0()

    @property
    def reserved(self) -> Pair:
        """max(kubelet reserved, the reservation annotation), per resource (koordinator `GetNodeReservation`)."""
        if self.annotation_reserved is None:
            return self.kubelet_reserved
        return self.kubelet_reserved.max(self.annotation_reserved)


@dataclass(frozen=True, slots=True)
class PodInput:
    """One pod the node runs, as the formula sees it."""

    uid: str
    key: str  # namespace/name
    priority_class: str  # koordinator's, with defaults ("" = none)
    qos: str  # koordinator's QoS class (LSE, LSR, LS, BE, SYSTEM or "")
    phase: str
    request: Pair
    usage: WindowedUsage | None  # None: no sample in the window (the pod counts at its request)
    # The NUMA nodes koord-scheduler bound it to (resource-status numaNodeResources); empty: it shares them all.
    numa_nodes: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class HostAppUsage:
    name: str
    priority_class: str
    usage: WindowedUsage


@dataclass(frozen=True, slots=True)
class UsageFacts:
    """The agent's own measurements over the report window."""

    node: WindowedUsage | None  # node usage (mid's "node unused"); None when the window holds no sample
    system: WindowedUsage | None  # node minus pods minus host applications
    host_apps: tuple[HostAppUsage, ...] = ()
    # Usage of pods the store does not list as running (koord-manager's "dangling" pod metrics).
    dangling: tuple[PodInput, ...] = ()
    window_s: float = 300.0
    fast_window_s: float = 0.0
