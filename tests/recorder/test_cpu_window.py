"""The CPU evictors' window under a proposal (issue 39): a proposal of another `cpuEvictTimeWindowSeconds` is
averaged over that window from the frames' samples, says so per frame, and a null proposal keeps the recorded
averages bit for bit.

Before: the replay kept the recorded averages, so on a real recording (agent at the default 1 s window) a
proposal of 30 s printed `cpuEvictTimeWindowSeconds unset -> 30` and ran BE satisfaction over 1 s.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hookserver.recorder.cpu_window import EvictWindow
from hookserver.recorder.proposal import Proposal
from hookserver.recorder.reader import Recording
from hookserver.recorder.replay import ReplayConfig, replay
from hookserver.slo.model import NodeSLOSpec

from qos.eviction.cpu import CPUEvict
from qos.snapshot.model import BEStats, NodeUsage, QoSSnapshot

from tests.recorder.helpers import small_recording


def _frame(now: float, usage: float, request: float = 1000.0, limit: float = 2000.0, node: float = 3.0) -> QoSSnapshot:
    return QoSSnapshot(
        now=now, slo=NodeSLOSpec(), node=None, collect_interval_s=1.0,
        be=BEStats(window_s=1.0, avg_usage_milli=usage, avg_request_milli=request, avg_limit_milli=limit, count=1,
                   last_usage_milli=usage, last_request_milli=request, last_limit_milli=limit),
        usage=NodeUsage(cpu_cores=node, cpu_cores_avg=node, cpu_avg_count=1, cpu_window_s=1.0))


def _slo(window: int) -> NodeSLOSpec:
    return NodeSLOSpec.model_validate({"resourceUsedThresholdWithBE": {"cpuEvictTimeWindowSeconds": window}})


def test_the_proposals_window_is_averaged_over_the_frames_in_it() -> None:
    window = EvictWindow()
    out = None
    for i, usage in enumerate([100.0, 200.0, 300.0, 400.0, 500.0]):  # a frame every 10 s
        frame = _frame(1000.0 + 10 * i, usage, node=float(i))
        window.add(frame)
        out, assumed = window.snapshot(frame, replace(frame, slo=_slo(30)))
    assert out is not None and assumed
    # the last 30 s: the frames at 1020, 1030 and 1040, each standing for the 10 s before it
    assert out.be.window_s == 30.0 and out.be.avg_usage_milli == pytest.approx(400.0)
    assert out.be.avg_request_milli == 1000.0 and out.be.avg_limit_milli == 2000.0
    assert out.be.count == 30  # the agent's per-second samples in 30 s
    assert out.usage.cpu_window_s == 30.0 and out.usage.cpu_cores_avg == pytest.approx(3.0)
    assert out.be.last_usage_milli == 500.0  # the latest sample is the recorded one


def test_the_recordings_start_cuts_the_sample_count_short() -> None:
    window = EvictWindow()
    first = _frame(1000.0, 100.0)
    window.add(first)
    out, _ = window.snapshot(first, replace(first, slo=_slo(60)))
    second = _frame(1010.0, 100.0)
    window.add(second)
    out2, _ = window.snapshot(second, replace(second, slo=_slo(60)))
    assert out.be.count == 1 and out2.be.count == 11  # too few for a 60 s window (koordlet's count x interval >= 20 s)


def test_the_recorded_window_leaves_the_frame_alone() -> None:
    window = EvictWindow()
    frame = replace(_frame(1000.0, 100.0), slo=_slo(30))
    window.add(frame)
    proposed = replace(frame, collect_interval_s=1.0)
    out, assumed = window.snapshot(frame, proposed)
    assert out is proposed and assumed == ""


def _windows_seen(monkeypatch: pytest.MonkeyPatch, path: str, proposal: Proposal) -> tuple[set[float], list[str]]:
    seen: set[float] = set()
    plan = CPUEvict.plan

    def spy(self: CPUEvict, snap: QoSSnapshot, state: Any) -> Any:
        seen.add(snap.be.window_s)
        return plan(self, snap, state)

    monkeypatch.setattr(CPUEvict, "plan", spy)
    rec = Recording(path)
    try:
        run = replay(rec, ReplayConfig("proposed", proposal, as_recorded=False))
    finally:
        rec.close()
    return seen, run.diverged


def test_a_proposed_window_reaches_the_evictor_and_marks_the_frames(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = small_recording(str(tmp_path / "r.sqlite"), hours=0.1, pods=12)
    slo = {"resourceUsedThresholdWithBE": {"cpuEvictTimeWindowSeconds": 120, "cpuEvictBESatisfactionLowerPercent": 60,
                                           "cpuEvictBESatisfactionUpperPercent": 80}}
    seen, diverged = _windows_seen(monkeypatch, path, Proposal(slo=slo, gates={"BECPUEvict": True}))
    assert seen == {120.0}
    assert diverged and all("CPU-evict averages over the proposal's 120s window" in d for d in diverged)
    # the gates off: the evictor never plans, and nothing is marked for a window nobody reads
    _seen, quiet = _windows_seen(monkeypatch, path, Proposal(slo=slo))
    assert not any(quiet)
