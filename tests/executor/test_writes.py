"""Writes on fixture trees: v1 and v2 files and values, read-before-write, validators, cache, audit, metrics."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from hookserver.executor import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.observability.metrics import HookMetrics

from tests.executor.conftest import FakeClock, Tree, make_executor

POD = "/kubepods/besteffort/pod-1"
R = CgroupResource


def plan(*writes: tuple[CgroupResource, int | str], d: str = POD, cacheable: bool = True) -> ResourcePlan:
    return ResourcePlan.single(
        [CgroupWrite(d, res, val, owner="test", reason="because") for res, val in writes], cacheable=cacheable
    )


def test_v1_values_written_as_v1(v1tree: Tree) -> None:
    v1tree.cgroup(POD)
    ex, _ = make_executor(v1tree)
    report = ex.apply(plan((R.CPU_SHARES, 2048), (R.CPU_CFS_QUOTA, 300000), (R.MEMORY_LIMIT, 3221225472),
                           (R.CPUSET_CPUS, "3,0-1"), (R.BLKIO_WEIGHT, 500)))
    assert report.ok, report.errors
    assert v1tree.read(POD, "cpu.shares") == "2048"
    assert v1tree.read(POD, "cpu.cfs_quota_us") == "300000"
    assert v1tree.read(POD, "memory.limit_in_bytes") == "3221225472"
    assert v1tree.read(POD, "cpuset.cpus") == "0-1,3"
    assert v1tree.read(POD, "blkio.weight") == "500"
    ex.apply(plan((R.MEMORY_LIMIT, -1), (R.CPU_CFS_QUOTA, -1), cacheable=False))
    assert v1tree.read(POD, "memory.limit_in_bytes") == "-1"
    assert v1tree.read(POD, "cpu.cfs_quota_us") == "-1"


def test_v2_values_converted(v2tree: Tree) -> None:
    v2tree.cgroup(POD)
    ex, _ = make_executor(v2tree)
    report = ex.apply(plan((R.CPU_SHARES, 2048), (R.CPU_CFS_QUOTA, 300000), (R.MEMORY_LIMIT, 3221225472),
                           (R.CPU_CFS_BURST, 5000), (R.BLKIO_WEIGHT, 1000), (R.MEMORY_HIGH, -1)))
    assert report.ok, report.errors
    assert v2tree.read(POD, "cpu.weight") == "79"
    # the quota is written alone, so the (real) kernel keeps the period: a plain file just holds the number
    assert v2tree.read(POD, "cpu.max") == "300000"
    assert v2tree.read(POD, "memory.max") == "3221225472"
    assert v2tree.read(POD, "cpu.max.burst") == "5000"
    assert v2tree.read(POD, "io.weight") == "10000"
    ex.apply(plan((R.MEMORY_LIMIT, -1), (R.CPU_CFS_QUOTA, -1), cacheable=False))
    assert v2tree.read(POD, "memory.max") == "max"
    assert v2tree.read(POD, "cpu.max") == "max"


def test_v2_period_keeps_quota(v2tree: Tree) -> None:
    v2tree.cgroup(POD, **{"cpu.max": "50000 100000"})
    ex, _ = make_executor(v2tree)
    assert ex.apply(plan((R.CPU_CFS_PERIOD, 20000))).ok
    assert v2tree.read(POD, "cpu.max") == "50000 20000"


def test_unchanged_values_are_not_rewritten(v1tree: Tree) -> None:
    v1tree.cgroup(POD, **{"memory.limit_in_bytes": "9223372036854771712", "cpuset.cpus": "0-3"})
    ex, store = make_executor(v1tree)
    before = v1tree.path(POD, "memory.limit_in_bytes").stat().st_mtime_ns
    report = ex.apply(plan((R.MEMORY_LIMIT, -1), (R.CPUSET_CPUS, "3,2,1,0"), (R.CPU_SHARES, 1024)))
    assert [r.skipped for r in report.results] == [True, True, True]
    assert v1tree.path(POD, "memory.limit_in_bytes").stat().st_mtime_ns == before
    assert v1tree.read(POD, "cpuset.cpus") == "0-3"
    assert all("unchanged" in w.reason for w in store.audit.writes())


def test_v2_max_equals_minus_one(v2tree: Tree) -> None:
    v2tree.cgroup(POD, **{"cpu.max": "max 100000"})
    ex, _ = make_executor(v2tree)
    report = ex.apply(plan((R.CPU_CFS_QUOTA, -1), (R.MEMORY_LIMIT, -1)))
    assert all(r.skipped for r in report.results)
    assert v2tree.read(POD, "cpu.max") == "max 100000"


def test_memory_compares_page_aligned(v1tree: Tree) -> None:
    v1tree.cgroup(POD, **{"memory.limit_in_bytes": "999424"})  # what the kernel keeps for 1000000
    ex, _ = make_executor(v1tree)
    assert ex.apply(plan((R.MEMORY_LIMIT, 1000000))).results[0].skipped


@pytest.mark.parametrize(
    ("resource", "value", "needle"),
    [
        (R.CPU_SHARES, 1, "cpu.shares 1 out of range"),
        (R.CPU_SHARES, 262145, "out of range"),
        (R.CPU_CFS_QUOTA, 500, "cpu.cfs_quota_us 500"),
        (R.CPU_CFS_QUOTA, -2, "out of range"),
        (R.CPU_CFS_PERIOD, 999, "cpu.cfs_period_us"),
        (R.MEMORY_LIMIT, 0, "memory.limit_in_bytes 0"),
        (R.CPUSET_CPUS, "0-a", "cpuset.cpus"),
        (R.CPUSET_CPUS, "5-2", "descending"),
        (R.CPU_IDLE, 2, "cpu.idle"),
        (R.CPU_BVT_WARP_NS, 3, "cpu.bvt_warp_ns"),
        (R.BLKIO_WEIGHT, 5, "blkio.weight"),
        (R.CPU_SHARES, "lots", "must be an integer"),
    ],
)
def test_validators_report_file_and_value_and_write_nothing(
    v1tree: Tree, resource: CgroupResource, value: int | str, needle: str
) -> None:
    v1tree.cgroup(POD)
    ex, store = make_executor(v1tree)
    before = v1tree.snapshot()
    report = ex.apply(plan((resource, value), (R.CPU_SHARES, 512) if resource is not R.CPU_SHARES else (R.BLKIO_WEIGHT, 20)))
    bad = report.errors
    assert len(bad) == 1 and needle in bad[0].error and "ExecutorError" in bad[0].error
    assert repr(str(value)) in bad[0].error and resource.value.split(".")[0] in bad[0].path
    # the other, valid write went through; the bad one left its file alone
    changed = {p for p, c in v1tree.snapshot().items() if before[p] != c}
    assert len(changed) == 1 and bad[0].path not in changed
    assert [w.ok for w in store.audit.writes()].count(False) == 1


def test_v2_weight_validated_after_conversion(v2tree: Tree) -> None:
    v2tree.cgroup(POD)
    ex, _ = make_executor(v2tree)
    assert ex.apply(plan((R.CPU_SHARES, 2))).ok
    assert v2tree.read(POD, "cpu.weight") == "1"


def test_cache_skips_without_touching_the_file_then_force_refreshes(v1tree: Tree) -> None:
    v1tree.cgroup(POD)
    clock = FakeClock()
    reads: list[str] = []

    from hookserver.executor import OsCgroupFiles

    class Counting(OsCgroupFiles):
        def read(self, path: str) -> str:
            reads.append(path)
            return super().read(path)

    ex, store = make_executor(v1tree, clock=clock, force=60.0, files=Counting())
    assert not ex.apply(plan((R.CPU_SHARES, 512))).results[0].skipped
    reads.clear()
    # someone else changes the file; within 60 s the cached write is skipped without reading or writing
    v1tree.path(POD, "cpu.shares").write_text("2\n")
    clock.now += 59.0
    r = ex.apply(plan((R.CPU_SHARES, 512))).results[0]
    assert r.skipped and reads == [] and v1tree.read(POD, "cpu.shares") == "2"
    assert store.audit.writes()[-1].reason.endswith("[cached]")
    # a different value is never served from the cache
    assert not ex.apply(plan((R.CPU_SHARES, 256))).results[0].skipped
    assert v1tree.read(POD, "cpu.shares") == "256"
    v1tree.path(POD, "cpu.shares").write_text("2\n")
    clock.now += 60.0
    r = ex.apply(plan((R.CPU_SHARES, 256))).results[0]
    assert not r.skipped and v1tree.read(POD, "cpu.shares") == "256" and r.previous == "2"


def test_uncacheable_plans_always_read(v1tree: Tree) -> None:
    v1tree.cgroup(POD)
    ex, _ = make_executor(v1tree)
    ex.apply(plan((R.CPU_SHARES, 512)))
    v1tree.path(POD, "cpu.shares").write_text("2\n")
    ex.apply(plan((R.CPU_SHARES, 512), cacheable=False))
    assert v1tree.read(POD, "cpu.shares") == "512"


def test_failures_are_not_cached(v1tree: Tree) -> None:
    ex, _ = make_executor(v1tree)
    assert not ex.apply(plan((R.CPU_SHARES, 512))).ok  # cgroup missing
    v1tree.cgroup(POD)
    assert ex.apply(plan((R.CPU_SHARES, 512))).ok
    assert v1tree.read(POD, "cpu.shares") == "512"


def test_audit_records_every_attempt_with_owner_reason_previous(v1tree: Tree) -> None:
    v1tree.cgroup(POD)
    ex, store = make_executor(v1tree)
    ex.apply(plan((R.CPU_SHARES, 512), (R.CPU_IDLE, 7), (R.MEMORY_LIMIT, 1 << 30)))
    ex.apply(plan((R.CPU_SHARES, 512)))
    records = store.audit.writes()
    assert len(records) == 4
    shares = [w for w in records if w.path.endswith("cpu.shares")]
    assert shares[0].ok and not shares[0].skipped and shares[0].previous == "1024" and shares[0].value == "512"
    assert shares[1].skipped
    assert all(w.owner == "test" and w.reason.startswith("because") for w in records)
    idle = [w for w in records if w.path.endswith("cpu.idle")]
    assert not idle[0].ok and "cpu.idle 7" in idle[0].error


def test_metrics_count_by_resource_and_result(v1tree: Tree) -> None:
    v1tree.cgroup(POD)
    registry = CollectorRegistry()
    ex, _ = make_executor(v1tree, metrics=HookMetrics(registry))
    ex.apply(plan((R.CPU_SHARES, 512), (R.CPU_IDLE, 9)))
    ex.apply(plan((R.CPU_SHARES, 512)))
    get = registry.get_sample_value
    assert get("hookserver_cgroup_writes_total", {"resource": "cpu.shares", "result": "ok"}) == 1
    assert get("hookserver_cgroup_writes_total", {"resource": "cpu.shares", "result": "skipped"}) == 1
    assert get("hookserver_cgroup_writes_total", {"resource": "cpu.idle", "result": "error"}) == 1


def test_missing_cgroup_and_missing_file_are_reported_not_raised(v1tree: Tree) -> None:
    v1tree.cgroup(POD)
    ex, _ = make_executor(v1tree)
    report = ex.apply(ResourcePlan.single([
        CgroupWrite("/kubepods/gone", R.CPU_SHARES, 512),
        CgroupWrite(POD, R.MEMORY_MIN, 1 << 20),  # v1 without memory.min (no Alibaba kernel)
    ]))
    errors = {r.write.resource: r.error for r in report.errors}
    assert errors[R.CPU_SHARES].startswith("CgroupNotFoundError") and "/kubepods/gone/cpu.shares" in errors[R.CPU_SHARES]
    assert errors[R.MEMORY_MIN].startswith("UnsupportedResourceError") and "memory.min" in errors[R.MEMORY_MIN]


def test_period_before_quota_and_retry_after_einval(v1tree: Tree) -> None:
    """The period is written first; if the kernel refuses it (EINVAL), the quota goes first, then the period."""
    import errno

    from hookserver.executor import OsCgroupFiles

    v1tree.cgroup(POD)
    order: list[str] = []

    class PeriodRefusedOnce(OsCgroupFiles):
        refused = False

        def write(self, path: str, data: str) -> None:
            order.append(f"{path.rsplit('/', 1)[1]}={data}")
            if path.endswith("cfs_period_us") and not self.refused:
                self.refused = True
                raise OSError(errno.EINVAL, "Invalid argument")
            super().write(path, data)

    ex, store = make_executor(v1tree, files=PeriodRefusedOnce())
    report = ex.apply(plan((R.CPU_CFS_QUOTA, 20000), (R.CPU_CFS_PERIOD, 10000)))
    assert order == ["cpu.cfs_period_us=10000", "cpu.cfs_quota_us=20000", "cpu.cfs_period_us=10000"]
    assert report.ok and len(report.results) == 2
    assert v1tree.read(POD, "cpu.cfs_period_us") == "10000" and v1tree.read(POD, "cpu.cfs_quota_us") == "20000"
    first = store.audit.writes()[0]
    assert not first.ok and "EINVAL" in first.error and "retried after the quota" in first.reason


def test_systemd_v2_container_from_bare_slice_parent(v2tree: Tree) -> None:
    """The whole naming path on a v2 systemd fixture: bare slice parent -> expanded dir -> converted values."""
    uid = "1b2c3d4e_aaaa_bbbb_cccc_0123456789ab"
    cid = "ab" * 32
    parent = f"kubepods-besteffort-pod{uid}.slice"
    expanded = f"kubepods.slice/kubepods-besteffort.slice/{parent}"
    v2tree.cgroup(expanded)
    v2tree.cgroup(f"{expanded}/cri-containerd-{cid}.scope")
    ex, store = make_executor(v2tree, driver="systemd")
    ctr = ex.layout.container_dir(parent, f"containerd://{cid}")
    report = ex.apply(ResourcePlan.single([
        CgroupWrite(parent, R.CPU_SHARES, 2048),  # the dispatcher passes the CRI parent as it came
        CgroupWrite(ctr, R.CPU_SHARES, 512),
        CgroupWrite(ctr, R.CPU_CFS_QUOTA, 100000),
        CgroupWrite(ctr, R.MEMORY_LIMIT, 1 << 30),
    ]))
    assert report.ok, report.errors
    assert v2tree.read(expanded, "cpu.weight") == "79"
    scope = f"{expanded}/cri-containerd-{cid}.scope"
    assert (v2tree.read(scope, "cpu.weight"), v2tree.read(scope, "cpu.max"), v2tree.read(scope, "memory.max")) == (
        "20", "100000", str(1 << 30)
    )
    assert {w.path.rsplit("/", 2)[1] for w in store.audit.writes()} == {parent, f"cri-containerd-{cid}.scope"}


def test_v2_audit_shows_the_files_own_unit_also_for_a_cached_skip(v2tree: Tree) -> None:
    """`hookctl writes` reads these records: on v2 the shares 512 went to cpu.weight as 20, and a write the cache
    skips must say 20 too, not the plan's v1 512 (issue 40). The quota's cpu.max line keeps the kernel's period."""
    v2tree.cgroup(POD, **{"cpu.max": "max 50000"})
    ex, store = make_executor(v2tree)
    ex.apply(plan((R.CPU_SHARES, 512), (R.CPU_CFS_QUOTA, 30000)))
    v2tree.path(POD, "cpu.max").write_text("30000 50000\n")  # what a real kernel shows after the quota write
    report = ex.apply(plan((R.CPU_SHARES, 512), (R.CPU_CFS_QUOTA, 30000)))
    assert all(r.skipped for r in report.results)
    written, cached = store.audit.writes()[:2], store.audit.writes()[2:]
    assert [w.value for w in written] == ["30000", "20"]
    assert [w.value for w in cached] == ["30000", "20"]
    assert all(w.reason.endswith("[cached]") for w in cached)
    assert [r.value for r in report.results] == ["30000", "20"]


def test_v1_cached_skip_shows_the_value_written(v1tree: Tree) -> None:
    v1tree.cgroup(POD)
    ex, store = make_executor(v1tree)
    ex.apply(plan((R.CPU_SHARES, 512)))
    ex.apply(plan((R.CPU_SHARES, 512)))
    assert [w.value for w in store.audit.writes()] == ["512", "512"]


def test_v2_a_failed_read_is_audited_in_the_files_own_unit_too(v2tree: Tree) -> None:
    """A v2 file that is not there (its controller not enabled on this cgroup) fails with the value that would
    have gone to it: cpu.weight 20, not the plan's shares 512."""
    v2tree.cgroup(POD)
    v2tree.path(POD, "cpu.weight").unlink()
    ex, store = make_executor(v2tree)
    report = ex.apply(plan((R.CPU_SHARES, 512)))
    assert not report.ok and report.results[0].error.startswith("UnsupportedResourceError")
    assert [w.value for w in store.audit.writes()] == ["20"]


def test_v2_a_file_missing_for_its_controller_says_which_controller(v2tree: Tree) -> None:
    """`hookctl writes` says why cpuset.cpus is ENOENT in a cgroup whose parent does not hand cpuset down."""
    tier = "/kubepods.slice/kubepods-besteffort.slice"
    v2tree.cgroup(tier)
    v2tree.path(tier, "cpuset.cpus").unlink()
    (v2tree.root / "kubepods.slice").mkdir(exist_ok=True)
    (v2tree.root / "kubepods.slice" / "cgroup.subtree_control").write_text("cpu io memory pids\n")
    ex, store = make_executor(v2tree)
    error = ex.apply(plan((R.CPUSET_CPUS, "0-1"), d=tier)).results[0].error
    assert error.startswith("UnsupportedResourceError") and "cpuset controller is not enabled on" in error
    assert "kubepods.slice's cgroup.subtree_control" in error
    # a file missing while the controller is handed down stays the plain ENOENT
    (v2tree.root / "kubepods.slice" / "cgroup.subtree_control").write_text("cpuset cpu io memory pids\n")
    error = ex.apply(plan((R.CPUSET_CPUS, "0-1"), d=tier)).results[0].error
    assert "file not supported here" in error and "controller" not in error
