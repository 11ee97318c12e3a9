"""Exact null (issue 39): replaying with no proposal, or with a proposal equal to the recording, gives proposed ==
recorded for every series and every frame, bit for bit, on recordings the recorder's own writer made of an
agent that planned every second and recorded every 10 s (Hypothesis draws the node, the NodeSLO, the suppress
policy and the LS spikes that make suppress's per-round growth cap bind).

Before the fix the proposed run fed its own target back once per 10 s frame: the growth cap acted per frame
and the quota's hysteresis took other steps, so a null proposal moved BE CPU on any recording with a spike.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookserver.recorder.proposal import Proposal
from hookserver.recorder.reader import Recording
from hookserver.recorder.replay import ReplayConfig, ReplayRun, replay
from hookserver.recorder.scenarios.synthetic import DEFAULT_COLOCATION, generate
from hookserver.recorder.world import ProposedWorld, tier_effect
from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.recorder.decisions import Decision
from hookserver.slo.model import NodeSLOSpec
from hookserver.system.cpulist import format_cpu_list

from qos.framework.plan import QoSPlan, numbers
from qos.snapshot.model import BETier, QoSSnapshot

_COMPARED = [f.name for f in fields(ReplayRun) if f.name not in ("label", "matched", "mismatches")]


def _series(run: ReplayRun) -> dict[str, Any]:
    return {name: getattr(run, name) for name in _COMPARED}


def _record(path: str, *, pods: int, seed: int, threshold: int, policy: str, memory: int, start_hour: float,
            spikes: list[tuple[float, float, float]]) -> Recording:
    slo = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": threshold,
                                           "cpuSuppressPolicy": policy, "memoryEvictThresholdPercent": memory}}
    generate(path, pods=pods, hours=0.1, step_s=10.0, round_s=1.0, seed=seed, slo=slo, start_hour=start_hour,
             spikes=spikes)
    return Recording(path)


recordings = st.fixed_dictionaries({
    "pods": st.integers(10, 30),
    "seed": st.integers(0, 2**16),
    "threshold": st.integers(30, 100),
    "policy": st.sampled_from(["cpuset", "cfsQuota"]),
    "memory": st.sampled_from([65, 72, 90]),
    "start_hour": st.sampled_from([3.0, 9.0, 20.0]),
    "spikes": st.lists(st.tuples(st.floats(0, 300), st.floats(5, 120), st.floats(0.2, 4.0)), max_size=3),
})


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=recordings)
def test_a_null_proposal_reproduces_the_recording_bit_for_bit(tmp_path_factory: Any, params: dict[str, Any]) -> None:
    rec = _record(str(tmp_path_factory.mktemp("null") / "r.sqlite"), **params)
    try:
        recorded = replay(rec, ReplayConfig("recorded"))
        assert recorded.mismatches == []
        null = replay(rec, ReplayConfig("proposed", Proposal(), as_recorded=False))
        same = Proposal(
            slo={"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": params["threshold"],
                                                 "cpuSuppressPolicy": params["policy"],
                                                 "memoryEvictThresholdPercent": params["memory"]}},
            colocation=dict(DEFAULT_COLOCATION), gates={"BECPUSuppress": True, "BEMemoryEvict": True})
        as_recorded = replay(rec, ReplayConfig("proposed", same, as_recorded=False))
    finally:
        rec.close()
    assert _series(null) == _series(recorded)
    assert _series(as_recorded) == _series(recorded)
    assert not any(null.diverged) and not any(as_recorded.diverged)


def test_the_growth_cap_binds_in_these_recordings(tmp_path) -> None:
    """The property above is not vacuous: on such a recording a proposal that suppresses differently does
    diverge, and its rounds between frames run at the agent's 1 s cadence (growth capped per round)."""
    rec = _record(str(tmp_path / "r.sqlite"), pods=30, seed=3, threshold=80, policy="cpuset", memory=90,
                  start_hour=3.0, spikes=[(60.0, 60.0, 3.0), (240.0, 60.0, 3.0)])
    try:
        recorded = replay(rec, ReplayConfig("recorded"))
        looser = replay(rec, ReplayConfig("proposed", Proposal(
            slo={"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 95}}), as_recorded=False))
    finally:
        rec.close()
    assert len(set(recorded.be_cpu_cores)) > 2  # suppress moved with the spikes
    assert sum(looser.be_cpu_cores) > sum(recorded.be_cpu_cores)
    assert any(looser.diverged)


def _cpuset_plan(cpus: int) -> QoSPlan:
    write = CgroupWrite("kubepods/besteffort", CgroupResource.CPUSET_CPUS, format_cpu_list(range(cpus)))
    return QoSPlan("CPUSuppress", "", numbers(policy="cpuset", cpuset=format_cpu_list(range(cpus))),
                   writes=(ResourcePlan.single([write]),))


def _capped_round(snap: QoSSnapshot, state: Any) -> tuple[QoSPlan, Any]:
    """Suppress wanting 9 CPUs, growth capped at +1 a round (what CPUSuppress does with 10 online CPUs)."""
    have = len(snap.be_tier.cpuset or ()) if snap.be_tier is not None else 0
    return _cpuset_plan(min(9, have + 1)), state


def _cpus_at_next_frame(round_s: float) -> int:
    world = ProposedWorld({}, round_s=round_s)
    snap = QoSSnapshot(now=0.0, slo=NodeSLOSpec(), node=None,
                       be_tier=BETier(dir="kubepods/besteffort", cpuset=frozenset({0, 1}), quota_us=-1))
    agent = Decision("CPUSuppress", "", {"policy": "cpuset", "cpuset": "0-1"}, ())
    world.suppressed(snap, _cpuset_plan(3), agent)  # the proposal grew to 3 where the agent kept 2
    world.catch_up(10.0, _capped_round, None)
    following, _ = world.snapshot(replace(snap, now=10.0))
    assert following.be_tier is not None
    return len(following.be_tier.cpuset or ())


def test_the_rounds_between_frames_run_at_the_agents_cadence() -> None:
    """Nine 1 s rounds between two frames 10 s apart: growth capped at +1 a round reaches the 9 CPUs wanted
    by the next frame; one round a frame (the old replay) would still be at 3."""
    assert _cpus_at_next_frame(1.0) == 9
    assert _cpus_at_next_frame(10.0) == 3


def test_a_decision_writes_what_its_effect_says() -> None:
    assert tier_effect("", {"policy": "cpuset", "cpuset": "0-3"}) == ("cpuset", "0-3")
    assert tier_effect("", {"policy": "cfsQuota", "quota_us": 5000}) == ("cfsQuota", 5000)
    assert tier_effect("", {}) == ("restore",)
    assert tier_effect("feature gates off", {}) == ("keep",)
    assert tier_effect("no node capacity", {"budget_milli": 3}) == ("keep",)


def test_a_null_replay_marks_nothing_when_the_agents_evictions_were_stamped_late(tmp_path: Any) -> None:
    """A SIGKILL eviction is audited when it is done: on a real cgroup v1 node the freeze timed out and the
    audit stamped grow-0 1.01 s after the round that decided it. The null replay then took the pod off as if
    the proposal alone had evicted it, and marked 29 of 50 frames counterfactual (the recorded decision, which
    names the pod, now says whose eviction it was)."""
    path = str(tmp_path / "late.sqlite")
    generate(path, pods=20, hours=0.15, step_s=10.0, round_s=1.0, seed=5, start_hour=9.0,
             slo={"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 65,
                                                  "memoryEvictThresholdPercent": 70}},
             evict_delay_s=1.5)
    rec = Recording(path)
    try:
        evictions = rec.evictions()
        recorded = replay(rec, ReplayConfig("recorded"))
        null = replay(rec, ReplayConfig("proposed", Proposal(), as_recorded=False))
    finally:
        rec.close()
    assert evictions, "the scenario must have the agent evict"
    decided = {e["uid"]: e["ts"] for e in recorded.evictions}
    assert all(e["ts"] - decided[str(e["pod_uid"])] > 1.0 for e in evictions)  # stamped late, as on the node
    assert recorded.mismatches == []
    assert not any(null.diverged)
    assert _series(null) == _series(recorded)
