"""Memory and CPU eviction plans on scripted snapshots with hand-computed amounts and orders (§5.2, §5.3)."""

from __future__ import annotations

from typing import Any

import pytest

from qos.eviction.cpu import CPUEvict, release_by_satisfaction
from qos.eviction.memory import EvictState, MemoryEvict
from qos.framework.evict_round import walk
from qos.framework.plan import QoSPlan
from qos.framework.reconciler import RoundOutcome
from qos.snapshot.model import BEStats, NodeUsage, QoSSnapshot
from tests.qos.helpers import node, pod, slo, snapshot

CAP = 10_000_000_000
M = 1_000_000


def names(plan: QoSPlan) -> list[str]:
    return [e.request.name for e in plan.evictions]


def covering(plan: QoSPlan) -> list[str]:
    """Whom the round evicts if every eviction goes through."""
    return [e.request.name for e in walk(plan.release_targets, plan.evictions, lambda item: True).picked()]


# -- memory --------------------------------------------------------------------------------------

MEM_PODS = (
    pod("p1", priority=100, mem=300 * M), pod("p2", priority=100, mem=500 * M),
    pod("p3", priority=50, mem=100 * M), pod("a-p4", priority=100, mem=500 * M),
    pod("ls", "LS", priority=0, mem=4000 * M),
)


def mem_snap(used: float = 7_250_000_000, **kw: Any) -> QoSSnapshot:
    values: dict[str, Any] = {"node": node(memory=CAP), "pods": MEM_PODS, "usage": NodeUsage(memory_bytes=used),
                              "slo": slo(enable=True)}
    values.update(kw)
    return snapshot(**values)


OLD = EvictState(last_evict=0.0)


def test_memory_release_and_order() -> None:
    plan = MemoryEvict().plan(mem_snap(), OLD)
    # 72 % ≥ 70 %: release 10e9 × (72 − 68) / 100 = 400 MB.
    assert (plan.numbers["BEMemoryEvict.usage_percent"], plan.numbers["BEMemoryEvict.lower_percent"], plan.numbers["BEMemoryEvict.release_target"]) == (72, 68, 400 * M)
    # priority 50 first; then priority 100 by memory descending, name breaking the 500 MB tie.
    assert names(plan) == ["p3", "a-p4", "p2", "p1"]
    assert covering(plan) == ["p3", "a-p4"]
    assert plan.evictions[0].request.reason == "EvictPodByNodeMemoryUsage"
    assert "400000000 bytes" in plan.evictions[0].request.message


def test_memory_below_threshold_does_nothing() -> None:
    plan = MemoryEvict().plan(mem_snap(used=6_999_999_999), OLD)  # 69.99 % truncates to 69
    assert plan.evictions == () and plan.numbers["BEMemoryEvict.usage_percent"] == 69 and "below the 70% threshold" in plan.summary


def test_memory_lower_percent_from_the_nodeslo() -> None:
    plan = MemoryEvict().plan(mem_snap(slo=slo(enable=True, memoryEvictThresholdPercent=70, memoryEvictLowerPercent=60)), OLD)
    assert plan.numbers["BEMemoryEvict.release_target"] == CAP * 12 // 100


def test_memory_eviction_labels_and_annotations() -> None:
    pods = (
        pod("p1", priority=100, mem=300 * M, annotations={"koordinator.sh/eviction-priority": "-5"}),
        pod("p2", priority=100, mem=500 * M, annotations={"koordinator.sh/eviction-policy": '["BECPUEvict"]'}),
        pod("p3", priority=50, mem=100 * M, annotations={"koordinator.sh/eviction-policy": "[BEMemoryEvict"}),
        pod("p5", priority=100, mem=50 * M, annotations={"koordinator.sh/eviction-policy": '["BEMemoryEvict"]'}),
        pod("gone", priority=0, mem=900 * M, terminating=True),
    )
    plan = MemoryEvict().plan(mem_snap(pods=pods), OLD)
    # p2 not by this policy, p3 unparsable policy; gone is already terminating: listed as pending, never evicted.
    assert names(plan) == ["p1", "gone", "p5"] and [e.pending for e in plan.evictions] == [False, True, False]
    # 400 MB: p1 (300 MB) evicted, then gone's 900 MB counts as on its way out: nobody else goes.
    assert covering(plan) == ["p1"]


def test_memory_cooldown_and_commit() -> None:
    r = MemoryEvict()
    assert r.initial_state(500.0) == EvictState(500.0)
    cooling = r.plan(mem_snap(), EvictState(last_evict=1000.0 - 2.0))
    assert cooling.evictions == () and "cooling down (2.0s of 4s" in cooling.skipped
    plan = r.plan(mem_snap(), OLD)
    assert r.commit(plan, RoundOutcome(dry_run=False, evicted=2), OLD, 1000.0) == EvictState(1000.0)
    assert r.commit(plan, RoundOutcome(dry_run=False, evicted=0), OLD, 1000.0) == OLD  # refused: no cool-down


def test_memory_missing_sample_skips() -> None:
    assert "no fresh node memory sample" in MemoryEvict().plan(mem_snap(usage=NodeUsage()), OLD).skipped


# -- CPU -----------------------------------------------------------------------------------------

CPU_SLO = slo(enable=True, cpuEvictBESatisfactionLowerPercent=60, cpuEvictBESatisfactionUpperPercent=90,
              cpuEvictBEUsageThresholdPercent=90, cpuEvictTimeWindowSeconds=60)
CPU_PODS = (
    pod("a", cpu=1.0, batch_milli=4000), pod("b", cpu=0.5, batch_milli=4000), pod("c", cpu=0.4, batch_milli=2000),
    pod("d", cpu=3.0, batch_milli=3000, priority=5),
    pod("e", cpu=0.1, batch_milli=1000, annotations={"koordinator.sh/eviction-priority": "-1"}),
    pod("ls", "LS", cpu=4.0, cpu_milli=4000),
)
BE = BEStats(window_s=60, avg_usage_milli=1900, avg_request_milli=10000, avg_limit_milli=2000, count=60,
             last_usage_milli=2400, last_request_milli=10000, last_limit_milli=2500)


def cpu_snap(**kw: Any) -> QoSSnapshot:
    values: dict[str, Any] = {"slo": CPU_SLO, "pods": CPU_PODS, "be": BE}
    values.update(kw)
    return snapshot(**values)


def test_release_formula() -> None:
    assert release_by_satisfaction(10000, 2000, 60, 90) == 7000  # 10000 × (0.9 − 0.2)
    assert release_by_satisfaction(10000, 7000, 60, 90) == 0  # satisfaction 0.7 > 0.6
    assert release_by_satisfaction(0, 2000, 60, 90) == 0


def test_cpu_release_is_the_smaller_of_window_and_latest() -> None:
    plan = CPUEvict().plan(cpu_snap(), OLD)
    # window: usage 1900/2000 ≥ 90 %, 10000 × (0.9 − 0.2) = 7000; latest: 2400/2500 ≥ 90 %,
    # 10000 × (0.9 − 0.25) = 6500 → 6500.
    assert plan.numbers["BECPUEvict.release_by_avg_milli"] == 7000 and plan.numbers["BECPUEvict.release_by_latest_milli"] == 6500
    assert plan.numbers["BECPUEvict.release_target"] == 6500
    # e (eviction-priority −1) first; priority 0: a 0.25, c 0.2, b 0.125 by usage/request; d (priority 5) last.
    assert names(plan) == ["e", "a", "c", "b", "d"]
    assert covering(plan) == ["e", "a", "c"]  # 1000 + 4000 + 2000 = 7000 ≥ 6500
    assert plan.evictions[0].request.reason == "EvictPodByBECPUSatisfaction"


def test_cpu_same_latest_values_use_the_window_release() -> None:
    be = BEStats(window_s=60, avg_usage_milli=1900, avg_request_milli=10000, avg_limit_milli=2000, count=60,
                 last_usage_milli=1990, last_request_milli=10000, last_limit_milli=2000)
    plan = CPUEvict().plan(cpu_snap(be=be), OLD)
    assert plan.numbers["BECPUEvict.release_target"] == 7000 and "BECPUEvict.release_by_latest_milli" not in plan.numbers


@pytest.mark.parametrize(
    ("be", "why"),
    [
        (BEStats(60, 1700, 10000, 2000, 60, 2400, 10000, 2500), "below 90%"),  # 0.85 < 0.9
        (BEStats(60, 1900, 10000, 7000, 60, 1950, 10000, 7000), "below 90%"),  # usage 1900/7000
        (BEStats(60, 1990, 2000, 2000, 60, 1990, 2000, 2000), "satisfaction above 60%"),  # 1.0
        (BEStats(60, 1900, 10000, 2000, 19, 2400, 10000, 2500), "only 19 BE samples"),  # 19 < 60 / 3
        (BEStats(60, 1900, 10000, 2000, 60, 1500, 10000, 2000), "latest BE usage"),  # latest 0.75
    ],
)
def test_cpu_no_eviction_when(be: BEStats, why: str) -> None:
    plan = CPUEvict().plan(cpu_snap(be=be), OLD)
    assert plan.evictions == () and why in (plan.summary + plan.skipped)


def test_cpu_limit_below_one_core_triggers_regardless_of_usage() -> None:
    be = BEStats(60, 100, 4000, 800, 60, 100, 4000, 800)  # usage 12 % of an 800m limit
    plan = CPUEvict().plan(cpu_snap(be=be), OLD)
    assert plan.numbers["BECPUEvict.release_target"] == int(4000 * (0.9 - 0.2))


def test_cpu_evict_by_allocatable_uses_batch_allocatable() -> None:
    s = cpu_snap(slo=slo(enable=True, cpuEvictBESatisfactionLowerPercent=60, cpuEvictBESatisfactionUpperPercent=90,
                         cpuEvictPolicy="evictByAllocatable"), node=node(batch_cpu_allocatable_milli=3000),
                 be=BEStats(1, 2900, 10000, 9000, 1, 2900, 10000, 9000))
    plan = CPUEvict().plan(s, OLD)
    # limit = allocatable 3000: usage 2900/3000 ≥ 90 %, satisfaction 0.3 → 10000 × 0.6 = 6000.
    assert plan.numbers["BECPUEvict.release_target"] == 6000


@pytest.mark.parametrize(
    ("threshold", "problem"),
    [
        ({}, "must both be set"),
        ({"cpuEvictBESatisfactionLowerPercent": 70, "cpuEvictBESatisfactionUpperPercent": 90}, "out of range (0, 60]"),
        ({"cpuEvictBESatisfactionLowerPercent": 0, "cpuEvictBESatisfactionUpperPercent": 90}, "out of range (0, 60]"),
        ({"cpuEvictBESatisfactionLowerPercent": 40, "cpuEvictBESatisfactionUpperPercent": 100}, "out of range (0, 100)"),
    ],
)
def test_cpu_invalid_satisfaction_config_is_reported(threshold: dict[str, int], problem: str) -> None:
    s = cpu_snap(slo=slo(enable=True, **threshold))
    verdict = CPUEvict().enabled(s)
    assert not verdict.enabled and problem in verdict.reason and "invalid NodeSLO" in verdict.reason
    assert CPUEvict().plan(s, OLD).evictions == ()


def test_cpu_cooldown_is_twenty_seconds() -> None:
    r = CPUEvict()
    assert r.cooldown_s == 20.0
    assert "cooling down" in r.plan(cpu_snap(), EvictState(1000.0 - 19.0)).skipped
    assert r.plan(cpu_snap(), EvictState(1000.0 - 20.0)).evictions != ()


def test_only_pods_labelled_be_are_evicted() -> None:
    from dataclasses import replace

    plain = replace(pod("kube-besteffort", mem=900 * M), qos_label="")  # BestEffort by kube QoS, no koordinator label
    plan = MemoryEvict().plan(mem_snap(pods=MEM_PODS + (plain,)), OLD)
    assert "kube-besteffort" not in names(plan) and names(plan)[0] == "p3"
