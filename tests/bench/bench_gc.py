"""Full garbage collections with a built daemon holding 500 pods: the whole heap against the heap after
`freeze_startup_heap` (what the daemon does once it has started), side by side in one process.

A full collection holds the GIL for its whole walk, so its time is a pause of the event loop (the NRI
hot path), the gRPC threads and the collectors alike.
"""

from __future__ import annotations

import gc
import tempfile
import time
from pathlib import Path

from tests.bench.common import BenchRow, summarize
from tests.collectors.fakehost import make_container, make_pod
from tests.readiness import daemon_settings

ROUNDS = 7


def _full_collections(rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        gc.collect()
        samples.append(time.perf_counter() - started)
    return samples


def run() -> list[BenchRow]:
    from hookserver.daemon import Daemon
    from hookserver.observability.gcpauses import freeze_startup_heap

    with tempfile.TemporaryDirectory() as tmp:
        daemon = Daemon(daemon_settings(Path(tmp), "bench", standalone=True))
        for i in range(500):
            uid = f"0000{i:04d}-aaaa-bbbb-cccc-dddddddddddd"
            daemon.store.upsert_pod(make_pod(uid, cgroup_parent=f"/kubepods/pod{uid}", qos_class="BE"))
            daemon.store.upsert_container(make_container(f"{i:08d}" + "c" * 56, uid, cgroup_parent=f"/kubepods/pod{uid}"))
        tracked = len(gc.get_objects())
        whole = summarize(_full_collections(ROUNDS))
        try:
            frozen, _took = freeze_startup_heap()
            after = summarize(_full_collections(ROUNDS))
        finally:
            gc.unfreeze()
        daemon.collectors.close()
    return [
        BenchRow(
            "gc", "full collection, daemon built + 500 pods", f"p50 {whole['p50_ms']:.1f} ms",
            f"{tracked} tracked objects (this process); {ROUNDS} rounds",
        ),
        BenchRow(
            "gc", "full collection after freeze_startup_heap", f"p50 {after['p50_ms'] * 1000:.0f} us",
            f"ratio {after['p50_ms'] / whole['p50_ms']:.3f}; {frozen} objects frozen, as the daemon does once started",
        ),
    ]
