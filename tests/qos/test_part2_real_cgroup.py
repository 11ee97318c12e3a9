"""CPU burst and blkio on REAL cgroup v1 files, in private subtrees (`hookserver-test-<random>`) that are
always removed. The agent's cgroup root is a temporary directory whose `cpu`, `cpuset`, `memory` and
`blkio` entries are symlinks to those subtrees, so the kubelet layout (kubepods/burstable/pod<uid>/<ctr>)
is real cgroupfs and nothing outside the subtrees is touched. Skipped with the reason when not root or
when this kernel has no `cpu.cfs_burst_us` (Linux < 5.14).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from qos.blkio import BlkIO
from qos.cpu.burst import CPUBurst
from tests.qos.part2_stack import add_pod, build_stack, sample

pytestmark = pytest.mark.cgroup

ROOT = "/sys/fs/cgroup"
SUBSYSTEMS = ("cpu", "cpuset", "memory", "blkio")


def _unusable() -> str:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for sub in SUBSYSTEMS:
        if not os.path.isfile(os.path.join(ROOT, sub, "cgroup.procs")):
            return f"no cgroup v1 {sub} hierarchy at {ROOT}/{sub}"
    return ""


def _rmtree(top: str) -> None:
    if os.path.isdir(top):
        for dirpath, _d, _f in sorted(os.walk(top), key=lambda t: -t[0].count("/")):
            os.rmdir(dirpath)


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    reason = _unusable()
    if reason:
        pytest.skip(reason)
    name = f"hookserver-test-{uuid.uuid4().hex[:12]}"
    agent_root = tmp_path / "cgroup"
    agent_root.mkdir()
    try:
        for sub in SUBSYSTEMS:
            real = os.path.join(ROOT, sub, name)
            os.makedirs(os.path.join(real, "kubepods", "burstable"))
            os.makedirs(os.path.join(real, "kubepods", "besteffort"), exist_ok=True)
            os.symlink(real, agent_root / sub)
        yield agent_root
    finally:
        for sub in SUBSYSTEMS:
            _rmtree(os.path.join(ROOT, sub, name))


def _read(path: Path) -> str:
    return path.read_text().strip()


def test_cfs_burst_and_quota_burst_on_real_cgroups_converge_after_a_reset(root: Path) -> None:
    if not os.path.exists(os.path.join(ROOT, "cpu", "cpu.cfs_burst_us")):
        pytest.skip("this kernel has no cpu.cfs_burst_us (needs Linux >= 5.14)")
    stack = build_stack(str(root), CPUBurst(), gates={"CPUBurst": True}, spec={"cpuBurstStrategy": {"policy": "auto"}})
    pod = add_pod(stack.store, "web", kube_qos="Burstable", qos="LS", containers={"c": ({"cpu": "500m"}, {"cpu": "500m"})})
    cpu = root / "cpu"
    pdir = cpu / "kubepods" / "burstable" / f"pod{pod.uid}"
    cdir = pdir / "webc"
    cdir.mkdir(parents=True)
    for d in (pdir, cdir):
        (d / "cpu.cfs_quota_us").write_text("50000")  # the kubelet's base: 500m × 100000 µs
    sample(stack.store, "container_cpu_throttled_ratio", 0.5, container="webc")
    sample(stack.store, "node_cpu_usage", 0.5)

    # The kernel refuses a burst above the quota: the computed 500m × 1000 % × 100 ms = 500000 µs.
    report = stack.executor.apply(ResourcePlan.single([CgroupWrite(str(cdir.relative_to(cpu)), CgroupResource.CPU_CFS_BURST, 500_000)]))
    assert not report.ok and "EINVAL" in report.errors[0].error

    plans = stack.tick()
    assert plans and not plans[0].skipped, plans
    assert _read(cdir / "cpu.cfs_burst_us") == "50000"  # clamped to the quota; the kernel kept it
    assert _read(cdir / "cpu.cfs_quota_us") == "60000"  # throttled: ×1.2
    assert _read(pdir / "cpu.cfs_quota_us") == "60000"  # pod moved by the same delta, first
    # someone (the kubelet on a resize, a runtime) resets the quotas: one interval later they are ours again
    for d in (cdir, pdir):  # child first: v1 refuses a parent quota below its child's
        (d / "cpu.cfs_quota_us").write_text("50000")
    sample(stack.store, "container_cpu_throttled_ratio", 0.5, container="webc")
    sample(stack.store, "node_cpu_usage", 0.5)
    stack.tick()
    assert _read(cdir / "cpu.cfs_quota_us") == "60000" and _read(pdir / "cpu.cfs_quota_us") == "60000"
    # policy none: back to base, burst 0
    stack.set_slo({"cpuBurstStrategy": {"policy": "none"}})
    stack.tick()
    assert _read(cdir / "cpu.cfs_quota_us") == "50000" and _read(pdir / "cpu.cfs_quota_us") == "50000"
    assert _read(cdir / "cpu.cfs_burst_us") == "0"


def test_blkio_throttle_lines_on_real_cgroups(root: Path, tmp_path: Path) -> None:
    devno = ""
    for name in ("vda", "sda", "nvme0n1", "loop0"):
        text = Path("/sys/class/block", name, "dev")
        if text.exists():
            devno, device = text.read_text().strip(), name
            break
    if not devno:
        pytest.skip("no block device to throttle on this host")
    spec = {"resourceQOSStrategy": {"beClass": {"blkioQOS": {"enable": True, "blocks": [
        {"name": f"/dev/{device}", "type": "device", "ioCfg": {"readBPS": 1048576, "writeIOPS": 300}}]}}}}
    stack = build_stack(str(root), BlkIO(), gates={"BlkIOReconcile": True}, spec=spec)
    tier = root / "blkio" / "kubepods" / "besteffort"
    stack.tick()
    assert f"{devno} 1048576" in (tier / "blkio.throttle.read_bps_device").read_text()
    assert f"{devno} 300" in (tier / "blkio.throttle.write_iops_device").read_text()
    audit = [w for w in stack.store.audit.writes() if w.path.endswith("read_bps_device")]
    stack.tick()  # the line holds: not rewritten
    again = [w for w in stack.store.audit.writes() if w.path.endswith("read_bps_device")]
    assert all(w.skipped for w in again[len(audit):])
    stack.set_slo({})  # blkio no longer enabled: lift what we set
    stack.tick()
    assert devno not in (tier / "blkio.throttle.read_bps_device").read_text()
    assert devno not in (tier / "blkio.throttle.write_iops_device").read_text()


def test_standalone_cpu_burst_from_the_announced_resources_on_real_cgroups(root: Path) -> None:
    """Issue 21: standalone (no pod spec, the pod known only from the proxy), an LS container announced with
    a 50000/100000 CFS quota gets its `cpu.cfs_burst_us` from the announced limit (500m): no apiserver needed."""
    if not os.path.exists(os.path.join(ROOT, "cpu", "cpu.cfs_burst_us")):
        pytest.skip("this kernel has no cpu.cfs_burst_us (needs Linux >= 5.14)")
    from hookserver.resources import Resources
    from hookserver.store.records import ContainerRecord, PodRecord

    stack = build_stack(str(root), CPUBurst(), gates={"CPUBurst": True},
                        spec={"cpuBurstStrategy": {"policy": "cpuBurstOnly", "cpuBurstPercent": 50}})
    uid = "solo-0000-2222"
    parent = f"kubepods/burstable/pod{uid}"
    stack.store.upsert_pod(PodRecord(uid=uid, namespace="default", name="solo", qos_class="LS", cgroup_parent=parent,
                                     source="proxy"))  # what a proxy's PreRunPodSandbox tells: no spec, no phase
    stack.store.upsert_container(ContainerRecord(
        id="soloc", pod_uid=uid, name="c", cgroup_parent=parent, source="proxy",
        resources=Resources(cpu_shares=512, cpu_quota_us=50_000, cpu_period_us=100_000, memory_limit_bytes=256 << 20)))
    cdir = root / "cpu" / parent / "soloc"
    cdir.mkdir(parents=True)
    for d in (cdir.parent, cdir):
        (d / "cpu.cfs_quota_us").write_text("50000")
    sample(stack.store, "node_cpu_usage", 0.5)

    plans = stack.tick()
    assert plans and not plans[0].skipped, plans
    # 500m (announced 50000/100000) × 50 % × 100 ms = 25000 µs
    assert _read(cdir / "cpu.cfs_burst_us") == "25000"


def test_a_node_without_a_be_tier_gets_no_failed_write_and_one_calm_state(tmp_path: Path) -> None:
    """Issue 21: `make run` on a machine with no kubepods tree recorded a failed cpuset write every second
    (CPU suppress restoring the BE tier's cpuset.cpus: ENOENT). A missing tier is a state, shown once."""
    from qos.cpu.suppress import CPUSuppress
    from hookserver.debug.render_qos import render_qos
    from qos.snapshot.builder import NODE_TOPOLOGY_KEY
    from tests.qos.helpers import topology

    root = tmp_path / "cgroup"
    for sub in SUBSYSTEMS:
        (root / sub).mkdir(parents=True)  # hierarchies, but no kubepods under them
    stack = build_stack(str(root), CPUSuppress(), gates={"BECPUSuppress": True})
    stack.store.series.put_static(NODE_TOPOLOGY_KEY, topology(4))
    for _ in range(5):
        sample(stack.store, "node_cpu_usage", 0.5)
        stack.tick()
    assert stack.store.audit.writes() == []
    plans = stack.store.audit.plans(reconciler="CPUSuppress")
    assert len(plans) == 1 and "no BE tier" in plans[0].summary
    report = stack.runner.report()
    assert "no BE tier cgroup" in report["be_tier_missing"]
    assert "BE tier: no BE tier cgroup" in render_qos(report)
