"""Metric costs the koordlet-compatible series add: the hook hot path (one plugin observation, with and
without koordlet's histogram beside ours, measured side by side) and a /metrics scrape of the store-backed
series (node, host applications, usage by QoS over 200 pods)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, generate_latest

from hookserver.observability.koordlet_metrics import KoordletHookMetrics, register_store_series
from hookserver.observability.metrics import HookMetrics
from hookserver.store import StateStore
from hookserver.store.records import PodRecord
from hookserver.store.timeseries_types import series_key
from tests.bench.common import BenchRow, percentile

CALLS_PER_BATCH = 1000
BATCHES = 200
PODS = 200
SCRAPES = 100


def _per_call_us(metrics: HookMetrics) -> list[float]:
    out = []
    for _ in range(BATCHES):
        started = time.perf_counter()
        for _ in range(CALLS_PER_BATCH):
            metrics.observe_plugin("batchresource", "PreCreateContainer", 0.00004)
        out.append((time.perf_counter() - started) / CALLS_PER_BATCH * 1e6)
    return out


def _scrape_ms() -> list[float]:
    store = StateStore()
    series = store.series
    now = time.time()
    for i in range(PODS):
        uid = f"uid-{i}"
        store.upsert_pod(PodRecord(uid=uid, namespace="ns", name=f"p{i}", qos_class=("BE", "LS", "LSR")[i % 3]))
        series.append(series_key("pod_cpu_usage", pod=uid), 0.1, ts=now, interval_s=1)
        series.append(series_key("pod_memory_usage", pod=uid), 1e8, ts=now, interval_s=1)
    series.append(series_key("node_cpu_usage"), 3.0, ts=now, interval_s=1)
    registry = CollectorRegistry()
    register_store_series(registry, store, node="n", started_at=now, nri_status=lambda: {"state": "ready"})
    out = []
    for _ in range(SCRAPES):
        started = time.perf_counter()
        generate_latest(registry)
        out.append((time.perf_counter() - started) * 1000)
    return out


def run() -> list[BenchRow]:
    plain_registry = CollectorRegistry()
    both_registry = CollectorRegistry()
    plain = HookMetrics(plain_registry)
    both = HookMetrics(both_registry, koordlet=KoordletHookMetrics(both_registry, node="n"))
    # interleaved, so both see the same machine load
    plain_us: list[float] = []
    both_us: list[float] = []
    for _ in range(3):
        plain_us += _per_call_us(plain)
        both_us += _per_call_us(both)
    p50_plain, p50_both = percentile(plain_us, 50), percentile(both_us, 50)
    scrape = _scrape_ms()
    return [
        BenchRow("metrics", "observe_plugin, hookserver only (µs/call)",
                 f"{p50_plain:.2f}", f"p99 {percentile(plain_us, 99):.2f}"),
        BenchRow("metrics", "observe_plugin + koordlet histogram (µs/call)",
                 f"{p50_both:.2f}", f"p99 {percentile(both_us, 99):.2f}; ratio {p50_both / p50_plain:.2f}x"),
        BenchRow("metrics", f"scrape of store-backed series, {PODS} pods (ms)",
                 f"{percentile(scrape, 50):.2f}", f"p99 {percentile(scrape, 99):.2f}"),
    ]
