"""Against the real machine: node CPU and memory agree with psutil, and a busy child in a real cgroup v1
subtree reads about one core. The cgroup test needs root and writable v1 cpu, cpuacct and memory
hierarchies; it creates its own uniquely named cgroups and removes them, even on failure."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from collectors import build_collectors
from hookserver.config import Settings
from hookserver.executor.settings import CgroupSettings
from hookserver.store.state import StateStore
from hookserver.store.timeseries import series_key
from hookserver.system.roots import SystemRoots
from tests.cgroupchild import rmdir_patiently, spawn_inside
from tests.collectors.fakehost import make_pod

CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("cpu", "cpuacct", "memory")

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs a Linux /proc")


def _scheduler(store: StateStore, version: str = "auto") -> object:
    settings = Settings(node_name="real", cgroup=CgroupSettings(version=version, driver="cgroupfs"))  # type: ignore[arg-type]
    return build_collectors(settings, store=store, roots=SystemRoots(), registry=None)


def test_node_cpu_and_memory_agree_with_psutil() -> None:
    store = StateStore()
    sched = build_collectors(Settings(node_name="real"), store=store, roots=SystemRoots(), registry=None)
    before = psutil.cpu_times()
    sched.run_group(["node_resource"], 1.0)
    burn_until = time.monotonic() + 0.6
    while time.monotonic() < burn_until:  # some load, so the comparison is not 0 vs 0
        pass
    sched.run_group(["node_resource"], 1.0)
    after = psutil.cpu_times()
    vm = psutil.virtual_memory()
    busy = sum(getattr(after, f) - getattr(before, f) for f in ("user", "nice", "system", "irq", "softirq", "steal"))
    total = busy + (after.idle - before.idle) + (after.iowait - before.iowait)
    psutil_cores = busy / total * psutil.cpu_count()
    last = store.series.last(series_key("node_cpu_usage", node="real"))
    assert last is not None
    assert last[1] == pytest.approx(psutil_cores, abs=0.25)
    assert 0.5 <= last[1] <= psutil.cpu_count() + 0.01  # this test itself kept one CPU busy
    memory = store.series.last(series_key("node_memory_usage", node="real"))
    assert memory is not None
    assert memory[1] == pytest.approx(vm.total - vm.available, abs=max(64 << 20, 0.05 * vm.total))
    total_mem = store.series.last(series_key("node_memory_total", node="real"))
    assert total_mem is not None and total_mem[1] == vm.total


def _v1_writable() -> str:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for controller in V1_CONTROLLERS:
        path = CGROUP_ROOT / controller
        if not (path / "cgroup.procs").exists() or not os.access(path, os.W_OK):
            return f"needs a writable cgroup v1 {controller} hierarchy at {path}"
    return ""


@pytest.mark.cgroup
def test_a_child_spawned_inside_is_charged_from_its_first_page() -> None:
    # tests/cgroupchild.py's promise, with the parent slow on purpose: nothing the child allocates escapes.
    reason = _v1_writable()
    if reason:
        pytest.skip(reason)
    cgroup = CGROUP_ROOT / "memory" / f"hookserver-test-spawn-{uuid.uuid4().hex[:10]}"
    cgroup.mkdir()
    child: subprocess.Popen[bytes] | None = None
    try:
        child = spawn_inside(
            [cgroup / "cgroup.procs"], "import time\nx = b'x' * (32 << 20)\nprint('ready', flush=True)\ntime.sleep(60)",
            stdout=subprocess.PIPE,
        )
        time.sleep(0.5)  # a parent this slow used to move the child after its 32 MiB were charged elsewhere
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        assert int((cgroup / "memory.usage_in_bytes").read_text()) >= 32 << 20
    finally:
        if child is not None:
            child.kill()
            child.wait(timeout=10)
        rmdir_patiently(cgroup)


@pytest.fixture
def busy_cgroup() -> Iterator[tuple[str, int]]:
    reason = _v1_writable()
    if reason:
        pytest.skip(reason)
    name = f"hookserver-test-collectors-{uuid.uuid4().hex[:10]}"
    made: list[Path] = []
    child: subprocess.Popen[bytes] | None = None
    try:
        for controller in V1_CONTROLLERS:
            path = CGROUP_ROOT / controller / name
            path.mkdir()
            made.append(path)
        child = spawn_inside([path / "cgroup.procs" for path in made], "while True: pass")
        yield name, child.pid
    finally:
        if child is not None:
            child.kill()
            child.wait(timeout=10)
        for path in reversed(made):
            rmdir_patiently(path)


@pytest.mark.cgroup
def test_busy_child_in_a_real_v1_cgroup_reads_about_one_core(busy_cgroup: tuple[str, int]) -> None:
    name, pid = busy_cgroup
    store = StateStore()
    store.upsert_pod(make_pod("real-uid", cgroup_parent=f"/{name}", qos_class="LS"))
    settings = Settings(node_name="real", cgroup=CgroupSettings(version="v1", driver="cgroupfs"))
    sched = build_collectors(settings, store=store, roots=SystemRoots(), registry=None)
    proc = psutil.Process(pid)
    time.sleep(0.2)  # let the child get going
    cpu0 = sum(proc.cpu_times()[:2])
    t0 = time.monotonic()
    sched.run_group(["pod_resource"], 1.0)
    time.sleep(1.5)
    sched.run_group(["pod_resource"], 1.0)
    child_cores = (sum(proc.cpu_times()[:2]) - cpu0) / (time.monotonic() - t0)
    last = store.series.last(series_key("pod_cpu_usage", pod="real-uid", qos="LS"))
    assert last is not None, sched.status()["collectors"]["pod_resource"]
    # What the cgroup says is what the process used...
    assert last[1] == pytest.approx(child_cores, rel=0.15)
    # ...which on an idle enough machine is one core. On a machine too busy to give it one, say so.
    if child_cores >= 0.85:
        assert last[1] == pytest.approx(1.0, rel=0.15)
    memory = store.series.last(series_key("pod_memory_usage", pod="real-uid", qos="LS"))
    assert memory is not None and 1 << 20 < memory[1] < 1 << 30  # a python interpreter's anon memory


@pytest.mark.cgroup
def test_numa_stat_and_memory_stat_agree_on_a_real_v1_cgroup() -> None:
    """The per-cycle read takes memory from memory.numa_stat (hierarchical pages) instead of memory.stat's
    total_* lines: on a live cgroup holding 64 MiB, in a child cgroup so the totals are hierarchical, both
    give the same bytes (read one after the other on an idle process, so within a few pages)."""
    from hookserver.system.cgroupstats import CgroupStatReader, CgroupVersion

    reason = _v1_writable()
    if reason:
        pytest.skip(reason)
    name = f"hookserver-test-numa-{uuid.uuid4().hex[:10]}"
    pod, ctr = CGROUP_ROOT / "memory" / name, CGROUP_ROOT / "memory" / name / "ctr"
    child: subprocess.Popen[bytes] | None = None
    if not (CGROUP_ROOT / "memory" / "memory.numa_stat").exists():
        pytest.skip("this kernel has no memory.numa_stat (CONFIG_NUMA off): the reader uses memory.stat")
    pod.mkdir()
    try:
        ctr.mkdir()
        child = spawn_inside(
            [ctr / "cgroup.procs"], "import sys, time\nx = b'x' * (64 << 20)\nprint('ready', flush=True)\ntime.sleep(60)",
            stdout=subprocess.PIPE,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        reader = CgroupStatReader(SystemRoots(), CgroupVersion.V1)
        try:
            # The kernel's memcg statistics are per-CPU counters flushed lazily (every ~2 s, or past a
            # threshold): once under a loaded `make test` this read gave 31.7 of the child's 64 MiB, both
            # files alike. The page counter (memory.usage_in_bytes) is exact at once; wait for the stats.
            deadline = time.monotonic() + 5
            while True:
                reader.new_cycle()
                _cpu, without, with_cache = reader.usage(name)
                if without >= 60 << 20 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            general = reader.memory(name)
        finally:
            reader.close()
        assert reader.numa_stat, "this kernel has memory.numa_stat; the reader must not have fallen back"
        assert general is not None
        slack = 64 * os.sysconf("SC_PAGE_SIZE")
        assert without == pytest.approx(general.without_cache, abs=slack)
        assert with_cache == pytest.approx(general.with_cache, abs=slack)
        assert without >= 60 << 20  # the child's 64 MiB, counted in the parent through the hierarchy
    finally:
        if child is not None:
            child.kill()
            child.wait(timeout=10)
        for path in (ctr, pod):
            rmdir_patiently(path)
