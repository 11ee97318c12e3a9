"""Real cgroup writes on this host, in a private, uniquely named subtree that is always removed.

v1: `/sys/fs/cgroup/{cpu,memory,cpuset}/hookserver-test-<random>/pod/ctr`. v2: under the cgroup2 mount when
the cpu and memory controllers are available there. Each test reads back what the kernel accepted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.executor.settings import CgroupSettings
from hookserver.executor import CgroupResource, CgroupWrite, ResourcePlan, build_executor
from hookserver.executor.executor import CgroupExecutor
from hookserver.store import StateStore
from hookserver.system import SystemRoots

pytestmark = pytest.mark.cgroup

ROOT = "/sys/fs/cgroup"
R = CgroupResource
V1_SUBSYSTEMS = ("cpu", "memory", "cpuset")


def _v1_unusable() -> str:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for sub in V1_SUBSYSTEMS:
        path = os.path.join(ROOT, sub)
        if not os.path.isfile(os.path.join(path, "cgroup.procs")) or not os.access(path, os.W_OK):
            return f"no writable cgroup v1 {sub} hierarchy at {path}"
    return ""


def _rmtree_cgroup(top: str) -> None:
    """rmdir bottom-up (cgroup dirs hold only kernel files, which rmdir removes with them)."""
    if not os.path.isdir(top):
        return
    for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda t: -t[0].count("/")):
        os.rmdir(dirpath)


class V1Subtree:
    def __init__(self) -> None:
        self.name = f"hookserver-test-{uuid.uuid4().hex[:12]}"
        self.pod = f"/{self.name}/pod"
        self.ctr = f"/{self.name}/pod/ctr"

    def make(self) -> None:
        for sub in V1_SUBSYSTEMS:
            os.makedirs(os.path.join(ROOT, sub, self.name, "pod", "ctr"))

    def remove(self) -> None:
        for sub in V1_SUBSYSTEMS:
            _rmtree_cgroup(os.path.join(ROOT, sub, self.name))

    def read(self, rel: str, name: str) -> str:
        return Path(ROOT, name.split(".")[0], rel.lstrip("/"), name).read_text().strip()


@pytest.fixture
def v1() -> Iterator[tuple[V1Subtree, CgroupExecutor, StateStore]]:
    reason = _v1_unusable()
    if reason:
        pytest.skip(reason)
    tree = V1Subtree()
    try:
        tree.make()
        store = StateStore()
        executor = build_executor(
            CgroupSettings(root=ROOT, version="v1", driver="cgroupfs"), store=store, roots=SystemRoots()
        )
        yield tree, executor, store
    finally:
        tree.remove()
    assert not os.path.exists(os.path.join(ROOT, "cpu", tree.name))


def single(d: str, *writes: tuple[CgroupResource, int | str]) -> ResourcePlan:
    return ResourcePlan.single([CgroupWrite(d, r, v, owner="test") for r, v in writes], cacheable=False)


def test_v1_shares_quota_memory_and_unlimited(v1: tuple[V1Subtree, CgroupExecutor, StateStore]) -> None:
    tree, ex, store = v1
    report = ex.apply(single(tree.ctr, (R.CPU_SHARES, 512), (R.CPU_CFS_QUOTA, 50000), (R.MEMORY_LIMIT, 1000000)))
    assert report.ok, report.errors
    assert tree.read(tree.ctr, "cpu.shares") == "512"
    assert tree.read(tree.ctr, "cpu.cfs_quota_us") == "50000"
    # the kernel rounds the limit down to whole pages; the executor reads that back and audits it
    held = tree.read(tree.ctr, "memory.limit_in_bytes")
    assert int(held) == 1000000 // os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PAGE_SIZE")
    mem = [r for r in report.results if r.write.resource is R.MEMORY_LIMIT][0]
    assert mem.held == held and store.audit.writes(path_contains="memory.limit")[-1].value == held
    report = ex.apply(single(tree.ctr, (R.CPU_CFS_QUOTA, -1), (R.MEMORY_LIMIT, -1)))
    assert report.ok, report.errors
    assert tree.read(tree.ctr, "cpu.cfs_quota_us") == "-1"
    assert tree.read(tree.ctr, "memory.limit_in_bytes") == "9223372036854771712"
    # and -1 now compares equal to what the kernel shows: nothing is rewritten
    assert all(r.skipped for r in ex.apply(single(tree.ctr, (R.MEMORY_LIMIT, -1), (R.CPU_CFS_QUOTA, -1))).results)


def test_v1_invalid_quota_refused_before_the_kernel(v1: tuple[V1Subtree, CgroupExecutor, StateStore]) -> None:
    tree, ex, _ = v1
    report = ex.apply(single(tree.ctr, (R.CPU_CFS_QUOTA, 500)))
    assert not report.ok and "500" in report.errors[0].error
    assert tree.read(tree.ctr, "cpu.cfs_quota_us") == "-1"


def test_v1_kernel_refusal_reported_and_leveled_update_fixes_order(
    v1: tuple[V1Subtree, CgroupExecutor, StateStore],
) -> None:
    tree, ex, _ = v1
    assert ex.apply(single(tree.pod, (R.CPU_CFS_QUOTA, 100000))).ok
    assert ex.apply(single(tree.ctr, (R.CPU_CFS_QUOTA, 50000))).ok
    # child above its parent's quota: the kernel says EINVAL; reported, not raised, nothing changed
    report = ex.apply(single(tree.ctr, (R.CPU_CFS_QUOTA, 200000)))
    (err,) = report.errors
    assert "EINVAL" in err.error and err.path.endswith("ctr/cpu.cfs_quota_us") and "'200000'" in err.error
    assert tree.read(tree.ctr, "cpu.cfs_quota_us") == "50000"
    # the same values bottom-first in one flat plan fail; as a leveled plan they grow top-down and pass
    grow = ResourcePlan(
        levels=((CgroupWrite(tree.pod, R.CPU_CFS_QUOTA, 400000),), (CgroupWrite(tree.ctr, R.CPU_CFS_QUOTA, 300000),)),
        leveled=True, cacheable=False,
    )
    assert ex.apply(grow).ok
    assert (tree.read(tree.pod, "cpu.cfs_quota_us"), tree.read(tree.ctr, "cpu.cfs_quota_us")) == ("400000", "300000")
    shrink = ResourcePlan(
        levels=((CgroupWrite(tree.pod, R.CPU_CFS_QUOTA, 20000),), (CgroupWrite(tree.ctr, R.CPU_CFS_QUOTA, 10000),)),
        leveled=True, cacheable=False,
    )
    assert ex.apply(shrink).ok
    assert (tree.read(tree.pod, "cpu.cfs_quota_us"), tree.read(tree.ctr, "cpu.cfs_quota_us")) == ("20000", "10000")


def test_v1_cpuset_leveled(v1: tuple[V1Subtree, CgroupExecutor, StateStore]) -> None:
    tree, ex, _ = v1
    cpus = sorted(os.sched_getaffinity(0))
    allowed = Path(ROOT, "cpuset", "cpuset.cpus").read_text().strip()
    mems = Path(ROOT, "cpuset", "cpuset.mems").read_text().strip()
    top = f"/{tree.name}"
    levels = [top, tree.pod, tree.ctr]

    def plan(value: str) -> ResourcePlan:
        return ResourcePlan(
            levels=tuple(
                (CgroupWrite(d, R.CPUSET_MEMS, mems), CgroupWrite(d, R.CPUSET_CPUS, value)) for d in levels
            ),
            leveled=True, cacheable=False,
        )

    # a fresh v1 cpuset is empty; a flat write to the child fails (not a subset of its empty parent)
    flat = ex.apply(single(tree.ctr, (R.CPUSET_CPUS, str(cpus[0]))))
    assert not flat.ok and "EACCES" in flat.errors[0].error
    assert ex.apply(plan(allowed)).ok
    assert tree.read(tree.ctr, "cpuset.cpus") == allowed
    if len(cpus) < 2:
        pytest.skip("one CPU: cannot test narrowing a cpuset")
    narrow = str(cpus[-1])
    report = ex.apply(plan(narrow))
    assert report.ok, report.errors
    assert [tree.read(d, "cpuset.cpus") for d in levels] == [narrow] * 3


def test_v1_memory_limit_below_usage_is_ebusy(v1: tuple[V1Subtree, CgroupExecutor, StateStore]) -> None:
    tree, ex, _ = v1
    if Path("/proc/swaps").read_text().count("\n") > 1:
        pytest.skip("swap is on: the kernel can push usage under the limit instead of refusing")
    procs = Path(ROOT, "memory", tree.ctr.lstrip("/"), "cgroup.procs")
    code = "import sys; b = bytearray(96 << 20); print('ready', flush=True); sys.stdin.read()"

    def join() -> None:
        procs.write_text(str(os.getpid()))

    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=join
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        started = time.monotonic()
        report = ex.apply(single(tree.ctr, (R.MEMORY_LIMIT, 16 << 20)))
        assert time.monotonic() - started < 10
        (err,) = report.errors
        assert "EBUSY" in err.error and "not retried" in err.error
        assert tree.read(tree.ctr, "memory.limit_in_bytes") == "9223372036854771712"
    finally:
        child.kill()
        child.wait()


def _v2_unusable(unified: str) -> str:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    controllers = Path(unified, "cgroup.controllers")
    if not controllers.is_file():
        return f"no cgroup2 mount at {unified}"
    enabled = Path(unified, "cgroup.subtree_control").read_text().split()
    missing = {"cpu", "memory"} - set(enabled)
    if missing:
        have = controllers.read_text().split()
        return (
            f"cgroup2 at {unified} has controllers {have} and subtree_control {enabled}: "
            f"{sorted(missing)} not delegated (bound to v1 on this host); not changing the host root"
        )
    return ""


def test_v2_real_writes() -> None:
    unified = os.path.join(ROOT, "unified") if os.path.isdir(os.path.join(ROOT, "unified")) else ROOT
    reason = _v2_unusable(unified)
    if reason:
        pytest.skip(reason)
    name = f"hookserver-test-{uuid.uuid4().hex[:12]}"
    top = os.path.join(unified, name)
    try:
        os.makedirs(os.path.join(top, "pod"))
        Path(top, "cgroup.subtree_control").write_text("+cpu +memory")
        ex = build_executor(CgroupSettings(root=ROOT, version="v2"), store=StateStore(), roots=SystemRoots())
        d = f"/{name}/pod"
        report = ex.apply(single(d, (R.CPU_SHARES, 2048), (R.CPU_CFS_QUOTA, 50000), (R.MEMORY_LIMIT, 64 << 20)))
        assert report.ok, report.errors
        assert Path(top, "pod", "cpu.weight").read_text().strip() == "79"
        assert Path(top, "pod", "cpu.max").read_text().split() == ["50000", "100000"]
        assert Path(top, "pod", "memory.max").read_text().strip() == str(64 << 20)
        assert ex.apply(single(d, (R.CPU_CFS_QUOTA, -1), (R.MEMORY_LIMIT, -1))).ok
        assert Path(top, "pod", "cpu.max").read_text().split()[0] == "max"
        assert Path(top, "pod", "memory.max").read_text().strip() == "max"
    finally:
        _rmtree_cgroup(top)
