"""CPU burst and memory QoS replayed (issue 39, item 6): the real planners, on the containers the recording kept.

A null proposal reproduces their decisions and every series bit for bit (Hypothesis over recordings of an
agent that planned every second and recorded every 10 s, with CPU burst's token bucket on or off); a proposal
that changes their NodeSLO fields changes their decisions and marks what the replay assumed; the text and
HTML reports show them. Before this change the replay ran neither planner: a recording held no container
facts, and a `cpuBurstStrategy` or `memoryQOS` proposal changed nothing.
"""

from __future__ import annotations

from pathlib import Path

from dataclasses import fields, replace
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.recorder.decisions import Decision
from hookserver.recorder.kernel_world import ProposedContainers
from hookserver.recorder.proposal import Proposal
from hookserver.recorder.reader import Recording
from hookserver.recorder.replay import ReplayConfig, ReplayRun, replay
from hookserver.recorder.scenarios.synthetic import DEFAULT_SLO, generate
from hookserver.recorder.settings import RecorderSettings
from hookserver.recorder.summary import compare, render_text
from hookserver.recorder.writer import FlightRecorder
from hookserver.slo.document import spec_from_json
from hookserver.slo.model import NodeSLOSpec

from qos.cpu.burst import CPUBurst
from qos.framework.plan import QoSPlan, numbers
from qos.framework.reconciler import RoundOutcome
from qos.snapshot.kernel import ContainerKernel, KernelFacts, PodKernel
from qos.snapshot.model import NodeFacts, NodeUsage, PodFacts, QoSSnapshot

_COMPARED = [f.name for f in fields(ReplayRun) if f.name not in ("label", "matched", "mismatches")]
_SPIKES = [(60.0, 60.0, 3.0), (200.0, 40.0, 2.5)]


def _slo(burst: dict[str, Any], ls_memory: dict[str, Any]) -> dict[str, Any]:
    return {"resourceUsedThresholdWithBE": DEFAULT_SLO["resourceUsedThresholdWithBE"],
            "cpuBurstStrategy": burst,
            "resourceQOSStrategy": {"lsClass": {"memoryQOS": ls_memory},
                                    "beClass": {"memoryQOS": {"enable": True, "throttlingPercent": 80}}}}


def _record(path: str, *, pods: int, seed: int, burst: dict[str, Any], ls_memory: dict[str, Any],
            start_hour: float, spikes: list[tuple[float, float, float]] | None = None) -> Recording:
    generate(path, pods=pods, hours=0.1, step_s=10.0, round_s=1.0, seed=seed, slo=_slo(burst, ls_memory),
             start_hour=start_hour, spikes=_SPIKES if spikes is None else spikes)
    return Recording(path)


bursts = st.fixed_dictionaries({
    "policy": st.sampled_from(["auto", "cpuBurstOnly", "cfsQuotaBurstOnly", "none"]),
    "cpuBurstPercent": st.sampled_from([100, 200, 1000]),
    "cfsQuotaBurstPercent": st.sampled_from([100, 150, 300]),
    "cfsQuotaBurstPeriodSeconds": st.sampled_from([-1, 0, 5, 60]),  # the token bucket: off, empty, short, long
    "sharePoolThresholdPercent": st.integers(40, 95),
})
memories = st.fixed_dictionaries({
    "enable": st.booleans(), "minLimitPercent": st.integers(0, 100), "lowLimitPercent": st.integers(0, 100),
    "throttlingPercent": st.integers(0, 100),
})


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pods=st.integers(10, 25), seed=st.integers(0, 2**16), burst=bursts, ls_memory=memories,
       start_hour=st.sampled_from([3.0, 9.0, 20.0]))
def test_a_null_proposal_reproduces_cpu_burst_and_memory_qos_bit_for_bit(
        tmp_path_factory: Any, pods: int, seed: int, burst: dict[str, Any], ls_memory: dict[str, Any],
        start_hour: float) -> None:
    rec = _record(str(tmp_path_factory.mktemp("p2") / "r.sqlite"), pods=pods, seed=seed, burst=burst,
                  ls_memory=ls_memory, start_hour=start_hour)
    try:
        recorded = replay(rec, ReplayConfig("recorded"))
        null = replay(rec, ReplayConfig("proposed", Proposal(), as_recorded=False))
        same = replay(rec, ReplayConfig("proposed", Proposal(slo={"cpuBurstStrategy": burst}), as_recorded=False))
        frames = rec.span()[2]
    finally:
        rec.close()
    assert recorded.mismatches == []
    assert recorded.matched == 5 * frames  # CPU burst and memory QoS among them, every frame
    for run in (null, same):
        assert {n: getattr(run, n) for n in _COMPARED} == {n: getattr(recorded, n) for n in _COMPARED}
        assert not any(run.diverged)
    assert len(recorded.ls_quota_cores) == len(recorded.memory_min_bytes) == frames


def _alternating_day(path: str, rounds: int) -> None:
    """One LS container limited at 1 core that uses 2 cores on even seconds and 0.1 on odd ones, planned by the
    real CPU burst every second (its state carried as the runner does) and recorded every 10 s."""
    slo = spec_from_json({"cpuBurstStrategy": {"policy": "cfsQuotaBurstOnly", "cfsQuotaBurstPercent": 300,
                                               "cfsQuotaBurstPeriodSeconds": 5}}, origin="test").spec
    pod = PodFacts(uid="ls-1", namespace="web", name="web-1", qos="LS", qos_label="LS", phase="Running",
                   cgroup_dirs=("kubepods/burstable/podls-1",))
    node = NodeFacts(name="n", cpu_capacity_milli=16_000, memory_capacity_bytes=2**34)
    burst = CPUBurst()
    recorder = FlightRecorder(path, RecorderSettings(interval_s=10.0),
                              reconcilers={burst.name: {"interval_s": 1.0, "cooldown_s": 0.0}})
    state, quota = burst.initial_state(0.0), 100_000
    for t in range(rounds):
        cpu = 2.0 if t % 2 == 0 else 0.1
        container = ContainerKernel(id="c1", name="main", dir="kubepods/burstable/podls-1/c1", cpu_limit_milli=1000,
                                    quota_us=quota, burst_us=0, throttled_ratio=0.5, cpu_usage_cores=cpu)
        kernel = KernelFacts(read=frozenset({"pods"}), cgroup_files=frozenset({"cpu.cfs_burst_us"}), pods={
            "ls-1": PodKernel(uid="ls-1", dir="kubepods/burstable/podls-1", containers=(container,),
                              quota_us=quota, cpu_limit_milli=1000)})
        snap = QoSSnapshot(now=1000.0 + t, slo=slo, node=node, pods=(replace(pod, cpu_usage_cores=cpu),),
                           usage=NodeUsage(cpu_cores=1.0 + cpu), kernel=kernel, feature_gates={"CPUBurst": True})
        plan = burst.plan(snap, state)
        state = burst.commit(plan, RoundOutcome(dry_run=False), state, snap.now)
        recorder.record_round(snap, [plan])
        for write in (w for rp in plan.writes for level in rp.levels for w in level):
            if write.cgroup_dir.endswith("/c1"):
                quota = int(write.value)
    recorder.close()


def test_the_token_bucket_needs_the_recorded_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: the agent's bucket drains on even seconds and refills on odd ones, while the frames (every
    10 s) see only the even seconds. The replay as recorded reproduces the agent's decisions because each frame
    keeps the state its round started from; without that state, it does not."""
    path = str(tmp_path / "r.sqlite")
    _alternating_day(path, 120)
    rec = Recording(path)
    try:
        frames = list(rec.frames())
        recorded = replay(rec, ReplayConfig("recorded"))
        import hookserver.recorder.replay as replay_module

        monkeypatch.setattr(replay_module, "restore_state", lambda name, own, kept: own)
        forgetful = replay(rec, ReplayConfig("recorded"))
    finally:
        rec.close()
    assert all(f.states is not None and "buckets" in f.states.get("CPUBurst", {}) for f in frames[1:])
    assert recorded.mismatches == [] and recorded.matched == len(frames)
    assert any(m["reconciler"] == "CPUBurst" for m in forgetful.mismatches)


def _proposed(tmp_path: Path, slo: dict[str, Any]) -> tuple[ReplayRun, ReplayRun]:
    rec = _record(str(tmp_path / "r.sqlite"), pods=25, seed=5,
                  burst={"policy": "auto", "cpuBurstPercent": 200, "sharePoolThresholdPercent": 75},
                  ls_memory={"enable": True, "minLimitPercent": 50, "lowLimitPercent": 80}, start_hour=3.0)
    try:
        return (replay(rec, ReplayConfig("recorded")),
                replay(rec, ReplayConfig("proposed", Proposal(slo=slo), as_recorded=False)))
    finally:
        rec.close()


def test_a_burst_proposal_changes_cpu_burst_decisions_and_says_what_it_assumed(tmp_path: Path) -> None:
    recorded, proposed = _proposed(tmp_path, {"cpuBurstStrategy": {"sharePoolThresholdPercent": 100,
                                                                   "cfsQuotaBurstPercent": 500}})
    assert sum(proposed.burst_scaled_up) > sum(recorded.burst_scaled_up)
    assert max(q or 0.0 for q in proposed.ls_quota_cores) > max(q or 0.0 for q in recorded.ls_quota_cores)
    assert any("CFS quota and burst are the proposal's" in d for d in proposed.diverged)
    assert proposed.memory_min_bytes == recorded.memory_min_bytes  # memory QoS untouched by a burst proposal


def test_turning_burst_off_brings_every_quota_back_to_its_base(tmp_path: Path) -> None:
    recorded, proposed = _proposed(tmp_path, {"cpuBurstStrategy": {"policy": "none"}})
    base = recorded.ls_quota_cores[0]
    assert base is not None
    assert max(q or 0.0 for q in recorded.ls_quota_cores) > base  # the agent did burst
    assert proposed.ls_quota_cores[-1] == base and sum(proposed.burst_scaled_up) == 0


def test_a_memory_qos_proposal_changes_memory_min_and_low(tmp_path: Path) -> None:
    recorded, proposed = _proposed(tmp_path, {"resourceQOSStrategy": {"lsClass": {"memoryQOS": {"minLimitPercent": 70}}}})
    assert all(p is not None and r is not None and p > r
               for p, r in zip(proposed.memory_min_bytes, recorded.memory_min_bytes))
    assert proposed.memory_low_bytes == recorded.memory_low_bytes  # lowLimitPercent 80 (above 70) stays as recorded
    assert all("memory.min/low/high given to pods are the proposal's" in d for d in proposed.diverged[1:])
    assert proposed.ls_quota_cores == recorded.ls_quota_cores


def test_an_eviction_proposal_marks_only_what_acts_on_the_node(tmp_path: Path) -> None:
    """A proposal that only evicts more takes pods off the node: memory QoS then manages fewer pods (another
    decision) but gives the same memory.min/low totals (BE pods have none here), and CPU burst sees another
    share-pool ratio but writes the same files. Neither is marked as the proposal's (they were, on every frame
    after the first eviction, in `make replay-demo`'s day)."""
    recorded, proposed = _proposed(tmp_path, {"resourceUsedThresholdWithBE": {"memoryEvictThresholdPercent": 50}})
    assert len(proposed.evictions) > len(recorded.evictions)
    assert any("the proposal evicted" in d for d in proposed.diverged)
    assert not any("memory.min" in d for d in proposed.diverged)
    assert proposed.memory_min_bytes == recorded.memory_min_bytes


def test_the_reports_show_cpu_burst_and_memory_qos(tmp_path: Path) -> None:
    recorded, proposed = _proposed(tmp_path, {"resourceQOSStrategy": {"lsClass": {"memoryQOS": {"minLimitPercent": 90}}},
                                              "cpuBurstStrategy": {"sharePoolThresholdPercent": 100}})
    cmp = compare("node", recorded, proposed)
    rows = {label: (a, b) for label, a, b, _ in cmp.rows}
    low, high = rows["memory.min given to pods, mean (GiB)"]
    assert float(high) > float(low)
    assert "LS CFS quota after CPU burst, mean (cores)" in rows
    assert "CPU burst quota scale-ups (containers x rounds)" in rows
    text = render_text(cmp)
    assert "memory.min given to pods" in text and "LS CFS quota after CPU burst" in text
    from hookserver.recorder.report_html import render_html

    page = render_html(cmp)
    assert "CPU burst: LS containers' CFS quota" in page and "Memory QoS: memory.min, memory.low and memory.high" in page


def test_a_proposal_that_changes_only_the_cfs_burst_shows_it(tmp_path: Path) -> None:
    """`cpuBurstPercent` moves only `cpu.cfs_burst_us`. Before, no series held it: the report said "no change"
    in words and in every row while it marked every frame (a real recording's `policy auto -> none`)."""
    recorded, proposed = _proposed(tmp_path, {"cpuBurstStrategy": {"cpuBurstPercent": 50}})
    assert proposed.ls_quota_cores == recorded.ls_quota_cores
    # cpuBurstPercent 200 -> 50: half the limit as burst, where 200 % was capped at the whole quota
    assert all(p is not None and r is not None and 0 < p < r
               for p, r in zip(proposed.ls_burst_cores[1:], recorded.ls_burst_cores[1:]))
    cmp = compare("node", recorded, proposed)
    assert not cmp.unchanged
    rows = {label: (a, b, change) for label, a, b, change in cmp.rows}
    a, b, change = rows["LS CFS burst (cfs_burst_us) after CPU burst, mean (cores)"]
    assert float(b) < float(a) and change.startswith("−")
    assert "no change" not in render_text(cmp)


def test_a_throttling_proposal_changes_memory_high(tmp_path: Path) -> None:
    """`throttlingPercent` moves only memory.high. Before, memory QoS's decision had no memory.high total, so such
    a proposal said "no change" in every row."""
    rec = _record(str(tmp_path / "r.sqlite"), pods=25, seed=5, burst={"policy": "auto"},
                  ls_memory={"enable": True, "minLimitPercent": 50, "lowLimitPercent": 80, "throttlingPercent": 90},
                  start_hour=3.0)
    try:
        recorded = replay(rec, ReplayConfig("recorded"))
        proposed = replay(rec, ReplayConfig("proposed", Proposal(
            slo={"resourceQOSStrategy": {"lsClass": {"memoryQOS": {"throttlingPercent": 50}}}}), as_recorded=False))
    finally:
        rec.close()
    assert recorded.mismatches == []
    assert proposed.memory_min_bytes == recorded.memory_min_bytes
    assert all(p is not None and r is not None and p < r
               for p, r in zip(proposed.memory_high_bytes, recorded.memory_high_bytes))
    assert all("memory.min/low/high given to pods are the proposal's" in d for d in proposed.diverged[1:])
    cmp = compare("node", recorded, proposed)
    rows = {label: (a, b, change) for label, a, b, change in cmp.rows}
    a, b, change = rows["memory.high of the pods it limits, mean (GiB)"]
    assert float(b) < float(a) and change.startswith("−")
    assert not cmp.unchanged


def test_an_older_recordings_memory_qos_decisions_still_match() -> None:
    """A recording made before memory.high's total was decided has no `high_total`: its decisions still count as
    reproduced; a recording that has it is compared on it."""
    from hookserver.recorder.decisions import Decision, comparable

    mine = Decision("MemoryQoS", "", {"pods": 3, "min_total": 10, "low_total": 20, "high_total": 30}, ())
    old = Decision("MemoryQoS", "", {"pods": 3, "min_total": 10, "low_total": 20}, ())
    assert comparable(mine, old).text() == old.text()
    other = Decision("MemoryQoS", "", {"pods": 3, "min_total": 10, "low_total": 20, "high_total": 31}, ())
    assert comparable(mine, other).text() != other.text()


_C = "kubepods/burstable/podp/c1"


def _one_container(now: float, quota: int) -> QoSSnapshot:
    kernel = KernelFacts(pods=MappingProxyType({"p": PodKernel("p", "kubepods/burstable/podp", containers=(
        ContainerKernel("c1", "main", _C, cpu_limit_milli=1000, quota_us=quota, burst_us=0),), quota_us=quota)}))
    return QoSSnapshot(now=now, slo=NodeSLOSpec(), node=None, kernel=kernel)


def _quota_plan(quota: int) -> QoSPlan:
    write = CgroupWrite(_C, CgroupResource.CPU_CFS_QUOTA, quota)
    return QoSPlan("CPUBurst", "", numbers(scaled_up=1), writes=(ResourcePlan.single([write]),))


def _scale_up(snap: QoSSnapshot, state: Any) -> tuple[QoSPlan, Any]:
    """Quota burst's round while throttled: x1.2, up to 10 CPUs."""
    quota = snap.kernel.pods["p"].containers[0].quota_us or 0
    return _quota_plan(min(int(quota * 1.2), 1_000_000)), state


def _no_plan() -> QoSPlan:
    return QoSPlan("CPUBurst", "", numbers())


def _quota_at_next_frame(round_s: float) -> int | None:
    world = ProposedContainers()
    first = _one_container(0.0, 100_000)
    agent = Decision("CPUBurst", "", {}, ())  # the agent held the quota
    plan = _quota_plan(120_000)  # the proposal (a higher ceiling) scaled it up
    world.planned("CPUBurst", first, plan, agent, lambda: ProposedContainers.agent_files(agent, first, _no_plan))
    world.catch_up(10.0, _scale_up, None, round_s)
    following = world.snapshot(_one_container(10.0, 100_000))
    return following.kernel.pods["p"].containers[0].quota_us


def test_burst_rounds_between_frames_run_at_the_agents_cadence() -> None:
    """Nine 1 s rounds between two frames 10 s apart: a quota the proposal scaled reaches x1.2^10 by the next
    frame, as on the node; one round a frame (before) left it at x1.2, ten times too slow."""
    expected = 120_000
    for _ in range(9):
        expected = int(expected * 1.2)
    assert expected == 619_171
    assert _quota_at_next_frame(1.0) == expected
    assert _quota_at_next_frame(10.0) == 120_000


def test_a_file_the_proposal_sets_as_the_agent_did_follows_the_recording() -> None:
    """The proposal's own files are only those it set otherwise: the quota it left as the agent did takes what
    the recording shows at the next frame (the agent's rounds in between), not the proposal's held value."""
    world = ProposedContainers()
    first = _one_container(0.0, 100_000)
    burst_only = QoSPlan("CPUBurst", "", numbers(), writes=(ResourcePlan.single(
        [CgroupWrite(_C, CgroupResource.CPU_CFS_BURST, 50_000)]),))
    agent = Decision("CPUBurst", "", {"scaled_up": 1}, ())  # the agent wrote: its round is planned again
    world.planned("CPUBurst", first, burst_only, agent, lambda: ProposedContainers.agent_files(agent, first, _no_plan))
    assert world.own == {(_C, 1): 50_000}
    later = world.snapshot(_one_container(10.0, 140_000))  # the agent's rounds scaled the quota meanwhile
    c = later.kernel.pods["p"].containers[0]
    assert (c.quota_us, c.burst_us) == (140_000, 50_000)


def test_the_agents_round_is_planned_again_only_where_it_wrote() -> None:
    frame = _one_container(0.0, 100_000)
    calls: list[int] = []

    def plan() -> QoSPlan:
        calls.append(1)
        return _quota_plan(120_000)

    quiet = Decision("CPUBurst", "", {"burst_writes": 0, "scaled_up": 0, "scaled_down": 0}, ())
    assert ProposedContainers.agent_files(quiet, frame, plan)[_C] == (100_000, 0) and not calls
    wrote = Decision("CPUBurst", "", {"burst_writes": 0, "scaled_up": 1, "scaled_down": 0}, ())
    assert ProposedContainers.agent_files(wrote, frame, plan)[_C] == (120_000, 0) and calls == [1]


def test_cpu_burst_decisions_count_every_write_under_the_names_the_replay_reads(tmp_path: Path) -> None:
    """`agent_files` skips the agent's round where its decision counts no write (`WRITE_COUNTS`): a planner that
    renamed one of those numbers would make every round look quiet. A recording where CPU burst wrote: each
    round's decision has all three counts."""
    from hookserver.recorder.kernel_world import WRITE_COUNTS

    rec = _record(str(tmp_path / "r.sqlite"), pods=15, seed=2, burst={"policy": "auto", "cpuBurstPercent": 200},
                  ls_memory={"enable": False}, start_hour=3.0)
    try:
        decisions = [f.decisions["CPUBurst"] for f in rec.frames() if "CPUBurst" in f.decisions]
    finally:
        rec.close()
    assert decisions and all(set(WRITE_COUNTS) <= set(d.numbers) for d in decisions)
    assert any(d.numbers["burst_writes"] for d in decisions)  # the first round sets every container's burst
