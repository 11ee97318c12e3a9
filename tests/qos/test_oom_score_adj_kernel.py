"""OOMScoreAdj on the real kernel: real processes in a real cgroup v1 subtree this test creates and removes
(`/sys/fs/cgroup/cpu/hookserver-oom-<random>/pod<uid>/<container>`), the whole runner round (snapshot
reader, planner, system-file executor, originals in the state dir), then `hookserver cleanup` through the
CLI. Every value is read back from `/proc/<pid>/oom_score_adj`."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.cli.serve import main
from hookserver.store.records import ContainerRecord, PodRecord
from hookserver.system.processes import can_lower_oom_scores
from qos.isolation import OOMScoreAdj
from qos.snapshot.oom_reader import ANNOTATION_OOM_SCORE_ADJ, ANNOTATION_OOM_SCORE_ADJ_SPEC
from tests.cgroupchild import rmdir_patiently, spawn_inside
from tests.qos.part2_stack import Stack, build_stack

pytestmark = pytest.mark.cgroup

CPU_ROOT = Path("/sys/fs/cgroup/cpu")


def _unusable() -> str:
    if os.geteuid() != 0:
        return "needs root to create cgroups and lower oom_score_adj"
    if not (CPU_ROOT / "cgroup.procs").is_file() or not os.access(CPU_ROOT, os.W_OK):
        return f"no writable cgroup v1 cpu hierarchy at {CPU_ROOT}"
    return ""


def _score(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())


class Pod:
    """A pod cgroup with two containers, each holding real sleeping processes."""

    def __init__(self) -> None:
        self.top = f"hookserver-oom-{uuid.uuid4().hex[:10]}"
        self.uid = uuid.uuid4().hex[:12]
        self.parent = f"/{self.top}/pod{self.uid}"
        self.children: list[subprocess.Popen[bytes]] = []

    def dir(self, container: str = "") -> Path:
        d = CPU_ROOT / self.top / f"pod{self.uid}"
        return d / container if container else d

    def make(self, *containers: str) -> None:
        for c in containers:
            self.dir(c).mkdir(parents=True)

    def spawn(self, container: str) -> int:
        child = spawn_inside([self.dir(container) / "cgroup.procs"], "import time; time.sleep(120)")
        self.children.append(child)
        deadline = time.monotonic() + 5
        while str(child.pid) not in (self.dir(container) / "cgroup.procs").read_text().split():
            assert time.monotonic() < deadline, "the child never joined its cgroup"
            time.sleep(0.01)
        return child.pid

    def remove(self) -> None:
        for child in self.children:
            child.kill()
            child.wait()
        top = CPU_ROOT / self.top
        if top.exists():
            for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                rmdir_patiently(d)
            rmdir_patiently(top)


@pytest.fixture
def pod_tree() -> Iterator[Pod]:
    reason = _unusable()
    if reason:
        pytest.skip(reason)
    tree = Pod()
    try:
        yield tree
    finally:
        tree.remove()


def _stack(tmp_path: Path, tree: Pod, annotations: dict[str, str], *, gate: bool = True) -> Stack:
    stack = build_stack("/sys/fs/cgroup", OOMScoreAdj(), gates={"OOMScoreAdj": gate}, state_dir=str(tmp_path / "state"))
    stack.store.upsert_pod(PodRecord(uid=tree.uid, namespace="default", name="web", kube_qos="Burstable",
                                     phase="Running", annotations=annotations, cgroup_parent=tree.parent))
    for name in ("app", "side"):
        stack.store.upsert_container(ContainerRecord(id=name, pod_uid=tree.uid, name=name, state="running"))
    return stack


def _cleanup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["cleanup", "--state-dir", str(tmp_path / "state"), "--proc-root", "/proc", "--sys-root",
               str(tmp_path / "sys"), "--cgroup-root", str(tmp_path / "cg"), "--cgroup-driver", "cgroupfs",
               "--hook-socket", str(tmp_path / "h.sock"), "--debug-socket", str(tmp_path / "d.sock")])
    return rc, capsys.readouterr().out


def test_annotated_processes_get_their_scores_new_ones_too_and_cleanup_puts_them_back(
    pod_tree: Pod, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    pod_tree.make("app", "side")
    app1, side1 = pod_tree.spawn("app"), pod_tree.spawn("side")
    before = {app1: _score(app1), side1: _score(side1)}
    stack = _stack(tmp_path, pod_tree, {ANNOTATION_OOM_SCORE_ADJ: "500", ANNOTATION_OOM_SCORE_ADJ_SPEC: '{"side": 800}'})

    stack.tick()
    assert (_score(app1), _score(side1)) == (500, 800)

    app2 = pod_tree.spawn("app")  # a process started after the first round: caught by the next
    assert _score(app2) == before[app1]
    stack.tick()
    assert _score(app2) == 500
    status = stack.runner.status_of["OOMScoreAdj"]
    assert status.last_summary.startswith("2 containers annotated; 1 processes to set, 2 already")

    stack.tick()  # nothing changed: no write at all
    assert "0 processes to set, 3 already" in stack.runner.status_of["OOMScoreAdj"].last_summary

    pod_tree.children[0].kill()  # app1 exits before cleanup: its original cannot be restored
    pod_tree.children[0].wait()
    rc, out = _cleanup(tmp_path, capsys)
    assert rc == 0, out
    assert f"gone      oom_score_adj of process {app1}@" in out
    assert f"restored  oom_score_adj of pid {side1} = {before[side1]}" in out
    assert (_score(side1), _score(app2)) == (before[side1], before[app1])
    rc, out = _cleanup(tmp_path, capsys)  # all done: a second run has nothing left
    assert "oom_score_adj" not in out


def test_turning_the_gate_off_restores_and_a_reused_pid_is_never_touched(
    pod_tree: Pod, tmp_path: Path,
) -> None:
    pod_tree.make("app")
    pid = pod_tree.spawn("app")
    before = _score(pid)
    stack = _stack(tmp_path, pod_tree, {ANNOTATION_OOM_SCORE_ADJ: "600"})
    stack.tick()
    assert _score(pid) == 600
    recorded = dict(stack.originals.section("oom_score_adj"))
    assert list(recorded.values()) == [str(before)] and next(iter(recorded)).startswith(f"{pid}@")

    # A forged original for this pid with another start time (as if the pid had been reused): forgotten, not written.
    stack.originals.record("oom_score_adj", f"{pid}@1", "-42")
    off = _stack(tmp_path, pod_tree, {ANNOTATION_OOM_SCORE_ADJ: "600"}, gate=False)
    off.tick()
    assert _score(pid) == before
    assert off.originals.section("oom_score_adj") == {}


def test_lowering_needs_cap_sys_resource_and_is_held_without_it(pod_tree: Pod, tmp_path: Path) -> None:
    """This host's containers drop CAP_SYS_RESOURCE: the kernel refuses a score below the floor (EACCES), so
    the plan holds the lowering and says why instead of failing a write every round. With the capability
    (a privileged agent), the value is set."""
    pod_tree.make("app")
    pid = pod_tree.spawn("app")
    before = _score(pid)
    stack = _stack(tmp_path, pod_tree, {ANNOTATION_OOM_SCORE_ADJ: "-500"})
    stack.tick()
    status = stack.runner.status_of["OOMScoreAdj"]
    if can_lower_oom_scores("/proc"):
        assert _score(pid) == -500
    else:
        assert _score(pid) == before
        assert "1 held (no CAP_SYS_RESOURCE to lower)" in status.last_summary
        assert any("CAP_SYS_RESOURCE" in n for n in (status.last_plan or {}).get("notes", []))
    assert status.errors == 0
