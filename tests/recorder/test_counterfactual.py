"""Honest counterfactuals (issue 39): every frame where the proposal's node is not the recorded one is marked with
what the replay assumed there, a pod the agent evicted and the proposal kept is said to be missing, and a
series that means nothing for the recording (no predicted peak) is said so instead of compared as zeros.

Before: the proposed run marked nothing, "evict at 95 %: 0 evictions" carried no warning although the pods
the agent evicted were absent from its later frames, and a flat-zero prediction printed "LS above the
predicted peak 97.9 %"; small changes printed as "0.0" or "−0.0".
"""

from __future__ import annotations

from typing import Any

import pytest

from hookserver.cli.hookctl import main
from hookserver.recorder.proposal import Proposal
from hookserver.recorder.reader import Recording
from hookserver.recorder.replay import ReplayConfig, ReplayRun, replay
from hookserver.recorder.summary import compare, render_text

from tests.recorder.helpers import EVICTING_SLO, small_recording


@pytest.fixture(scope="module")
def evicting(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Half an hour in which the agent evicted BE pods (memory over its 70 %)."""
    return small_recording(str(tmp_path_factory.mktemp("cf") / "evicting.sqlite"), hours=0.5, pods=20,
                           slo=EVICTING_SLO)


def _runs(path: str, proposal: Proposal) -> tuple[ReplayRun, ReplayRun]:
    rec = Recording(path)
    try:
        return (replay(rec, ReplayConfig("recorded")),
                replay(rec, ReplayConfig("proposed", proposal, as_recorded=False)))
    finally:
        rec.close()


def test_pods_the_agent_evicted_and_the_proposal_kept_are_marked(evicting: str) -> None:
    recorded, proposed = _runs(evicting, Proposal(slo={"resourceUsedThresholdWithBE": {"memoryEvictThresholdPercent": 95}}))
    assert recorded.evictions and not proposed.evictions
    assert sorted(proposed.kept_pods) == sorted({e["uid"] for e in recorded.evictions})
    first = recorded.evictions[0]["ts"]
    for ts, why in zip(proposed.frame_ts, proposed.diverged):
        assert ("the agent evicted and the proposal kept" in why) == (ts > first), (ts, why)
    text = render_text(compare("n", recorded, proposed))
    assert "counterfactual:" in text and "may undercount" in text


def test_pods_the_proposal_evicted_are_marked_until_the_agent_evicted_them(evicting: str) -> None:
    recorded, proposed = _runs(evicting, Proposal(slo={"resourceUsedThresholdWithBE": {"memoryEvictThresholdPercent": 60}}))
    assert len(proposed.evictions) > len(recorded.evictions)
    marked = [why for why in proposed.diverged if "the proposal evicted taken off" in why]
    assert marked
    assert all(not why for ts, why in zip(proposed.frame_ts, proposed.diverged) if ts <= proposed.evictions[0]["ts"])


def test_a_pod_the_proposal_evicted_stays_gone_when_the_agent_evicts_it_later(tmp_path: Any) -> None:
    """Before: from the agent's own eviction on, the run followed the recording again, where the pod was still
    running at that frame, and the proposal evicted it a second time (the 200-pod day: 19 evictions, not 12)."""
    path = small_recording(str(tmp_path / "r.sqlite"), hours=1.0, pods=40, slo=EVICTING_SLO)
    recorded, proposed = _runs(path, Proposal(slo={"resourceUsedThresholdWithBE": {"memoryEvictThresholdPercent": 60}}))
    uids = [e["uid"] for e in proposed.evictions]
    agent = {e["uid"]: e["ts"] for e in recorded.evictions}
    early = [e for e in proposed.evictions if agent.get(e["uid"], 0.0) > e["ts"]]
    assert early, "the scenario must have the proposal evict a pod before the agent did"
    assert len(uids) == len(set(uids))


def test_a_tier_of_the_proposals_own_is_marked(evicting: str) -> None:
    _, proposed = _runs(evicting, Proposal(slo={"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 95}}))
    assert any("BE tier limits are the proposal's" in why for why in proposed.diverged)


def _flat(label: str, n: int = 10, *, predicted: float | None = 0.0, be: float = 2.0) -> ReplayRun:
    run = ReplayRun(label, frame_ts=[1000.0 + 10 * i for i in range(n)], be_cpu_cores=[be] * n,
                    predicted_cpu_milli=[predicted] * n, actual_prod_cpu_milli=[500.0] * n,
                    predicted_memory_bytes=[predicted] * n, actual_prod_memory_bytes=[1e9] * n,
                    diverged=[""] * n, cpu_capacity_cores=8.0, modelled_rounds=n)
    return run


def test_a_recording_without_a_predicted_peak_says_so_instead_of_comparing_zeros() -> None:
    cmp = compare("n", _flat("recorded"), _flat("proposed"))
    rows = {label: (a, b) for label, a, b, _c in cmp.rows}
    assert rows["LS CPU above the predicted peak (time)"] == ("n/a", "n/a")
    assert any("not meaningful here" in note for note in cmp.notes)
    assert "note: LS above the predicted peak: not meaningful" in render_text(cmp)
    real = compare("n", _flat("recorded", predicted=400.0), _flat("proposed", predicted=400.0))
    assert dict((r[0], r[1]) for r in real.rows)["LS CPU above the predicted peak (time)"] == "100.00%"
    assert not any("predicted peak" in note for note in real.notes)  # (these runs have no container facts: noted)


def test_a_small_change_is_never_printed_as_zero() -> None:
    cmp = compare("n", _flat("recorded", be=2.0), _flat("proposed", be=1.996))
    change = {label: c for label, _a, _b, c in cmp.rows}["BE CPU after suppress, mean (cores)"]
    assert change == "−0.0040"  # and the values 2.0000 and 1.9960, not 2.00 and 2.00
    assert {label: c for label, _a, _b, c in cmp.rows}["evictions"] == "±0"


def test_the_json_lists_every_marked_frame(evicting: str, tmp_path: Any, capsys: Any) -> None:
    slo = tmp_path / "slo.yaml"
    slo.write_text("resourceUsedThresholdWithBE: {memoryEvictThresholdPercent: 95}\n")
    assert main(["-o", "json", "replay", evicting, "--slo", str(slo)]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["diverged"] and all(d["assumed"] for d in doc["diverged"])
    assert doc["proposal"] == [f"--slo ({slo}) resourceUsedThresholdWithBE.memoryEvictThresholdPercent 70 -> 95"]


def test_a_recording_with_colocation_off_says_so_and_a_proposal_turning_it_on_offers(tmp_path: Any) -> None:
    """Standalone agents record colocation-config disabled: the formula offers 0 throughout. Before, the report
    compared 0.0 with 0.0 core-hours as if it meant something; now the rows are n/a with the reason, and a
    `--colocation {"enable": true}` proposal shows what would have been offered."""
    path = str(tmp_path / "off.sqlite")
    from hookserver.recorder.scenarios.synthetic import DEFAULT_COLOCATION, generate

    generate(path, pods=12, hours=0.2, step_s=10.0, colocation={**DEFAULT_COLOCATION, "enable": False})
    recorded, proposed = _runs(path, Proposal())
    cmp = compare("n", recorded, proposed)
    rows = {label: (a, b) for label, a, b, _c in cmp.rows}
    assert rows["batch-cpu offered (core-hours)"] == ("n/a", "n/a") and cmp.no_capacity
    assert any("colocation-config is disabled" in note for note in cmp.notes)
    recorded, on = _runs(path, Proposal(colocation={"enable": True}))
    turned_on = compare("n", recorded, on)
    a, b = {label: (a, b) for label, a, b, _c in turned_on.rows}["batch-cpu offered, mean (cores)"]
    assert float(a) == 0 and float(b) > 0 and not turned_on.no_capacity

