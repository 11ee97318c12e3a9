"""Per-NUMA node and system usage (NodeMetric numaUsages, koordinator #3138) from scripted /proc, /sys and cgroup
trees, with hand-computed values: koordlet's formulas (pkg/koordlet/metricsadvisor/collectors/{noderesource,
sysresource}, pkg/koordlet/util/meminfo.go NUMAMemUsageBytes) on hookserver's tick-ratio CPU measure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hookserver.errors import SystemFileError
from hookserver.store.state import StateStore
from hookserver.store.timeseries import series_key
from hookserver.system.numa_usage import CpuTick, parse_numa_meminfo, parse_numa_stat, parse_per_cpu_ticks
from collectors.numa_resource import numa_cpu_usage
from tests.collectors.fakehost import FakeClock, FakeHost, make_pod, make_scheduler

GiB = 1024**3
MiB = 1024**2
POD_DIR = "kubepods/burstable/poduid-a"


def _last(store: StateStore, metric: str, **labels: str) -> float | None:
    last = store.series.last(series_key(metric, **labels))
    return None if last is None else last[1]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _stat(host: FakeHost, per_cpu: dict[int, tuple[int, int]]) -> None:
    """/proc/stat with `cpuN user 0 0 idle` lines (busy = user, total = user + idle) and their sum as `cpu`."""
    user = sum(u for u, _ in per_cpu.values())
    idle = sum(i for _, i in per_cpu.values())
    lines = [f"cpu  {user} 0 0 {idle} 0 0 0 0 0 0"]
    lines += [f"cpu{c} {u} 0 0 {i} 0 0 0 0 0 0" for c, (u, i) in sorted(per_cpu.items())]
    _write(host.proc / "stat", "\n".join(lines) + "\nintr 1 0\nctxt 10\nbtime 1\nprocesses 5\n")


def _node(host: FakeHost, node: int, cpus: str, *, total: int, free: int, active_file: int = 0,
          inactive_file: int = 0, sreclaimable: int = 0, file_pages: int = 0) -> None:
    base = host.sys / "devices" / "system" / "node" / f"node{node}"
    _write(base / "cpulist", cpus + "\n")
    kb = {"MemTotal": total, "MemFree": free, "MemUsed": total - free, "Active(file)": active_file,
          "Inactive(file)": inactive_file, "FilePages": file_pages, "SReclaimable": sreclaimable}
    _write(base / "meminfo", "".join(f"Node {node} {k}:{v // 1024:>16} kB\n" for k, v in kb.items()))


def test_parsers_follow_the_kernel_formats() -> None:
    ticks = parse_per_cpu_ticks("cpu  9 9 9 9\ncpu0 10 1 2 100 5 3 4 6 7 0\ncpu3 1 0 0 1\nintr 1\n")
    # busy = user 10 + nice 1 + system 2 + irq 3 + softirq 4 + steal 6 = 26; total = 26 + idle 100 + iowait 5.
    assert ticks == {0: CpuTick(26, 131), 3: CpuTick(1, 2)}
    mem = parse_numa_meminfo(1, "Node 1 MemTotal: 8388608 kB\nNode 1 MemFree: 2097152 kB\n"
                                "Node 1 Active(file): 1048576 kB\nNode 1 Inactive(file): 524288 kB\n"
                                "Node 1 FilePages: 9999999 kB\nNode 1 SReclaimable: 524288 kB\n", "meminfo")
    # 8 GiB − (2 GiB free + 1 GiB + 0.5 GiB file LRU + 0.5 GiB SReclaimable) = 4 GiB; FilePages is not used.
    assert mem.used == 4 * GiB
    bare = parse_numa_meminfo(0, "Node 0 MemTotal: 100 kB\nNode 0 MemFree: 200 kB\n", "meminfo")
    assert bare.used == 0  # never negative
    with pytest.raises(SystemFileError):
        parse_numa_meminfo(0, "Node 0 MemFree: 1 kB\n", "meminfo")
    v1 = "total=10 N0=4 N1=6\nfile=0 N0=0 N1=0\nhierarchical_total=30 N0=10 N1=20\n"
    assert parse_numa_stat(v1, "numa_stat", v2=False, page_size=4096) == {0: 10 * 4096, 1: 20 * 4096}
    assert parse_numa_stat("total=10 N0=4 N1=6\n", "numa_stat", v2=False, page_size=4096) == {0: 4 * 4096, 1: 6 * 4096}
    v2 = "anon N0=100 N1=200\nfile N0=30 N1=10\nkernel_stack N0=8 N1=0\n"
    assert parse_numa_stat(v2, "numa_stat", v2=True, page_size=4096) == {0: 130, 1: 210}
    with pytest.raises(SystemFileError):
        parse_numa_stat("anon N0=x\nfile N0=1\n", "numa_stat", v2=True, page_size=4096)


def test_numa_cpu_usage_skips_offline_and_reset_cpus() -> None:
    prev = {0: CpuTick(100, 1000), 1: CpuTick(50, 1000), 2: CpuTick(500, 1000)}
    cur = {0: CpuTick(150, 1100), 1: CpuTick(10, 1100), 3: CpuTick(1, 2)}
    # node 0: cpu0 50/100 = 0.5, cpu1's counters went backwards (skipped); node 1: cpu2 offline now, cpu3 new.
    assert numa_cpu_usage(prev, cur, {0: frozenset({0, 1}), 1: frozenset({2, 3})}) == {0: 0.5}


def _two_numa_host(host: FakeHost) -> None:
    _node(host, 0, "0-1", total=8 * GiB, free=2 * GiB, active_file=GiB, inactive_file=512 * MiB,
          sreclaimable=512 * MiB, file_pages=3 * GiB)
    _node(host, 1, "2-3", total=8 * GiB, free=6 * GiB, active_file=GiB)
    host.set_meminfo(total_kb=16 * 1024 * 1024, free_kb=8 * 1024 * 1024, available_kb=10 * 1024 * 1024)


def test_two_numa_nodes_node_and_system_usage(host: FakeHost, clock: FakeClock, store: StateStore) -> None:
    """Node 0 = CPUs 0-1, node 1 = CPUs 2-3. Between the readings (each CPU 100 ticks): cpu0 busy 50, cpu1 25,
    cpu2 100, cpu3 0 -> node 0 0.75 cores, node 1 1.0; the node 1.75. A pod uses 0.35 cores, so system CPU is
    1.4, apportioned 1.4 × 0.75 / 1.75 = 0.6 and 1.4 × 1.0 / 1.75 = 0.8.
    Memory: node 0 8 GiB − (2 + 1 + 0.5 + 0.5) = 4 GiB, node 1 8 − (6 + 1) = 1 GiB. The pod has 0.5 GiB on node 0
    and 2 GiB on node 1: system 3.5 GiB and 0 (never negative)."""
    _two_numa_host(host)
    _stat(host, {0: (100, 900), 1: (100, 900), 2: (100, 900), 3: (100, 900)})
    store.upsert_pod(make_pod("uid-a", name="a", cgroup_parent=POD_DIR))
    host.set_cpu_usage(POD_DIR, 0)
    host.set_memory(POD_DIR, active_anon=0, inactive_anon=0)
    page = os.sysconf("SC_PAGE_SIZE")
    n0, n1 = 512 * MiB, 2 * GiB
    if host.version == 2:
        host.write_raw("", POD_DIR, "memory.numa_stat", f"anon N0={n0} N1={n1 - 4096}\nfile N0=0 N1=4096\n")
    else:
        p0, p1 = n0 // page, n1 // page
        host.write_raw("memory", POD_DIR, "memory.numa_stat",
                       f"total=0 N0=0 N1=0\nhierarchical_total={p0 + p1} N0={p0} N1={p1}\n")
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    assert _last(store, "numa_cpu_usage", node="node-1", numa="0") is None  # the first reading only primes
    assert _last(store, "numa_memory_usage", node="node-1", numa="0") == 4 * GiB
    assert _last(store, "numa_memory_usage", node="node-1", numa="1") == 1 * GiB
    clock.advance(1)
    _stat(host, {0: (150, 950), 1: (125, 975), 2: (200, 900), 3: (100, 1000)})
    host.set_cpu_usage(POD_DIR, 350_000_000)  # 0.35 s of CPU in 1 s
    sched.run_once()
    assert _last(store, "node_cpu_usage", node="node-1") == pytest.approx(1.75)
    assert _last(store, "numa_cpu_usage", node="node-1", numa="0") == pytest.approx(0.75)
    assert _last(store, "numa_cpu_usage", node="node-1", numa="1") == pytest.approx(1.0)
    assert _last(store, "system_cpu_usage", node="node-1") == pytest.approx(1.4)
    assert _last(store, "numa_system_cpu_usage", node="node-1", numa="0") == pytest.approx(0.6)
    assert _last(store, "numa_system_cpu_usage", node="node-1", numa="1") == pytest.approx(0.8)
    assert _last(store, "numa_system_memory_usage", node="node-1", numa="0") == 3.5 * GiB
    assert _last(store, "numa_system_memory_usage", node="node-1", numa="1") == 0


def test_one_numa_node_with_an_offline_cpu(host_v2: FakeHost, clock: FakeClock, store: StateStore) -> None:
    """One node listing CPUs 0-3; CPU 2 is offline (no /proc/stat line): the node's CPU is cpu0 40/100 +
    cpu1 10/100 + cpu3 50/100 = 1.0 cores. Memory 4 GiB − (1 GiB free + 1 GiB SReclaimable) = 2 GiB; no pods,
    so system memory is all of it and the whole system CPU (= node 1.0) is this node's."""
    host = host_v2
    _node(host, 0, "0-3", total=4 * GiB, free=GiB, sreclaimable=GiB)
    host.set_meminfo(total_kb=4 * 1024 * 1024, free_kb=1024 * 1024, available_kb=2 * 1024 * 1024)
    _stat(host, {0: (0, 0), 1: (0, 0), 3: (0, 0)})
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    clock.advance(1)
    _stat(host, {0: (40, 60), 1: (10, 90), 3: (50, 50)})
    sched.run_once()
    assert _last(store, "numa_cpu_usage", node="node-1", numa="0") == pytest.approx(1.0)
    assert _last(store, "numa_memory_usage", node="node-1", numa="0") == 2 * GiB
    assert _last(store, "numa_system_cpu_usage", node="node-1", numa="0") == pytest.approx(1.0)
    assert _last(store, "numa_system_memory_usage", node="node-1", numa="0") == 2 * GiB


def test_no_numa_directories_no_numa_series(host_v2: FakeHost, clock: FakeClock, store: StateStore) -> None:
    host = host_v2
    host.set_meminfo(total_kb=1024, free_kb=512, available_kb=512)
    _stat(host, {0: (0, 0)})
    sched = make_scheduler(host, clock, store)
    sched.run_once()
    clock.advance(1)
    _stat(host, {0: (50, 50)})
    sched.run_once()
    assert _last(store, "node_cpu_usage", node="node-1") == pytest.approx(0.5)
    for metric in ("numa_cpu_usage", "numa_memory_usage", "numa_system_cpu_usage", "numa_system_memory_usage"):
        assert store.series.keys(metric) == []
    assert sched.status()["collectors"]["numa_resource"]["enabled"] is True
