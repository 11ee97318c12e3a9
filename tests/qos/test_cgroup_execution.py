"""QoS plans carried out on real cgroups: a private BE tier under /sys/fs/cgroup/{cpu,cpuset}/hookserver-test-*
(cgroupfs layout), values read back from the kernel, the subtree removed; cgroup v2 on a fixture tree.

The full path runs: store + series -> SnapshotBuilder (reads the tier's real files) -> CPUSuppress.plan ->
QoSRunner -> CgroupExecutor (leveled writes) -> kernel.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import pytest

from hookserver.executor import CgroupExecutor, CgroupLayout
from hookserver.slo.model import NodeSLOSpec
from hookserver.store import StateStore
from hookserver.store.records import NodeRecord, PodRecord
from hookserver.store.timeseries import series_key
from hookserver.system import SystemRoots
from hookserver.system.cgroupnames import CgroupDriver
from hookserver.system.topology import read_node_topology
from qos.cpu.suppress import CPUSuppress, _cpuset_writes
from qos.framework.evictions import EvictionGuard, ReportOnlyBackend
from qos.snapshot.builder import CgroupView, SnapshotBuilder
from qos.registry import gate_registry
from qos.framework.runner import QoSRunner
from qos.snapshot.model import BETier

ROOT = "/sys/fs/cgroup"
TIER = "kubepods/besteffort"
DIRS = (TIER, f"{TIER}/poda", f"{TIER}/poda/c1", f"{TIER}/podb")


def _unusable() -> str:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for sub in ("cpu", "cpuset"):
        if not os.access(os.path.join(ROOT, sub, "cgroup.procs"), os.W_OK):
            return f"no writable cgroup v1 {sub} hierarchy at {ROOT}/{sub}"
    if len(read_node_topology(SystemRoots()).cpus) < 2:
        return "needs at least 2 CPUs"
    return ""


def _rmtree(top: str) -> None:
    if os.path.isdir(top):
        for dirpath, _d, _f in sorted(os.walk(top), key=lambda t: -t[0].count("/")):
            os.rmdir(dirpath)


class Tier:
    def __init__(self) -> None:
        self.name = f"hookserver-test-{uuid.uuid4().hex[:12]}"
        self.roots = {sub: os.path.join(ROOT, sub, self.name) for sub in ("cpu", "cpuset")}
        self.layout = CgroupLayout(version="v1", driver="cgroupfs", cgroup_root=ROOT, hierarchies=self.roots)  # type: ignore[arg-type]

    def make(self) -> None:
        """Create every level top-down; v1 cpuset children start empty, so each gets cpus and mems."""
        mems = Path(ROOT, "cpuset", "cpuset.mems").read_text().strip()
        for sub, top in self.roots.items():
            os.makedirs(top)
            if sub == "cpuset":
                self._cpuset(top, "0-1", mems)
            for rel in ("kubepods", *DIRS):
                path = os.path.join(top, rel)
                os.makedirs(path, exist_ok=True)
                if sub == "cpuset":
                    self._cpuset(path, "0-1" if rel == "kubepods" else "0", mems)

    @staticmethod
    def _cpuset(path: str, cpus: str, mems: str) -> None:
        Path(path, "cpuset.mems").write_text(mems)
        Path(path, "cpuset.cpus").write_text(cpus)

    def read(self, sub: str, rel: str, name: str) -> str:
        return Path(self.roots[sub], rel, name).read_text().strip()

    def remove(self) -> None:
        for top in self.roots.values():
            _rmtree(top)


@pytest.fixture
def tier() -> Iterator[Tier]:
    why = _unusable()
    if why:
        pytest.skip(why)
    t = Tier()
    try:
        t.make()
        yield t
    finally:
        t.remove()


def _store(policy: str, *, enable: bool = True) -> tuple[StateStore, list[float]]:
    clock = [1000.0]
    store = StateStore(clock=lambda: clock[0])
    store.upsert_pod(PodRecord(uid="u-ls", namespace="ns", name="ls", qos_class="LS"))
    store.set_node(NodeRecord(name="n", capacity=MappingProxyType({"cpu": "2", "memory": "4Gi"})))
    _slo(store, policy, enable=enable)
    store.series.put_static("node_topology", read_node_topology(SystemRoots()))
    return store, clock


def _slo(store: StateStore, policy: str, *, enable: bool = True) -> None:
    store.set_node_slo(NodeSLOSpec.model_validate(
        {"resourceUsedThresholdWithBE": {"enable": enable, "cpuSuppressPolicy": policy}}))


def _samples(store: StateStore, now: float) -> None:
    store.series.append(series_key("node_cpu_usage"), 0.5, ts=now)
    store.series.append(series_key("pod_cpu_usage", pod="u-ls", qos="LS"), 0.2, ts=now)


def _runner(t: Tier, store: StateStore, clock: list[float]) -> tuple[QoSRunner, CgroupExecutor]:
    executor = CgroupExecutor(t.layout, store=store)
    view = CgroupView(hierarchy_root=t.layout.hierarchy_root, v2=False, driver=CgroupDriver.CGROUPFS)
    reconcilers = [CPUSuppress()]
    runner = QoSRunner(
        reconcilers, gates=gate_registry(reconcilers).resolve([]), store=store, executor=executor,
        snapshots=SnapshotBuilder(store, cgroups=view), evictions=EvictionGuard(ReportOnlyBackend()),
        clock=lambda: clock[0], mono=lambda: clock[0],
    )
    return runner, executor


@pytest.mark.cgroup
def test_suppress_rounds_on_a_real_be_tier(tier: Tier) -> None:
    store, clock = _store("cpuset")
    runner, _ = _runner(tier, store, clock)
    _samples(store, clock[0])
    # Round 1, cpuset: budget 2000 × 65% − 200 − max(300, 0) = 800m -> the 2-CPU floor: 0-1, grown from 0.
    plan = runner.round()[0]
    assert plan.numbers["budget_milli"] == 800 and plan.numbers["cpuset"] == "0-1"
    assert [tier.read("cpuset", d, "cpuset.cpus") for d in DIRS] == ["0-1"] * 4
    # Growing: the union pass wrote parents before children (a child may not exceed its parent in v1).
    grown = [w.path for w in store.audit.writes() if w.path.endswith("cpuset.cpus") and w.ok and not w.skipped]
    depth = [p.count("/") for p in grown]
    assert depth == sorted(depth) and len(grown) == 4

    # Round 2, cfsQuota: the tier's quota = 800m × 100 = 80000 µs, read back from the kernel.
    _slo(store, "cfsQuota")
    clock[0] += 1.0
    _samples(store, clock[0])
    plan = runner.round()[0]
    assert plan.numbers["quota_us"] == 80000
    assert tier.read("cpu", TIER, "cpu.cfs_quota_us") == "80000"

    # Round 3, suppress off: the quota goes back to unlimited.
    _slo(store, "cfsQuota", enable=False)
    clock[0] += 1.0
    _samples(store, clock[0])
    runner.round()
    assert tier.read("cpu", TIER, "cpu.cfs_quota_us") == "-1"
    assert runner.report()["reconcilers"][0]["errors"] == 0


@pytest.mark.cgroup
def test_union_first_moves_be_between_cpus_on_the_kernel(tier: Tier) -> None:
    """{0} -> {1} on tier, pods and containers: written plainly top-down the kernel refuses it (a parent
    may not drop CPUs a child uses); the leveled plan the reconciler emits writes 0-1 top-down, then 1
    bottom-up, and every level ends at 1."""
    store = StateStore()
    executor = CgroupExecutor(tier.layout, store=store)
    levels = ((TIER,), (f"{TIER}/poda", f"{TIER}/podb"), (f"{TIER}/poda/c1",))
    plan = _cpuset_writes(BETier(TIER), frozenset({1}), dirs=levels, reason="test", owner="CPUSuppress")
    from dataclasses import replace

    naive = executor.apply(replace(plan, leveled=False, cacheable=False))
    assert not naive.ok  # the tier cannot shrink below its children
    assert tier.read("cpuset", f"{TIER}/poda/c1", "cpuset.cpus") == "0"
    report = executor.apply(plan)
    assert report.ok, report.errors
    assert [tier.read("cpuset", d, "cpuset.cpus") for d in DIRS] == ["1", "1", "1", "1"]
    ordered = [(w.path.count("/"), w.value) for w in store.audit.writes() if w.ok and not w.skipped][-8:]
    grow, final = ordered[:4], ordered[4:]
    assert [v for _, v in grow] == ["0-1"] * 4 and [d for d, _ in grow] == sorted(d for d, _ in grow)
    assert [v for _, v in final] == ["1"] * 4 and [d for d, _ in final] == sorted((d for d, _ in final), reverse=True)


def test_v2_quota_goes_to_cpu_max_on_a_fixture_tree(tmp_path: Path) -> None:
    root = tmp_path / "cg"
    tier_dir = root / "kubepods.slice" / "kubepods-besteffort.slice"
    tier_dir.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for d in (root / "kubepods.slice", tier_dir):
        (d / "cpu.max").write_text("max 100000\n")
        (d / "cpuset.cpus").write_text("0-1\n")
    layout = CgroupLayout(version="v2", driver="systemd", roots=SystemRoots(cgroup=str(root)))  # type: ignore[arg-type]
    store, clock = _store("cfsQuota")
    executor = CgroupExecutor(layout, store=store)
    view = CgroupView(hierarchy_root=layout.hierarchy_root, v2=True, driver=CgroupDriver.SYSTEMD)
    reconcilers = [CPUSuppress()]
    runner = QoSRunner(
        reconcilers, gates=gate_registry(reconcilers).resolve([]), store=store, executor=executor,
        snapshots=SnapshotBuilder(store, cgroups=view), evictions=EvictionGuard(ReportOnlyBackend()),
        clock=lambda: clock[0], mono=lambda: clock[0],
    )
    _samples(store, clock[0])
    runner.round()
    assert (tier_dir / "cpu.max").read_text().strip() == "80000"  # the kernel keeps the period
    _slo(store, "cpuset", enable=False)
    clock[0] += 1
    _samples(store, clock[0])
    runner.round()
    assert (tier_dir / "cpu.max").read_text().strip().split()[0] == "max"
    assert any(w.path.endswith("cpu.max") and w.owner == "CPUSuppress" for w in store.audit.writes())
