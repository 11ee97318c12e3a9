"""koordinator's v1.7/v1.8 eviction modes (CPUEvict, MemoryEvict, CPU/MemoryAllocatableEvict) and the round
across modes, on scripted snapshots with hand-computed numbers, then through the runner end to end."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.eviction import EvictionStatus
from hookserver.store import StateStore
from qos.eviction.cpu import CPUEvict
from qos.eviction.modes import allocatable_mode, usage_mode
from qos.framework.evict_round import walk
from qos.framework.evictions import EvictionGuard
from qos.eviction.memory import EvictState, MemoryEvict
from qos.framework.plan import QoSPlan
from qos.snapshot.priority import label_priority, priority_class, priority_value
from qos.registry import gate_registry
from qos.framework.runner import QoSRunner
from qos.snapshot.model import BEStats, NodeUsage, PodFacts, QoSSnapshot
from tests.qos.helpers import FixedSnapshots, RecordingBackend, node, pod, run_round, slo, snapshot

OLD = EvictState(last_evict=0.0)
ON = {"koordinator.sh/eviction-enabled": "true"}
BCPU, BMEM, MCPU, MMEM = ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory", "kubernetes.io/mid-cpu",
                          "kubernetes.io/mid-memory")
M = 1_000_000


def kpod(name: str, qos: str = "LS", *, priority: int | None = None, labels: dict[str, str] | None = None,
         requests: dict[str, int] | None = None, cpu: float | None = None, mem: float | None = None,
         terminating: bool = False, annotations: dict[str, str] | None = None) -> PodFacts:
    reqs = dict(requests or {})
    p = pod(name, qos, cpu=cpu, mem=mem, priority=priority, labels=labels, annotations=annotations,
            terminating=terminating, batch_milli=reqs.get(BCPU, 0))
    return replace(p, requests=MappingProxyType(reqs))


def picked(plan: QoSPlan, mode: str | None = None) -> list[str]:
    return [i.request.name for i in walk(plan.release_targets, plan.evictions, lambda item: True).picked(mode)]


# -- priorities ----------------------------------------------------------------------------------

def test_koordinator_priority_rules() -> None:
    assert priority_value(kpod("be", "BE")) == 5500 and priority_class(kpod("be", "BE")) == "koord-batch"
    assert priority_value(kpod("ls", "LS")) == 9500 and priority_class(kpod("ls", "LS")) == "koord-prod"
    assert priority_value(kpod("p0", "LS", priority=0, labels={"koordinator.sh/priority-class": "koord-mid"})) == 7500
    assert priority_class(kpod("m", priority=7100)) == "koord-mid" and priority_value(kpod("m", priority=7100)) == 7100
    # the class label wins over the band of spec.priority; an unknown class name falls back to the QoS default
    assert priority_class(kpod("x", priority=7100, labels={"koordinator.sh/priority-class": "koord-batch"})) == "koord-batch"
    assert priority_class(kpod("y", "BE", labels={"koordinator.sh/priority-class": "gold"})) == "koord-batch"
    assert label_priority(kpod("l", priority=5100, labels={"koordinator.sh/priority": "7"})) == 7
    assert label_priority(kpod("l", priority=5100, labels={"koordinator.sh/priority": "x"})) == 5100


# -- CPUEvict (usage) ----------------------------------------------------------------------------

USAGE_SLO = slo(enable=True, cpuEvictThresholdPercent=80, evictEnabledPriorityThreshold=5999,
                memoryEvictThresholdPercent=70)
USAGE_PODS = (
    kpod("b1", priority=5100, cpu=0.3, labels=ON),
    kpod("b2", priority=5100, cpu=0.5, labels=ON),
    kpod("b3", priority=5000, cpu=0.1, labels=ON),
    kpod("m1", priority=7100, cpu=2.0, labels=ON),  # above the priority threshold
    kpod("b4", priority=5100, cpu=0.9),  # did not opt in
    kpod("b5", priority=5100, cpu=0.05, labels={**ON, "koordinator.sh/priority": "1"}),
    kpod("b6", priority=5100, cpu=0.2, labels=ON, annotations={"koordinator.sh/eviction-priority": "-1"}),
    kpod("ls", "LS", cpu=3.0, labels=ON),  # no priority: prod default 9500
    kpod("be", "BE", cpu=0.4, labels=ON),  # no priority: batch default 5500
    kpod("nodata", priority=5000, labels=ON),  # no usage sample: koordlet skips it
)


def usage_snap(avg: float = 8.5, **kw: Any) -> QoSSnapshot:
    values: dict[str, Any] = {"slo": USAGE_SLO, "node": node(cpu_milli=10_000), "pods": USAGE_PODS,
                              "usage": NodeUsage(cpu_cores_avg=avg, cpu_avg_count=60, cpu_window_s=60),
                              "feature_gates": {"CPUEvict": True}}
    values.update(kw)
    return snapshot(**values)


def test_cpu_usage_mode_release_order_and_picks() -> None:
    plan = CPUEvict().plan(usage_snap(), OLD)
    n = plan.numbers
    # 8.5 cores of 10: 85 % ≥ 80 %; lower = 80 − 2 = 78; release 10000 × (85 − 78) / 100 = 700m.
    assert (n["CPUEvict.usage_percent"], n["CPUEvict.lower_percent"], n["CPUEvict.release_target"]) == (85, 78, 700)
    # b6 (eviction-priority −1); b3 (priority 5000); 5100: b5 (label priority 1), then by usage b2, b1; be 5500.
    assert [e.request.name for e in plan.evictions] == ["b6", "b3", "b5", "b2", "b1", "be"]
    # 200 + 100 + 50 + 500 = 850 ≥ 700
    assert picked(plan) == ["b6", "b3", "b5", "b2"]
    assert plan.evictions[0].request.reason == "EvictPodByNodeCPUUsage"
    assert "trigger by koordlet feature CPUEvict" in plan.evictions[0].request.message
    assert plan.numbers["CPUEvict.would_evict"] == 4 and "BECPUEvict: feature gate off" in plan.notes


def test_cpu_usage_below_threshold_and_lower_from_the_nodeslo() -> None:
    quiet = CPUEvict().plan(usage_snap(avg=7.99), OLD)  # 79.9 % truncates to 79
    assert quiet.evictions == () and "below 80%" in quiet.summary
    plan = CPUEvict().plan(usage_snap(slo=slo(enable=True, cpuEvictThresholdPercent=80, cpuEvictLowerPercent=60,
                                              evictEnabledPriorityThreshold=5999)), OLD)
    assert plan.numbers["CPUEvict.release_target"] == 10_000 * (85 - 60) // 100


@pytest.mark.parametrize(
    ("threshold", "problem"),
    [
        ({"evictEnabledPriorityThreshold": 5999}, "cpuEvictThresholdPercent is not set"),
        ({"cpuEvictThresholdPercent": 80, "cpuEvictLowerPercent": 80, "evictEnabledPriorityThreshold": 5999},
         "cpuEvictLowerPercent 80 is not below cpuEvictThresholdPercent 80"),
        ({"cpuEvictThresholdPercent": 80}, "evictEnabledPriorityThreshold is not set"),
    ],
)
def test_cpu_usage_config_is_checked(threshold: dict[str, int], problem: str) -> None:
    s = usage_snap(slo=slo(enable=True, **threshold))
    mode = usage_mode(s, "CPUEvict", "cpu")
    assert mode.target is None and mode.skipped == f"invalid NodeSLO: {problem}"
    verdict = CPUEvict().enabled(s)  # the only mode on is invalid: the reconciler says why
    assert not verdict.enabled and problem in verdict.reason


# -- allocatable ---------------------------------------------------------------------------------

ALLOC_SLO = slo(enable=True, cpuAllocatableEvictThresholdPercent=100, cpuAllocatableEvictLowerPercent=90,
                memoryAllocatableEvictThresholdPercent=100, memoryAllocatableEvictLowerPercent=90,
                allocatableEvictPriorityThreshold=7999)
ALLOC_PODS = (
    kpod("a", priority=5500, labels=ON, requests={BCPU: 4000, BMEM: 4000 * M}),
    kpod("b", priority=5500, labels=ON, requests={BCPU: 3000}),
    kpod("c", priority=5100, labels=ON, requests={BCPU: 2000}),
    kpod("d", priority=5500, labels=ON, requests={BCPU: 2500}),
    kpod("m1", priority=7100, labels=ON, requests={MCPU: 2000, MMEM: 3000 * M}),
    kpod("m2", priority=7100, labels=ON, requests={MCPU: 1000, MMEM: 2000 * M}),
    kpod("prod", priority=9100, labels=ON, requests={"cpu": 8000}),
    kpod("done", priority=5500, labels=ON, requests={BCPU: 9000}),
)
OFFER = {BCPU: 10_000, MCPU: 4000, BMEM: 8000 * M, MMEM: 4000 * M}


def alloc_snap(offer: dict[str, int] | None = None, **kw: Any) -> QoSSnapshot:
    pods = tuple(replace(p, phase="Succeeded") if p.name == "done" else p for p in ALLOC_PODS)
    values: dict[str, Any] = {"slo": ALLOC_SLO, "pods": pods,
                              "node": node(extended_allocatable=MappingProxyType(OFFER if offer is None else offer)),
                              "feature_gates": {"CPUAllocatableEvict": True, "MemoryAllocatableEvict": True}}
    values.update(kw)
    return snapshot(**values)


def test_cpu_allocatable_release_and_order() -> None:
    plan = CPUEvict().plan(alloc_snap(), OLD)
    n = plan.numbers
    # batch-cpu requests 4000 + 3000 + 2000 + 2500 = 11500 (the Succeeded pod holds none) = 115 % of 10000 > 100 %:
    # release 11500 − 90 % × 10000 = 2500. mid-cpu 3000 of 4000 = 75 %: nothing.
    assert n[f"CPUAllocatableEvict.requested.{BCPU}"] == 11_500 and n[f"CPUAllocatableEvict.release_target.{BCPU}"] == 2500
    assert n[f"CPUAllocatableEvict.requested.{MCPU}"] == 3000 and f"CPUAllocatableEvict.release_target.{MCPU}" not in n
    # only Batch pods free batch-cpu: c (priority 5100) first, then 5500 by request: a, b, d. Mid pods are not
    # candidates (their class is not over), nor the prod pod (above the threshold).
    assert [e.request.name for e in plan.evictions] == ["c", "a", "b", "d"]
    assert picked(plan) == ["c", "a"]  # 2000 < 2500, + 4000 ≥ 2500
    assert plan.evictions[0].request.reason == "EvictPodByCPUAllocatable"


def test_mid_allocatable_evicts_mid_pods_only() -> None:
    plan = MemoryEvict().plan(alloc_snap(), OLD)
    n = plan.numbers
    # batch-memory 4000 MB of 8000 MB: fine; mid-memory 5000 MB of 4000 MB = 125 %: release 5000 − 3600 = 1400 MB.
    assert n[f"MemoryAllocatableEvict.release_target.{MMEM}"] == 1400 * M
    assert [e.request.name for e in plan.evictions] == ["m1", "m2"] and picked(plan) == ["m1"]


@pytest.mark.parametrize(("offer", "shown"), [({MCPU: 4000}, "missing"), ({BCPU: 0, MCPU: 4000}, 0)])
def test_missing_or_zero_allocatable_holds_the_mode(offer: dict[str, int], shown: object) -> None:
    plan = CPUEvict().plan(alloc_snap(offer), OLD)
    # koordlet would count all 11500m as to-release and evict every batch pod; the offer is unknown or
    # withdrawn (a degrade resets batch allocatable to 0), so the mode holds and says so.
    assert plan.evictions == () and plan.numbers[f"CPUAllocatableEvict.allocatable.{BCPU}"] == shown
    assert "holding" in plan.summary
    assert any("holds for kubernetes.io/batch-cpu" in note and "usage modes still protect" in note for note in plan.notes)


def test_the_usage_mode_still_protects_the_node_when_allocatable_is_withdrawn() -> None:
    pods = tuple(replace(p, cpu_usage_cores=1.0) for p in ALLOC_PODS if p.name != "done")
    s = alloc_snap({BCPU: 0}, pods=pods, slo=ALLOC_SLO.model_copy(update={
        "resource_used_threshold_with_be": ALLOC_SLO.resource_used_threshold_with_be.model_copy(update={
            "cpu_evict_threshold_percent": 80, "evict_enabled_priority_threshold": 5999})}),
        usage=NodeUsage(cpu_cores_avg=7.0, cpu_avg_count=60, cpu_window_s=60),
        feature_gates={"CPUAllocatableEvict": True, "CPUEvict": True})
    plan = CPUEvict().plan(s, OLD)
    # 7 of 8 cores = 87 % ≥ 80 %: release 8000 × (87 − 78) / 100 = 720m; c (5100) first, 1000m covers it.
    assert plan.numbers["CPUEvict.release_target"] == 720 and picked(plan) == ["c"]
    assert picked(plan, "CPUAllocatableEvict") == []


@pytest.mark.parametrize(
    ("update", "problem"),
    [
        ({"allocatable_evict_priority_threshold": 8000}, "allocatableEvictPriorityThreshold 8000 is above 7999"),
        ({"cpu_allocatable_evict_lower_percent": None}, "cpuAllocatableEvictLowerPercent is not set"),
        ({"cpu_allocatable_evict_lower_percent": 100}, "cpuAllocatableEvictLowerPercent 100 is not below"),
        ({"cpu_allocatable_evict_threshold_percent": None}, "cpuAllocatableEvictThresholdPercent is not set"),
        ({"allocatable_evict_priority_threshold": None}, "allocatableEvictPriorityThreshold is not set"),
    ],
)
def test_allocatable_config_is_checked(update: dict[str, Any], problem: str) -> None:
    t = ALLOC_SLO.resource_used_threshold_with_be.model_copy(update=update)
    mode = allocatable_mode(alloc_snap(slo=ALLOC_SLO.model_copy(update={"resource_used_threshold_with_be": t})),
                            "CPUAllocatableEvict", "cpu")
    assert mode.target is None and problem in mode.skipped


# -- the round across modes ----------------------------------------------------------------------


def round_snap(**kw: Any) -> QoSSnapshot:
    t = slo(enable=True, cpuEvictBESatisfactionLowerPercent=40, cpuEvictBESatisfactionUpperPercent=50,
            cpuAllocatableEvictThresholdPercent=100, cpuAllocatableEvictLowerPercent=90,
            allocatableEvictPriorityThreshold=7999, cpuEvictThresholdPercent=80, cpuEvictLowerPercent=70,
            evictEnabledPriorityThreshold=5999)
    pods = (
        kpod("x", "BE", cpu=0.9, requests={BCPU: 1000}),
        kpod("y", "BE", cpu=0.3, requests={BCPU: 1000}),
        kpod("z", "BE", cpu=0.2, requests={BCPU: 2000}, labels=ON),
        kpod("w", priority=5300, cpu=2.0, requests={BCPU: 4000}, labels=ON),
        kpod("v", priority=5300, cpu=1.0, requests={BCPU: 4000}, labels=ON),
    )
    be = BEStats(window_s=60, avg_usage_milli=950, avg_request_milli=5000, avg_limit_milli=1000, count=60,
                 last_usage_milli=950, last_request_milli=5000, last_limit_milli=1000)
    values: dict[str, Any] = {
        "slo": t, "pods": pods, "be": be, "node": node(cpu_milli=16_000, extended_allocatable=MappingProxyType({BCPU: 10_000})),
        "usage": NodeUsage(cpu_cores_avg=15.2, cpu_avg_count=60, cpu_window_s=60),
        "feature_gates": {"BECPUEvict": True, "CPUAllocatableEvict": True, "CPUEvict": True},
    }
    values.update(kw)
    return snapshot(**values)


def test_one_cpu_round_with_cumulative_release() -> None:
    plan = CPUEvict().plan(round_snap(), OLD)
    n = plan.numbers
    # BECPUEvict: satisfaction 1000 / 5000 = 0.2 ≤ 0.4, usage 950/1000 ≥ 90 %: release 5000 × (0.5 − 0.2) = 1500
    #   batch-cpu; BE order by usage/request: x 0.9, y 0.3, z 0.1 → x + y = 2000 ≥ 1500.
    # CPUAllocatableEvict: batch-cpu 1000+1000+2000+4000+4000 = 12000 > 100 % of 10000: release 12000 − 9000 = 3000;
    #   x + y already free 2000 of it; v and w (5300) before z (5500), 4000 tie by name: v → 6000 ≥ 3000.
    # CPUEvict: 15.2 of 16 cores = 95 % ≥ 80 %: release 16000 × (95 − 70) / 100 = 4000m used; x 900 + y 300 +
    #   v 1000 = 2200 already; w (2000) → 4200 ≥ 4000.
    assert (n["BECPUEvict.release_target"], n[f"CPUAllocatableEvict.release_target.{BCPU}"],
            n["CPUEvict.release_target"]) == (1500, 3000, 4000)
    assert picked(plan, "BECPUEvict") == ["x", "y"]
    assert picked(plan, "CPUAllocatableEvict") == ["v"]
    assert picked(plan, "CPUEvict") == ["w"]
    assert [t.mode for t in plan.release_targets] == ["BECPUEvict", "CPUAllocatableEvict", "CPUEvict"]
    by_name = {(e.mode, e.request.name): e for e in plan.evictions}
    # what x frees, by every count of the round: its batch-cpu request and its usage
    assert dict(by_name[("BECPUEvict", "x")].releases) == {f"request/{BCPU}": 1000.0, "used/cpu": 900.0}


def test_pods_on_their_way_out_count_as_pending_release() -> None:
    s = round_snap()
    s = replace(s, pods=tuple(replace(p, terminating=p.name in ("x", "v")) for p in s.pods))
    plan = CPUEvict().plan(s, OLD)
    result = walk(plan.release_targets, plan.evictions, lambda item: True)
    # x (terminating) counts 1000 batch-cpu / 900m used without an eviction; y completes BECPUEvict. v pending
    # covers the allocatable goal (2000 + 4000 ≥ 3000); CPUEvict: 900 + 300 + 1000 = 2200 + w 2000 = 4200.
    assert [i.request.name for i in result.pending()] == ["x", "v"]
    assert [i.request.name for i in result.picked()] == ["y", "w"]
    assert plan.numbers["BECPUEvict.pending_pods"] == 1
    assert plan.numbers[f"CPUAllocatableEvict.pending_release.request/{BCPU}"] == 4000.0


def test_memory_round_be_first_then_usage_by_priority() -> None:
    pods = (
        kpod("be1", "BE", mem=300 * M, labels=ON), kpod("be2", "BE", mem=50 * M),
        kpod("lsb1", priority=5200, mem=200 * M, labels=ON), kpod("lsb2", priority=5200, mem=100 * M, labels=ON),
    )
    s = snapshot(slo=USAGE_SLO, pods=pods, node=node(memory=10_000 * M), usage=NodeUsage(memory_bytes=7250 * M),
                 feature_gates={"BEMemoryEvict": True, "MemoryEvict": True})
    plan = MemoryEvict().plan(s, OLD)
    # 72 % ≥ 70 %: both modes want 10e9 × (72 − 68) / 100 = 400 MB used. BE: be1 + be2 = 350 MB, not enough;
    # MemoryEvict goes on from 350 MB: be1 is done, lsb1 (200 MB) → 550 MB.
    assert plan.numbers["BEMemoryEvict.release_target"] == plan.numbers["MemoryEvict.release_target"] == 400 * M
    assert picked(plan, "BEMemoryEvict") == ["be1", "be2"] and picked(plan, "MemoryEvict") == ["lsb1"]
    # BEMemoryEvict alone could not cover it, the round as a whole did
    assert walk(plan.release_targets, plan.evictions, lambda item: True).unmet == ()


# -- through the runner --------------------------------------------------------------------------

def _runner(snap: QoSSnapshot, gates: dict[str, bool], backend: RecordingBackend) -> QoSRunner:
    clock = [1000.0]
    reconcilers = [CPUEvict(), MemoryEvict()]
    runner = QoSRunner(
        reconcilers, gates=gate_registry(reconcilers).resolve([("flag --feature-gates", gates)]),
        snapshots=FixedSnapshots(replace(snap, feature_gates=None), mark_evicted=True), store=StateStore(), executor=None,
        evictions=EvictionGuard(backend, cooldown_s=300, clock=lambda: clock[0]), clock=lambda: clock[0],
        mono=lambda: clock[0], evict_in_background=False,
    )
    runner._state = {name: OLD for name in runner._state}
    return runner


ALL_CPU = {"BECPUEvict": True, "CPUAllocatableEvict": True, "CPUEvict": True}


def test_runner_carries_out_the_round_and_tries_the_next_pod_after_a_refusal() -> None:
    backend = RecordingBackend({"x": EvictionStatus.REFUSED})
    runner = _runner(round_snap(), ALL_CPU, backend)
    run_round(runner)
    # x refused (a PodDisruptionBudget): BECPUEvict goes on with y (1000) and z (2000) → 3000 ≥ 1500; that also
    # covers the allocatable 3000. CPUEvict: 300 + 200 = 500m; w 2000 → 2500, v 1000 → 3500 < 4000 (no one left).
    assert [r.name for r in backend.requests] == ["x", "y", "z", "w", "v"]
    outcome = runner.status_of["CPUEvict"].last_outcome
    assert outcome is not None and outcome.evicted == 4 and outcome.statuses == {"refused": 1, "evicted": 4}
    row = next(r for r in runner.report()["reconcilers"] if r["name"] == "CPUEvict")
    assert [g["name"] for g in row["gates"]] == ["BECPUEvict", "CPUAllocatableEvict", "CPUEvict"] and row["enabled"]


def test_runner_runs_a_multi_gate_reconciler_when_any_gate_is_on() -> None:
    backend = RecordingBackend()
    runner = _runner(round_snap(), {"CPUEvict": True}, backend)
    run_round(runner)
    # only CPUEvict: w 2000, v 1000, z 200 → 3200 < 4000 (x and y did not opt in)
    assert [r.name for r in backend.requests] == ["w", "v", "z"]
    assert runner.status_of["MemoryEvict"].last_verdict.reason == (
        "feature gates BEMemoryEvict, MemoryAllocatableEvict, MemoryEvict are all off")
    # 30 s later (past the 20 s cool-down) the three are still terminating: they count, nobody new goes.
    later = replace(runner.snapshots.build(evicted=runner.evictions.recently_evicted()), now=1030.0)
    replay = runner.replay("CPUEvict", later)
    assert [e["pod"] for e in replay["would_evict"]] == []
    assert [e["pod"] for e in replay["pending_release"]] == ["default/w", "default/v", "default/z"]


def test_runner_cool_down_is_shared_by_the_modes() -> None:
    backend = RecordingBackend()
    runner = _runner(round_snap(), ALL_CPU, backend)
    run_round(runner)
    assert runner.state_of("CPUEvict") == EvictState(1000.0)
    plan = CPUEvict().plan(round_snap(now=1019.0), runner.state_of("CPUEvict"))
    assert "cooling down (19.0s of 20s" in plan.skipped


def test_hookctl_explains_each_mode() -> None:
    from hookserver.debug.render_qos import render_qos, render_qos_plan

    s = round_snap()
    s = replace(s, pods=tuple(replace(p, terminating=p.name == "x") for p in s.pods))
    runner = _runner(s, ALL_CPU, RecordingBackend())
    replay = runner.replay("CPUEvict", s)
    text = render_qos_plan(replay)
    assert "gates BECPUEvict=true,CPUAllocatableEvict=true,CPUEvict=true" in text
    # each mode's numbers under its name: threshold, usage or requests vs allocatable, release target, pending
    assert "mode CPUEvict:\n" in text and "  usage_percent: 95" in text and "  release_target: 4000" in text
    assert f"  requested.{BCPU}: 12000" in text and f"  allocatable.{BCPU}: 10000" in text
    assert f"  pending_release.request/{BCPU}: 1000.0" in text
    assert "already on their way out" in text and "default/x" in text.split("would evict")[0]
    evict_table = text.split("would evict, in order:")[1]
    assert [line.split()[0] for line in evict_table.splitlines()[2:5]] == ["default/y", "default/v", "default/w"]
    assert "why (CPUAllocatableEvict): trigger by koordlet feature CPUAllocatableEvict" in text
    run_round(runner)
    listing = render_qos(runner.report(), now=1000.0)
    assert "CPUEvict modes, last round:" in listing and "CPUEvict: node cpu usage 95% >= 80%; release cpu 4000 (used)" in listing
    assert "MemoryEvict: feature gate off" in listing or "BEMemoryEvict=false" in listing


def test_hookctl_shows_a_held_allocatable_mode() -> None:
    from hookserver.debug.render_qos import render_qos_plan
    from qos.framework.debug import QoSProviders

    snap = alloc_snap({MCPU: 4000})
    runner = _runner(snap, {"CPUAllocatableEvict": True}, RecordingBackend())
    # `hookctl qos plan CPUAllocatableEvict` finds the evictor that carries the mode
    providers = QoSProviders(runner, snapshot=lambda: snap, node_labels=dict)
    text = render_qos_plan(providers.replay({"name": "CPUAllocatableEvict"}))
    assert f"allocatable.{BCPU}: missing" in text and "the offer is unknown or withdrawn" in text
    assert "nothing would be written or evicted" in text


def test_one_invalid_mode_is_skipped_the_others_run() -> None:
    # CPUEvict's fields are fine, the allocatable ones missing: the evictor runs, the allocatable mode says why not.
    s = usage_snap(feature_gates={"CPUAllocatableEvict": True, "CPUEvict": True})
    verdict = CPUEvict().enabled(s)
    assert verdict.enabled and verdict.reason == "modes CPUAllocatableEvict (skipped: invalid NodeSLO), CPUEvict"
    plan = CPUEvict().plan(s, OLD)
    assert picked(plan) == ["b6", "b3", "b5", "b2"]
    assert "CPUAllocatableEvict: skipped: invalid NodeSLO: cpuAllocatableEvictThresholdPercent is not set" in plan.notes


def test_be_memory_lower_equal_to_threshold_is_invalid_as_in_koordlet() -> None:
    s = snapshot(slo=slo(enable=True, memoryEvictThresholdPercent=70, memoryEvictLowerPercent=70),
                 node=node(memory=10_000 * M), usage=NodeUsage(memory_bytes=9000 * M), pods=(kpod("be", "BE", mem=M),),
                 feature_gates={"BEMemoryEvict": True})
    verdict = MemoryEvict().enabled(s)
    assert not verdict.enabled and verdict.reason == (
        "BEMemoryEvict: invalid NodeSLO: memoryEvictLowerPercent 70 is not below memoryEvictThresholdPercent 70")
    assert MemoryEvict().plan(s, OLD).evictions == ()


def test_be_satisfaction_without_a_request_says_so() -> None:
    """Busy BE pods whose batch-cpu request is 0 over the window: nothing to release, and the summary says why.
    Before it read "BE satisfaction above 40% over the window", which a real node's BE pods (their requests
    lost) showed on every round."""
    be = BEStats(window_s=60, avg_usage_milli=950, avg_request_milli=0, avg_limit_milli=1000, count=60,
                 last_usage_milli=950, last_request_milli=0, last_limit_milli=1000)
    plan = CPUEvict().plan(round_snap(be=be, feature_gates={"BECPUEvict": True}), OLD)
    assert "BECPUEvict.release_target" not in plan.numbers
    assert "no BE batch-cpu request over the window" in plan.summary
    assert "satisfaction above" not in plan.summary
