"""`hookctl replay` and `hookctl record export` from the command line: exit codes and what they print."""

from __future__ import annotations

import json

import pytest

from hookserver.cli.hookctl import main

from tests.recorder.helpers import small_recording


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> str:
    return small_recording(str(tmp_path_factory.mktemp("cli") / "r.sqlite"), hours=0.5)


def test_replay_prints_the_side_by_side_summary(recording: str, tmp_path, capsys) -> None:
    slo = tmp_path / "slo.yaml"
    slo.write_text("resourceUsedThresholdWithBE:\n  enable: true\n  memoryEvictThresholdPercent: 60\n")
    colocation = tmp_path / "colocation.json"
    colocation.write_text(json.dumps({"enable": True, "cpuReclaimThresholdPercent": 80}))
    assert main(["replay", recording, "--slo", str(slo), "--colocation", str(colocation),
                 "--predictor", "safety_margin_percent=5"]) == 0
    out = capsys.readouterr().out
    assert "recorded decisions reproduced, 0 not" in out
    assert "batch-cpu offered (core-hours)" in out and "evictions proposed:" in out
    assert main(["-o", "json", "replay", recording]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["reproduced"]["mismatched"] == 0 and doc["rows"]


def test_bad_input_is_a_usage_error_naming_the_flag(recording: str, tmp_path, capsys) -> None:
    assert main(["replay", recording, "--predictor", "safety_margin_percent"]) == 2
    assert "--predictor" in capsys.readouterr().err
    assert main(["replay", recording, "--predictor", "no_such_setting=1"]) == 2
    assert main(["replay", str(tmp_path / "missing.sqlite")]) == 2
    not_a_recording = tmp_path / "x.sqlite"
    not_a_recording.write_bytes(b"")
    assert main(["replay", str(not_a_recording)]) == 2
    assert "an empty file, not a recording" in capsys.readouterr().err


def test_record_export_copies_the_state_dir_recording(recording: str, tmp_path, capsys) -> None:
    import shutil

    state = tmp_path / "state"
    state.mkdir()
    shutil.copy(recording, state / "flight-recorder.sqlite")
    out = tmp_path / "copy.sqlite"
    assert main(["record", "export", str(out), "--state-dir", str(state)]) == 0
    assert f"{out}:" in capsys.readouterr().out
    assert main(["replay", str(out)]) == 0
    assert main(["record", "export", str(out), "--state-dir", str(tmp_path / "nowhere")]) == 1
