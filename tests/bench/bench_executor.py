"""Executor cost on the hook hot path: one pod plan (cpu.shares, cfs quota, memory limit) applied to a
fixture tree (uncached: read + write + read-back; cached: no file touched) and, when run as root on a cgroup
v1 host, to a real cgroup in a private subtree that is removed afterwards."""

from __future__ import annotations

import itertools
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from hookserver.executor import CgroupExecutor, CgroupLayout, CgroupResource, CgroupWrite, ResourcePlan
from hookserver.store import StateStore
from hookserver.system import SystemRoots
from tests.bench.common import BenchRow, summarize

_N = 2000
_R = CgroupResource


def _plan(d: str, shares: int, cacheable: bool) -> ResourcePlan:
    return ResourcePlan.single(
        [CgroupWrite(d, _R.CPU_SHARES, shares), CgroupWrite(d, _R.CPU_CFS_QUOTA, 100000 + shares),
         CgroupWrite(d, _R.MEMORY_LIMIT, (1 << 30) + shares * 4096)],
        cacheable=cacheable,
    )


def _time(fn: Callable[[int], object], n: int = _N) -> dict[str, float]:
    samples: list[float] = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - start)
    return summarize(samples)


def _row(name: str, stats: dict[str, float], note: str) -> BenchRow:
    return BenchRow("executor", name, f"p50 {stats['p50_ms'] * 1000:.0f}us p99 {stats['p99_ms'] * 1000:.0f}us", note)


def _fixture_rows() -> list[BenchRow]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pod = "kubepods/besteffort/pod-bench"
        for sub, files in {"cpu": ("cpu.shares", "cpu.cfs_quota_us"), "memory": ("memory.limit_in_bytes",)}.items():
            (root / sub / pod).mkdir(parents=True)
            for name in files:
                (root / sub / pod / name).write_text("-1\n")
        layout = CgroupLayout(version="v1", driver="cgroupfs", roots=SystemRoots(cgroup=str(root)))  # type: ignore[arg-type]
        ex = CgroupExecutor(layout, store=StateStore())
        changing = _time(lambda i: ex.apply(_plan(pod, 2 + i % 1000, False)))
        ex.apply(_plan(pod, 512, True))
        cached = _time(lambda i: ex.apply(_plan(pod, 512, True)))
        unchanged = _time(lambda i: ex.apply(_plan(pod, 512, False)))
    return [
        _row("pod plan, 3 files, changed (fixture)", changing, "resolve + read + write + read-back, per plan"),
        _row("pod plan, 3 files, unchanged (fixture)", unchanged, "read-before-write skip"),
        _row("pod plan, 3 files, cached", cached, "no file touched"),
    ]


def _real_rows() -> list[BenchRow]:
    if os.geteuid() != 0 or not os.access("/sys/fs/cgroup/cpu", os.W_OK) or not os.path.isdir("/sys/fs/cgroup/memory"):
        return [BenchRow("executor", "real cgroup v1", "skipped", "needs root and writable /sys/fs/cgroup/{cpu,memory}")]
    name = f"hookserver-bench-{uuid.uuid4().hex[:8]}"
    dirs = [f"/sys/fs/cgroup/{s}/{name}" for s in ("cpu", "memory")]
    try:
        for d in dirs:
            os.mkdir(d)
        layout = CgroupLayout(version="v1", driver="cgroupfs", roots=SystemRoots())  # type: ignore[arg-type]
        ex = CgroupExecutor(layout, store=StateStore())
        counter = itertools.count()
        changing = _time(lambda i: ex.apply(_plan(name, 2 + next(counter) % 1000, False)), 1000)
        unchanged = _time(lambda i: ex.apply(_plan(name, 512, False)), 1000)
    finally:
        for d in dirs:
            if os.path.isdir(d):
                os.rmdir(d)
    return [
        _row("pod plan, 3 files, changed (real v1)", changing, "kernel cgroupfs"),
        _row("pod plan, 3 files, unchanged (real v1)", unchanged, "kernel cgroupfs"),
    ]


def run() -> list[BenchRow]:
    return _fixture_rows() + _real_rows()
