"""The CPU evictor (koordlet's "CPUEvict" plugin, every 1 s, cool-down 20 s): one round across its modes, in
koordlet's order — BECPUEvict (BE satisfaction, below), CPUAllocatableEvict, CPUEvict (qos.eviction.modes) — each
on when its gate is, with cumulative release (qos.framework.evict_round). The cool-down is the evictor's: a round that
evicted anyone, by any mode, starts it.

BE satisfaction (gate BECPUEvict; reference §5.2):

Over the window (`cpuEvictTimeWindowSeconds`, never shorter than the collect interval) average the BE usage,
request and real limit (the node's batch-cpu allocatable instead of the real limit under
`cpuEvictPolicy: evictByAllocatable`). With too few samples (count × interval < window / 3) do nothing.
Act only when usage / limit ≥ `cpuEvictBEUsageThresholdPercent` (default 90) or the limit is below one core,
and satisfaction = limit / request ≤ `cpuEvictBESatisfactionLowerPercent`:
    release = request × (upper% − satisfaction)           (milli-cores)
then again with the latest samples (the same usage check), and release the smaller of the two. BE pods go
in order — eviction-priority annotation, spec.priority, then usage / request descending, then name — until
their batch-cpu requests cover the release.

The satisfaction thresholds are checked as koordlet checks them: lower in (0, 60], upper in (0, 100) and
≥ lower; both must be set. A bad or missing value skips the mode with a reason naming the field. BE pods
already on their way out count as pending release (their batch-cpu request), never evicted twice.
"""

from __future__ import annotations

from typing import Any

from hookserver.eviction import EVICT_BY_BE_CPU_SATISFACTION
from hookserver.slo.threshold import ResourceThresholdStrategy

from qos.eviction.order import eviction_allowed, eviction_priority
from qos.eviction.modes import allocatable_config_problem, allocatable_mode, usage_config_problem, usage_mode
from qos.framework.evict_round import Candidate, ModeResult
from hookserver.featuregates import FeatureGate
from qos.eviction.resource_evictor import EvictState, ResourceEvictor
from qos.framework.plan import ReleaseTarget, numbers
from qos.snapshot.priority import BATCH_CPU
from qos.snapshot.model import PodFacts, QoSSnapshot

__all__ = ["CPUEvict", "be_satisfaction_mode", "cpu_order", "release_by_satisfaction", "satisfaction_config_problem"]

POLICY = "BECPUEvict"
LOWER_MAX = 60
UPPER_MAX = 100
USAGE_THRESHOLD_DEFAULT = 90
MIN_BATCH_ALLOCATABLE_MILLI = 1


def satisfaction_config_problem(t: ResourceThresholdStrategy) -> str:
    """Why the satisfaction thresholds are unusable, or ""."""
    low, up = t.cpu_evict_be_satisfaction_lower_percent, t.cpu_evict_be_satisfaction_upper_percent
    if low is None or up is None:
        return "cpuEvictBESatisfactionLowerPercent and cpuEvictBESatisfactionUpperPercent must both be set"
    if not 0 < low <= LOWER_MAX:
        return f"cpuEvictBESatisfactionLowerPercent {low} is out of range (0, {LOWER_MAX}]"
    if not 0 < up < UPPER_MAX:
        return f"cpuEvictBESatisfactionUpperPercent {up} is out of range (0, {UPPER_MAX})"
    if up < low:
        return f"cpuEvictBESatisfactionUpperPercent {up} is below cpuEvictBESatisfactionLowerPercent {low}"
    return ""


def release_by_satisfaction(request_milli: float, limit_milli: float, lower: int, upper: int) -> int:
    """request × (upper − satisfaction) when satisfaction = limit / request ≤ lower; else 0."""
    if request_milli <= 0:
        return 0
    satisfaction = limit_milli / request_milli
    if satisfaction > lower / 100:
        return 0
    gap = upper / 100 - satisfaction
    if gap <= 0:
        return 0
    return int(request_milli * gap)


def _usage_high(usage: float, limit: float, threshold: int) -> bool:
    if limit <= 0:
        return False
    if limit < 1000:
        return True
    return usage / limit >= threshold / 100


def _ratio(p: PodFacts) -> float:
    used = int((p.cpu_usage_cores or 0.0) * 1000)
    return used / p.batch_cpu_request_milli if p.batch_cpu_request_milli > 0 else 0.0


def cpu_order(pods: list[PodFacts]) -> list[PodFacts]:
    return sorted(pods, key=lambda p: (eviction_priority(p), p.priority or 0, -_ratio(p), p.key))


def _limit(snap: QoSSnapshot, real_limit: float) -> float:
    t = snap.slo.resource_used_threshold_with_be
    if t.cpu_evict_policy != "evictByAllocatable":
        return real_limit
    alloc = snap.node.batch_cpu_allocatable_milli if snap.node is not None else -1
    if alloc < 0:
        return -1.0
    return float(alloc) if alloc > 0 else float(MIN_BATCH_ALLOCATABLE_MILLI)


def _skip(why: str, **values: float | int | str) -> ModeResult:
    return ModeResult(POLICY, f"skipped: {why}", numbers(**values), skipped=why)


def be_satisfaction_mode(snap: QoSSnapshot) -> ModeResult:
    """BECPUEvict: the release by BE satisfaction, in batch-cpu requests, and the BE pods in order."""
    t = snap.slo.resource_used_threshold_with_be
    problem = satisfaction_config_problem(t)
    if problem:
        return _skip(f"invalid NodeSLO: {problem}")
    assert t.cpu_evict_be_satisfaction_lower_percent is not None and t.cpu_evict_be_satisfaction_upper_percent is not None
    lower, upper = t.cpu_evict_be_satisfaction_lower_percent, t.cpu_evict_be_satisfaction_upper_percent
    threshold = t.cpu_evict_be_usage_threshold_percent or USAGE_THRESHOLD_DEFAULT
    be = snap.be
    interval = max(snap.collect_interval_s, 1e-9)
    avg_limit = _limit(snap, be.avg_limit_milli)
    values: dict[str, int | float | str] = {
        "window_s": be.window_s, "samples": be.count, "avg_usage_milli": be.avg_usage_milli,
        "avg_request_milli": be.avg_request_milli, "avg_limit_milli": avg_limit,
        "usage_threshold_percent": threshold, "lower_percent": lower, "upper_percent": upper,
        "policy": t.cpu_evict_policy,
    }
    if be.count * interval < be.window_s / 3 or be.count == 0:
        return _skip(f"only {be.count} BE samples in the {be.window_s:.0f}s window", **values)
    if avg_limit > 0 and be.avg_request_milli > 0:
        values["avg_satisfaction"] = avg_limit / be.avg_request_milli
    if not _usage_high(be.avg_usage_milli, avg_limit, threshold):
        return ModeResult(POLICY, f"BE usage over the window is below {threshold}% of its limit", numbers(**values))
    if be.avg_request_milli <= 0:
        # No satisfaction without a request (koordlet releases nothing either). Said as it is: a real node's BE
        # pods whose batch-cpu request never reached the sum read "BE satisfaction above 60%" here.
        return ModeResult(POLICY, "no BE batch-cpu request over the window: satisfaction undefined, nothing to "
                          "release", numbers(**values))
    release = release_by_satisfaction(be.avg_request_milli, avg_limit, lower, upper)
    values["release_by_avg_milli"] = release
    if release <= 0:
        return ModeResult(POLICY, f"BE satisfaction above {lower}% over the window", numbers(**values))
    if be.last_usage_milli is None or be.last_request_milli is None or be.last_limit_milli is None:
        return _skip("no fresh BE samples", **values)
    cur_limit = _limit(snap, be.last_limit_milli)
    values.update(last_usage_milli=be.last_usage_milli, last_request_milli=be.last_request_milli,
                  last_limit_milli=cur_limit)
    if not _usage_high(be.last_usage_milli, cur_limit, threshold):
        return ModeResult(POLICY, f"latest BE usage is below {threshold}% of its limit", numbers(**values))
    if be.last_request_milli != be.avg_request_milli or cur_limit != avg_limit:
        now_release = release_by_satisfaction(be.last_request_milli, cur_limit, lower, upper)
        values["release_by_latest_milli"] = now_release
        if now_release <= 0:
            return ModeResult(POLICY, "latest BE satisfaction is above the lower threshold", numbers(**values))
        release = min(release, now_release)
    values["release_target"] = release
    pods = cpu_order([p for p in snap.pods if p.qos_label == "BE" and p.phase not in ("Succeeded", "Failed")
                      and eviction_allowed(POLICY, p.annotations)])
    message = (
        f"BE CPU satisfaction {float(values.get('avg_satisfaction', 0)) * 100:.0f}% (limit {avg_limit:.0f}m / request "
        f"{be.avg_request_milli:.0f}m) <= {lower}% with usage >= {threshold}% of the limit: release {release} milli-CPU"
    )
    candidates = tuple(
        Candidate(p, f"{message}; pod requests {p.batch_cpu_request_milli}m, uses {int((p.cpu_usage_cores or 0) * 1000)}m",
                  numbers(releases=float(p.batch_cpu_request_milli), request_milli=p.batch_cpu_request_milli,
                          used_milli=int((p.cpu_usage_cores or 0.0) * 1000), usage_ratio=_ratio(p),
                          priority=p.priority if p.priority is not None else "", eviction_priority=eviction_priority(p)))
        for p in pods
    )
    return ModeResult(
        POLICY, f"BE satisfaction low (release {release}m batch-cpu)", numbers(**values),
        reason=EVICT_BY_BE_CPU_SATISFACTION, target=ReleaseTarget(POLICY, "request", {BATCH_CPU: release}),
        candidates=candidates, contribution=lambda p: {f"request/{BATCH_CPU}": float(p.batch_cpu_request_milli)},
    )


class CPUEvict(ResourceEvictor):
    name = "CPUEvict"
    # koordlet's order within one round (cpu_evict.go triggerFeatures).
    gates = (
        FeatureGate("BECPUEvict", False, "evict BE pods whose CPU satisfaction stays too low"),
        FeatureGate("CPUAllocatableEvict", False,
                    "evict Batch/Mid pods when their cpu requests exceed the node's batch/mid-cpu allocatable"),
        FeatureGate("CPUEvict", False, "evict pods at or below a priority when node CPU usage passes the threshold"),
    )
    default_interval_s = 1.0
    default_cooldown_s = 20.0
    acts_on = ("eviction",)
    resource = "cpu"

    def mode(self, snap: QoSSnapshot, gate: str) -> ModeResult:
        if gate == POLICY:
            return be_satisfaction_mode(snap)
        if gate == "CPUAllocatableEvict":
            return allocatable_mode(snap, gate, "cpu")
        return usage_mode(snap, gate, "cpu")

    def capacity(self, snap: QoSSnapshot) -> int:
        return snap.node.cpu_capacity_milli if snap.node is not None else 0

    def config_problem(self, snap: QoSSnapshot, gate: str) -> str:
        t = snap.slo.resource_used_threshold_with_be
        if gate == POLICY:
            return satisfaction_config_problem(t)
        if gate == "CPUAllocatableEvict":
            return allocatable_config_problem(t, "cpu")
        return usage_config_problem(t, "cpu")
