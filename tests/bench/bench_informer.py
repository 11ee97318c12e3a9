"""Informer benchmarks: reading the pod set, applying watch events, memory per 100 pods.

    python -m tests.bench informer
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from tempfile import TemporaryDirectory

from prometheus_client import CollectorRegistry

from hookserver.informer.handlers import PodHandler
from hookserver.informer.metrics import InformerMetrics
from hookserver.informer.reflector import Reflector, ResourceKind
from hookserver.informer.settings import InformerSettings
from hookserver.store import StateStore
from tests.bench.common import BenchRow, summarize

AREA = "informer"


def _pod(i: int, generation: int = 0) -> dict[str, object]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "namespace": f"ns-{i % 20}", "uid": f"uid-{i:05d}",
                     "resourceVersion": str(1000 + generation * 100000 + i),
                     "labels": {"app": f"app-{i % 50}", "koordinator.sh/qosClass": "BE" if i % 3 else "LS",
                                "pod-template-hash": "7c9d8f"},
                     "annotations": {"node.koordinator.sh/extended-resource-spec": json.dumps(
                         {"containers": {"main": {"requests": {"kubernetes.io/batch-cpu": "1000"},
                                                  "limits": {"kubernetes.io/batch-cpu": str(1000 + generation)}}}})}},
        "spec": {"nodeName": "node-a", "priority": 5000 + i % 3, "priorityClassName": "koord-batch",
                 "containers": [{"name": "main", "image": "busybox:1.36",
                                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                               "limits": {"cpu": f"{1 + generation % 4}", "memory": "256Mi"}}},
                                {"name": "sidecar", "image": "envoy:1.30",
                                 "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]},
        "status": {"phase": "Running", "qosClass": "Burstable"},
    }


class _Lines:
    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines

    def lines(self) -> Iterator[bytes]:
        return iter(self._lines)

    def close(self) -> None:
        return None


class _NoTransport:
    def get_json(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError

    def open_watch(self, *args: object, **kwargs: object) -> _Lines:
        raise NotImplementedError

    def close(self) -> None:
        return None


def _read_pod_set() -> list[BenchRow]:
    store = StateStore()
    handler = PodHandler(store, source="apiserver")
    handler.replace([_pod(i) for i in range(500)])
    samples: list[float] = []
    for _ in range(2000):
        started = time.perf_counter()
        pods = list(store.snapshot().pods.values())
        samples.append(time.perf_counter() - started)
    assert len(pods) == 500
    cached = summarize(samples)
    rebuild: list[float] = []
    for i in range(300):
        store.set_stale(i % 2 == 0)  # any write invalidates the snapshot
        started = time.perf_counter()
        pods = list(store.snapshot().pods.values())
        rebuild.append(time.perf_counter() - started)
    after_write = summarize(rebuild)
    return [
        BenchRow(AREA, "read 500 pods (cached snapshot) p50", f"{cached['p50_ms'] * 1000:.1f} us",
                 f"p99 {cached['p99_ms'] * 1000:.1f} us; target < 100 us"),
        BenchRow(AREA, "read 500 pods (first read after a write) p50", f"{after_write['p50_ms'] * 1000:.1f} us",
                 f"p99 {after_write['p99_ms'] * 1000:.1f} us; snapshot rebuilt once per write burst"),
    ]


def _apply_events() -> list[BenchRow]:
    store = StateStore()
    handler = PodHandler(store, source="apiserver")
    handler.replace([_pod(i) for i in range(500)])
    changes: list[object] = []
    store.subscribe_pods(changes.append)
    lines = [json.dumps({"type": "MODIFIED", "object": _pod(i, g)}).encode() for g in range(1, 9) for i in range(500)]
    reflector = Reflector(ResourceKind("pods", "/api/v1/pods"), transport=_NoTransport(), handler=handler,
                          settings=InformerSettings(), metrics=InformerMetrics(CollectorRegistry()))
    started = time.perf_counter()
    outcome = reflector._consume(_Lines(lines))
    elapsed = time.perf_counter() - started
    assert outcome == "ended" and reflector.events == len(lines) and reflector.skipped == 0
    rate = len(lines) / elapsed
    return [BenchRow(AREA, "watch events applied (decode+convert+store+listeners)", f"{rate:,.0f} ev/s",
                     f"{len(lines)} MODIFIED pod events, {len(changes)} listener calls; target >= 2,000/s")]


def _apply_events_over_http() -> list[BenchRow]:
    from hookserver.config import Settings
    from hookserver.informer import build_informer
    from tests.informer.fake_apiserver import FakeApiServer, make_node

    n = 2000

    async def scenario(kubeconfig: str) -> float:
        store = StateStore()
        settings = Settings(node_name="node-a", kubeconfig=kubeconfig, informer=InformerSettings(
            source="apiserver", watch_nodeslo=False, watch_nodemetric=False, resync_period_s=0))
        informer = build_informer(settings, store=store, registry=CollectorRegistry())
        stop = asyncio.Event()
        task = asyncio.create_task(informer.run(stop))
        await informer.wait_synced(10)
        started = time.perf_counter()
        for i in range(n):
            fake.apply("pods", _pod(i))
        while len(store.snapshot().pods) < n:
            await asyncio.sleep(0.002)
        elapsed = time.perf_counter() - started
        stop.set()
        await task
        return n / elapsed

    fake = FakeApiServer().start()
    try:
        fake.apply("nodes", make_node("node-a"))
        with TemporaryDirectory() as tmp:
            rate = asyncio.run(scenario(fake.kubeconfig(str(Path(tmp) / "kubeconfig"))))
    finally:
        fake.kill()
    return [BenchRow(AREA, "watch events over HTTP from the fake apiserver", f"{rate:,.0f} ev/s",
                     f"{n} ADDED events incl. the fake's own JSON encoding and chunking (same process)")]


def _memory() -> list[BenchRow]:
    pods = [_pod(i) for i in range(1000)]
    encoded = [json.loads(json.dumps(p)) for p in pods]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    store = StateStore()
    handler = PodHandler(store, source="apiserver")
    handler.replace(encoded)
    snapshot = store.snapshot()
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert len(snapshot.pods) == 1000
    total = sum(s.size_diff for s in after.compare_to(before, "filename"))
    per_100 = total / 10
    return [BenchRow(AREA, "informer memory per 100 pods", f"{per_100 / 1024:.0f} KiB",
                     "tracemalloc: records, indexes and one snapshot, 1000 pods with 2 containers")]


def run() -> list[BenchRow]:
    return [*_read_pod_set(), *_apply_events(), *_apply_events_over_http(), *_memory()]
