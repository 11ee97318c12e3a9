"""Replay: as recorded it reproduces the agent's own decisions; a proposed config that must evict does, one
that must not does not; the colocation-config moves the batch offer."""

from __future__ import annotations

import os

import pytest

from hookserver.recorder.reader import Recording
from hookserver.recorder.replay import ReplayConfig, replay
from hookserver.recorder.summary import compare, render_text
from hookserver.recorder.proposal import Proposal

from tests.recorder.helpers import EVICTING_SLO, small_recording


@pytest.fixture(scope="module")
def evicting(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """Two hours in which the agent itself evicted (memory over its 70 % threshold)."""
    path = str(tmp_path_factory.mktemp("rec") / "evicting.sqlite")
    return Recording(small_recording(path, hours=2, slo=EVICTING_SLO))


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """An hour of the morning ramp (07:00-08:00) under the default synthetic NodeSLO (80 %): nothing evicted."""
    return Recording(small_recording(str(tmp_path_factory.mktemp("rec") / "quiet.sqlite"), hours=1, start_hour=7))


def _slo(**threshold: object) -> ReplayConfig:
    return ReplayConfig("proposed", Proposal(slo={"resourceUsedThresholdWithBE": {"enable": True, **threshold}}),
                        as_recorded=False)


def test_as_recorded_reproduces_every_decision_the_agent_took(evicting: Recording) -> None:
    run = replay(evicting, ReplayConfig("recorded"))
    _, _, frames = evicting.span()
    assert run.mismatches == []
    assert run.matched == 5 * frames  # CPU suppress, memory and CPU evictor, CPU burst, memory QoS, every frame
    done = [(e["ts"], e["pod_uid"]) for e in evicting.evictions()]
    assert done, "the scenario must make the agent evict"
    assert [(e["ts"], e["uid"]) for e in run.evictions] == done


def test_a_different_config_does_not_pass_as_the_recorded_one(evicting: Recording) -> None:
    """The check can fail: the same frames under another NodeSLO, compared with the agent's decisions."""
    run = replay(evicting, ReplayConfig("recorded", _slo(cpuSuppressThresholdPercent=80,
                                                         memoryEvictThresholdPercent=90).proposal))
    assert run.mismatches and {m["reconciler"] for m in run.mismatches} >= {"CPUSuppress", "MemoryEvict"}


def test_a_threshold_below_the_usage_evicts_and_one_above_does_not(quiet: Recording) -> None:
    recorded = replay(quiet, ReplayConfig("recorded"))
    assert recorded.evictions == [] and recorded.mismatches == []
    must = replay(quiet, _slo(memoryEvictThresholdPercent=60))
    assert must.evictions and {e["reason"] for e in must.evictions} == {"EvictPodByNodeMemoryUsage"}
    assert all(e["pod"].startswith("batch/") for e in must.evictions)  # BE pods only
    assert "60%" in must.evictions[0]["message"]
    must_not = replay(quiet, _slo(memoryEvictThresholdPercent=95))
    assert must_not.evictions == []


def test_a_higher_suppress_threshold_leaves_be_more_cpu(quiet: Recording) -> None:
    recorded = replay(quiet, ReplayConfig("recorded"))
    looser = replay(quiet, _slo(cpuSuppressThresholdPercent=95, memoryEvictThresholdPercent=80))
    assert sum(looser.be_cpu_cores) > sum(recorded.be_cpu_cores)


def test_the_colocation_config_moves_the_batch_offer(quiet: Recording) -> None:
    recorded = replay(quiet, ReplayConfig("recorded"))
    more = Proposal(colocation={"cpuReclaimThresholdPercent": 85, "memoryReclaimThresholdPercent": 90})
    proposed = replay(quiet, ReplayConfig("proposed", more, as_recorded=False))
    assert recorded.core_hours() > 0 and proposed.core_hours() > recorded.core_hours()
    assert proposed.gib_hours() > recorded.gib_hours()
    off = replay(quiet, ReplayConfig("off", Proposal(colocation={"enable": False}), as_recorded=False))
    assert off.core_hours() == 0  # colocation disabled: nothing offered
    text = render_text(compare("n", recorded, proposed))
    assert "batch-cpu offered (core-hours)" in text and "reproduced" in text


def test_the_predictor_margin_moves_the_safety_number(quiet: Recording) -> None:
    """No cold start and no margin: the prediction is the p95 of history, and usage goes above it sometimes;
    a large margin keeps it above usage."""
    tight = replay(quiet, ReplayConfig("tight", Proposal(predictor={"cold_start_duration_s": 0, "safety_margin_percent": 0,
                                                            "training_interval_s": 60}), as_recorded=False))
    wide = replay(quiet, ReplayConfig("wide", Proposal(predictor={"cold_start_duration_s": 0, "safety_margin_percent": 100,
                                                          "training_interval_s": 60}), as_recorded=False))
    assert tight.safety("cpu")["exceeded"] > 0
    assert wide.safety("cpu")["exceeded"] < tight.safety("cpu")["exceeded"]


REAL = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "replay", "cgroup-30min.sqlite")


def test_the_real_cgroup_recording_replays_as_recorded() -> None:
    """Half an hour of real processes in real cgroups (hookserver.recorder.scenarios.cgroup_hour): the replay
    reproduces every decision the runner took there, the evictions included."""
    recording = Recording(REAL)
    run = replay(recording, ReplayConfig("recorded"))
    _, _, frames = recording.span()
    assert frames > 100 and run.mismatches == [] and run.matched == 3 * frames
    assert [e["uid"] for e in run.evictions] == [e["pod_uid"] for e in recording.evictions()]


def test_the_text_report_prints_each_eviction_message_whole(evicting: Recording) -> None:
    """A real recording's report cut the message at 110 characters, mid-number ("pod uses 24622530" for
    2462253056 bytes): an operator must read the figures the evictor used."""
    recorded = replay(evicting, ReplayConfig("recorded"))
    assert recorded.evictions
    text = render_text(compare("n", recorded, replay(evicting, _slo(memoryEvictThresholdPercent=90))))
    for e in recorded.evictions[:8]:
        assert e["message"] in text
