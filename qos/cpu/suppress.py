"""CPU suppress (koordlet's "CPUSuppresss", gate BECPUSuppress, every 1 s; reference §5.1).

BE budget (milli-cores) = capacity × cpuSuppressThresholdPercent / 100
                          − non-BE pod usage − non-BE host-application usage − max(system usage, node reserved),
raised to capacity × cpuSuppressMinPercent / 100 when that is set. System usage is node − all pods − all host
applications (never negative); node reserved is max(kubelet's capacity − allocatable, the koordinator
reservation annotation).

* `cpuset`: ceil(budget / 1000) CPUs, at least 2; growth per round at most ceil(10 % of the online CPUs); taken
  from the LSR and LS pools in proportion, whole cores first, never reserved, exclusive-SYSTEM or LSE CPUs
  (qos.cpu.cpuset_pick). Written to every BE cpuset cgroup (tier, pods, containers) as one leveled plan: the
  executor writes old ∪ new top-down, then the new set bottom-up (§5.9). With the kubelet's static CPU
  manager policy only containers get the set (the tier and pods keep every allowed CPU). The tier's CFS
  quota is restored to -1.
* `cfsQuota`: the tier's `cpu.cfs_quota_us` (v2 `cpu.max`) = budget × 100 µs, at least 2000; skipped when
  |Δ| < 1 % of capacity × period (unless the target is the 2000 floor); increases capped at 10 % of
  capacity × period per round once a quota is set. BE cpusets are restored to every allowed CPU.
* Off (gate or NodeSLO) restores both: quota -1, cpusets = every allowed CPU.

A round that would act on missing data (no fresh node CPU sample, no topology, unreadable tier files)
does nothing and says why: suppressing on a guess could starve BE or fail to protect LS.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.system.cpulist import format_cpu_list

from qos.cpu.cpuset_pick import allowed_cpus, logical_cores, split_pools, suppress_cpuset
from hookserver.featuregates import FeatureGate
from qos.framework.plan import QoSPlan, numbers
from qos.framework.reconciler import Reconciler, Verdict
from qos.snapshot.model import BETier, QoSSnapshot

__all__ = ["CPUSuppress", "SuppressBudget", "SuppressState", "suppress_budget"]

BE_MIN_CPUS = 2
BE_MIN_QUOTA_US = 2000
BE_MAX_INCREASE = 0.1
QUOTA_BYPASS_RATIO = 0.01
CFS_PERIOD_US = 100_000
# Writes of an unchanged target are repeated this often, so a cgroup someone else reset is put right.
REFRESH_S = 60.0


@dataclass(frozen=True, slots=True)
class SuppressBudget:
    capacity_milli: int
    threshold_percent: int
    pods_non_be_milli: int
    host_apps_non_be_milli: int
    system_milli: int
    reserved_milli: int
    min_milli: int | None
    budget_milli: int

    def as_numbers(self) -> dict[str, int | str]:
        out: dict[str, int | str] = {
            "capacity_milli": self.capacity_milli, "threshold_percent": self.threshold_percent,
            "pods_non_be_milli": self.pods_non_be_milli, "host_apps_non_be_milli": self.host_apps_non_be_milli,
            "system_milli": self.system_milli, "reserved_milli": self.reserved_milli,
            "budget_milli": self.budget_milli,
        }
        if self.min_milli is not None:
            out["min_milli"] = self.min_milli
        return out


@dataclass(frozen=True, slots=True)
class SuppressState:
    """What was last planned: the policy in use ("cpuset", "cfsQuota", "restored"), the cpuset target and
    the directories that got it, and when (for the periodic refresh)."""

    policy: str = ""
    target: frozenset[int] = frozenset()
    written: frozenset[str] = frozenset()
    at: float = 0.0


def suppress_budget(snap: QoSSnapshot) -> SuppressBudget | None:
    """The BE CPU budget of §5.1, or None without a node or a fresh node CPU sample."""
    node, usage = snap.node, snap.usage
    if node is None or node.cpu_capacity_milli <= 0 or usage.cpu_cores is None:
        return None
    threshold = snap.slo.resource_used_threshold_with_be
    pods_all = sum(p.cpu_usage_cores for p in snap.pods if p.cpu_usage_cores is not None)
    pods_non_be = sum(p.cpu_usage_cores for p in snap.pods if p.cpu_usage_cores is not None and not p.is_be)
    apps_all = sum(a.cpu_usage_cores for a in usage.host_apps)
    apps_non_be = sum(a.cpu_usage_cores for a in usage.host_apps if a.qos != "BE")
    system = max(usage.cpu_cores - pods_all - apps_all, 0.0)
    pods_milli, apps_milli, system_milli = int(pods_non_be * 1000), int(apps_non_be * 1000), int(system * 1000)
    capacity = node.cpu_capacity_milli
    budget = capacity * threshold.cpu_suppress_threshold_percent // 100
    budget -= pods_milli + apps_milli + max(system_milli, node.reserved_cpu_milli)
    min_milli = None
    if threshold.cpu_suppress_min_percent is not None:
        min_milli = capacity * threshold.cpu_suppress_min_percent // 100
        budget = max(budget, min_milli)
    return SuppressBudget(
        capacity_milli=capacity, threshold_percent=threshold.cpu_suppress_threshold_percent,
        pods_non_be_milli=pods_milli, host_apps_non_be_milli=apps_milli, system_milli=system_milli,
        reserved_milli=node.reserved_cpu_milli, min_milli=min_milli, budget_milli=budget,
    )


def _pool_of(snap: QoSSnapshot) -> dict[int, str]:
    pool: dict[int, str] = {}
    for pod in snap.pods:
        if pod.cpuset and pod.qos in ("LSE", "LSR") and pod.active:
            for cpu in pod.cpuset:
                pool[cpu] = pod.qos
    return pool


def _excluded(snap: QoSSnapshot) -> frozenset[int]:
    node = snap.node
    if node is None:
        return frozenset()
    return node.reserved_cpus | node.system_exclusive_cpus


def _allowed(snap: QoSSnapshot) -> frozenset[int] | None:
    if snap.topology is None or not snap.topology.cpus:
        return None
    lse = frozenset(cpu for cpu, qos in _pool_of(snap).items() if qos == "LSE")
    return allowed_cpus(snap.topology.cpus, excluded=_excluded(snap), lse=lse)


def _cpuset_writes(
    tier: BETier, target: frozenset[int], *, dirs: tuple[tuple[str, ...], ...], reason: str, owner: str,
) -> ResourcePlan:
    text = format_cpu_list(target)
    levels = tuple(
        tuple(CgroupWrite(d, CgroupResource.CPUSET_CPUS, text, owner=owner, reason=reason) for d in level)
        for level in dirs if level
    )
    return ResourcePlan(levels=levels, leveled=True, cacheable=True)


def _quota_write(tier: BETier, quota: int, *, reason: str, owner: str) -> ResourcePlan:
    return ResourcePlan.single([CgroupWrite(tier.dir, CgroupResource.CPU_CFS_QUOTA, quota, owner=owner, reason=reason)])


class CPUSuppress(Reconciler):
    name = "CPUSuppress"
    gate = FeatureGate("BECPUSuppress", True, "suppress BE CPU (cpuset or CFS quota) to keep LS pods' share")
    default_interval_s = 1.0
    acts_on = ("cgroup",)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        if snap.slo.resource_used_threshold_with_be.suppress_policy_in_effect() is None:
            return Verdict(False, "NodeSLO resourceUsedThresholdWithBE.enable is false")
        return Verdict(True, f"policy {snap.slo.resource_used_threshold_with_be.cpu_suppress_policy}")

    def initial_state(self, now: float) -> Any:
        return SuppressState()

    # -- helpers ----------------------------------------------------------------------------------
    def _dirs_needing(
        self, snap: QoSSnapshot, state: SuppressState, target: frozenset[int], policy: str, levels: tuple[tuple[str, ...], ...]
    ) -> tuple[tuple[tuple[str, ...], ...], bool]:
        """The directories to write: all when the target, the policy or the tier changed or the refresh is
        due; else only directories that appeared since (new pods and containers)."""
        tier = snap.be_tier
        assert tier is not None
        full = (
            state.policy != policy or state.target != target or tier.cpuset != target
            or snap.now - state.at >= REFRESH_S
        )
        if full:
            return levels, True
        fresh = tuple(tuple(d for d in level if d not in state.written) for level in levels)
        return fresh, False

    def _restore_cpuset(self, snap: QoSSnapshot, state: SuppressState, why: str) -> tuple[list[ResourcePlan], SuppressState, list[str]]:
        """Every BE cpuset back to every allowed CPU (a growing change: the leveled plan writes it top-down)."""
        tier = snap.be_tier
        if tier is not None and "cpuset" in tier.missing_controllers:
            return [], state, [f"cpuset not restored: the cpuset controller is not enabled on {tier.dir}"]
        allowed = _allowed(snap)
        if tier is None or allowed is None or not allowed:
            return [], state, ["cpuset not restored: no topology or BE tier known"]
        levels = tier.cpuset_levels or ((tier.dir,),)
        dirs, full = self._dirs_needing(snap, state, allowed, "restored", levels)
        if not any(dirs):
            return [], state, []
        reason = f"restore BE cpuset to all {len(allowed)} allowed CPUs ({why})"
        written = frozenset(d for level in levels for d in level) if full else state.written | {d for lv in dirs for d in lv}
        new_state = SuppressState("restored", allowed, written, snap.now if full else state.at)
        return [_cpuset_writes(tier, allowed, dirs=dirs, reason=reason, owner=self.name)], new_state, []

    def _restore_quota(self, snap: QoSSnapshot, why: str) -> list[ResourcePlan]:
        tier = snap.be_tier
        if tier is None or tier.quota_us is None or tier.quota_us == -1:
            return []
        return [_quota_write(tier, -1, reason=f"restore BE tier quota to unlimited ({why})", owner=self.name)]

    # -- rounds -----------------------------------------------------------------------------------
    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        st = state if isinstance(state, SuppressState) else SuppressState()
        writes = self._restore_quota(snap, why)
        cpuset_writes, new_state, notes = self._restore_cpuset(snap, st, why)
        writes += cpuset_writes
        if snap.be_tier is None:
            summary = f"disabled ({why}); no BE tier cgroup on this node"
        else:
            summary = f"disabled ({why}); " + ("restoring BE CPU" if writes else "BE CPU already unrestricted")
        return QoSPlan(self.name, summary, numbers(), writes=tuple(writes), notes=tuple(notes), skipped=why if not writes else "",
                       state=new_state)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        st = state if isinstance(state, SuppressState) else SuppressState()
        budget = suppress_budget(snap)
        if budget is None:
            return QoSPlan.skip(self.name, "no node capacity or no fresh node CPU sample", state=st)
        if snap.be_tier is None:
            return QoSPlan.skip(self.name, "BE tier cgroup not found", state=st, **budget.as_numbers())
        policy = snap.slo.resource_used_threshold_with_be.cpu_suppress_policy
        if policy == "cfsQuota":
            return self._plan_quota(snap, st, budget)
        return self._plan_cpuset(snap, st, budget)

    def _plan_cpuset(self, snap: QoSSnapshot, st: SuppressState, budget: SuppressBudget) -> QoSPlan:
        tier = snap.be_tier
        assert tier is not None
        if snap.topology is None or not snap.topology.cpus:
            return QoSPlan.skip(self.name, "no CPU topology yet (node_info collector)", state=st, **budget.as_numbers())
        if "cpuset" in tier.missing_controllers:
            # A state of the node, not an error: the runner records this plan once, and the round after the
            # controller appears plans the cpuset as usual.
            why = f"cpuset policy unavailable on {tier.dir}: the cpuset controller is not enabled there"
            writes = self._restore_quota(snap, "cpuset policy in use")
            return QoSPlan(self.name, why if writes else f"skipped: {why}", numbers(**budget.as_numbers(), policy="cpuset"),
                           writes=tuple(writes), skipped="" if writes else why, state=st)
        if tier.cpuset is None:
            return QoSPlan.skip(self.name, f"cannot read {tier.dir}/cpuset.cpus", state=st, **budget.as_numbers())
        # koordlet counts len(ProcessorInfos): lscpu gives an offline CPU no topology, so only online CPUs.
        ncpus = sum(1 for c in snap.topology.cpus if c.online)
        wanted = max(math.ceil(budget.budget_milli / 1000), BE_MIN_CPUS)
        max_increase = math.ceil(ncpus * BE_MAX_INCREASE)
        old = len(tier.cpuset)
        count = min(wanted, old + max_increase)
        lsr, ls = split_pools(snap.topology.cpus, excluded=_excluded(snap), pool_of=_pool_of(snap))
        target = frozenset(suppress_cpuset(count, lsr, ls, core_rank=logical_cores(snap.topology.cpus)))
        values = {
            **budget.as_numbers(), "policy": "cpuset", "cpus_wanted": wanted, "cpus": count, "cpus_before": old,
            "max_increase": max_increase, "lsr_pool": len(lsr), "ls_pool": len(ls),
        }
        if not target:
            return QoSPlan.skip(self.name, f"cannot pick {count} CPUs from LSR {len(lsr)} + LS {len(ls)}",
                                state=st, **values)
        writes = self._restore_quota(snap, "cpuset policy in use")
        text = format_cpu_list(target)
        reason = (
            f"BE cpuset {text} ({count} CPUs): budget {budget.budget_milli}m = {budget.capacity_milli}m × "
            f"{budget.threshold_percent}% − LS pods {budget.pods_non_be_milli}m − LS host apps "
            f"{budget.host_apps_non_be_milli}m − max(system {budget.system_milli}m, reserved {budget.reserved_milli}m)"
            + (f", min {budget.min_milli}m" if budget.min_milli is not None else "")
            + (f"; growth capped at +{max_increase}" if wanted > count else "")
        )
        levels = tier.cpuset_levels or ((tier.dir,),)
        notes: list[str] = []
        node = snap.node
        if node is not None and node.kubelet_cpu_manager_policy == "static":
            # The kubelet owns pod-level cpusets under the static policy: only containers are narrowed; the
            # tier and pods keep every allowed CPU. Both are plain cacheable plans (the tier and pods only
            # grow, containers only shrink), so the executor's write cache keeps quiet rounds free.
            allowed = _allowed(snap) or target
            upper, containers = tuple(levels[:2]), tuple(levels[2:3])
            policy_name, dirs, full = "cpuset-static", containers, True
            if upper:
                writes.append(replace(_cpuset_writes(tier, allowed, dirs=upper, owner=self.name,
                                                     reason="kubelet static CPU policy: tier and pods keep every allowed CPU"),
                                      leveled=False))
            if any(containers):
                writes.append(replace(_cpuset_writes(tier, target, dirs=containers, reason=reason, owner=self.name),
                                      leveled=False))
        else:
            policy_name = "cpuset"
            dirs, full = self._dirs_needing(snap, st, target, policy_name, levels)
            if any(dirs):
                writes.append(_cpuset_writes(tier, target, dirs=dirs, reason=reason, owner=self.name))
        all_dirs = frozenset(d for level in levels for d in level)
        written = all_dirs if full else st.written | {d for level in dirs for d in level}
        new_state = SuppressState(policy_name, target, written, snap.now if full else st.at)
        # A round that writes nothing says so without its (fluctuating) budget: the audit records a no-op
        # plan only when its summary changes. The numbers carry the budget either way.
        if writes:
            summary = f"cpuset: BE gets {count} CPUs ({text}) of budget {budget.budget_milli}m"
        else:
            summary = f"cpuset: BE keeps {count} CPUs ({text}); unchanged"
        return QoSPlan(self.name, summary, numbers(**values, cpuset=text), writes=tuple(writes), notes=tuple(notes),
                       state=new_state)

    def _plan_quota(self, snap: QoSSnapshot, st: SuppressState, budget: SuppressBudget) -> QoSPlan:
        tier = snap.be_tier
        assert tier is not None
        if "cpu" in tier.missing_controllers:
            return QoSPlan.skip(self.name, f"cfsQuota policy unavailable on {tier.dir}: the cpu controller is not "
                                "enabled there", state=st, **budget.as_numbers())
        if tier.quota_us is None:
            return QoSPlan.skip(self.name, f"cannot read the quota of {tier.dir}", state=st, **budget.as_numbers())
        capacity_cores = math.ceil(budget.capacity_milli / 1000)
        target = max(budget.budget_milli * CFS_PERIOD_US // 1000, BE_MIN_QUOTA_US)
        current = tier.quota_us
        min_delta = capacity_cores * CFS_PERIOD_US * QUOTA_BYPASS_RATIO
        max_increase = int(capacity_cores * CFS_PERIOD_US * BE_MAX_INCREASE)
        values: dict[str, Any] = {
            **budget.as_numbers(), "policy": "cfsQuota", "quota_target_us": target, "quota_before_us": current,
            "min_delta_us": min_delta, "max_increase_us": max_increase,
        }
        writes: list[ResourcePlan] = []
        cpuset_writes, new_state, notes = self._restore_cpuset(snap, st, "cfsQuota policy in use")
        writes += cpuset_writes
        quota = target
        if abs(target - current) < min_delta and target != BE_MIN_QUOTA_US:
            summary = f"cfsQuota: {target}µs is within {min_delta:.0f}µs of the current {current}µs; unchanged"
            quota = current
        else:
            capped = current != -1 and target - current > max_increase
            if capped:
                quota = current + max_increase
            raw = budget.budget_milli * CFS_PERIOD_US // 1000
            reason = (
                f"BE tier quota {quota}µs: budget {budget.budget_milli}m × 100 = {raw}µs"
                + (f", raised to the {BE_MIN_QUOTA_US}µs floor" if raw < BE_MIN_QUOTA_US else "")
                + (f", increase capped at +{max_increase}µs from {current}µs" if capped else "")
            )
            writes.append(_quota_write(tier, quota, reason=reason, owner=self.name))
            before = "unlimited" if current == -1 else f"{current}µs"
            summary = f"cfsQuota: BE tier quota {before} -> {quota}µs (budget {budget.budget_milli}m)"
        values["quota_us"] = quota
        return QoSPlan(self.name, summary, numbers(**values), writes=tuple(writes), notes=tuple(notes), state=new_state)

    def gauges(self, plan: QoSPlan) -> Mapping[str, float]:
        n = plan.numbers
        out: dict[str, float] = {}
        if n.get("policy") == "cpuset" and isinstance(n.get("cpus"), int):
            out["suppress:cpuset"] = float(n["cpus"])
        if n.get("policy") == "cfsQuota" and isinstance(n.get("quota_us"), int):
            out["suppress:cfsQuota"] = float(n["quota_us"]) / CFS_PERIOD_US
        if isinstance(n.get("pods_non_be_milli"), int):
            out["ls_used"] = float(n["pods_non_be_milli"]) / 1000
        return MappingProxyType(out)
