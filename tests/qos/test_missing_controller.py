"""Calm where a controller is missing (issue 40 item 4): on cgroup v2 a controller that the parent's
`cgroup.subtree_control` does not hand down has no files in the child, so `cpuset.cpus` is ENOENT in
`kubepods-besteffort.slice` until some container turns cpuset on. CPU suppress then plans no cpuset write there
(not a failed write a second), says once why its cpuset half is unavailable, and picks up by itself when the
controller appears. Fixture v2 trees under tmp_path, and the real cgroup2 mount where this host delegates.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import MappingProxyType

import pytest

from hookserver.executor import CgroupExecutor, CgroupLayout
from hookserver.slo.model import NodeSLOSpec
from hookserver.store import StateStore
from hookserver.store.records import NodeRecord, PodRecord
from hookserver.store.timeseries import series_key
from hookserver.system import SystemRoots
from hookserver.system.cgroupcontrollers import missing_controllers, subtree_control
from hookserver.system.cgroupnames import CgroupDriver
from hookserver.system.topology import CpuInfo, NodeTopology
from qos.cpu.suppress import CPUSuppress
from qos.framework.evictions import EvictionGuard, ReportOnlyBackend
from qos.framework.runner import QoSRunner
from qos.registry import gate_registry
from qos.snapshot.builder import CgroupView, SnapshotBuilder

KUBEPODS = "kubepods.slice"
TIER = f"{KUBEPODS}/kubepods-besteffort.slice"
POD = f"{TIER}/kubepods-besteffort-poda.slice"
CONTAINER = f"{POD}/cri-containerd-c1.scope"


class V2Tree:
    """A systemd-driver v2 tree whose files follow the controllers each cgroup has, as the kernel's do."""

    FILES = {"cpu": {"cpu.max": "max 100000", "cpu.weight": "100"}, "cpuset": {"cpuset.cpus": ""}}

    def __init__(self, root: Path, *, kubepods_hands_down: str) -> None:
        self.root = root
        root.mkdir(parents=True)
        (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        (root / "cgroup.subtree_control").write_text("cpuset cpu io memory pids\n")
        self.make(KUBEPODS, "cpuset cpu io memory pids", hands_down=kubepods_hands_down)
        self.make(TIER, kubepods_hands_down, hands_down=kubepods_hands_down)
        self.make(POD, kubepods_hands_down, hands_down=kubepods_hands_down)
        self.make(CONTAINER, kubepods_hands_down, hands_down="")

    def make(self, rel: str, controllers: str, *, hands_down: str) -> None:
        d = self.root / rel
        d.mkdir(parents=True, exist_ok=True)
        (d / "cgroup.controllers").write_text(controllers + "\n")
        (d / "cgroup.subtree_control").write_text(hands_down + "\n")
        for controller, files in self.FILES.items():
            for name, value in files.items():
                if controller in controllers.split():
                    (d / name).write_text(value + "\n")
                else:
                    (d / name).unlink(missing_ok=True)

    def enable_cpuset(self) -> None:
        """What `echo +cpuset > kubepods.slice/cgroup.subtree_control` (and below) does."""
        full = "cpuset cpu io memory pids"
        self.make(KUBEPODS, full, hands_down=full)
        self.make(TIER, full, hands_down=full)
        self.make(POD, full, hands_down=full)
        self.make(CONTAINER, full, hands_down="")
        for rel in (TIER, POD, CONTAINER):
            (self.root / rel / "cpuset.cpus").write_text("0-3\n")


def _topology() -> NodeTopology:
    cpus = tuple(CpuInfo(cpu=i, core=i, socket=0, numa_node=0, l3=0, online=True) for i in range(4))
    return NodeTopology(cpus=cpus, numa=())


def _runner(tree: V2Tree, policy: str) -> tuple[QoSRunner, StateStore, SnapshotBuilder, list[float]]:
    layout = CgroupLayout(version="v2", driver="systemd", roots=SystemRoots(cgroup=str(tree.root)))  # type: ignore[arg-type]
    return _runner_on(layout, policy)


def _runner_on(layout: CgroupLayout, policy: str) -> tuple[QoSRunner, StateStore, SnapshotBuilder, list[float]]:
    clock = [1000.0]
    store = StateStore(clock=lambda: clock[0])
    store.upsert_pod(PodRecord(uid="u-ls", namespace="ns", name="ls", qos_class="LS"))
    store.set_node(NodeRecord(name="n", capacity=MappingProxyType({"cpu": "4", "memory": "4Gi"})))
    store.set_node_slo(NodeSLOSpec.model_validate(
        {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": policy}}))
    store.series.put_static("node_topology", _topology())
    v2 = layout.version.value == "v2"
    view = CgroupView(hierarchy_root=layout.hierarchy_root, v2=v2, driver=CgroupDriver(layout.driver))
    builder = SnapshotBuilder(store, cgroups=view)
    reconcilers = [CPUSuppress()]
    runner = QoSRunner(
        reconcilers, gates=gate_registry(reconcilers).resolve([]), store=store,
        executor=CgroupExecutor(layout, store=store), snapshots=builder,
        evictions=EvictionGuard(ReportOnlyBackend()), clock=lambda: clock[0], mono=lambda: clock[0],
    )
    return runner, store, builder, clock


def _rounds(runner: QoSRunner, store: StateStore, clock: list[float], n: int) -> None:
    for _ in range(n):
        clock[0] += 1.0
        store.series.append(series_key("node_cpu_usage"), 1.0, ts=clock[0])
        store.series.append(series_key("pod_cpu_usage", pod="u-ls", qos="LS"), 0.5, ts=clock[0])
        runner.round()


@pytest.mark.parametrize("policy", ["cfsQuota", "cpuset"])
def test_no_failed_write_a_second_where_cpuset_is_not_handed_down(
    tmp_path: Path, policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    tree = V2Tree(tmp_path / "cg", kubepods_hands_down="cpu io memory pids")
    runner, store, builder, clock = _runner(tree, policy)
    with caplog.at_level(logging.INFO):
        _rounds(runner, store, clock, 5)
    failed = [w for w in store.audit.writes() if not w.ok]
    assert failed == [], [f"{w.path}: {w.error}" for w in failed]
    assert not any(w.path.endswith("cpuset.cpus") for w in store.audit.writes())
    row = runner.report()["reconcilers"][0]
    assert row["errors"] == 0
    # one calm line, logged once, shown by `hookctl qos` and `hookctl status`
    problem = builder.controllers_problem
    assert "cpuset" in problem and "kubepods-besteffort.slice" in problem and "unavailable" in problem
    assert runner.report()["be_tier_controllers"] == problem
    assert sum("cpuset" in r.getMessage() and "not enabled" in r.getMessage() for r in caplog.records) == 1
    assert "subtree_control" in problem
    if policy == "cfsQuota":  # the quota half still works: cpu is handed down
        assert (tree.root / TIER / "cpu.max").read_text().split()[0] != "max"
    else:
        assert "unavailable" in row["last_summary"]


def test_it_recovers_by_itself_when_the_controller_appears(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tree = V2Tree(tmp_path / "cg", kubepods_hands_down="cpu io memory pids")
    runner, store, builder, clock = _runner(tree, "cpuset")
    _rounds(runner, store, clock, 2)
    assert builder.controllers_problem
    tree.enable_cpuset()
    with caplog.at_level(logging.INFO):
        _rounds(runner, store, clock, 1)
    assert builder.controllers_problem == ""
    assert runner.report()["be_tier_controllers"] == ""
    assert any("cpuset" in r.getMessage() and "enabled now" in r.getMessage() for r in caplog.records)
    written = {w.path for w in store.audit.writes() if w.ok and w.path.endswith("cpuset.cpus")}
    assert {str(tree.root / d / "cpuset.cpus") for d in (TIER, POD, CONTAINER)} <= written
    assert (tree.root / CONTAINER / "cpuset.cpus").read_text().strip() != "0-3"  # suppressed


def test_pods_without_cpuset_are_left_out_of_the_plan(tmp_path: Path) -> None:
    """The tier has cpuset but does not hand it down: the tier is suppressed, its pods (no cpuset files) are
    not written and not failed."""
    tree = V2Tree(tmp_path / "cg", kubepods_hands_down="cpuset cpu io memory pids")
    tree.make(TIER, "cpuset cpu io memory pids", hands_down="cpu io memory pids")
    tree.make(POD, "cpu io memory pids", hands_down="cpu io memory pids")
    tree.make(CONTAINER, "cpu io memory pids", hands_down="")
    (tree.root / TIER / "cpuset.cpus").write_text("0-3\n")
    runner, store, builder, clock = _runner(tree, "cpuset")
    _rounds(runner, store, clock, 3)
    assert [w for w in store.audit.writes() if not w.ok] == []
    assert {w.path for w in store.audit.writes() if w.path.endswith("cpuset.cpus")} == {
        str(tree.root / TIER / "cpuset.cpus")}
    assert builder.controllers_problem == ""


def test_readers_of_the_controller_files(tmp_path: Path) -> None:
    tree = V2Tree(tmp_path / "cg", kubepods_hands_down="cpu io memory pids")
    root = str(tree.root)
    assert subtree_control(f"{root}/{KUBEPODS}") == frozenset({"cpu", "io", "memory", "pids"})
    assert subtree_control(f"{root}/nowhere") is None
    assert missing_controllers(root, TIER, ("cpuset", "cpu")) == frozenset({"cpuset"})
    assert missing_controllers(root, KUBEPODS, ("cpuset", "cpu")) == frozenset()
    # a tree without the control files (a plain fixture) says nothing is missing: unknown is not missing
    (tree.root / KUBEPODS / "cgroup.subtree_control").unlink()
    assert missing_controllers(root, TIER, ("cpuset",)) == frozenset()


REAL_V2 = Path("/sys/fs/cgroup/unified")
REAL_V1 = Path("/sys/fs/cgroup")


def _rmtree(top: Path) -> None:
    for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda t: -t[0].count("/")):
        os.rmdir(dirpath)


def test_a_real_v2_tier_without_cpu_and_cpuset_is_one_calm_line(tmp_path: Path) -> None:
    """The host's cgroup2 mount hands down neither cpu nor cpuset (hybrid: both are bound to v1), as a node
    whose kubepods.slice does not enable them: a systemd-layout tier made there gets no write, no error, and
    one line naming both. The subtree is ours and removed."""
    if not (REAL_V2 / "cgroup.subtree_control").exists():
        pytest.skip(f"no cgroup2 mount at {REAL_V2}")
    handed = subtree_control(str(REAL_V2)) or frozenset()
    if {"cpu", "cpuset"} & handed:
        pytest.skip(f"{REAL_V2} hands down {sorted(handed)}: not a tier without them")
    top = REAL_V2 / f"hookserver-test-calm-{tmp_path.name[-8:]}"
    try:
        (top / POD).mkdir(parents=True)
    except OSError as exc:
        pytest.skip(f"cannot create cgroups under {REAL_V2}: {exc}")
    try:
        assert not (top / TIER / "cpuset.cpus").exists() and not (top / TIER / "cpu.max").exists()
        layout = CgroupLayout(version="v2", driver="systemd", roots=SystemRoots(cgroup=str(top)))  # type: ignore[arg-type]
        runner, store, builder, clock = _runner_on(layout, "cfsQuota")
        _rounds(runner, store, clock, 3)
        assert list(store.audit.writes()) == []
        assert "cpu and cpuset not enabled on kubepods-besteffort.slice" in builder.controllers_problem
        assert "cfsQuota policy unavailable" in runner.report()["reconcilers"][0]["last_summary"]
        assert runner.report()["reconcilers"][0]["errors"] == 0
    finally:
        _rmtree(top)


def test_a_real_v1_tier_without_a_cpuset_hierarchy_dir(tmp_path: Path) -> None:
    """On the host's cgroup v1 hierarchies: a tier in the cpu hierarchy and none in cpuset. The quota is written
    and read back from the kernel; no cpuset write is tried; one line says cpuset is missing there."""
    cpu_top = REAL_V1 / "cpu" / f"hookserver-test-calm-{tmp_path.name[-8:]}"
    if os.geteuid() != 0 or not os.access(REAL_V1 / "cpu" / "cgroup.procs", os.W_OK):
        pytest.skip("needs root and a writable cgroup v1 cpu hierarchy")
    tier = "kubepods/besteffort"
    (cpu_top / tier).mkdir(parents=True)
    try:
        hierarchies = {"cpu": str(cpu_top), "cpuset": str(REAL_V1 / "cpuset" / cpu_top.name)}
        layout = CgroupLayout(version="v1", driver="cgroupfs", cgroup_root=str(REAL_V1),  # type: ignore[arg-type]
                              hierarchies=hierarchies)
        runner, store, builder, clock = _runner_on(layout, "cfsQuota")
        _rounds(runner, store, clock, 2)
        assert [w for w in store.audit.writes() if not w.ok] == []
        assert not any("cpuset" in w.path for w in store.audit.writes())
        assert (cpu_top / tier / "cpu.cfs_quota_us").read_text().strip() != "-1"
        assert builder.controllers_problem.startswith("cpuset not enabled on besteffort")
    finally:
        _rmtree(cpu_top)


def test_the_real_cgroup2_mount_says_what_it_hands_down(tmp_path: Path) -> None:
    """On the host's cgroup2 mount (hybrid: controllers bound to v1 are never in its subtree_control), a
    child we create reports exactly the controllers its parent hands down; removed afterwards."""
    if not (REAL_V2 / "cgroup.subtree_control").exists():
        pytest.skip(f"no cgroup2 mount at {REAL_V2}")
    child = REAL_V2 / f"hookserver-test-calm-{tmp_path.name[-8:]}"
    try:
        child.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot create a cgroup under {REAL_V2}: {exc}")
    try:
        handed = subtree_control(str(REAL_V2))
        assert handed is not None
        assert set((child / "cgroup.controllers").read_text().split()) == handed
        assert missing_controllers(str(REAL_V2), child.name, ("cpuset",)) == (
            frozenset() if "cpuset" in handed else frozenset({"cpuset"}))
        assert not (child / "cpuset.cpus").exists() or "cpuset" in handed
    finally:
        child.rmdir()
