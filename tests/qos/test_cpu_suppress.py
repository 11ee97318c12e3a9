"""CPU suppress plans on scripted snapshots, with hand-computed budgets, CPU sets and quotas (reference §5.1).

The standard node: 8 CPUs (cores 0-3, siblings i and i+4), capacity 8000m, threshold 65 %.
LS pods use 1.5 + 0.5 = 2.0 cores, a BE pod 1.0; an LS host app 0.2, a BE host app 0.3; node usage 4.0.
system = 4.0 − (2.0 + 1.0) − (0.2 + 0.3) = 0.5 → 500m; reserved 0.
budget = 8000 × 65 // 100 − 2000 − 200 − max(500, 0) = 2500m → ceil(2.5) = 3 CPUs.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from hookserver.executor.plan import CgroupResource
from qos.cpu.suppress import CPUSuppress, SuppressState, suppress_budget
from qos.framework.plan import QoSPlan
from qos.snapshot.model import BETier, HostAppUsage, NodeUsage, QoSSnapshot
from tests.qos.helpers import LEVELS, TIER, node, pod, slo, snapshot, topology

PODS = (pod("ls1", "LS", cpu=1.5), pod("ls2", "LS", cpu=0.5), pod("be1", "BE", cpu=1.0))
USAGE = NodeUsage(cpu_cores=4.0, host_apps=(HostAppUsage("agent", "LS", 0.2), HostAppUsage("batchd", "BE", 0.3)))
ALL = frozenset(range(8))


def snap(*, policy: str = "cpuset", cpuset: frozenset[int] = ALL, quota: int = -1, **kw: Any) -> QoSSnapshot:
    values: dict[str, Any] = {
        "slo": slo(enable=True, cpuSuppressPolicy=policy),
        "pods": PODS, "usage": USAGE, "topology": topology(8),
        "be_tier": BETier(dir=TIER, cpuset=cpuset, quota_us=quota, cpuset_levels=LEVELS),
    }
    values.update(kw)
    return snapshot(**values)


def cpuset_values(plan: QoSPlan) -> dict[str, str]:
    return {w.cgroup_dir: str(w.value) for p in plan.writes for w in p.all_writes()
            if w.resource is CgroupResource.CPUSET_CPUS}


def quota_values(plan: QoSPlan) -> list[int]:
    return [int(w.value) for p in plan.writes for w in p.all_writes() if w.resource is CgroupResource.CPU_CFS_QUOTA]


def test_budget_formula_matches_the_hand_computation() -> None:
    b = suppress_budget(snap())
    assert b is not None
    assert (b.pods_non_be_milli, b.host_apps_non_be_milli, b.system_milli, b.budget_milli) == (2000, 200, 500, 2500)


def test_reserved_wins_over_a_smaller_system_usage() -> None:
    b = suppress_budget(snap(node=node(cpu_allocatable_milli=7000, reserved_cpu_milli=1000)))
    assert b is not None and b.budget_milli == 5200 - 2000 - 200 - 1000


def test_min_percent_raises_the_budget() -> None:
    heavy = (pod("ls1", "LS", cpu=6.0),)
    b = suppress_budget(snap(pods=heavy, usage=NodeUsage(cpu_cores=6.5), slo=slo(enable=True, cpuSuppressMinPercent=20)))
    # 5200 − 6000 − 0 − max(500, 0) = −1300, raised to 8000 × 20 // 100 = 1600.
    assert b is not None and b.budget_milli == 1600


def test_cpuset_three_cpus_whole_core_first() -> None:
    plan = CPUSuppress().plan(snap(), SuppressState())
    # 3 CPUs: the core-0 pair (0, 4), then the single CPU 1.
    assert plan.numbers["cpus"] == 3 and plan.numbers["cpuset"] == "0-1,4"
    values = cpuset_values(plan)
    assert set(values) == {d for level in LEVELS for d in level} and set(values.values()) == {"0-1,4"}
    leveled = [p for p in plan.writes if p.all_writes()[0].resource is CgroupResource.CPUSET_CPUS]
    assert len(leveled) == 1 and leveled[0].leveled
    assert [tuple(w.cgroup_dir for w in level) for level in leveled[0].levels] == list(LEVELS)
    assert "budget 2500m = 8000m × 65% − LS pods 2000m" in leveled[0].all_writes()[0].reason
    assert quota_values(plan) == []  # the quota is already -1


def test_at_least_two_cpus() -> None:
    heavy = (pod("ls1", "LS", cpu=7.5),)
    plan = CPUSuppress().plan(snap(pods=heavy, usage=NodeUsage(cpu_cores=7.6)), SuppressState())
    assert plan.numbers["cpus_wanted"] == 2 and plan.numbers["cpuset"] == "0,4"


def test_growth_is_capped_at_ten_percent_of_the_cpus() -> None:
    idle = (pod("be1", "BE", cpu=0.1),)
    plan = CPUSuppress().plan(snap(pods=idle, usage=NodeUsage(cpu_cores=0.1), cpuset=frozenset({0, 4})), SuppressState())
    # budget 5200 → 6 wanted; from 2 CPUs at most +ceil(0.8) = 1 → 3.
    assert (plan.numbers["cpus_wanted"], plan.numbers["cpus"], plan.numbers["max_increase"]) == (6, 3, 1)
    assert plan.numbers["cpuset"] == "0-1,4"


def test_lsr_and_ls_pools_in_proportion_and_lse_reserved_excluded() -> None:
    status = lambda cpus: {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": cpus})}  # noqa: E731
    pods = PODS + (
        pod("lsr", "LSR", cpu=0.0, annotations=status("2-3,6-7"), cpuset=frozenset({2, 3, 6, 7})),
        pod("lse", "LSE", cpu=0.0, annotations=status("1,5"), cpuset=frozenset({1, 5})),
    )
    plan = CPUSuppress().plan(snap(pods=pods), SuppressState())
    # LSR pool {2,3,6,7}, LS pool {0,4} (1,5 are LSE): 3 × 4 // 6 = 2 from LSR (pair 2,6), 1 from LS (0).
    assert (plan.numbers["lsr_pool"], plan.numbers["ls_pool"]) == (4, 2)
    assert plan.numbers["cpuset"] == "0,2,6"


def test_reserved_cpus_are_never_given_to_be() -> None:
    plan = CPUSuppress().plan(snap(node=node(reserved_cpus=frozenset({0, 4}))), SuppressState())
    assert plan.numbers["cpuset"] == "1-2,5"  # pair (1,5), then 2


def test_an_unchanged_target_writes_only_new_directories() -> None:
    r = CPUSuppress()
    first = r.plan(snap(), SuppressState())
    state = first.state
    second = r.plan(snap(cpuset=frozenset({0, 1, 4})), state)
    assert second.writes == () and second.summary == "cpuset: BE keeps 3 CPUs (0-1,4); unchanged"
    more = LEVELS[:2] + ((*LEVELS[2], f"{TIER}/podb/c3"),)
    third = r.plan(snap(cpuset=frozenset({0, 1, 4}), be_tier=BETier(TIER, frozenset({0, 1, 4}), -1, cpuset_levels=more)), state)
    assert list(cpuset_values(third)) == [f"{TIER}/podb/c3"]
    later = r.plan(replace(snap(cpuset=frozenset({0, 1, 4})), now=1000.0 + 60), state)
    assert len(cpuset_values(later)) == 5  # the periodic refresh rewrites everything


def test_cpuset_policy_restores_a_quota_left_by_cfsquota() -> None:
    plan = CPUSuppress().plan(snap(quota=250_000), SuppressState())
    assert quota_values(plan) == [-1]


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        (-1, [250_000]),  # no quota yet: straight to the target (no step limit)
        (240_000, [250_000]),  # |Δ| 10000 ≥ 1 % of 8 × 100000 = 8000
        (245_000, []),  # |Δ| 5000 < 8000: skipped
        (100_000, [180_000]),  # +150000 capped at 10 % of 8 × 100000 = 80000
    ],
)
def test_cfs_quota_policy(current: int, expected: list[int]) -> None:
    plan = CPUSuppress().plan(snap(policy="cfsQuota", quota=current), SuppressState())
    assert plan.numbers["quota_target_us"] == 250_000
    assert quota_values(plan) == expected


def test_cfs_quota_floor_is_written_even_when_close() -> None:
    heavy = (pod("ls1", "LS", cpu=7.5),)
    plan = CPUSuppress().plan(snap(policy="cfsQuota", quota=2500, pods=heavy, usage=NodeUsage(cpu_cores=7.6)), SuppressState())
    assert plan.numbers["quota_target_us"] == 2000 and quota_values(plan) == [2000]


def test_cfs_quota_policy_restores_the_cpusets() -> None:
    plan = CPUSuppress().plan(snap(policy="cfsQuota", cpuset=frozenset({0, 4})), SuppressState())
    assert set(cpuset_values(plan).values()) == {"0-7"}


def test_disabled_restores_both_mechanisms_once() -> None:
    r = CPUSuppress()
    s = snap(cpuset=frozenset({0, 4}), quota=50_000, slo=slo(enable=False))
    verdict = r.enabled(s)
    assert not verdict.enabled and "enable is false" in verdict.reason
    plan = r.plan_disabled(s, SuppressState(), verdict.reason)
    assert quota_values(plan) == [-1] and set(cpuset_values(plan).values()) == {"0-7"}
    restored = snap(cpuset=ALL, quota=-1, slo=slo(enable=False))
    again = r.plan_disabled(restored, plan.state, verdict.reason)
    assert again.writes == () and "already unrestricted" in again.summary


def test_kubelet_static_policy_narrows_containers_only() -> None:
    plan = CPUSuppress().plan(snap(node=node(kubelet_cpu_manager_policy="static")), SuppressState())
    values = cpuset_values(plan)
    assert values[TIER] == "0-7" and values[f"{TIER}/poda"] == "0-7"
    assert values[f"{TIER}/poda/c1"] == "0-1,4"
    assert all(not p.leveled for p in plan.writes)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"usage": NodeUsage(cpu_cores=None)}, "no fresh node CPU sample"),
        ({"topology": None}, "no CPU topology"),
        ({"be_tier": None}, "BE tier cgroup not found"),
        ({"cpuset": None}, "cannot read"),
    ],
)
def test_missing_inputs_skip_with_a_reason(change: dict[str, Any], why: str) -> None:
    plan = CPUSuppress().plan(snap(**change), SuppressState())
    assert plan.writes == () and why in plan.skipped


def test_gauges_follow_koordlet() -> None:
    r = CPUSuppress()
    assert r.gauges(r.plan(snap(), SuppressState())) == {"suppress:cpuset": 3.0, "ls_used": 2.0}
    assert r.gauges(r.plan(snap(policy="cfsQuota"), SuppressState()))["suppress:cfsQuota"] == 2.5


def test_offline_cpus_are_never_picked_or_restored() -> None:
    topo = topology(8)
    offline = replace(topo, cpus=tuple(replace(c, online=c.cpu not in (0, 4)) for c in topo.cpus))
    plan = CPUSuppress().plan(snap(topology=offline), SuppressState())
    assert plan.numbers["cpuset"] == "1-2,5"  # core 0 (CPUs 0 and 4) is offline: pair (1,5), then 2
    disabled = CPUSuppress().plan_disabled(snap(topology=offline, cpuset=frozenset({1, 5})), SuppressState(), "off")
    assert set(cpuset_values(disabled).values()) == {"1-3,5-7"}


def test_cpuset_odd_cpu_goes_to_the_next_numa_node_like_koordlet() -> None:
    """16 CPUs on 2 sockets / NUMA nodes (cores 0-3 on node 0, 4-7 on node 1, siblings i and i+8), 3 CPUs:
    koordlet takes the pair (0,8) from node 0 and continues the single-CPU turn on node 1 (CPU 4), where
    the whole-core turn stopped; it does not go back to node 0 for CPU 1."""
    plan = CPUSuppress().plan(snap(topology=topology(16, sockets=2), cpuset=frozenset(range(16))), SuppressState())
    assert plan.numbers["cpus"] == 3 and plan.numbers["cpuset"] == "0,4,8"


def test_growth_cap_counts_online_cpus_like_koordlet() -> None:
    """koordlet's cap is ceil(10 % × len(ProcessorInfos)), and lscpu gives offline CPUs no topology, so
    koordlet's list holds online CPUs only. 16 CPUs with the 8 second threads offline: +ceil(0.8) = 1, not
    +ceil(1.6) = 2; from {0, 1} that is 3 CPUs, one per core (no core has two online threads): 0, 1, 2."""
    topo = topology(16)
    half_off = replace(topo, cpus=tuple(replace(c, online=c.cpu < 8) for c in topo.cpus))
    idle = (pod("be1", "BE", cpu=0.1),)
    plan = CPUSuppress().plan(snap(topology=half_off, pods=idle, usage=NodeUsage(cpu_cores=0.1),
                                   cpuset=frozenset({0, 1})), SuppressState())
    assert (plan.numbers["max_increase"], plan.numbers["cpus"], plan.numbers["cpuset"]) == (1, 3, "0-2")
