"""`--evict-standalone=kill`: freeze the pod's cgroup, SIGKILL its processes, thaw, all audited. Real cgroup
v1 freezer with a real process in a private subtree; v2 `cgroup.kill` on a fixture tree."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.eviction import EvictionRequest, EvictionStatus
from hookserver.executor import CgroupLayout
from hookserver.executor.kill import CgroupKiller
from hookserver.store import StateStore
from hookserver.system import SystemRoots

ROOT = "/sys/fs/cgroup"
POD = "kubepods/besteffort/podk"


def _request(*dirs: str) -> EvictionRequest:
    return EvictionRequest("uid-k", "ns", "k", "EvictPodByNodeMemoryUsage", "memory 72% >= 70%", cgroup_dirs=dirs)


@pytest.fixture
def freezer_pod() -> Iterator[tuple[CgroupLayout, Path, subprocess.Popen[bytes]]]:
    if os.geteuid() != 0 or not os.access(os.path.join(ROOT, "freezer", "cgroup.procs"), os.W_OK):
        pytest.skip("needs root and a writable cgroup v1 freezer hierarchy")
    top = Path(ROOT, "freezer", f"hookserver-test-{uuid.uuid4().hex[:12]}")
    (top / POD / "c1").mkdir(parents=True)
    proc = subprocess.Popen(["sleep", "300"])
    child = subprocess.Popen(["sleep", "300"])
    try:
        (top / POD / "cgroup.procs").write_text(str(proc.pid))
        (top / POD / "c1" / "cgroup.procs").write_text(str(child.pid))
        layout = CgroupLayout(version="v1", driver="cgroupfs", cgroup_root=ROOT,  # type: ignore[arg-type]
                              hierarchies={"freezer": str(top), "cpu": str(top)})
        yield layout, top, proc
        assert child.wait(timeout=5) == -9
    finally:
        for p in (proc, child):
            if p.poll() is None:
                p.kill()
                p.wait()
        for dirpath, _d, _f in sorted(os.walk(top), key=lambda t: -t[0].count("/")):
            for _ in range(50):
                try:
                    os.rmdir(dirpath)
                    break
                except OSError:
                    time.sleep(0.02)


@pytest.mark.cgroup
def test_kill_freezes_kills_and_thaws_a_real_pod(freezer_pod: tuple[CgroupLayout, Path, subprocess.Popen[bytes]]) -> None:
    layout, top, proc = freezer_pod
    store = StateStore()
    result = CgroupKiller(layout, store=store).evict(_request(POD))
    assert result.status is EvictionStatus.KILLED, result
    assert "SIGKILL to 2 process(es)" in result.detail and "frozen" in result.detail
    assert proc.wait(timeout=5) == -9
    writes = [(Path(w.path).name, w.value, w.ok) for w in store.audit.writes()]
    assert writes == [("freezer.state", "FROZEN", True), ("freezer.state", "THAWED", True)]
    assert (top / POD / "freezer.state").read_text().strip() == "THAWED"
    assert all(w.owner == "qos:evict-standalone" and "memory 72%" in w.reason for w in store.audit.writes())


def test_kill_v2_uses_cgroup_kill_on_a_fixture(tmp_path: Path) -> None:
    pod = tmp_path / "kubepods.slice" / "kubepods-besteffort.slice" / "pod-k.slice"
    pod.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    for name, value in (("cgroup.freeze", "0"), ("cgroup.kill", ""), ("cgroup.events", "populated 1\nfrozen 1\n"),
                        ("cgroup.procs", "4242\n")):
        (pod / name).write_text(value)
    layout = CgroupLayout(version="v2", driver="systemd", roots=SystemRoots(cgroup=str(tmp_path)))  # type: ignore[arg-type]
    store = StateStore()
    killed: list[int] = []
    rel = "kubepods.slice/kubepods-besteffort.slice/pod-k.slice"
    result = CgroupKiller(layout, store=store, kill=lambda pid, sig: killed.append(pid)).evict(_request(rel))
    assert result.status is EvictionStatus.KILLED and "cgroup.kill" in result.detail
    assert (pod / "cgroup.kill").read_text() == "1" and (pod / "cgroup.freeze").read_text() == "0"
    assert [Path(w.path).name for w in store.audit.writes()] == ["cgroup.freeze", "cgroup.kill", "cgroup.freeze"]
    assert killed == []  # one cgroup.kill write, no per-process signals


def test_kill_refuses_an_escaping_or_missing_directory(tmp_path: Path) -> None:
    (tmp_path / "freezer").mkdir()
    layout = CgroupLayout(version="v1", driver="cgroupfs", roots=SystemRoots(cgroup=str(tmp_path)))  # type: ignore[arg-type]
    killer = CgroupKiller(layout, store=StateStore(), kill=lambda pid, sig: None)
    assert killer.evict(_request("../../etc")).status is EvictionStatus.FAILED
    assert killer.evict(_request("kubepods/besteffort/gone")).status is EvictionStatus.NOT_FOUND
    assert killer.evict(_request()).status is EvictionStatus.FAILED
