"""CPU evict by BE satisfaction (koordlet's "CPUEvict" for gate BECPUEvict, every 1 s, cool-down 20 s;
reference §5.2).

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
≥ lower; both must be set. A bad or missing value disables the reconciler with a reason naming the field.
"""

from __future__ import annotations

from typing import Any

from hookserver.eviction import EVICT_BY_BE_CPU_SATISFACTION, EvictionRequest
from hookserver.slo.threshold import ResourceThresholdStrategy

from qos.eviction_order import eviction_allowed, eviction_priority
from qos.gates import FeatureGate
from qos.memory_evict import EvictState, _covering
from qos.plan import PlannedEviction, QoSPlan, numbers
from qos.reconciler import Reconciler, RoundOutcome, Verdict
from qos.snapshot import PodFacts, QoSSnapshot

__all__ = ["CPUEvict", "cpu_order", "release_by_satisfaction", "satisfaction_config_problem"]

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


class CPUEvict(Reconciler):
    name = "CPUEvict"
    gate = FeatureGate("BECPUEvict", False, "evict BE pods whose CPU satisfaction stays too low")
    default_interval_s = 1.0
    default_cooldown_s = 20.0
    acts_on = ("eviction",)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        t = snap.slo.resource_used_threshold_with_be
        if not t.enable:
            return Verdict(False, "NodeSLO resourceUsedThresholdWithBE.enable is false")
        problem = satisfaction_config_problem(t)
        if problem:
            return Verdict(False, f"invalid NodeSLO: {problem}")
        return Verdict(True, f"satisfaction {t.cpu_evict_be_satisfaction_lower_percent}%..{t.cpu_evict_be_satisfaction_upper_percent}%")

    def initial_state(self, now: float) -> Any:
        return EvictState(last_evict=now)

    def _limit(self, snap: QoSSnapshot, real_limit: float) -> float:
        t = snap.slo.resource_used_threshold_with_be
        if t.cpu_evict_policy != "evictByAllocatable":
            return real_limit
        alloc = snap.node.batch_cpu_allocatable_milli if snap.node is not None else -1
        if alloc < 0:
            return -1.0
        return float(alloc) if alloc > 0 else float(MIN_BATCH_ALLOCATABLE_MILLI)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        st = state if isinstance(state, EvictState) else EvictState(0.0)
        since = snap.now - st.last_evict
        if since < self.cooldown_s:
            return QoSPlan.skip(self.name, f"cooling down ({since:.1f}s of {self.cooldown_s:.0f}s since the last eviction or start)",
                                state=st)
        t = snap.slo.resource_used_threshold_with_be
        problem = satisfaction_config_problem(t)
        if problem:
            return QoSPlan.skip(self.name, f"invalid NodeSLO: {problem}", state=st)
        assert t.cpu_evict_be_satisfaction_lower_percent is not None and t.cpu_evict_be_satisfaction_upper_percent is not None
        lower, upper = t.cpu_evict_be_satisfaction_lower_percent, t.cpu_evict_be_satisfaction_upper_percent
        threshold = t.cpu_evict_be_usage_threshold_percent or USAGE_THRESHOLD_DEFAULT
        be = snap.be
        interval = max(snap.collect_interval_s, 1e-9)
        avg_limit = self._limit(snap, be.avg_limit_milli)
        values: dict[str, int | float | str] = {
            "window_s": be.window_s, "samples": be.count, "avg_usage_milli": be.avg_usage_milli,
            "avg_request_milli": be.avg_request_milli, "avg_limit_milli": avg_limit,
            "usage_threshold_percent": threshold, "lower_percent": lower, "upper_percent": upper,
            "policy": t.cpu_evict_policy,
        }
        if be.count * interval < be.window_s / 3 or be.count == 0:
            return QoSPlan.skip(self.name, f"only {be.count} BE samples in the {be.window_s:.0f}s window", state=st, **values)
        if avg_limit > 0 and be.avg_request_milli > 0:
            values["avg_satisfaction"] = avg_limit / be.avg_request_milli
        if not _usage_high(be.avg_usage_milli, avg_limit, threshold):
            return QoSPlan(self.name, f"BE usage over the window is below {threshold}% of its limit (see numbers)",
                           numbers(**values), state=st)
        release = release_by_satisfaction(be.avg_request_milli, avg_limit, lower, upper)
        values["release_by_avg_milli"] = release
        if release <= 0:
            return QoSPlan(self.name, f"BE satisfaction above {lower}% over the window", numbers(**values), state=st)
        if be.last_usage_milli is None or be.last_request_milli is None or be.last_limit_milli is None:
            return QoSPlan.skip(self.name, "no fresh BE samples", state=st, **values)
        cur_limit = self._limit(snap, be.last_limit_milli)
        values.update(last_usage_milli=be.last_usage_milli, last_request_milli=be.last_request_milli,
                      last_limit_milli=cur_limit)
        if not _usage_high(be.last_usage_milli, cur_limit, threshold):
            return QoSPlan(self.name, f"latest BE usage is below {threshold}% of its limit (see numbers)",
                           numbers(**values), state=st)
        if be.last_request_milli != be.avg_request_milli or cur_limit != avg_limit:
            now_release = release_by_satisfaction(be.last_request_milli, cur_limit, lower, upper)
            values["release_by_latest_milli"] = now_release
            if now_release <= 0:
                return QoSPlan(self.name, "latest BE satisfaction is above the lower threshold", numbers(**values), state=st)
            release = min(release, now_release)
        values["release_target"] = release
        candidates = cpu_order([p for p in snap.evictable_be_pods() if eviction_allowed(POLICY, p.annotations)])
        message = (
            f"BE CPU satisfaction {float(values.get('avg_satisfaction', 0)) * 100:.0f}% (limit {avg_limit:.0f}m / request "
            f"{be.avg_request_milli:.0f}m) <= {lower}% with usage >= {threshold}% of the limit: release {release} milli-CPU"
        )
        items = tuple(
            PlannedEviction(
                EvictionRequest(
                    pod_uid=p.uid, namespace=p.namespace, name=p.name, reason=EVICT_BY_BE_CPU_SATISFACTION,
                    message=f"{message}; pod requests {p.batch_cpu_request_milli}m, uses {int((p.cpu_usage_cores or 0) * 1000)}m",
                    reconciler=self.name, cgroup_dirs=p.cgroup_dirs, labels=p.labels,
                ),
                numbers(releases=float(p.batch_cpu_request_milli), request_milli=p.batch_cpu_request_milli,
                        used_milli=int((p.cpu_usage_cores or 0.0) * 1000), usage_ratio=_ratio(p),
                        priority=p.priority if p.priority is not None else "", eviction_priority=eviction_priority(p)),
            )
            for p in candidates
        )
        summary = f"BE satisfaction low: release {release}m; evict {_covering(items, float(release))} of {len(items)} BE pod(s)"
        return QoSPlan(self.name, summary, numbers(**values), evictions=items, state=st)

    def commit(self, plan: QoSPlan, outcome: RoundOutcome, state: Any, now: float) -> Any:
        if outcome.evicted > 0:
            return EvictState(last_evict=now)
        return state
