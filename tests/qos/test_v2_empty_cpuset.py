"""cgroup v2's empty `cpuset.cpus`: the cgroup inherits its parent's CPUs (the kubelet's systemd slices leave
the BE tier so). Found on a real Debian 12 node in the VM tier (issue 40): CPU suppress under the cfsQuota
policy "restored" the tier, its pods and containers to all CPUs by writing `0-1` into files that were empty,
pinning them; the originals for `hookserver cleanup` were then taken after that write, so cleanup left the pin
in place. Here on a v2 fixture tree whose `cpuset.cpus.effective` files say what the empty files inherit."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from hookserver.cli.serve import main
from hookserver.executor import build_executor
from hookserver.executor.fileio import OsCgroupFiles
from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.executor.settings import CgroupSettings
from hookserver.store import StateStore
from hookserver.store.originals import ORIGINALS_FILE
from hookserver.system import SystemRoots
from qos.cpu.suppress import CPUSuppress
from qos.snapshot.builder import NODE_TOPOLOGY_KEY
from tests.qos.helpers import topology
from tests.qos.part2_stack import build_stack, sample

TIER = ("kubepods", "besteffort")
QUOTA = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}


def _v2_node(root: Path) -> list[Path]:
    """kubepods/besteffort/podx/ctr with empty cpuset.cpus inheriting 0-3, the BE tier's quota unlimited."""
    root.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu memory io\n")
    dirs = [root / "kubepods", root.joinpath(*TIER), root.joinpath(*TIER, "podx"), root.joinpath(*TIER, "podx", "ctr")]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        (d / "cpuset.cpus").write_text("\n")
        (d / "cpuset.cpus.effective").write_text("0-3\n")
        (d / "cpu.max").write_text("max 100000\n")
    return dirs


def test_a_set_the_empty_cpuset_already_inherits_is_not_written(tmp_path: Path) -> None:
    dirs = _v2_node(tmp_path / "cg")
    ex = build_executor(CgroupSettings(root=str(tmp_path / "cg"), version="v2"), store=StateStore(), roots=SystemRoots())
    same = ex.apply(ResourcePlan.single([CgroupWrite("kubepods/besteffort", CgroupResource.CPUSET_CPUS, "0-3")],
                                        cacheable=False))
    assert same.ok and all(r.skipped for r in same.results)
    assert (dirs[1] / "cpuset.cpus").read_text() == "\n"  # still inheriting
    fewer = ex.apply(ResourcePlan.single([CgroupWrite("kubepods/besteffort", CgroupResource.CPUSET_CPUS, "0-1")],
                                         cacheable=False))
    assert fewer.ok and (dirs[1] / "cpuset.cpus").read_text() == "0-1"  # a real narrowing is written


def test_cfs_quota_suppress_leaves_inheriting_cpusets_alone_and_records_them_for_cleanup(tmp_path: Path) -> None:
    dirs = _v2_node(tmp_path / "cg")
    state = tmp_path / "state"
    stack = build_stack(str(tmp_path / "cg"), CPUSuppress(), gates={"BECPUSuppress": True}, version="v2",
                        state_dir=str(state), spec=QUOTA)
    stack.store.series.put_static(NODE_TOPOLOGY_KEY, topology(4))
    for _ in range(3):
        sample(stack.store, "node_cpu_usage", 0.5)
        stack.tick()
    assert [(d / "cpuset.cpus").read_text() for d in dirs] == ["\n"] * 4
    assert (dirs[1] / "cpu.max").read_text().split()[0] != "max"  # the quota policy itself did act
    recorded = json.loads((state / ORIGINALS_FILE).read_text())["cgroup"]
    assert recorded["cpuset:kubepods/besteffort/cpuset.cpus"] == ""
    assert recorded["cpu:kubepods/besteffort/cpu.max"] == "max 100000"


def test_cleanup_puts_an_inheriting_cpuset_back_to_inheriting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dirs = _v2_node(tmp_path / "cg")
    for d in dirs[1:]:
        (d / "cpuset.cpus").write_text("0-1")  # the agent's cpuset policy pinned the tier and below
    state = tmp_path / "state"
    state.mkdir()
    (state / ORIGINALS_FILE).write_text(json.dumps({"sysctl": {}, "resctrl_groups": {},
                                                    "cgroup": {"cpuset:kubepods/besteffort/cpuset.cpus": ""}}))
    config = tmp_path / "config.yaml"
    config.write_text("cgroup:\n  version: v2\n")
    argv = ["cleanup", "--config", str(config), "--state-dir", str(state), "--proc-root", str(tmp_path / "proc"), "--sys-root",
            str(tmp_path / "sys"), "--cgroup-root", str(tmp_path / "cg"), "--cgroup-driver", "cgroupfs", "--hook-socket", str(tmp_path / "h.sock"),
            "--debug-socket", str(tmp_path / "d.sock")]
    assert main(argv) == 0, capsys.readouterr()
    # a newline, as `echo > cpuset.cpus` writes it: a zero-length write never reaches the kernel's handler
    assert [(d / "cpuset.cpus").read_text() for d in dirs[1:]] == ["\n"] * 3


class _KernelRefusesEmpty(OsCgroupFiles):
    """The real files, except that emptying `populated`'s cpuset answers ENOSPC, as Linux 6.1 does for a
    cgroup with tasks (seen on the VM tier's kernel: the container scope and the pod slice above it)."""

    def __init__(self, populated: set[str]) -> None:
        self.populated = populated

    def write(self, path: str, data: str) -> None:
        if path.endswith("cpuset.cpus") and not data.strip() and os.path.dirname(path) in self.populated:
            raise OSError(errno.ENOSPC, "No space left on device")
        super().write(path, data)


def test_a_populated_cpuset_that_cannot_go_back_to_inheriting_gets_what_it_would_inherit(tmp_path: Path) -> None:
    dirs = _v2_node(tmp_path / "cg")
    for d in dirs[1:]:
        (d / "cpuset.cpus").write_text("0-1")
    (dirs[0] / "cpuset.cpus.effective").write_text("0-3\n")  # what the tier would inherit from kubepods
    files = _KernelRefusesEmpty({str(dirs[1]), str(dirs[2]), str(dirs[3])} - {str(dirs[1])})
    store = StateStore()
    ex = build_executor(CgroupSettings(root=str(tmp_path / "cg"), version="v2"), store=store, roots=SystemRoots(),
                        files=files)
    plan = ResourcePlan(levels=tuple((CgroupWrite(str(d.relative_to(tmp_path / "cg")), CgroupResource.CPUSET_CPUS, ""),)
                                     for d in dirs[1:]), leveled=True, cacheable=False)
    for d in dirs[1:3]:
        (d / "cpuset.cpus.effective").write_text("0-3\n")
    report = ex.apply(plan)
    assert report.ok, report.errors
    assert (dirs[1] / "cpuset.cpus").read_text() == "\n"  # no tasks: inherits again
    assert (dirs[2] / "cpuset.cpus").read_text() == "0-3" and (dirs[3] / "cpuset.cpus").read_text() == "0-3"
    notes = [w.reason for w in store.audit.writes() if w.path.startswith(str(dirs[2]))]
    assert any("set to what it would inherit" in n for n in notes), notes


def test_cleanup_widens_populated_cpusets_to_what_they_would_inherit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent narrowed the tier, a pod and its container to CPU 0; the pod and container have tasks. Cleanup
    leaves none of them narrower than what the tier inherits (0-3): bottom-up alone would have handed the
    container and the pod their still-narrowed parents' set."""
    dirs = _v2_node(tmp_path / "cg")
    for d in dirs[1:]:
        (d / "cpuset.cpus").write_text("0")
        (d / "cpuset.cpus.effective").write_text("0\n")
    populated = {str(dirs[2]), str(dirs[3])}
    real_write = OsCgroupFiles.write

    def kernel_write(self: OsCgroupFiles, path: str, data: str) -> None:
        if path.endswith("cpuset.cpus") and not data.strip() and os.path.dirname(path) in populated:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self, path, data)
        if path.endswith("cpuset.cpus") and data.strip():  # the fixture's stand-in for the kernel's effective
            Path(path + ".effective").write_text(data.strip() + "\n")

    monkeypatch.setattr(OsCgroupFiles, "write", kernel_write)
    state = tmp_path / "state"
    state.mkdir()
    (state / ORIGINALS_FILE).write_text(json.dumps({"sysctl": {}, "resctrl_groups": {},
                                                    "cgroup": {"cpuset:kubepods/besteffort/cpuset.cpus": ""}}))
    config = tmp_path / "config.yaml"
    config.write_text("cgroup:\n  version: v2\n")
    assert main(["cleanup", "--config", str(config), "--state-dir", str(state), "--cgroup-root", str(tmp_path / "cg"),
                 "--cgroup-driver", "cgroupfs", "--hook-socket", str(tmp_path / "h.sock"),
                 "--debug-socket", str(tmp_path / "d.sock")]) == 0, capsys.readouterr()
    assert [(d / "cpuset.cpus").read_text() for d in dirs[1:]] == ["\n", "0-3", "0-3"]
