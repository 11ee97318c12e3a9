"""A real recording, replayed (issue 39): `deploy/replay/real-v1-8min.sqlite`, made on real cgroup v1 by the real
agent (`python -m tests.realrec.record_v1`, 2026-11-29): 3 LS pods with a 60 s spike of all three, 5 BE pods
announced through the proxy with batch-cpu requests (busy loops under cfsQuota suppress at 65 %, two memory
growers), and the two evictions the agent made itself (SIGKILL, node memory at 12 %).

The faults this recording's predecessors showed, each now a test: the agent's BE request sum was 0 for
proxy-announced pods (so BE satisfaction could never act), a null replay marked frames where a SIGKILL was
audited late, a CPU burst proposal that changed only `cfs_burst_us` said "no change", a proposed
`cpuEvictTimeWindowSeconds` was printed and not used, and rows compared zeros that meant nothing (colocation
off; the predictor in its 24 h cold start).
"""

from __future__ import annotations

import os
from dataclasses import fields
from typing import Any

import pytest

from hookserver.recorder.proposal import Proposal
from hookserver.recorder.reader import Recording
from hookserver.recorder.replay import ReplayConfig, ReplayRun, replay
from hookserver.recorder.summary import Comparison, compare, render_text

REAL = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "replay", "real-v1-8min.sqlite")
_COMPARED = [f.name for f in fields(ReplayRun) if f.name not in ("label", "matched", "mismatches")]


def _run(proposal: Proposal | None = None) -> ReplayRun:
    rec = Recording(REAL)
    try:
        if proposal is None:
            return replay(rec, ReplayConfig("recorded"))
        return replay(rec, ReplayConfig("proposed", proposal, as_recorded=False))
    finally:
        rec.close()


@pytest.fixture(scope="module")
def recorded() -> ReplayRun:
    return _run()


def _compare(recorded: ReplayRun, proposal: Proposal) -> tuple[ReplayRun, Comparison]:
    proposed = _run(proposal)
    return proposed, compare("realrec-node", recorded, proposed)


def _row(cmp: Comparison, label: str) -> tuple[str, str, str]:
    return {r[0]: (r[1], r[2], r[3]) for r in cmp.rows}[label]


def test_every_recorded_decision_is_reproduced(recorded: ReplayRun) -> None:
    assert recorded.matched == 5 * len(recorded.frame_ts) and recorded.mismatches == []
    assert [e["pod"] for e in recorded.evictions] == ["realrec/grow-0", "realrec/grow-1"]


def test_the_null_replay_is_the_recording(recorded: ReplayRun) -> None:
    null = _run(Proposal())
    assert {n: getattr(null, n) for n in _COMPARED} == {n: getattr(recorded, n) for n in _COMPARED}
    assert not any(null.diverged)
    assert "no change" in render_text(compare("realrec-node", recorded, null))


def test_the_agent_counted_the_proxy_pods_batch_requests() -> None:
    rec = Recording(REAL)
    try:
        frames = list(rec.frames())
    finally:
        rec.close()
    # batch-0..2 request 500m, grow-0/1 2000m (their extended-resource-spec annotations), in every frame
    for frame in frames:
        requests = {p.name: p.batch_cpu_request_milli for p in frame.snapshot.pods if p.is_be}
        assert requests == {"batch-0": 500, "batch-1": 500, "batch-2": 500, "grow-0": 2000, "grow-1": 2000}
    assert {f.snapshot.be.last_request_milli for f in frames[1:]} == {5500.0}


def test_be_satisfaction_acts_over_the_proposed_window(recorded: ReplayRun) -> None:
    slo = {"resourceUsedThresholdWithBE": {"cpuEvictBESatisfactionLowerPercent": 60,
                                           "cpuEvictBESatisfactionUpperPercent": 80,
                                           "cpuEvictTimeWindowSeconds": 30}}
    proposed, cmp = _compare(recorded, Proposal(slo=slo, gates={"BECPUEvict": True}))
    reasons = {e["reason"] for e in proposed.evictions}
    assert reasons == {"EvictPodByBECPUSatisfaction"}
    assert "request 5500m" in proposed.evictions[0]["message"]
    assert all("30s window" in why for why in proposed.diverged)


def test_a_later_memory_threshold_keeps_the_growers_and_says_what_it_cannot_know(recorded: ReplayRun) -> None:
    proposed, cmp = _compare(recorded, Proposal(slo={"resourceUsedThresholdWithBE": {"memoryEvictThresholdPercent": 20}}))
    assert proposed.evictions == [] and len(proposed.kept_pods) == 2
    assert any("may undercount" in note for note in cmp.notes)
    assert _row(cmp, "evictions")[2] == "−2"


def test_suppressing_later_leaves_be_more_cpu(recorded: ReplayRun) -> None:
    proposed, cmp = _compare(recorded, Proposal(slo={"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 85}}))
    a, b, _change = _row(cmp, "BE CPU after suppress, mean (cores)")
    assert float(b) > float(a)
    assert any("BE tier limits are the proposal's" in why for why in proposed.diverged)


def test_turning_cpu_burst_off_takes_the_cfs_burst_away(recorded: ReplayRun) -> None:
    proposed, cmp = _compare(recorded, Proposal(slo={"cpuBurstStrategy": {"policy": "none"}}))
    a, b, _change = _row(cmp, "LS CFS burst (cfs_burst_us) after CPU burst, mean (cores)")
    assert float(a) > 0 and float(b) == 0
    assert proposed.ls_quota_cores == recorded.ls_quota_cores
    assert not cmp.unchanged


def test_rows_that_mean_nothing_here_say_why(recorded: ReplayRun) -> None:
    _proposed, cmp = _compare(recorded, Proposal(predictor={"safety_margin_percent": 0}))
    assert cmp.unchanged and cmp.no_capacity
    assert _row(cmp, "batch-cpu offered (core-hours)")[:2] == ("n/a", "n/a")
    notes = " ".join(cmp.notes)
    assert "colocation-config is disabled" in notes and "in its cold start" in notes and "86400 s" in notes
    assert "memory QoS: n/a" in notes  # cgroup v1 without memory.min


def test_proposals_that_reach_past_those_limits_show_their_effect(recorded: ReplayRun) -> None:
    _proposed, cmp = _compare(recorded, Proposal(colocation={"enable": True}))
    assert float(_row(cmp, "batch-cpu offered, mean (cores)")[1]) > 0
    _proposed, cold = _compare(recorded, Proposal(predictor={"cold_start_duration_s": 60}))
    assert not cold.unchanged and not any("in its cold start" in note for note in cold.notes)


def test_the_recording_is_the_one_documented(recorded: Any) -> None:
    """The fixture is what the docs and `make replay-demo` say it is (8 minutes, frames every 10 s or less)."""
    span = recorded.frame_ts[-1] - recorded.frame_ts[0]
    assert 470 <= span <= 490 and len(recorded.frame_ts) >= 48
