"""CPU burst (koordlet's cpuburst plugin; gate CPUBurst, on by default; every 1 s; reference §5.4) for LS pods.

Policy from NodeSLO `cpuBurstStrategy`, overridden per pod by the `koordinator.sh/cpuBurst` annotation
(koordinator's CPUBurstConfig JSON: `policy`, `cpuBurstPercent`, `cfsQuotaBurstPercent`,
`cfsQuotaBurstPeriodSeconds`; fields the pod leaves out come from the node). `none` turns both off,
`cpuBurstOnly` / `cfsQuotaBurstOnly` one each, `auto` both.

(a) Kernel CFS burst: container `cpu.cfs_burst_us` (v2 `cpu.max.burst`) = limit(cores) × cpuBurstPercent /
    100 × period. Mainline kernels refuse a burst above the quota (EINVAL: checked on 6.18), so the value is
    clamped to the container's base quota (quota burst never takes the quota below it) and the plan's
    reason says so. A value the kernel still refused (the file does not show it next round) is not
    planned again for `REFUSED_RETRY_S`, so a bad kernel costs one error per 5 minutes, not one a second.
    Off: burst 0.
(b) User-space quota burst: the share pool (the CPUs not bound to LSE/LSR pods, their usage) is
    `overload` at ≥ sharePoolThresholdPercent, `cooling` at ≥ 0.9 × it, else idle; unknown without a
    fresh node CPU sample. A throttled container (ratio > 0 in the last sample) is scaled ×1.2, others
    ×0.8; overload turns every scale-up into a scale-down, cooling or unknown into hold. The result stays
    in [base, base × cfsQuotaBurstPercent / 100]. A token bucket per container bounds how long it may
    burst: capacity = cfsQuotaBurstPeriodSeconds × (cfsQuotaBurstPercent − 100) (percent-seconds);
    each round it loses (usage% − 100) × Δt while the container uses ≥ 100 % of its limit and gains
    (100 − usage%) × Δt while it uses < 60 %, kept within [−capacity, capacity] as koordlet does; an empty
    bucket (tokens ≤ 0) scales down. −1: no bucket. The pod's
    quota moves by the same delta; one leveled plan (pods, containers) grows the pod first and shrinks
    the container first (executor pass 1 top-down max, pass 2 bottom-up). Off: every container back
    to its base quota (and the pod to the sum).

With the CPUNormalization gate on as well, the two gates no longer fight over LS quota (koordinator#2306): the
hook stands down (hookserver.hooks.plugins) and CPU burst works on the normalized CPU, as #2306 asks: the base
quota is the normalized one, ceil(limit quota / cpu-normalization-ratio) for a ratio above 1 (the hook's rule,
`hookserver.cgroupmath.apply_quota_rule`), so the ceiling, the reset value, the CFS burst (base x
cpuBurstPercent / 100) and the token bucket's usage percent (of the normalized limit) all follow it. A ratio
of 1 or less, or none, changes nothing.

Knobs (qos.framework.knobs): LS containers' `cpu.cfs_burst_us`, LS pods' and containers' `cpu.cfs_quota_us`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hookserver.cgroupmath import apply_quota_rule
from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.slo.model import CPUBurstStrategy
from hookserver.view import cpu_normalization_ratio

from hookserver.featuregates import FeatureGate
from qos.snapshot.kernel import ContainerKernel, PodKernel
from qos.framework.plan import QoSPlan, numbers
from qos.framework.reconciler import Reconciler, Verdict
from qos.snapshot.model import PodFacts, QoSSnapshot

__all__ = [
    "ANNOTATION_CPU_BURST",
    "BurstConfig",
    "BurstState",
    "CPUBurst",
    "TokenBucket",
    "burst_normalization_ratio",
    "node_burst_config",
    "node_burst_state",
    "pod_burst_config",
]

ANNOTATION_CPU_BURST = "koordinator.sh/cpuBurst"
CFS_INCREASE_STEP = 1.2
CFS_DECREASE_STEP = 0.8
COOLING_RATIO = 0.9
SAVING_PERCENT = 60.0
REFUSED_RETRY_S = 300.0
_POLICIES = ("none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto")


@dataclass(frozen=True, slots=True)
class BurstConfig:
    policy: str = "none"
    cpu_burst_percent: int = 1000
    cfs_quota_burst_percent: int = 300
    cfs_quota_burst_period_s: int = -1
    source: str = "node"

    @property
    def cfs_burst(self) -> bool:
        return self.policy in ("auto", "cpuBurstOnly")

    @property
    def quota_burst(self) -> bool:
        return self.policy in ("auto", "cfsQuotaBurstOnly")


def node_burst_config(node: CPUBurstStrategy) -> BurstConfig:
    """The NodeSLO's config, for every pod without the annotation."""
    return BurstConfig(node.policy, node.cpu_burst_percent, node.cfs_quota_burst_percent,
                       node.cfs_quota_burst_period_seconds)


def pod_burst_config(pod: PodFacts, node: CPUBurstStrategy) -> tuple[BurstConfig, str]:
    """The pod's config: the annotation's fields over the node's. A malformed annotation is ignored
    (the node's config applies) and the second value says why."""
    base = node_burst_config(node)
    raw = pod.annotations.get(ANNOTATION_CPU_BURST)
    if not raw:
        return base, ""
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        return base, f"{pod.key}: {ANNOTATION_CPU_BURST} is not JSON ({exc}); node config used"
    if not isinstance(doc, Mapping):
        return base, f"{pod.key}: {ANNOTATION_CPU_BURST} is not an object; node config used"
    policy = doc.get("policy", base.policy) or base.policy
    checks: list[tuple[str, Any, int, int | None]] = [
        ("cpuBurstPercent", doc.get("cpuBurstPercent", base.cpu_burst_percent), 0, 10000),
        ("cfsQuotaBurstPercent", doc.get("cfsQuotaBurstPercent", base.cfs_quota_burst_percent), 100, None),
        ("cfsQuotaBurstPeriodSeconds", doc.get("cfsQuotaBurstPeriodSeconds", base.cfs_quota_burst_period_s), -1, None),
    ]
    if policy not in _POLICIES:
        return base, f"{pod.key}: {ANNOTATION_CPU_BURST} policy {policy!r} unknown (one of {', '.join(_POLICIES)}); node config used"
    values: list[int] = []
    for name, value, lo, hi in checks:
        if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
            return base, f"{pod.key}: {ANNOTATION_CPU_BURST} {name}={value!r} invalid; node config used"
        values.append(value)
    return BurstConfig(str(policy), values[0], values[1], values[2], source="annotation"), ""


def node_burst_state(snap: QoSSnapshot, threshold_percent: int) -> tuple[str, float | None]:
    """("overload" | "cooling" | "idle" | "unknown", share-pool usage ratio)."""
    if snap.usage.cpu_cores is None:
        return "unknown", None
    total_cpus = len(snap.topology.cpus) if snap.topology is not None and snap.topology.cpus else 0
    if not total_cpus and snap.node is not None:
        total_cpus = snap.node.cpu_capacity_milli // 1000
    if total_cpus <= 0:
        return "unknown", None
    exclusive: set[int] = set()
    exclusive_usage = 0.0
    for pod in snap.pods:
        if pod.qos in ("LSE", "LSR") and pod.cpuset and pod.active:
            exclusive |= pod.cpuset
            exclusive_usage += pod.cpu_usage_cores or 0.0
    pool = total_cpus - len(exclusive)
    if pool <= 0:
        return "overload", 1.0
    ratio = max(snap.usage.cpu_cores - exclusive_usage, 0.0) / pool
    threshold = threshold_percent / 100
    if ratio >= threshold:
        return "overload", ratio
    if ratio >= threshold * COOLING_RATIO:
        return "cooling", ratio
    return "idle", ratio


@dataclass(frozen=True, slots=True)
class TokenBucket:
    """Percent-seconds of burst left; `at` when last updated."""

    tokens: float
    at: float

    @staticmethod
    def capacity(cfg: BurstConfig) -> float:
        """period × (percent − 100), never negative: below 100 % koordlet refuses quota burst outright, and a
        negative capacity would turn the bounds [−capacity, capacity] inside out."""
        return float(max(cfg.cfs_quota_burst_period_s * (cfg.cfs_quota_burst_percent - 100), 0))

    def step(self, cfg: BurstConfig, usage_percent: float | None, now: float) -> TokenBucket:
        capacity = self.capacity(cfg)
        dt = max(now - self.at, 0.0)
        tokens = self.tokens
        if usage_percent is not None:
            if usage_percent >= 100:
                tokens -= (usage_percent - 100) * dt
            elif usage_percent < SAVING_PERCENT:
                tokens += (100 - usage_percent) * dt
        # koordlet's burstLimiter.Allow keeps the tokens in [−capacity, capacity]: a long overload owes at most
        # one capacity, so quota burst comes back after the same idle time as on a koordlet node.
        return TokenBucket(max(min(tokens, capacity), -capacity), now)


@dataclass(frozen=True, slots=True)
class BurstState:
    """Per container dir: its token bucket; the burst value planned last round (to notice a refusal) and
    values the kernel refused, with when."""

    buckets: Mapping[str, TokenBucket] = field(default_factory=lambda: MappingProxyType({}))
    planned_burst: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    refused: Mapping[str, tuple[int, float]] = field(default_factory=lambda: MappingProxyType({}))
    # (namespace, pod, container id, container name) -> (cfs burst µs, cfs quota µs) as last planned:
    # koordlet's koordlet_container_scaled_cfs_{burst,quota}_us gauges (qos.cpu.burst_metrics).
    scaled: Mapping[tuple[str, str, str, str], tuple[int | None, int | None]] = field(
        default_factory=lambda: MappingProxyType({}))


def burst_normalization_ratio(snap: QoSSnapshot) -> float | None:
    """The ratio CPU burst normalizes by: the node's cpu-normalization-ratio while the CPUNormalization gate is
    on and the ratio is above 1 (below, the hook writes the unscaled quota too), else None."""
    if not snap.gate_on("CPUNormalization") or snap.node is None:
        return None
    ratio = cpu_normalization_ratio(snap.node.annotations)
    return ratio if ratio is not None and ratio > 1 else None


def _base_quota(c: ContainerKernel, ratio: float | None) -> int:
    """The container's quota from its CPU limit, normalized when `ratio` is set (the hook's rule)."""
    if c.cpu_limit_milli <= 0:
        return 0
    return apply_quota_rule(c.cpu_limit_milli * c.period_us // 1000, cfs_quota_suppress=False,
                            normalization_ratio=ratio)


def _burst_reason(pod: PodFacts, c: ContainerKernel, cfg: BurstConfig, wanted: int, cap: int, target: int,
                  base: int, normalization: float | None) -> str:
    """Why a container's CFS burst is written: the formula, and the clamp to its quota when there was one."""
    if not cfg.cfs_burst:
        reason = f"{pod.key}/{c.name}: CPU burst off ({cfg.policy})"
    elif normalization:
        reason = f"{pod.key}/{c.name}: burst {wanted} = normalized quota {base} × {cfg.cpu_burst_percent}% (ratio {normalization:g})"
    else:
        reason = f"{pod.key}/{c.name}: burst {wanted} = {c.cpu_limit_milli}m × {cfg.cpu_burst_percent}% × {c.period_us}µs"
    if target < wanted:
        reason += f", clamped to the quota {cap} (the kernel refuses a burst above the quota)"
    return reason


class CPUBurst(Reconciler):
    name = "CPUBurst"
    gate = FeatureGate("CPUBurst", True, "CFS burst and user-space CFS quota burst for LS pods")
    default_interval_s = 1.0
    acts_on = ("cgroup",)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        strategy = snap.slo.cpu_burst_strategy
        annotated = any(ANNOTATION_CPU_BURST in p.annotations for p in snap.pods if p.qos == "LS")
        if strategy.policy == "none" and not annotated:
            return Verdict(False, "NodeSLO cpuBurstStrategy.policy is none and no LS pod asks by annotation")
        return Verdict(True, f"policy {strategy.policy}" + (" (pod annotations override)" if annotated else ""))

    def initial_state(self, now: float) -> Any:
        return BurstState()

    def _pods(self, snap: QoSSnapshot) -> list[tuple[PodFacts, PodKernel]]:
        out = []
        pods = snap.kernel.pods
        for pod in snap.pods:
            if pod.qos != "LS" or not pod.active:
                continue
            pk = pods.get(pod.uid)
            if pk is not None and pk.containers:
                out.append((pod, pk))
        return out

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        """Burst back to 0 and every quota back to its base (containers first, then pods: a shrink)."""
        reset = CPUBurstStrategy.model_validate({})
        ratio = burst_normalization_ratio(snap)
        pods = self._pods(snap)
        burst: list[CgroupWrite] = []
        pod_level: list[CgroupWrite] = []
        cont_level: list[CgroupWrite] = []
        for pod, pk in pods:
            delta_sum = 0
            for c in pk.containers:
                if c.burst_us is not None and c.burst_us > 0:
                    burst.append(CgroupWrite(c.dir, CgroupResource.CPU_CFS_BURST, 0, owner=self.name,
                                             reason=f"{pod.key}/{c.name}: CPU burst off ({why})"))
                base = _base_quota(c, ratio)
                if base > 0 and c.quota_us is not None and c.quota_us > base:
                    delta_sum += base - c.quota_us
                    cont_level.append(CgroupWrite(c.dir, CgroupResource.CPU_CFS_QUOTA, base, owner=self.name,
                                                  reason=f"{pod.key}/{c.name}: quota back to base {base} ({why})"))
            if delta_sum and pk.quota_us is not None and pk.quota_us > 0:
                pod_level.append(CgroupWrite(pk.dir, CgroupResource.CPU_CFS_QUOTA, max(pk.quota_us + delta_sum, 1000),
                                             owner=self.name, reason=f"{pod.key}: quota back by {delta_sum} ({why})"))
        writes: list[ResourcePlan] = []
        if burst:
            writes.append(ResourcePlan.single(burst, cacheable=False))
        if cont_level:
            writes.append(ResourcePlan(levels=(tuple(pod_level), tuple(cont_level)), leveled=True, cacheable=False))
        if not writes:
            return QoSPlan.skip(self.name, why, state=BurstState())
        return QoSPlan(self.name, f"disabled ({why}); resetting {len(burst)} bursts, {len(cont_level)} quotas",
                       writes=tuple(writes), state=BurstState())

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        st = state if isinstance(state, BurstState) else BurstState()
        strategy = snap.slo.cpu_burst_strategy
        if "pods" not in snap.kernel.read:
            return QoSPlan.skip(self.name, "no kernel facts read this round", state=st)
        burst_supported = "cpu.cfs_burst_us" in snap.kernel.cgroup_files
        node_state, ratio = node_burst_state(snap, strategy.share_pool_threshold_percent)
        normalization = burst_normalization_ratio(snap)
        notes: list[str] = []
        burst_writes: list[CgroupWrite] = []
        pod_level: list[CgroupWrite] = []
        cont_level: list[CgroupWrite] = []
        buckets: dict[str, TokenBucket] = {}
        planned: dict[str, int] = {}
        refused = dict(st.refused)
        clamped = scaled_up = scaled_down = 0
        scaled: dict[tuple[str, str, str, str], tuple[int | None, int | None]] = {}
        unsupported_noted = False
        node_cfg = node_burst_config(strategy)
        for pod, pk in self._pods(snap):
            # the node's config for a pod without the annotation (most pods): built once a round, not per pod
            cfg, problem = pod_burst_config(pod, strategy) if ANNOTATION_CPU_BURST in pod.annotations else (node_cfg, "")
            if problem:
                notes.append(problem)
            pod_delta = 0
            for c in pk.containers:
                base = _base_quota(c, normalization)
                if base <= 0:
                    continue
                # the limit as the container gets it: normalized (milli-cores of the cluster's base CPU)
                limit_milli = c.cpu_limit_milli / normalization if normalization else float(c.cpu_limit_milli)
                # (a) kernel CFS burst
                if cfg.cfs_burst or (c.burst_us or 0) > 0:
                    if not burst_supported:
                        if cfg.cfs_burst and not unsupported_noted:
                            notes.append("cpu.cfs_burst_us is not offered by this kernel (needs Linux >= 5.14): CFS burst unsupported")
                            unsupported_noted = True
                    else:
                        if normalization:
                            wanted = base * cfg.cpu_burst_percent // 100 if cfg.cfs_burst else 0
                        else:
                            wanted = c.cpu_limit_milli * cfg.cpu_burst_percent * c.period_us // 100_000 if cfg.cfs_burst else 0
                        cap = min(base, c.quota_us) if c.quota_us is not None and c.quota_us > 0 else base
                        target = min(wanted, cap)
                        scaled[(pod.namespace, pod.name, c.id, c.name)] = (target, c.quota_us)
                        if target < wanted:
                            clamped += 1
                        last = st.planned_burst.get(c.dir)
                        if last is not None and c.burst_us is not None and c.burst_us != last:
                            refused[c.dir] = (last, snap.now)
                        ref = refused.get(c.dir)
                        if ref is not None and ref[0] == target and snap.now - ref[1] < REFUSED_RETRY_S:
                            notes.append(f"{pod.key}/{c.name}: burst {target} refused by the kernel at {ref[1]:.0f}; retried after {REFUSED_RETRY_S:.0f}s")
                        elif c.burst_us != target:
                            # the reason only for a write: most rounds write nothing, and the text cost more
                            # than the plan (the flight recorder's replay plans a day of rounds)
                            burst_writes.append(CgroupWrite(c.dir, CgroupResource.CPU_CFS_BURST, target, owner=self.name,
                                                            reason=_burst_reason(pod, c, cfg, wanted, cap, target,
                                                                                 base, normalization)))
                            planned[c.dir] = target
                # (b) user-space quota burst
                if c.quota_us is None or c.quota_us <= 0:
                    continue
                ceil = base * cfg.cfs_quota_burst_percent // 100 if cfg.cfs_quota_burst_percent > 100 else base
                op = "reset"
                if cfg.quota_burst:
                    op = "up" if (c.throttled_ratio or 0.0) > 0 else ("down" if c.throttled_ratio is not None else "hold")
                    if cfg.cfs_quota_burst_period_s >= 0:
                        usage_pct = (c.cpu_usage_cores * 100_000 / limit_milli) if c.cpu_usage_cores is not None else None
                        bucket = st.buckets.get(c.dir) or TokenBucket(TokenBucket.capacity(cfg), snap.now)
                        bucket = bucket.step(cfg, usage_pct, snap.now)
                        buckets[c.dir] = bucket
                        if bucket.tokens <= 0 and op == "up":
                            op = "down"
                    if node_state == "overload" and op in ("up", "hold"):
                        op = "down"
                    elif node_state in ("cooling", "unknown") and op == "up":
                        op = "hold"
                target_q = c.quota_us
                if op == "up":
                    target_q = int(c.quota_us * CFS_INCREASE_STEP)
                elif op == "down":
                    target_q = int(c.quota_us * CFS_DECREASE_STEP)
                elif op == "reset":
                    target_q = base
                target_q = max(base, min(target_q, ceil))
                key = (pod.namespace, pod.name, c.id, c.name)
                scaled[key] = (scaled.get(key, (c.burst_us, None))[0], target_q)
                if target_q == c.quota_us:
                    continue
                delta = target_q - c.quota_us
                pod_delta += delta
                scaled_up += delta > 0
                scaled_down += delta < 0
                cont_level.append(CgroupWrite(
                    c.dir, CgroupResource.CPU_CFS_QUOTA, target_q, owner=self.name,
                    reason=(f"{pod.key}/{c.name}: quota {c.quota_us} -> {target_q} ({op}; throttled "
                            f"{c.throttled_ratio}, node {node_state}, base {base}, ceil {ceil})"),
                ))
            if pod_delta and pk.quota_us is not None and pk.quota_us > 0:
                pod_level.append(CgroupWrite(pk.dir, CgroupResource.CPU_CFS_QUOTA, max(pk.quota_us + pod_delta, 1000),
                                             owner=self.name, reason=f"{pod.key}: pod quota {pk.quota_us} {pod_delta:+d}"))
        # Not cacheable: a write is planned only when the file (read this round) differs, e.g. because the
        # kubelet or a runtime reset it; the executor's write cache must not skip it as "written lately".
        writes: list[ResourcePlan] = []
        if burst_writes:
            writes.append(ResourcePlan.single(burst_writes, cacheable=False))
        if cont_level:
            writes.append(ResourcePlan(levels=(tuple(pod_level), tuple(cont_level)), leveled=True, cacheable=False))
        refused = {d: v for d, v in refused.items() if snap.now - v[1] < REFUSED_RETRY_S}
        new_state = BurstState(MappingProxyType(buckets), MappingProxyType(planned), MappingProxyType(refused),
                               MappingProxyType(scaled))
        summary = (f"{strategy.policy}: node {node_state}; {len(burst_writes)} burst writes ({clamped} clamped to quota), "
                   f"quota up {scaled_up} down {scaled_down}")
        if unsupported_noted:
            summary += "; CFS burst unsupported on this kernel (no cpu.cfs_burst_us)"
        if normalization:
            summary += f"; on the normalized CPU (ratio {normalization:g})"
        values = numbers(node_state=node_state, share_pool_ratio=ratio if ratio is not None else -1.0,
                         burst_writes=len(burst_writes), clamped=clamped, scaled_up=scaled_up, scaled_down=scaled_down)
        return QoSPlan(self.name, summary, values, writes=tuple(writes), notes=tuple(dict.fromkeys(notes)), state=new_state)

    def gauges(self, plan: QoSPlan) -> Mapping[str, float]:
        return MappingProxyType({k: float(v) for k, v in plan.numbers.items() if isinstance(v, int | float)})
