"""Temporary files of killed writers do not pile up (found by `make soak`: every kill -9 of the agent during an
originals or registration write left one more `*.tmp.<pid>…` file, forever).

The kill test is real: a child process writes in a loop (tests/soak/writers.py) and is killed with SIGKILL at
random instants, then the agent's own loader runs. The unit test pins which files are removed: only those of
processes that are gone.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hookserver.proxy.registration import Registration
from hookserver.store.originals import ORIGINALS_FILE, NodeOriginals
from tests.soak import writers

ROOT = Path(__file__).resolve().parents[1]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("kind", ["originals", "registration", "checkpoint"])
def test_kill_9_mid_write_leaves_at_most_one_temporary_file(tmp_path: Path, kind: str) -> None:
    rng = random.Random(7)
    for _ in range(8):
        proc = subprocess.Popen([sys.executable, "-m", "tests.soak.writers", kind, str(tmp_path)],
                                stdout=subprocess.PIPE, cwd=ROOT)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.03))
        proc.kill()
        proc.wait()
        proc.stdout.close()
        assert writers.load(kind, str(tmp_path)) == []  # nothing half-written was loaded or set aside
    if kind == "registration":  # the registration's own write is what cleans up, as at an agent's start
        Registration.build(directory=str(tmp_path), name="hookserver", remote_endpoint="/run/x.sock",
                           failure_policy="Ignore", runtime_hooks=["PreRunPodSandbox"]).write()
    leftovers = [p.name for p in tmp_path.rglob("*") if ".tmp" in p.name]
    assert leftovers == []


def test_originals_remove_only_temporary_files_of_dead_processes(tmp_path: Path) -> None:
    (tmp_path / ORIGINALS_FILE).write_text(json.dumps({"cgroup": {"cpu:a/cpu.shares": "1024"}}))
    dead = tmp_path / f"{ORIGINALS_FILE}.tmp.{_dead_pid()}.1"
    live = tmp_path / f"{ORIGINALS_FILE}.tmp.{1}.1"  # init never goes away
    other = tmp_path / "unrelated.tmp.5.1"
    for path in (dead, live, other):
        path.write_text("{")
    originals = NodeOriginals(str(tmp_path))
    assert originals.get("cgroup", "cpu:a/cpu.shares") == "1024" and originals.problem == ""
    assert not dead.exists() and live.exists() and other.exists()
    assert originals.tmp_removed == [dead.name]


def test_registration_removes_only_temporary_files_of_dead_processes(tmp_path: Path) -> None:
    dead = tmp_path / f".hookserver.json.{_dead_pid()}.tmp"
    live = tmp_path / ".hookserver.json.1.tmp"
    other = tmp_path / ".other.json.77.tmp"
    for path in (dead, live, other):
        path.write_text("{")
    Registration.build(directory=str(tmp_path), name="hookserver", remote_endpoint="/run/x.sock",
                       failure_policy="Ignore", runtime_hooks=["PreRunPodSandbox"]).write()
    assert not dead.exists() and live.exists() and other.exists()
    assert json.loads((tmp_path / "hookserver.json").read_text())["remote-endpoint"] == "/run/x.sock"
