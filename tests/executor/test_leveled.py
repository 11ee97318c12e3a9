"""Leveled updates (reference §5.9): growing limits top-down, shrinking ones bottom-up, in recorded order."""

from __future__ import annotations

from hookserver.executor import CgroupResource, CgroupWrite, OsCgroupFiles, ResourcePlan

from tests.executor.conftest import Tree, make_executor

R = CgroupResource
QOS, POD, CTR = "/kubepods/besteffort", "/kubepods/besteffort/pod-1", "/kubepods/besteffort/pod-1/ctr"


class Recording(OsCgroupFiles):
    def __init__(self, root: str) -> None:
        self.root = root
        self.writes: list[tuple[str, str]] = []

    def write(self, path: str, data: str) -> None:
        rel = path.split("/kubepods/", 1)[1]
        self.writes.append((rel, data))
        super().write(path, data)


def leveled(resource: CgroupResource, values: tuple[int | str, int | str, int | str], **kw: bool) -> ResourcePlan:
    dirs = (QOS, POD, CTR)
    return ResourcePlan(levels=tuple((CgroupWrite(d, resource, v),) for d, v in zip(dirs, values)), leveled=True, **kw)


def setup(tree: Tree, **files: str) -> None:
    for d in (QOS, POD, CTR):
        tree.cgroup(d, **files)


def test_quota_grow_top_down(v1tree: Tree) -> None:
    setup(v1tree, **{"cpu.cfs_quota_us": "100000"})
    rec = Recording(str(v1tree.root))
    ex, _ = make_executor(v1tree, files=rec)
    report = ex.apply(leveled(R.CPU_CFS_QUOTA, (400000, 300000, 200000)))
    assert report.ok
    assert rec.writes == [
        ("besteffort/cpu.cfs_quota_us", "400000"),
        ("besteffort/pod-1/cpu.cfs_quota_us", "300000"),
        ("besteffort/pod-1/ctr/cpu.cfs_quota_us", "200000"),
    ]


def test_quota_shrink_bottom_up(v1tree: Tree) -> None:
    setup(v1tree, **{"cpu.cfs_quota_us": "400000"})
    rec = Recording(str(v1tree.root))
    ex, store = make_executor(v1tree, files=rec)
    report = ex.apply(leveled(R.CPU_CFS_QUOTA, (300000, 200000, 100000)))
    assert report.ok
    # pass 1 keeps the larger current values (nothing written); pass 2 writes bottom-up
    assert rec.writes == [
        ("besteffort/pod-1/ctr/cpu.cfs_quota_us", "100000"),
        ("besteffort/pod-1/cpu.cfs_quota_us", "200000"),
        ("besteffort/cpu.cfs_quota_us", "300000"),
    ]
    assert all("leveled pass 2" in w.reason for w in store.audit.writes())


def test_quota_unlimited_counts_as_infinite(v1tree: Tree) -> None:
    setup(v1tree, **{"cpu.cfs_quota_us": "200000"})
    rec = Recording(str(v1tree.root))
    ex, _ = make_executor(v1tree, files=rec)
    assert ex.apply(leveled(R.CPU_CFS_QUOTA, (-1, 100000, -1))).ok
    # -1 grows (top-down, pass 1); 100000 shrinks (pass 2)
    assert rec.writes == [
        ("besteffort/cpu.cfs_quota_us", "-1"),
        ("besteffort/pod-1/ctr/cpu.cfs_quota_us", "-1"),
        ("besteffort/pod-1/cpu.cfs_quota_us", "100000"),
    ]
    assert v1tree.read(POD, "cpu.cfs_quota_us") == "100000"


def test_quota_mixed_v2(v2tree: Tree) -> None:
    setup(v2tree, **{"cpu.max": "200000 100000"})
    rec = Recording(str(v2tree.root))
    ex, _ = make_executor(v2tree, files=rec)
    assert ex.apply(leveled(R.CPU_CFS_QUOTA, (-1, 100000, 150000))).ok
    assert rec.writes == [
        ("besteffort/cpu.max", "max"),
        ("besteffort/pod-1/ctr/cpu.max", "150000"),
        ("besteffort/pod-1/cpu.max", "100000"),
    ]


def test_cpuset_union_then_narrow(v1tree: Tree) -> None:
    setup(v1tree, **{"cpuset.cpus": "0-1"})
    rec = Recording(str(v1tree.root))
    ex, _ = make_executor(v1tree, files=rec)
    assert ex.apply(leveled(R.CPUSET_CPUS, ("2-3", "2-3", "3"))).ok
    assert rec.writes == [
        # pass 1, top-down: old ∪ new so a child is always a subset of its parent
        ("besteffort/cpuset.cpus", "0-3"),
        ("besteffort/pod-1/cpuset.cpus", "0-3"),
        ("besteffort/pod-1/ctr/cpuset.cpus", "0-1,3"),
        # pass 2, bottom-up: the real values
        ("besteffort/pod-1/ctr/cpuset.cpus", "3"),
        ("besteffort/pod-1/cpuset.cpus", "2-3"),
        ("besteffort/cpuset.cpus", "2-3"),
    ]


def test_cpuset_subset_needs_no_pass_one(v1tree: Tree) -> None:
    setup(v1tree, **{"cpuset.cpus": "0-3"})
    rec = Recording(str(v1tree.root))
    ex, _ = make_executor(v1tree, files=rec)
    assert ex.apply(leveled(R.CPUSET_CPUS, ("0-1", "0-1", "1"))).ok
    assert [w[0].count("/") for w in rec.writes] == [3, 2, 1]  # bottom-up only


def test_memory_high_grows_top_down_other_files_once(v2tree: Tree) -> None:
    setup(v2tree, **{"memory.high": "1048576"})
    rec = Recording(str(v2tree.root))
    ex, _ = make_executor(v2tree, files=rec)
    plan = ResourcePlan(
        levels=(
            (CgroupWrite(QOS, R.MEMORY_HIGH, 8 << 20), CgroupWrite(QOS, R.CPU_SHARES, 4096)),
            (CgroupWrite(POD, R.MEMORY_HIGH, 4 << 20), CgroupWrite(POD, R.CPU_SHARES, 2048)),
        ),
        leveled=True,
    )
    report = ex.apply(plan)
    assert report.ok and len(report.results) == 4
    assert rec.writes == [
        ("besteffort/memory.high", str(8 << 20)),
        ("besteffort/cpu.weight", "157"),
        ("besteffort/pod-1/memory.high", str(4 << 20)),
        ("besteffort/pod-1/cpu.weight", "79"),
    ]


def test_missing_cgroup_in_pass_one_is_not_retried(v1tree: Tree) -> None:
    v1tree.cgroup(QOS)
    v1tree.cgroup(POD)  # CTR missing
    ex, _ = make_executor(v1tree)
    report = ex.apply(leveled(R.CPU_CFS_QUOTA, (-1, -1, 100000)))
    errors = [r.error for r in report.errors]
    assert len(errors) == 1 and errors[0].startswith("CgroupNotFoundError")


def test_leveled_cached_second_apply_touches_nothing(v1tree: Tree) -> None:
    setup(v1tree, **{"cpu.cfs_quota_us": "100000"})
    rec = Recording(str(v1tree.root))
    ex, _ = make_executor(v1tree, files=rec)
    plan = leveled(R.CPU_CFS_QUOTA, (400000, 50000, 20000))
    ex.apply(plan)
    n = len(rec.writes)
    assert all(r.skipped for r in ex.apply(plan).results)
    assert len(rec.writes) == n
