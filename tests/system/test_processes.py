"""A process's identity (pid + start ticks) and score from a fixture /proc, and the system-file executor's
"proc" root: a process that exited is a skipped write, never a failure."""

from __future__ import annotations

from pathlib import Path

from hookserver.executor.plan import FileWrite
from hookserver.executor.sysfiles import SystemFileExecutor
from hookserver.store import StateStore
from hookserver.store.originals import NodeOriginals
from hookserver.system.processes import (
    can_lower_oom_scores,
    process_key,
    read_oom_score_adj,
    read_start_ticks,
    split_process_key,
)

# Field 22 is 123456; the command name holds a space and a ")" to trip a naive split.
STAT = "77 (evil) name) S 1 77 77 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10 18446744073709551615"


def _proc(tmp_path: Path, pid: int = 77, stat: str = STAT, score: str = "-5\n") -> Path:
    d = tmp_path / str(pid)
    d.mkdir(parents=True)
    (d / "stat").write_text(stat)
    (d / "oom_score_adj").write_text(score)
    return tmp_path


def test_start_ticks_count_after_the_last_paren(tmp_path: Path) -> None:
    root = str(_proc(tmp_path))
    assert read_start_ticks(root, 77) == 123456
    assert read_oom_score_adj(root, 77) == -5
    assert read_start_ticks(root, 78) is None and read_oom_score_adj(root, 78) is None


def test_a_short_or_garbled_stat_is_no_identity(tmp_path: Path) -> None:
    root = str(_proc(tmp_path, stat="77 (x) S 1 2"))
    assert read_start_ticks(root, 77) is None
    (tmp_path / "77" / "oom_score_adj").write_text("junk")
    assert read_oom_score_adj(root, 77) is None


def test_process_keys_round_trip_and_refuse_other_text() -> None:
    assert split_process_key(process_key(12, 3456)) == (12, 3456)
    for bad in ("12", "12@", "@5", "a@1", "1@b", "1@2@3"):
        assert split_process_key(bad) is None


def test_cap_sys_resource_is_bit_24_of_capeff(tmp_path: Path) -> None:
    status = tmp_path / "self"
    status.mkdir()
    (status / "status").write_text("Name:\tx\nCapEff:\t000001fffeffffff\n")
    assert can_lower_oom_scores(str(tmp_path)) is False
    (status / "status").write_text("CapEff:\t000001ffffffffff\n")
    assert can_lower_oom_scores(str(tmp_path)) is True
    (status / "status").write_text("nothing here\n")
    assert can_lower_oom_scores(str(tmp_path)) is True


def test_a_process_that_exited_is_a_skipped_write(tmp_path: Path) -> None:
    root = _proc(tmp_path)
    store = StateStore()
    files = SystemFileExecutor({"proc": str(root)}, store=store, originals=NodeOriginals(""))
    gone, live = files.apply([
        FileWrite("proc", "99/oom_score_adj", "100", compare="int", owner="t"),
        FileWrite("proc", "77/oom_score_adj", "100", compare="int", owner="t"),
    ])
    assert (gone.ok, gone.skipped, gone.error) == (True, True, "process exited")
    assert live.ok and not live.skipped and live.previous == "-5"
    assert (root / "77" / "oom_score_adj").read_text() == "100"
