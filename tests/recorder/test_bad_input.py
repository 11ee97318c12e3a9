"""Bad input gets one line and a non-zero exit (issue 39), never a traceback.

Each row of the table failed before: an empty recording exited 0 with an all-zero report dated 1970; a
directory, a corrupted page and an export to a missing folder ended in a traceback; a truncated file got the
message of a text file (SQLite's "malformed" dropped); a failed export to an existing folder left its
`*.part` copy behind; a ConfigMap's bad JSON value exited 1 without naming the flag or the file. The fuzz
tests throw mutated recordings and arbitrary flag values at `hookctl replay`.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookserver.cli.hookctl import main
from hookserver.recorder.schema import open_write

from tests.recorder.helpers import small_recording


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> str:
    return small_recording(str(tmp_path_factory.mktemp("bad") / "good.sqlite"), hours=0.05, pods=10)


@pytest.fixture
def one_process() -> Iterator[None]:
    """Replays in this process (the fuzz runs hundreds; a process pool per run costs a second each)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "cpu_count", lambda: 1)
        yield


def _run(args: list[str], capsys: Any) -> tuple[int, str]:
    rc = main(args)
    err = capsys.readouterr().err
    return rc, err


def _empty_recording(tmp: Path, good: str) -> str:
    path = str(tmp / "empty.sqlite")
    open_write(path).close()
    return path


def _zero_bytes(tmp: Path, good: str) -> str:
    (tmp / "zero.sqlite").write_bytes(b"")
    return str(tmp / "zero.sqlite")


def _directory(tmp: Path, good: str) -> str:
    (tmp / "adir").mkdir()
    return str(tmp / "adir")


def _truncated(tmp: Path, good: str) -> str:
    data = Path(good).read_bytes()
    (tmp / "cut.sqlite").write_bytes(data[: len(data) // 2])
    return str(tmp / "cut.sqlite")


def _corrupted_page(tmp: Path, good: str) -> str:
    data = bytearray(Path(good).read_bytes())
    page = 4096
    for start in range(2 * page, len(data) - page, 3 * page):  # every third page past the schema, scribbled on
        data[start + 8:start + 200] = bytes((i * 37) % 251 for i in range(192))
    (tmp / "corrupt.sqlite").write_bytes(bytes(data))
    return str(tmp / "corrupt.sqlite")


def _other_version(tmp: Path, good: str) -> str:
    path = str(tmp / "v9.sqlite")
    shutil.copy(good, path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '9' WHERE key = 'format'")
    conn.commit()
    conn.close()
    return path


def _text_file(tmp: Path, good: str) -> str:
    (tmp / "notes.txt").write_text("not a recording\n" * 100)
    return str(tmp / "notes.txt")


def _undecodable_frame(tmp: Path, good: str) -> str:
    """Sound to SQLite, but one frame's blob is not what the writer wrote (found only while replaying)."""
    path = str(tmp / "blob.sqlite")
    shutil.copy(good, path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE frames SET misc = ? WHERE ts = (SELECT MAX(ts) FROM frames)", (b"not zlib",))
    conn.commit()
    conn.close()
    return path


RECORDINGS: list[tuple[str, Callable[[Path, str], str], str]] = [
    ("empty recording", _empty_recording, "a recording without frames"),
    ("zero bytes", _zero_bytes, "an empty file"),
    ("directory", _directory, "a directory, not a recording file"),
    ("truncated", _truncated, "SQLite found the recording malformed"),
    ("corrupted page", _corrupted_page, "SQLite found the recording malformed"),
    ("wrong format version", _other_version, "format 9; this hookserver reads formats 1 and 2"),
    ("text file", _text_file, "not an SQLite database"),
    ("undecodable frame", _undecodable_frame, "cannot decode the frame at"),
]


def test_an_undecodable_frame_found_in_a_worker_process_is_one_line(good: str, tmp_path: Path, capsys: Any) -> None:
    """The two replays run in worker processes (more than one CPU): the error crosses back as the same line."""
    path = _undecodable_frame(tmp_path, good)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "cpu_count", lambda: 2)
        rc, err = _run(["replay", path], capsys)
    _one_line_error(rc, err, path, "cannot decode the frame at")


def _one_line_error(rc: int, err: str, *words: str) -> None:
    assert rc != 0
    assert err.count("\n") == 1 and err.startswith("hookctl: error: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err


@pytest.mark.parametrize(("name", "make", "says"), RECORDINGS, ids=[r[0] for r in RECORDINGS])
def test_a_bad_recording_is_one_line(name: str, make: Callable[[Path, str], str], says: str, good: str,
                                     tmp_path: Path, capsys: Any, one_process: None) -> None:
    path = make(tmp_path, good)
    rc, err = _run(["replay", path], capsys)
    _one_line_error(rc, err, path, says)


def _state_dir(tmp: Path, good: str) -> str:
    state = tmp / "state"
    state.mkdir()
    shutil.copy(good, state / "flight-recorder.sqlite")
    return str(state)


def test_export_to_a_missing_folder_is_one_line_and_leaves_nothing(good: str, tmp_path: Path, capsys: Any) -> None:
    dest = tmp_path / "no" / "such" / "copy.sqlite"
    rc, err = _run(["record", "export", str(dest), "--state-dir", _state_dir(tmp_path, good)], capsys)
    _one_line_error(rc, err, "no folder", str(dest.parent))
    assert not dest.parent.exists()


def test_export_onto_a_folder_is_one_line_and_leaves_no_part(good: str, tmp_path: Path, capsys: Any) -> None:
    dest = tmp_path / "existing"
    dest.mkdir()
    rc, err = _run(["record", "export", str(dest), "--state-dir", _state_dir(tmp_path, good)], capsys)
    _one_line_error(rc, err, "is a directory")
    assert list(tmp_path.glob("*.part")) == []


def test_an_export_that_fails_midway_removes_its_part(good: str, tmp_path: Path, capsys: Any) -> None:
    state = _state_dir(tmp_path, good)
    data = bytearray(Path(state, "flight-recorder.sqlite").read_bytes())
    Path(state, "flight-recorder.sqlite").write_bytes(bytes(data[:100]) + bytes(len(data) - 100))  # header kept
    dest = tmp_path / "copy.sqlite"
    rc, err = _run(["record", "export", str(dest), "--state-dir", state], capsys)
    assert rc != 0 and "Traceback" not in err and err.count("\n") == 1
    assert list(tmp_path.glob("*.part")) == [] and not dest.exists()


FLAG_FILES: list[tuple[str, str, str, str]] = [
    ("--slo", "slo.yaml", "resourceUsedThresholdWithBE: [\n", "not valid YAML"),
    ("--slo", "slo.json", '{"resourceUsedThresholdWithBE": ', "not valid JSON"),
    ("--slo", "cm.yaml", "kind: ConfigMap\ndata:\n  resource-threshold-config: '{\"clusterStrategy\": {'\n",
     "not valid JSON"),
    ("--colocation", "co.json", '{"enable": true,', "not valid JSON"),
    ("--colocation", "cm.yaml", "data:\n  colocation-config: '{\"enable\": tru}'\n", "not valid JSON"),
    ("--colocation", "co.yaml", "enable: true\nmetricAggregateDurationSeconds: 0\n", "metricAggregateDurationSeconds"),
    ("--slo", "missing.yaml", None, "cannot read"),  # type: ignore[list-item]
]


@pytest.mark.parametrize(("flag", "name", "text", "says"), FLAG_FILES, ids=[f"{f[0]} {f[1]} {f[3]}" for f in FLAG_FILES])
def test_a_bad_flag_file_names_the_flag_and_the_file(flag: str, name: str, text: str | None, says: str, good: str,
                                                     tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text, encoding="utf-8")
    rc, err = _run(["replay", good, flag, str(path)], capsys)
    _one_line_error(rc, err, f"error: {flag}: ", str(path), says)


def test_an_unwritable_html_target_is_one_line(good: str, tmp_path: Path, capsys: Any, one_process: None) -> None:
    pytest.importorskip("plotly")
    rc, err = _run(["replay", good, "--html", str(tmp_path / "no" / "r.html")], capsys)
    _one_line_error(rc, err, "r.html")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0.0, 1.0), scribbles=st.lists(st.tuples(st.floats(0.0, 1.0), st.binary(min_size=1, max_size=64)),
                                                   max_size=4))
def test_fuzz_recording_bytes_never_a_traceback(good: str, tmp_path_factory: Any, capsys: Any, one_process: None,
                                                cut: float, scribbles: list[tuple[float, bytes]]) -> None:
    data = bytearray(Path(good).read_bytes())
    for at, junk in scribbles:
        start = int(at * (len(data) - 1))
        data[start:start + len(junk)] = junk
    data = data[: max(int(cut * len(data)), 0)] if cut < 1.0 else data
    path = tmp_path_factory.mktemp("fuzz") / "r.sqlite"
    path.write_bytes(bytes(data))
    rc = main(["replay", str(path)])
    err = capsys.readouterr().err
    assert rc in (0, 1, 2) and "Traceback" not in err
    if rc:
        assert err.count("\n") == 1 and err.startswith("hookctl: error: "), err


_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=120)
_DOCS = st.one_of(
    _TEXT,
    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 500), st.text(max_size=12)),
                 lambda inner: st.one_of(st.lists(inner, max_size=3),
                                         st.dictionaries(st.sampled_from([
                                             "resourceUsedThresholdWithBE", "enable", "cpuSuppressThresholdPercent",
                                             "data", "kind", "spec", "colocation-config", "resource-threshold-config",
                                             "clusterStrategy", "nodeStrategies", "cpuReclaimThresholdPercent",
                                             "metricReportIntervalSeconds", "x"]), inner, max_size=4)),
                 max_leaves=12).map(lambda doc: __import__("json").dumps(doc)),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slo=st.none() | _DOCS, colocation=st.none() | _DOCS,
       predictor=st.lists(_TEXT.filter(lambda s: not s.startswith("-")), max_size=2),
       gate=st.lists(_TEXT.filter(lambda s: not s.startswith("-")), max_size=2))
def test_fuzz_flag_values_never_a_traceback(good: str, tmp_path_factory: Any, capsys: Any, one_process: None,
                                            slo: str | None, colocation: str | None, predictor: list[str],
                                            gate: list[str]) -> None:
    tmp = tmp_path_factory.mktemp("flags")
    args = ["replay", good]
    for flag, text in (("--slo", slo), ("--colocation", colocation)):
        if text is not None:
            (tmp / f"{flag[2:]}.yaml").write_text(text, encoding="utf-8")
            args += [flag, str(tmp / f"{flag[2:]}.yaml")]
    if predictor:
        args += ["--predictor", *predictor]
    if gate:
        args += ["--gate", *gate]
    try:
        rc = main(args)
    except SystemExit as exc:  # argparse's own usage error: its usage text and exit 2, not a traceback
        rc = int(exc.code or 0)
        assert rc == 2
        capsys.readouterr()
        return
    err = capsys.readouterr().err
    assert rc in (0, 2) and "Traceback" not in err
    if rc:
        assert err.count("\n") == 1 and err.startswith("hookctl: error: "), err
