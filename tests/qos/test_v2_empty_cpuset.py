"""cgroup v2's empty `cpuset.cpus`: the cgroup inherits its parent's CPUs (the kubelet's systemd slices leave
the BE tier so). Found on a real Debian 12 node in the VM tier (issue 40): CPU suppress under the cfsQuota
policy "restored" the tier, its pods and containers to all CPUs by writing `0-1` into files that were empty,
pinning them; the originals for `hookserver cleanup` were then taken after that write, so cleanup left the pin
in place. Here on a v2 fixture tree whose `cpuset.cpus.effective` files say what the empty files inherit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hookserver.cli.serve import main
from hookserver.executor import build_executor
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
