"""Reconciler pass cost over 500 BE pods (one container each; target: nothing to change <= 20 ms per pass).

Rows, measured side by side in one run, on a private real cgroup v1 subtree when run as root (else a
fixture tree, whose plain files are slower to read than cgroupfs):
  * unchanged: the store did not move since the last pass (decisions reused): per pod one existence check and
    a shares canary read per target, cache lookups, no write;
  * unchanged, store moved: a hook call changed the store, so every pod's decisions are made again (the
    dispatcher, the hooks, the write lists), still no write;
  * all corrected: every pod and container holds kubelet's values (agent restart after an outage): 6 files
    each read, written and read back, one leveled plan.
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from pathlib import Path

from hookserver.executor import CgroupLayout
from hookserver.system import SystemRoots
from tests.bench.common import BenchRow, summarize
from tests.reconciler.churn import real_v1_usable
from tests.reconciler.conftest import KUBELET_BE, World, make_world

PODS = 500
ROUNDS = 60
TARGET_MS = 20.0


def _world(tmp: Path, real_top: str) -> World:
    if not real_top:
        return make_world(tmp / "cg")
    layout = CgroupLayout(
        version="v1", driver="cgroupfs", roots=SystemRoots(), cgroup_root="/sys/fs/cgroup",  # type: ignore[arg-type]
        hierarchies={sub: f"/sys/fs/cgroup/{sub}/{real_top}" for sub in ("cpu", "memory")},
    )
    return make_world(tmp / "unused", layout=layout)


def _make(world: World, real_top: str, rel: str) -> None:
    if not real_top:
        world.tree.cgroup(rel, **KUBELET_BE)
        return
    for sub in ("cpu", "memory"):
        os.makedirs(f"/sys/fs/cgroup/{sub}/{real_top}/{rel}", exist_ok=True)
    for name, value in KUBELET_BE.items():
        Path(f"/sys/fs/cgroup/{name.split('.')[0]}/{real_top}/{rel}/{name}").write_text(value)


def _remove(real_top: str) -> None:
    for sub in ("cpu", "memory"):
        base = f"/sys/fs/cgroup/{sub}/{real_top}"
        for dirpath, _d, _f in sorted(os.walk(base), key=lambda t: -t[0].count("/")):
            os.rmdir(dirpath)


def _timed(fn: object, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return samples


def run() -> list[BenchRow]:
    real_top = f"hookserver-test-{uuid.uuid4().hex[:12]}" if real_v1_usable() else ""
    where = "real cgroup v1" if real_top else "fixture tree"
    with tempfile.TemporaryDirectory(prefix="hs-bench-rec-") as tmp:
        try:
            world = _world(Path(tmp), real_top)
            pods = [world.be_pod(f"p{i}", make_dirs=False) for i in range(PODS)]
            for pod in pods:
                _make(world, real_top, world.pod_dir(pod))
                _make(world, real_top, world.container_dir(pod, pod.container_ids["main"]))
            first = world.engine.run(trigger="start")
            assert first.corrections == 6 * PODS, first

            def unchanged() -> None:
                world.clock.now += 0.5  # inside the cache window
                report = world.engine.run(trigger="periodic")
                assert report.written == 0 and report.reconciled == PODS

            def moved() -> None:
                # any store write (here: a node heartbeat with the same content) invalidates the pass memo
                world.store.set_node(world.store.snapshot().node)
                unchanged()

            steady = summarize(_timed(unchanged, ROUNDS))
            churned = summarize(_timed(moved, ROUNDS))
            # agent restart after an outage: forget everything, every file holds kubelet's values again
            corrected: list[float] = []
            for _ in range(3):
                for pod in pods:
                    for rel in (world.pod_dir(pod), world.container_dir(pod, pod.container_ids["main"])):
                        _make(world, real_top, rel)
                world.executor.cache.forget_under(["kubepods"])  # a restarted agent has an empty cache
                start = time.perf_counter()
                report = world.engine.run(trigger="start")
                corrected.append(time.perf_counter() - start)
                assert report.corrections == 6 * PODS, report
            full = summarize(corrected)
        finally:
            if real_top:
                _remove(real_top)
    note = f"{PODS} pods x (pod + 1 container), {where}; target <= {TARGET_MS:.0f} ms"
    return [
        BenchRow("reconciler", "pass, nothing to change", f"p50 {steady['p50_ms']:.2f}ms p99 {steady['p99_ms']:.2f}ms",
                 f"{note}; {steady['p50_ms'] / TARGET_MS:.2f}x of target"),
        BenchRow("reconciler", "pass, nothing to change, store moved",
                 f"p50 {churned['p50_ms']:.2f}ms p99 {churned['p99_ms']:.2f}ms",
                 f"every decision made again; {churned['p50_ms'] / steady['p50_ms']:.1f}x the unchanged pass"),
        BenchRow("reconciler", "pass, all 3000 files corrected", f"p50 {full['p50_ms']:.1f}ms",
                 "read + write + read-back per file, one leveled plan (3 runs)"),
    ]

