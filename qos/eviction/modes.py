"""The koordinator v1.7 and v1.8 eviction modes, for CPU and memory alike (cpuevict/cpu_evict.go and
memoryevict/memory_evict.go): by node usage (CPUEvict, MemoryEvict) and by the allocatable ledger
(CPUAllocatableEvict, MemoryAllocatableEvict). Each returns a `ModeResult` for the round (qos.framework.evict_round).

Usage modes: node usage as a whole percent of capacity (CPU: the average over `cpuEvictTimeWindowSeconds`;
memory: the latest sample, without page cache) ≥ the threshold → release capacity × (usage% − lower%) / 100,
counted by the pods' usage. Candidates: pods at or below `evictEnabledPriorityThreshold` that opted in
(`koordinator.sh/eviction-enabled: "true"`) and have a fresh usage sample; order: eviction-priority
annotation, priority, `koordinator.sh/priority` label, usage descending (then name, so plans are stable).

Allocatable modes: per Batch and Mid class, the summed requests (batch-cpu/batch-memory, mid-cpu/mid-memory)
of pods at or below `allocatableEvictPriorityThreshold` > threshold% of the node's allocatable of that
resource → release requests − lower% × allocatable, counted by requests; largest request first within the
same order. Where hookserver differs from koordlet, on purpose:
* a missing or zero allocatable holds the mode for that resource (koordlet would count every request as
  to-release: after a degrade resets batch allocatable to 0 that evicts every batch pod at once). The offer
  is unknown or withdrawn, not "negative"; the usage modes still protect the node;
* only pods whose eviction frees something toward the goal are candidates (koordlet would go on to evict
  pods of a class that is not over, which frees nothing it counts);
* requests of pods of other classes (a priority below the threshold outside the Batch and Mid bands) are
  not counted: they are not charged to a batch or mid ledger.

Config checks are koordlet's; a bad or missing value skips the mode with a reason naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from hookserver.eviction import (
    EVICT_BY_CPU_ALLOCATABLE,
    EVICT_BY_MEMORY_ALLOCATABLE,
    EVICT_BY_NODE_CPU_USAGE,
    EVICT_BY_NODE_MEMORY_USAGE,
)
from hookserver.slo.threshold import ResourceThresholdStrategy

from qos.eviction.order import eviction_allowed, eviction_priority
from qos.framework.evict_round import Candidate, ModeResult
from qos.framework.plan import ReleaseTarget, numbers
from qos.snapshot.priority import (
    BATCH,
    MID,
    MID_VALUE_MAX,
    class_resource,
    eviction_enabled,
    label_priority,
    priority_class,
    priority_value,
    request_resource,
)
from qos.snapshot.model import PodFacts, QoSSnapshot

__all__ = [
    "allocatable_config_problem",
    "allocatable_mode",
    "priority_order",
    "usage_config_problem",
    "usage_mode",
]

_INACTIVE = ("Succeeded", "Failed")


def usage_config_problem(t: ResourceThresholdStrategy, resource: str) -> str:
    """koordlet's isUsedThresholdConfigValid (CPU) / generateConfigCheck(MemoryEvict)."""
    if resource == "cpu":
        threshold, lower, names = t.cpu_evict_threshold_percent, t.effective_cpu_evict_lower_percent(), (
            "cpuEvictThresholdPercent", "cpuEvictLowerPercent")
    else:
        threshold, lower, names = t.memory_evict_threshold_percent, t.effective_memory_evict_lower_percent(), (
            "memoryEvictThresholdPercent", "memoryEvictLowerPercent")
    if threshold is None:
        return f"{names[0]} is not set"
    if threshold < 0:
        return f"{names[0]} {threshold} is negative"
    if lower is not None and lower >= threshold:
        return f"{names[1]} {lower} is not below {names[0]} {threshold}"
    if t.evict_enabled_priority_threshold is None:
        return "evictEnabledPriorityThreshold is not set"
    return ""


def allocatable_config_problem(t: ResourceThresholdStrategy, resource: str) -> str:
    """koordlet's isAllocatableThresholdConfigValid."""
    prefix = "cpu" if resource == "cpu" else "memory"
    threshold, lower = _allocatable_percents(t, resource)
    if threshold is None:
        return f"{prefix}AllocatableEvictThresholdPercent is not set"
    if threshold < 0:
        return f"{prefix}AllocatableEvictThresholdPercent {threshold} is negative"
    if lower is None:
        return f"{prefix}AllocatableEvictLowerPercent is not set"
    if lower >= threshold:
        return f"{prefix}AllocatableEvictLowerPercent {lower} is not below {prefix}AllocatableEvictThresholdPercent {threshold}"
    prio = t.allocatable_evict_priority_threshold
    if prio is None:
        return "allocatableEvictPriorityThreshold is not set"
    if prio > MID_VALUE_MAX:
        return f"allocatableEvictPriorityThreshold {prio} is above {MID_VALUE_MAX}: koord-prod pods must never be evicted"
    return ""


def _allocatable_percents(t: ResourceThresholdStrategy, resource: str) -> tuple[int | None, int | None]:
    if resource == "cpu":
        return t.cpu_allocatable_evict_threshold_percent, t.cpu_allocatable_evict_lower_percent
    return t.memory_allocatable_evict_threshold_percent, t.memory_allocatable_evict_lower_percent


def priority_order(
    snap: QoSSnapshot, mode: str, threshold: int, *, include: Callable[[PodFacts], bool], size: Callable[[PodFacts], float]
) -> list[PodFacts]:
    """koordlet's getPodEvictInfoAndSortByPriority: active pods at or below `threshold`, opted in, allowed by
    their eviction policy; terminating pods stay in (the round counts them as pending release)."""
    pods = [
        p for p in snap.pods
        if p.phase not in _INACTIVE and priority_value(p) <= threshold and eviction_enabled(p)
        and eviction_allowed(mode, p.annotations) and include(p)
    ]
    return sorted(pods, key=lambda p: (eviction_priority(p), priority_value(p), label_priority(p), -size(p), p.key))


def _used(pod: PodFacts, resource: str) -> float | None:
    if resource == "cpu":
        return None if pod.cpu_usage_cores is None else float(int(pod.cpu_usage_cores * 1000))
    return pod.memory_usage_bytes


def _skip(mode: str, why: str, **values: float | int | str) -> ModeResult:
    return ModeResult(mode, f"skipped: {why}", numbers(**values), skipped=why)


def usage_mode(snap: QoSSnapshot, mode: str, resource: str) -> ModeResult:
    """CPUEvict or MemoryEvict."""
    t = snap.slo.resource_used_threshold_with_be
    problem = usage_config_problem(t, resource)
    if problem:
        return _skip(mode, f"invalid NodeSLO: {problem}")
    cpu = resource == "cpu"
    node = snap.node
    capacity = (node.cpu_capacity_milli if cpu else node.memory_capacity_bytes) if node is not None else 0
    if capacity <= 0:
        return _skip(mode, f"no node {resource} capacity")
    if cpu:
        avg = snap.usage.cpu_cores_avg
        if avg is None:
            return _skip(mode, f"no node CPU usage over the {snap.usage.cpu_window_s:.0f}s window")
        used = int(avg * 1000)
    else:
        if snap.usage.memory_bytes is None:
            return _skip(mode, "no fresh node memory sample")
        used = int(snap.usage.memory_bytes)
    threshold = t.cpu_evict_threshold_percent if cpu else t.memory_evict_threshold_percent
    lower = t.effective_cpu_evict_lower_percent() if cpu else t.effective_memory_evict_lower_percent()
    prio = t.evict_enabled_priority_threshold
    assert threshold is not None and lower is not None and prio is not None
    usage_percent = used * 100 // capacity
    unit = "m" if cpu else " bytes"
    values: dict[str, int | float | str] = {
        "capacity": capacity, "used": used, "usage_percent": usage_percent, "threshold_percent": threshold,
        "lower_percent": lower, "priority_threshold": prio,
    }
    if cpu:
        values.update(window_s=snap.usage.cpu_window_s, samples=snap.usage.cpu_avg_count)
    if usage_percent < threshold:
        return ModeResult(mode, f"node {resource} usage {usage_percent}% is below {threshold}%", numbers(**values))
    release = capacity * (usage_percent - lower) // 100
    values["release_target"] = release
    sentence = (f"trigger by koordlet feature {mode}: node {resource} usage {usage_percent}% >= {threshold}%, release "
                f"{release}{unit} = {capacity}{unit} x ({usage_percent}% - {lower}%)")
    pods = priority_order(snap, mode, prio, include=lambda p: _used(p, resource) is not None,
                          size=lambda p: _used(p, resource) or 0.0)
    candidates = tuple(
        Candidate(p, f"{sentence}; pod priority {priority_value(p)} <= {prio}, uses {int(_used(p, resource) or 0)}{unit}",
                  numbers(used=int(_used(p, resource) or 0), priority=priority_value(p),
                          eviction_priority=eviction_priority(p), label_priority=label_priority(p)))
        for p in pods
    )
    key = f"used/{resource}"
    return ModeResult(
        mode, f"node {resource} usage {usage_percent}% >= {threshold}%", numbers(**values),
        reason=EVICT_BY_NODE_CPU_USAGE if cpu else EVICT_BY_NODE_MEMORY_USAGE,
        target=ReleaseTarget(mode, "used", {resource: release}), candidates=candidates,
        contribution=lambda p: {key: _used(p, resource) or 0.0},
    )


def allocatable_mode(snap: QoSSnapshot, mode: str, resource: str) -> ModeResult:
    """CPUAllocatableEvict or MemoryAllocatableEvict."""
    t = snap.slo.resource_used_threshold_with_be
    problem = allocatable_config_problem(t, resource)
    if problem:
        return _skip(mode, f"invalid NodeSLO: {problem}")
    threshold, lower = _allocatable_percents(t, resource)
    prio = t.allocatable_evict_priority_threshold
    assert threshold is not None and lower is not None and prio is not None
    requested: dict[str, int] = {}
    for p in snap.pods:
        if p.phase in _INACTIVE or priority_value(p) > prio or priority_class(p) not in (BATCH, MID):
            continue
        res = request_resource(p, resource)
        requested[res] = requested.get(res, 0) + p.requests.get(res, 0)
    offered: Mapping[str, int] = snap.node.extended_allocatable if snap.node is not None else {}
    values: dict[str, int | float | str] = {"threshold_percent": threshold, "lower_percent": lower, "priority_threshold": prio}
    to_release: dict[str, int] = {}
    notes: list[str] = []
    held: list[str] = []
    for res in sorted(requested):
        req, alloc = requested[res], offered.get(res)
        values[f"requested.{res}"] = req
        if req <= 0:
            continue
        if alloc is None or alloc <= 0:
            values[f"allocatable.{res}"] = "missing" if alloc is None else 0
            held.append(res)
            notes.append(f"holds for {res}: the node offers {'none' if alloc is None else '0'} (the offer is unknown or "
                         f"withdrawn, e.g. after a degrade); {req} requested is not evicted for it, the usage modes still protect the node")
            continue
        values[f"allocatable.{res}"] = alloc
        values[f"requested_percent.{res}"] = req * 100 / alloc
        if req * 100 > threshold * alloc:
            to_release[res] = int(req - lower * alloc / 100)
            values[f"release_target.{res}"] = to_release[res]
    if not to_release:
        why = ("requests within " + f"{threshold}% of allocatable") if not held else (
            f"allocatable of {', '.join(held)} missing or 0: holding (the offer is unknown or withdrawn)")
        return ModeResult(mode, why, numbers(**values), notes=tuple(notes))
    over = {c for c in (BATCH, MID) if class_resource(c, resource) in to_release}

    def frees(p: PodFacts) -> int:
        return p.requests.get(request_resource(p, resource), 0) if priority_class(p) in over else 0

    pods = priority_order(snap, mode, prio, include=lambda p: frees(p) > 0, size=lambda p: float(frees(p)))
    goal = ", ".join(f"{r} {requested[r]} > {threshold}% of {offered.get(r)}" for r in to_release)
    sentence = f"trigger by koordlet feature {mode}: requests {goal}; release down to {lower}%"
    candidates = tuple(
        Candidate(p, f"{sentence}; pod priority {priority_value(p)} <= {prio}, requests {frees(p)} {request_resource(p, resource)}",
                  numbers(request=frees(p), resource=request_resource(p, resource), priority=priority_value(p),
                          eviction_priority=eviction_priority(p), label_priority=label_priority(p)))
        for p in pods
    )
    return ModeResult(
        mode, f"requests over {threshold}% of allocatable ({', '.join(sorted(to_release))})", numbers(**values),
        reason=EVICT_BY_CPU_ALLOCATABLE if resource == "cpu" else EVICT_BY_MEMORY_ALLOCATABLE,
        target=ReleaseTarget(mode, "request", to_release), candidates=candidates,
        contribution=lambda p: {f"request/{request_resource(p, resource)}": float(frees(p))} if frees(p) > 0 else {},
        notes=tuple(notes),
    )

