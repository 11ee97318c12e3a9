"""NRI Synchronize at node scale: how long the runtime waits, and whether every update comes back.

The test runtime (tests/nri/fake_runtime.py) holds P BE pods x 2 running containers with realistic
objects (tests/nri/scale.py: labels, the batch spec, kubelet annotations, env, mounts; ~2 KiB of pod
annotations, and 64 KiB a pod in the heavy row) and syncs them as containerd does (nri >= v0.7): one
message, re-cut into `more` chunks under ttrpc's 4 MiB, one 2 s deadline for all of them. The plugin
is hookserver's `NriPlugin` in its own process on a socketpair end (the pre-launched path, as in
bench_nri.py), with a real dispatcher, store, metrics and the batchresource hook. The time is the
runtime's: first chunk sent to last reply read; the chunks are encoded before it starts (Go encodes
many times faster than Python). Each row is the median of REPEATS fresh plugins; `updates` counts the
reply's updates that match what the hook computes for that container (all of them is 2 x P; a run whose
sync the runtime gave up on at its deadline counts 0).

After each sync the runtime at once makes CREATES_AFTER CreateContainer calls (new containers of synced pods), as
a restarted runtime with pods to start does: they meet the sync's bookkeeping, which runs after the reply (the
store learning the node, audits, pod cgroup values), and the row "CreateContainer right after" times them.

Targets (issue 24): 500 pods <= 40 ms, 2,500 pods <= 300 ms with every update returned. Set
HOOKSERVER_BENCH_BEFORE=<another checkout> to run that checkout's plugin in the same rounds (before vs
after side by side). `python -m tests.bench nri_sync` runs only this module.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from pathlib import Path

from hookserver.api import nri_pb2
from tests.bench.bench_nri import _spawn
from tests.bench.common import BenchRow, percentile, stop_process
from tests.nri.fake_runtime import FakeRuntime, RuntimeConn, wait_for
from tests.nri.scale import expected_update, node_objects

REPEATS = 3
CREATES_AFTER = 200
LAST = (0.0, 0.0)
# (pods, annotation bytes a pod, workloads: 0 = specs differ from pod to pod, n = the pods of n Jobs)
SIZES = ((100, 2048, 0), (500, 2048, 0), (500, 2048, 4), (1000, 2048, 0), (2500, 2048, 0), (2500, 65536, 0))
TARGETS_MS = {100: None, 500: 40.0, 1000: None, 2500: 300.0}


def _correct(updates: list[nri_pb2.ContainerUpdate], workloads: int) -> int:
    ok = 0
    for u in updates:
        _, index, name = u.container_id.split("-", 2)
        r = u.linux.resources
        got = (r.cpu.shares.value, r.cpu.quota.value, r.memory.limit.value)
        ok += got == expected_update(int(index), name, workloads=workloads)
    return ok


async def _creates_after_sync(conn: RuntimeConn, pods: list[nri_pb2.PodSandbox]) -> list[float]:
    """CREATES_AFTER serial CreateContainer calls, new containers of synced pods, sent the moment the sync is
    answered, as a runtime that restarted with pods to start does: they meet the sync's bookkeeping (the store
    learning the node, audits, pod cgroup values), which runs after the reply."""
    out: list[float] = []
    for i in range(CREATES_AFTER):
        pod = pods[(i * 7) % len(pods)]
        ctr = nri_pb2.Container(id=f"after-sync-{i}", pod_sandbox_id=pod.id, name="main", state=1)
        payload = nri_pb2.CreateContainerRequest(pod=pod, container=ctr).SerializeToString()
        t0 = time.perf_counter()
        code, message, _reply = await conn.call_raw("CreateContainer", payload, timeout_nano=2_000_000_000)
        out.append(time.perf_counter() - t0)
        if code:
            raise RuntimeError(f"CreateContainer after the sync failed: {code} {message}")
    return out


async def _one(
    pods: list[nri_pb2.PodSandbox], ctrs: list[nri_pb2.Container], tree: Path | None, workloads: int
) -> tuple[float, int, int, int, list[float]]:
    """(sync seconds, correct updates, chunks, updates, CreateContainer seconds right after) of one fresh plugin
    process."""
    runtime_end, proc = _spawn("--plugin", tree=tree)
    runtime = FakeRuntime(runtime_version="v2.3.0", nri_version="v0.12.0", pods=pods, containers=ctrs)
    try:
        reader, writer = await asyncio.open_unix_connection(sock=runtime_end)
        await runtime.attach(reader, writer)
        conn = runtime.conns[0]
        await wait_for(lambda: conn.ready.is_set() or conn.closed.is_set(), 60, "the sync to end")
        if not conn.ready.is_set():  # the runtime dropped the plugin (its deadline passed): nothing applied
            return time.perf_counter() - conn.sync_started, 0, len(conn.sync_replies), 0, []
        creates = await _creates_after_sync(conn, pods)
        final = conn.sync_replies[-1]
        global LAST
        LAST = (round(conn.sync_started_epoch, 4), round(time.time(), 4))
        return (conn.sync_seconds, _correct(list(final.update), workloads), len(conn.sync_replies),
                len(final.update), creates)
    finally:
        await runtime.aclose()
        stop_process(proc)


def run() -> list[BenchRow]:
    before = os.environ.get("HOOKSERVER_BENCH_BEFORE")
    trees: dict[str, Path | None] = {"after": None}
    if before:
        trees = {"before": Path(before), "after": None}
    rows: list[BenchRow] = []
    for count, annotation_bytes, workloads in SIZES:
        pods, ctrs = node_objects(count, annotation_bytes=annotation_bytes, workloads=workloads)
        results: dict[str, list[tuple[float, int, int, int, list[float]]]] = {name: [] for name in trees}
        for _ in range(REPEATS):
            for name, tree in trees.items():  # the same rounds for both, so machine noise hits both alike
                results[name].append(asyncio.run(_one(pods, ctrs, tree, workloads)))
        target = TARGETS_MS.get(count) if annotation_bytes <= 2048 and (count != 500 or workloads) else None
        for name, runs in results.items():
            ms = statistics.median(r[0] for r in runs) * 1000
            correct = min(r[1] for r in runs)
            label = f"Synchronize {count} pods x2, {annotation_bytes >> 10} KiB annotations/pod" + (
                f", {workloads} workloads' specs" if workloads else ", specs differ")
            rows.append(BenchRow(
                "nri-sync", label + (f" ({name})" if before else ""), f"{ms:.1f} ms",
                f"median of {len(runs)} ({', '.join(f'{r[0] * 1000:.0f}' for r in runs)}); updates correct "
                f"{correct}/{2 * count} (fewest of the runs); {runs[0][2]} chunk(s)"
                + (f"; target <= {target:.0f} ms" if target else "") + f"; load {os.getloadavg()[0]:.1f}",
            ))
            creates = [c for r in runs for c in r[4]]
            if creates and annotation_bytes <= 2048 and not workloads:
                rows.append(BenchRow(
                    "nri-sync", f"CreateContainer right after a {count}-pod sync" + (f" ({name})" if before else ""),
                    f"p50 {percentile(creates, 50) * 1000:.3f} p99 {percentile(creates, 99) * 1000:.3f} "
                    f"max {max(creates) * 1000:.3f} ms",
                    f"{CREATES_AFTER} serial calls from the moment the sync is answered, x{len(runs)}; "
                    "they meet the sync's bookkeeping",
                ))
    return rows
