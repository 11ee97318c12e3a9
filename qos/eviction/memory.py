"""The memory evictor (koordlet's "memoryEvict" plugin, every 1 s, cool-down 4 s): one round across its modes,
in koordlet's order — BEMemoryEvict (below), MemoryAllocatableEvict, MemoryEvict (qos.eviction.modes) — each on
when its gate is, with cumulative release (qos.framework.evict_round).

BE memory (gate BEMemoryEvict; reference §5.3): node memory usage (without page cache) as a whole percent of
capacity ≥ memoryEvictThresholdPercent (default 70). Release: capacity × (usage % − lower %) / 100, lower =
memoryEvictLowerPercent or threshold − 2, counted by the pods' memory usage. BE pods are evicted in order —
eviction-priority annotation, then spec.priority ascending, then memory used descending, then namespace/name —
until their memory covers the release. Only a round that really evicted starts the cool-down; the cool-down
also runs from startup, as in koordlet (a fresh agent looks at the node for a few seconds before it evicts).
"""

from __future__ import annotations

from hookserver.eviction import EVICT_BY_NODE_MEMORY_USAGE
from hookserver.slo.threshold import ResourceThresholdStrategy

from qos.eviction.order import eviction_allowed, eviction_priority
from qos.eviction.modes import allocatable_config_problem, allocatable_mode, usage_config_problem, usage_mode
from qos.framework.evict_round import Candidate, ModeResult
from hookserver.featuregates import FeatureGate
from qos.framework.plan import ReleaseTarget, numbers
from qos.eviction.resource_evictor import EvictState, ResourceEvictor
from qos.snapshot.model import PodFacts, QoSSnapshot

__all__ = ["EvictState", "MemoryEvict", "ResourceEvictor", "be_config_problem", "be_memory_mode", "memory_order"]

POLICY = "BEMemoryEvict"


def memory_order(pods: list[PodFacts]) -> list[PodFacts]:
    return sorted(pods, key=lambda p: (eviction_priority(p), p.priority or 0, -(p.memory_usage_bytes or 0.0), p.key))


def be_config_problem(t: ResourceThresholdStrategy) -> str:
    """koordlet's check for BEMemoryEvict: the lower percent (default threshold − 2) below the threshold."""
    lower, threshold = t.effective_memory_evict_lower_percent(), t.memory_evict_threshold_percent
    if lower >= threshold:
        return f"memoryEvictLowerPercent {lower} is not below memoryEvictThresholdPercent {threshold}"
    return ""


def be_memory_mode(snap: QoSSnapshot) -> ModeResult:
    """BEMemoryEvict: the release by node memory usage, and the BE pods in order."""
    problem = be_config_problem(snap.slo.resource_used_threshold_with_be)
    if problem:
        return ModeResult(POLICY, f"skipped: invalid NodeSLO: {problem}", numbers(), skipped=f"invalid NodeSLO: {problem}")
    node, used = snap.node, snap.usage.memory_bytes
    if node is None or node.memory_capacity_bytes <= 0:
        return ModeResult(POLICY, "skipped: no node memory capacity", numbers(), skipped="no node memory capacity")
    if used is None:
        return ModeResult(POLICY, "skipped: no fresh node memory sample", numbers(), skipped="no fresh node memory sample")
    t = snap.slo.resource_used_threshold_with_be
    capacity = node.memory_capacity_bytes
    usage_percent = int(used) * 100 // capacity
    threshold, lower = t.memory_evict_threshold_percent, t.effective_memory_evict_lower_percent()
    values: dict[str, int | float | str] = {
        "capacity_bytes": capacity, "used_bytes": int(used), "usage_percent": usage_percent,
        "threshold_percent": threshold, "lower_percent": lower,
    }
    if usage_percent < threshold:
        return ModeResult(POLICY, f"memory below the {threshold}% threshold", numbers(**values))
    need = capacity * (usage_percent - lower) // 100
    values["release_target"] = need
    pods = memory_order([p for p in snap.pods if p.qos_label == "BE" and p.phase not in ("Succeeded", "Failed")
                         and eviction_allowed(POLICY, p.annotations)])
    message = (
        f"node memory usage {usage_percent}% >= threshold {threshold}%: release {need} bytes "
        f"= {capacity} × ({usage_percent}% − {lower}%)"
    )
    candidates = tuple(
        Candidate(p, f"{message}; pod uses {int(p.memory_usage_bytes or 0)} bytes",
                  numbers(releases=float(p.memory_usage_bytes or 0.0), memory_bytes=int(p.memory_usage_bytes or 0),
                          priority=p.priority if p.priority is not None else "", eviction_priority=eviction_priority(p)))
        for p in pods
    )
    summary = f"memory {usage_percent}% >= {threshold}%"
    if not candidates:
        summary += " (no BE pod may be evicted)"
    return ModeResult(
        POLICY, summary, numbers(**values), reason=EVICT_BY_NODE_MEMORY_USAGE,
        target=ReleaseTarget(POLICY, "used", {"memory": need}), candidates=candidates,
        contribution=lambda p: {"used/memory": float(p.memory_usage_bytes or 0.0)},
    )


class MemoryEvict(ResourceEvictor):
    name = "MemoryEvict"
    # koordlet's order within one round (memory_evict.go triggerFeatures).
    gates = (
        FeatureGate("BEMemoryEvict", False, "evict BE pods when node memory usage passes the threshold"),
        FeatureGate("MemoryAllocatableEvict", False,
                    "evict Batch/Mid pods when their memory requests exceed the node's batch/mid-memory allocatable"),
        FeatureGate("MemoryEvict", False, "evict pods at or below a priority when node memory usage passes the threshold"),
    )
    default_interval_s = 1.0
    default_cooldown_s = 4.0
    acts_on = ("eviction",)
    resource = "memory"

    def mode(self, snap: QoSSnapshot, gate: str) -> ModeResult:
        if gate == POLICY:
            return be_memory_mode(snap)
        if gate == "MemoryAllocatableEvict":
            return allocatable_mode(snap, gate, "memory")
        return usage_mode(snap, gate, "memory")

    def capacity(self, snap: QoSSnapshot) -> int:
        return snap.node.memory_capacity_bytes if snap.node is not None else 0

    def config_problem(self, snap: QoSSnapshot, gate: str) -> str:
        t = snap.slo.resource_used_threshold_with_be
        if gate == POLICY:
            return be_config_problem(t)
        if gate == "MemoryAllocatableEvict":
            return allocatable_config_problem(t, "memory")
        return usage_config_problem(t, "memory")
