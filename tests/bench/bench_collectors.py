"""Collector cycle cost (100 and 500 pods), time-series memory (200 pods x 10 series x 30 min at 1 s) and
window-query latency. Targets from issue 5: cycle <= 20 ms at 500 pods, store <= 50 MiB.

The pod trees are scripted cgroup v1 and v2 trees under a temporary directory (one container per pod),
read through the same code as on a node. `python -m tests.bench collectors` runs only this module.

On a node the stat files live on cgroupfs, where a removed cgroup's open files fail with ENODEV, so the
reader re-reads kept-open descriptors with one `pread` each. A fixture tree is an ordinary filesystem
(a deleted file stays readable), where the reader also `fstat`s each file to notice deletion; the
cycle rows tell the reader to treat the fixture like cgroupfs, so they measure the node's code path
(the "fixture semantics" row shows the cost with the extra check).
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
import uuid
from pathlib import Path

import psutil

from tests.bench.common import BenchRow, summarize
from tests.collectors.fakehost import make_scheduler
from tests.collectors.fakehost import FakeClock, FakeHost, make_container, make_pod

from collectors import top_report
from hookserver.store.state import StateStore
from hookserver.store.timeseries import TimeSeriesStore, series_key

USAGE_GROUP = ("node_resource", "pod_resource", "host_application", "pod_throttled", "be_resource", "system_resource")


def _tree(base: Path, pods: int, version: int) -> tuple[FakeHost, FakeClock, StateStore]:
    host = FakeHost(base, version=version)
    clock = FakeClock()
    store = StateStore(clock=clock.time)
    host.set_proc_stat(user=1000, system=100, idle=5000, ncpu=64)
    host.set_meminfo(total_kb=256 << 20, free_kb=100 << 20, available_kb=150 << 20)
    host.set_cpu_usage("kubepods/besteffort", 10**9)
    host.set_cpu_limit("kubepods/besteffort", quota_us=-1, cpus="0-63")
    for i in range(pods):
        qos = "besteffort" if i % 3 == 0 else "burstable"
        uid = f"0000{i:04d}-aaaa-bbbb-cccc-dddddddddddd"
        rel = f"kubepods/{qos}/pod{uid}"
        store.upsert_pod(make_pod(uid, cgroup_parent="/" + rel, qos_class="BE" if qos == "besteffort" else "LS",
                                  batch_cpu={"app": "1000"} if qos == "besteffort" else None))
        cid = f"{i:08d}" + "c" * 56
        store.upsert_container(make_container(cid, uid, cgroup_parent="/" + rel))
        for path in (rel, f"{rel}/{cid}"):
            host.set_cpu_usage(path, 10**9 + i, nr_periods=100, nr_throttled=i % 7)
            host.set_memory(path, active_anon=1 << 20, inactive_anon=1 << 19, active_file=1 << 22, inactive_file=1 << 21,
                            current=(1 << 23))
    return host, clock, store


def _cycle_rows(pods: int, version: int, *, containers: bool = True, as_cgroupfs: bool = True) -> list[BenchRow]:
    with tempfile.TemporaryDirectory(prefix="hs-bench-") as tmp:
        host, clock, store = _tree(Path(tmp), pods, version)
        sched = make_scheduler(host, clock, store, psi={"enabled": False}, containers=containers)
        if as_cgroupfs:
            reader = sched._on_cycle.__self__  # type: ignore[union-attr]  # the CgroupStatReader build_collectors wired
            reader.files.kernel_prefixes = (str(host.cgroup) + "/",)
        sched.probe()
        _freeze_heap()
        samples: list[float] = []
        kept = 0
        try:
            for _ in range(40):
                clock.advance(1.0)
                start = time.perf_counter()
                kept = sched.run_group(USAGE_GROUP, 1.0)
                samples.append(time.perf_counter() - start)
        finally:
            gc.unfreeze()
        stats = summarize(samples[5:])
        load = os.getloadavg()[0]
        per = {name: (state.last_duration_s or 0.0) * 1000 for name, state in sched.states().items() if name in USAGE_GROUP}
        detail = ", ".join(f"{k} {v:.1f}" for k, v in per.items() if v >= 0.05)
        return [
            BenchRow(
                "collectors",
                f"1s cycle, {pods} pods{f' + {pods} containers' if containers else ' (containers off)'}, cgroup v{version}"
                + ("" if as_cgroupfs else " (fixture semantics)"),
                f"{stats['p50_ms']:.1f} ms",
                f"p99 {stats['p99_ms']:.1f} ms; {kept} samples/cycle; load {load:.1f}; last run ms: {detail}",
            )
        ]


_REAL_ROOT = "/sys/fs/cgroup"
_REAL_CONTROLLERS = ("cpu", "cpuacct", "memory")


def _real_v1_unusable() -> str:
    if os.geteuid() != 0:
        return "not root"
    for controller in _REAL_CONTROLLERS:
        base = f"{_REAL_ROOT}/{controller}"
        if not os.access(base, os.W_OK) or not os.path.exists(f"{base}/cgroup.procs"):
            return f"{base} is not a writable cgroup v1 hierarchy"
    return ""


def _freeze_heap() -> None:
    try:
        from hookserver.observability.gcpauses import freeze_startup_heap
    except ImportError:  # code before the daemon froze its start-up heap
        return
    freeze_startup_heap()


def _real_cycle_rows(pods: int = 500) -> list[BenchRow]:
    """The node's code path on real cgroupfs: a private v1 subtree with `pods` pods and one container each.

    The kernel generates every stat file on read (no fixture shortcut), and kept-open descriptors are
    read with pread. The subtree is removed afterwards.
    """
    from hookserver.system.roots import SystemRoots

    from collectors.settings import CollectorSettings
    from collectors.build import build_collectors
    from hookserver.config import Settings
    from hookserver.executor.settings import CgroupSettings

    why = _real_v1_unusable()
    if why:
        return [BenchRow("collectors", f"1s cycle, {pods} pods + {pods} containers, real cgroup v1", "skipped", why)]
    top = f"hookserver-bench-{uuid.uuid4().hex[:10]}"
    made: list[str] = []
    store = StateStore(clock=time.time)
    try:
        for i in range(pods):
            uid = f"0000{i:04d}-aaaa-bbbb-cccc-dddddddddddd"
            cid = f"{i:08d}" + "c" * 56
            rel = f"{top}/pod{uid}"
            for controller in _REAL_CONTROLLERS:
                for path in (f"{_REAL_ROOT}/{controller}/{top}", f"{_REAL_ROOT}/{controller}/{rel}",
                             f"{_REAL_ROOT}/{controller}/{rel}/{cid}"):
                    if not os.path.isdir(path):
                        os.mkdir(path)
                        made.append(path)
            store.upsert_pod(make_pod(uid, cgroup_parent="/" + rel, qos_class="BE" if i % 3 == 0 else "LS"))
            store.upsert_container(make_container(cid, uid, cgroup_parent="/" + rel))
        settings = Settings(
            node_name="bench", cgroup=CgroupSettings(root=_REAL_ROOT, driver="cgroupfs", version="v1"),
            collectors=CollectorSettings.model_validate({"gpu": {"enabled": False}, "psi": {"enabled": False}}),
        )
        sched = build_collectors(settings, store=store, roots=SystemRoots(cgroup=_REAL_ROOT), registry=None)
        sched.probe()
        _freeze_heap()  # as the daemon does once started: a full collection of the whole heap is not the cycle's
        samples: list[float] = []
        kept = 0
        for _ in range(25):
            start = time.perf_counter()
            kept = sched.run_group(USAGE_GROUP, 1.0)
            samples.append(time.perf_counter() - start)
            time.sleep(0.01)
        sched.close()
        stats = summarize(samples[5:])
        return [BenchRow(
            "collectors", f"1s cycle, {pods} pods + {pods} containers, real cgroup v1", f"{stats['p50_ms']:.1f} ms",
            f"p99 {stats['p99_ms']:.1f} ms; {kept} samples/cycle; kernel-generated stat files under /{top}",
        )]
    finally:
        gc.unfreeze()
        for path in reversed(made):
            try:
                os.rmdir(path)
            except OSError:
                pass


def _memory_row() -> tuple[list[BenchRow], TimeSeriesStore]:
    pods, per_pod, seconds = 200, 10, 1800
    keys = [series_key(f"bench_metric_{m}", pod=f"pod-{p:04d}", qos="LS") for p in range(pods) for m in range(per_pod)]
    gc.collect()
    rss_before = psutil.Process().memory_info().rss
    store = TimeSeriesStore(retention_s=seconds, default_interval_s=1.0, clock=lambda: 1e9 + seconds)
    start = time.perf_counter()
    t0 = 1e9
    items = [(k, 0.5) for k in keys]  # one batch reused, so the delta is the store's, not the test's lists
    for s in range(seconds + 1):
        store.append_many(t0 + s, items, interval_s=1.0)
    fill_s = time.perf_counter() - start
    gc.collect()
    used = psutil.Process().memory_info().rss - rss_before
    stats = store.stats()
    per_append_us = fill_s / ((seconds + 1) * len(keys)) * 1e6
    rows = [
        BenchRow(
            "collectors",
            f"store memory, {pods} pods x {per_pod} series x 30 min at 1 s",
            f"{used / (1 << 20):.1f} MiB",
            f"RSS delta ({stats.approx_bytes / (1 << 20):.1f} MiB by the store's count); {stats.samples} samples, "
            f"{used / stats.samples:.1f} B/sample; target <= 50 MiB; append {per_append_us:.2f} us/sample in batches of {len(keys)}",
        )
    ]
    return rows, store


def _query_rows(store: TimeSeriesStore) -> list[BenchRow]:
    key = store.keys()[0]
    now = 1e9 + 1800
    rows: list[BenchRow] = []
    for window in (300.0, 1800.0):
        samples = []
        for _ in range(300):
            start = time.perf_counter()
            store.window(key, window, now=now)
            samples.append(time.perf_counter() - start)
        s = summarize(samples)
        rows.append(BenchRow("collectors", f"window query ({window / 60:.0f} min, all aggregates)", f"{s['p50_ms'] * 1000:.0f} us",
                             f"p99 {s['p99_ms'] * 1000:.0f} us; {int(window) + 1} samples"))
    return rows


def _top_row() -> list[BenchRow]:
    clock = FakeClock()
    state = StateStore(clock=clock.time)
    for p in range(200):
        state.upsert_pod(make_pod(f"uid-{p:04d}"))
    keys = [(series_key("pod_cpu_usage", pod=f"uid-{p:04d}"), series_key("pod_memory_usage", pod=f"uid-{p:04d}")) for p in range(200)]
    for second in range(300):
        clock.advance(1.0)
        state.series.append_many(clock.time(), [(k, float(second)) for pair in keys for k in pair])
    samples = []
    for _ in range(10):
        start = time.perf_counter()
        top_report(state, window_s=300.0)
        samples.append(time.perf_counter() - start)
    stats = summarize(samples)
    return [BenchRow("collectors", "hookctl top, 200 pods, 5 min window", f"{stats['p50_ms']:.1f} ms", f"p99 {stats['p99_ms']:.1f} ms")]


def run() -> list[BenchRow]:
    rows: list[BenchRow] = []
    for pods in (100, 500):
        for version in (1, 2):
            rows += _cycle_rows(pods, version)
    rows += _cycle_rows(500, 2, containers=False)
    rows += _cycle_rows(500, 1, as_cgroupfs=False)
    rows += _real_cycle_rows(500)
    memory, store = _memory_row()
    rows += memory
    rows += _query_rows(store)
    rows += _top_row()
    return rows
