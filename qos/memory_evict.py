"""Memory evict (koordlet's "memoryEvict", gate BEMemoryEvict, every 1 s, cool-down 4 s; reference §5.3).

Trigger: node memory usage (without page cache) as a whole percent of capacity ≥ memoryEvictThresholdPercent
(default 70). Release: capacity × (usage % − lower %) / 100, lower = memoryEvictLowerPercent or
threshold − 2. BE pods are evicted in order — eviction-priority annotation, then spec.priority ascending,
then memory used descending, then namespace/name — until their memory covers the release. Only a round
that really evicted starts the cool-down; the cool-down also runs from startup, as in koordlet (a fresh
agent looks at the node for a few seconds before it evicts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hookserver.eviction import EVICT_BY_NODE_MEMORY_USAGE, EvictionRequest

from qos.eviction_order import eviction_allowed, eviction_priority
from qos.gates import FeatureGate
from qos.plan import PlannedEviction, QoSPlan, numbers
from qos.reconciler import Reconciler, RoundOutcome, Verdict
from qos.snapshot import PodFacts, QoSSnapshot

__all__ = ["EvictState", "MemoryEvict", "memory_order"]

POLICY = "BEMemoryEvict"


@dataclass(frozen=True, slots=True)
class EvictState:
    """When this reconciler last evicted (the cool-down runs from here)."""

    last_evict: float


def memory_order(pods: list[PodFacts]) -> list[PodFacts]:
    return sorted(pods, key=lambda p: (eviction_priority(p), p.priority or 0, -(p.memory_usage_bytes or 0.0), p.key))


class MemoryEvict(Reconciler):
    name = "MemoryEvict"
    gate = FeatureGate("BEMemoryEvict", False, "evict BE pods when node memory usage passes the threshold")
    default_interval_s = 1.0
    default_cooldown_s = 4.0
    acts_on = ("eviction",)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        if not snap.slo.resource_used_threshold_with_be.enable:
            return Verdict(False, "NodeSLO resourceUsedThresholdWithBE.enable is false")
        return Verdict(True, f"threshold {snap.slo.resource_used_threshold_with_be.memory_evict_threshold_percent}%")

    def initial_state(self, now: float) -> Any:
        return EvictState(last_evict=now)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        st = state if isinstance(state, EvictState) else EvictState(0.0)
        since = snap.now - st.last_evict
        if since < self.cooldown_s:
            return QoSPlan.skip(self.name, f"cooling down ({since:.1f}s of {self.cooldown_s:.0f}s since the last eviction or start)",
                                state=st)
        node, used = snap.node, snap.usage.memory_bytes
        if node is None or node.memory_capacity_bytes <= 0:
            return QoSPlan.skip(self.name, "no node memory capacity", state=st)
        if used is None:
            return QoSPlan.skip(self.name, "no fresh node memory sample", state=st)
        t = snap.slo.resource_used_threshold_with_be
        capacity = node.memory_capacity_bytes
        usage_percent = int(used) * 100 // capacity
        threshold, lower = t.memory_evict_threshold_percent, t.effective_memory_evict_lower_percent()
        values: dict[str, int | float | str] = {
            "capacity_bytes": capacity, "used_bytes": int(used), "usage_percent": usage_percent,
            "threshold_percent": threshold, "lower_percent": lower,
        }
        if usage_percent < threshold:
            return QoSPlan(self.name, f"memory below the {threshold}% threshold (see numbers)", numbers(**values), state=st)
        need = capacity * (usage_percent - lower) // 100
        values["release_target"] = need
        candidates = memory_order([
            p for p in snap.evictable_be_pods() if eviction_allowed(POLICY, p.annotations)
        ])
        message = (
            f"node memory usage {usage_percent}% >= threshold {threshold}%: release {need} bytes "
            f"= {capacity} × ({usage_percent}% − {lower}%)"
        )
        items = tuple(
            PlannedEviction(
                EvictionRequest(
                    pod_uid=p.uid, namespace=p.namespace, name=p.name, reason=EVICT_BY_NODE_MEMORY_USAGE,
                    message=f"{message}; pod uses {int(p.memory_usage_bytes or 0)} bytes", reconciler=self.name,
                    cgroup_dirs=p.cgroup_dirs, labels=p.labels,
                ),
                numbers(releases=float(p.memory_usage_bytes or 0.0), memory_bytes=int(p.memory_usage_bytes or 0),
                        priority=p.priority if p.priority is not None else "", eviction_priority=eviction_priority(p)),
            )
            for p in candidates
        )
        picked = _covering(items, float(need))
        summary = (f"memory {usage_percent}% >= {threshold}%: release {need} bytes; evict {picked} of "
                   f"{len(items)} BE pod(s)")
        if not items:
            summary += " (no BE pod may be evicted)"
        return QoSPlan(self.name, summary, numbers(**values), evictions=items, state=st)

    def commit(self, plan: QoSPlan, outcome: RoundOutcome, state: Any, now: float) -> Any:
        if outcome.evicted > 0:
            return EvictState(last_evict=now)
        return state


def _covering(items: tuple[PlannedEviction, ...], target: float) -> int:
    """How many of `items`, in order, cover `target` (assuming each eviction succeeds)."""
    released = 0.0
    for count, item in enumerate(items, start=1):
        released += float(item.numbers.get("releases", 0) or 0)
        if released >= target:
            return count
    return len(items)
