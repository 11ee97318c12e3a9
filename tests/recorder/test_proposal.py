"""Proposals are overlays (issue 39): `--slo`, `--colocation`, `--predictor` and `--gate` change only the fields
they name, every other field stays as recorded, a misspelt key is refused with the closest known name, gates
are checked as the agent's `--feature-gates`, and the report prints the proposal as a diff.

Before: a partial `--slo` was resolved over koordinator's defaults (the recorded cfsQuota policy became
cpuset, the recorded memory threshold 70), a misspelt key was kept silently, `--gate BEMemoryEvict=maybe`
was taken as false and `--gate NoSuchGate=true` accepted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.cli.hookctl import main
from hookserver.errors import InputError
from hookserver.recorder.proposal import FrameOverlay, Proposal, leaves
from hookserver.recorder.proposal_files import colocation_overlay, gate_overlay, predictor_overlay, slo_overlay
from hookserver.recorder.reader import Recording
from hookserver.recorder.replay import REPLAYED_GATES
from hookserver.slo.colocation import ColocationStrategy
from hookserver.slo.model import NodeSLOSpec

from tests.recorder.helpers import small_recording

THRESHOLD_FIELDS = {
    "enable": st.booleans(),
    "cpuSuppressThresholdPercent": st.integers(0, 100),
    "cpuSuppressMinPercent": st.integers(0, 100),
    "cpuSuppressPolicy": st.sampled_from(["cpuset", "cfsQuota"]),
    "memoryEvictThresholdPercent": st.integers(50, 100),
    "cpuEvictBEUsageThresholdPercent": st.integers(0, 100),
    "cpuEvictTimeWindowSeconds": st.integers(0, 3600),
}
COLOCATION_FIELDS = {
    "enable": st.booleans(),
    "cpuReclaimThresholdPercent": st.integers(0, 100),
    "memoryReclaimThresholdPercent": st.integers(0, 100),
    "metricAggregateDurationSeconds": st.integers(1, 900),
    "metricReportIntervalSeconds": st.integers(1, 300),
    "degradeTimeMinutes": st.integers(1, 60),
}


def _some(fields: dict[str, Any], *, min_size: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    return st.lists(st.sampled_from(sorted(fields)), unique=True, min_size=min_size).flatmap(
        lambda keys: st.fixed_dictionaries({k: fields[k] for k in keys}))


def _wire(model: Any) -> dict[str, Any]:
    return dict(leaves(model.model_dump(mode="json", by_alias=True, exclude_none=True)))


@settings(max_examples=60, deadline=None)
@given(recorded=_some(THRESHOLD_FIELDS), named=_some(THRESHOLD_FIELDS, min_size=1),
       qos_on=st.booleans())
def test_an_slo_proposal_changes_only_the_fields_it_names(recorded: dict[str, Any], named: dict[str, Any],
                                                          qos_on: bool) -> None:
    base = NodeSLOSpec.model_validate({
        "resourceUsedThresholdWithBE": recorded,
        "resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": qos_on, "groupIdentity": 2}}}})
    proposal = Proposal(slo={"resourceUsedThresholdWithBE": named})
    before, after = _wire(base), _wire(proposal.slo_over(base))
    overlay = {f"resourceUsedThresholdWithBE.{k}": v for k, v in named.items()}
    for path in set(before) | set(after):
        assert after.get(path) == overlay.get(path, before.get(path)), path


@settings(max_examples=60, deadline=None)
@given(recorded=_some(COLOCATION_FIELDS), named=_some(COLOCATION_FIELDS, min_size=1))
def test_a_colocation_proposal_changes_only_the_fields_it_names(recorded: dict[str, Any],
                                                                named: dict[str, Any]) -> None:
    base = ColocationStrategy.model_validate(recorded).to_json()
    after = _wire(Proposal(colocation=named).colocation_over(base))
    for path in set(dict(leaves(base))) | set(after):
        assert after.get(path) == named.get(path, dict(leaves(base)).get(path)), path


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Recorded under cfsQuota at 80 % and memory eviction at 72 %: neither is koordinator's default."""
    slo = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 80,
                                           "cpuSuppressPolicy": "cfsQuota", "memoryEvictThresholdPercent": 72}}
    return small_recording(str(tmp_path_factory.mktemp("proposal") / "r.sqlite"), hours=0.25, pods=20, slo=slo)


def test_every_frame_keeps_what_the_proposal_does_not_name(recording: str) -> None:
    """The issue's case: `{enable: true, cpuSuppressThresholdPercent: 50}` keeps the recorded cfsQuota policy
    and memory threshold at every frame."""
    proposal = Proposal(slo={"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 50}},
                        colocation={"cpuReclaimThresholdPercent": 90})
    overlay = FrameOverlay(proposal, "proposed")
    rec = Recording(recording)
    try:
        for frame in rec.frames():
            t = overlay.snapshot(frame.snapshot).slo.resource_used_threshold_with_be
            assert (t.cpu_suppress_threshold_percent, t.cpu_suppress_policy, t.memory_evict_threshold_percent) == (
                50, "cfsQuota", 72)
            strategy = overlay.strategy(frame.colocation)
            recorded = ColocationStrategy.model_validate(dict(frame.colocation or {}))
            assert strategy == recorded.model_copy(update={"cpu_reclaim_threshold_percent": 90})
    finally:
        rec.close()


def _write(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return str(path)


KNOWN_SLO_KEYS = sorted(THRESHOLD_FIELDS) + ["cpuEvictLowerPercent", "memoryEvictLowerPercent"]


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(KNOWN_SLO_KEYS), data=st.data())
def test_a_misspelt_slo_key_is_refused_with_the_closest_name(tmp_path_factory: Any, key: str, data: Any) -> None:
    i = data.draw(st.integers(0, len(key) - 1))
    typo = key[:i] + key[i + 1:]  # one letter dropped
    known = {f.alias.lower() for f in NodeSLOSpec.model_fields["resource_used_threshold_with_be"].annotation
             .model_fields.values() if f.alias}
    if typo.lower() in known:
        return
    path = _write(tmp_path_factory.mktemp("typo"), "slo.yaml",
                  json.dumps({"resourceUsedThresholdWithBE": {typo: 50}}))
    with pytest.raises(InputError) as err:
        slo_overlay(path)
    text = str(err.value)
    assert text.startswith("--slo: ") and path in text and f"did you mean {key}?" in text


def test_the_issues_misspelling_and_bad_documents_name_the_flag_and_file(tmp_path: Path) -> None:
    typo = _write(tmp_path, "typo.yaml", "resourceUsedThresholdWithBE: {enable: true, cpuSupressThresholdPercent: 50}\n")
    with pytest.raises(InputError, match="did you mean cpuSuppressThresholdPercent"):
        slo_overlay(typo)
    cm = _write(tmp_path, "cm.yaml", "kind: ConfigMap\ndata:\n  colocation-config: '{\"enable\": true,'\n")
    with pytest.raises(InputError) as err:
        colocation_overlay(cm)
    assert str(err.value).startswith("--colocation: ") and cm in str(err.value) and "not valid JSON" in str(err.value)
    bad_yaml = _write(tmp_path, "bad.yaml", "resourceUsedThresholdWithBE: [\n")
    with pytest.raises(InputError) as err:
        slo_overlay(bad_yaml)
    assert str(err.value).startswith("--slo: ") and bad_yaml in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(InputError, match="did you mean cpuReclaimThresholdPercent"):
        colocation_overlay(_write(tmp_path, "c.json", '{"cpuReclaimThresholdPrecent": 70}'))
    with pytest.raises(InputError, match="did you mean safety_margin_percent"):
        predictor_overlay(["safety_margin_percnt=5"])


TRUE, FALSE = ("true", "1", "yes", "on", "True"), ("false", "0", "no", "off", "FALSE")


@settings(max_examples=60, deadline=None)
@given(gate=st.sampled_from([g.name for g in REPLAYED_GATES]),
       value=st.one_of(st.sampled_from(TRUE + FALSE), st.text(max_size=8)))
def test_gates_are_checked_as_the_agents_flag(gate: str, value: str) -> None:
    v = value.strip()
    if v.lower() in {x.lower() for x in TRUE + FALSE}:
        assert gate_overlay([f"{gate}={value}"], REPLAYED_GATES) == {gate: v.lower() in {"true", "1", "yes", "on"}}
    else:
        with pytest.raises(InputError, match="--gate: .*expected true or false"):
            gate_overlay([f"{gate}={value}"], REPLAYED_GATES)


def test_unknown_gates_are_refused_with_the_closest_name() -> None:
    with pytest.raises(InputError, match="unknown feature gate.*NoSuchGate"):
        gate_overlay(["NoSuchGate=true"], REPLAYED_GATES)
    with pytest.raises(InputError, match="BECpuEvict -> BECPUEvict"):
        gate_overlay(["BECpuEvict=true"], REPLAYED_GATES)


def test_the_text_and_the_page_print_the_proposal_as_a_diff(recording: str, tmp_path: Path, capsys: Any) -> None:
    slo = _write(tmp_path, "slo.yaml", "resourceUsedThresholdWithBE: {enable: true, cpuSuppressThresholdPercent: 50}\n")
    html = tmp_path / "r.html"
    args = ["replay", recording, "--slo", slo, "--gate", "BECPUEvict=true", "--predictor", "safety_margin_percent=5"]
    try:
        import plotly  # noqa: F401

        args += ["--html", str(html)]
    except ImportError:
        pass
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "resourceUsedThresholdWithBE.cpuSuppressThresholdPercent 80 -> 50" in out
    assert "resourceUsedThresholdWithBE.enable (as recorded)" in out
    assert "--gate BECPUEvict false -> true" in out and "--predictor safety_margin_percent 10 -> 5" in out
    assert "memoryEvictThresholdPercent" not in out and "cpuSuppressPolicy" not in out
    if html.exists():
        assert "cpuSuppressThresholdPercent 80 -&gt; 50" in html.read_text(encoding="utf-8")


def test_a_null_replay_says_so(recording: str, capsys: Any) -> None:
    assert main(["replay", recording]) == 0
    out = capsys.readouterr().out
    assert "none: every field as recorded" in out and "no change: every series" in out
    assert "counterfactual" not in out
