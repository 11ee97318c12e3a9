"""Predictor costs (issue 8): training 1,000 pod models from one minute of 1 s samples (target <= 50 ms),
memory per model (<= 4 KiB) and for 1,000, checkpointing 1,000 models, restoring 1,000 at start (<= 200 ms).

`python -m tests.bench predictor` runs only this module. Ratios are measured / target, side by side in one run.
"""

from __future__ import annotations

import gc
import math
import os
import tempfile
import time
import tracemalloc

from hookserver.predictor.histogram import CPU_BUCKETS, DecayingHistogram
from hookserver.predictor.models import ModelTable
from hookserver.predictor.service import PredictorService
from hookserver.predictor.settings import PredictorSettings
from hookserver.predictor.training import collect_training_round
from hookserver.store.records import PodRecord
from hookserver.store.state import StateStore
from hookserver.store.timeseries import make_labels
from tests.bench.common import BenchRow, summarize

PODS = 1000
NOW = 1_800_000_000.0
GI = float(1 << 30)


def _store() -> StateStore:
    store = StateStore(clock=lambda: NOW)
    for i in range(PODS):
        store.upsert_pod(PodRecord(uid=f"uid-{i:04d}", namespace="bench", name=f"pod-{i:04d}",
                                   labels={"koordinator.sh/priority-class": ("koord-prod", "koord-batch")[i % 2]}))
    keys = [(("pod_cpu_usage", make_labels(pod=f"uid-{i:04d}", qos="LS")),
             ("pod_memory_usage", make_labels(pod=f"uid-{i:04d}", qos="LS"))) for i in range(PODS)]
    for s in range(61):
        ts = NOW - 60 + s
        items = [(k, 0.01 * ((i + s) % 200)) for i, (k, _) in enumerate(keys)]
        items += [(m, (1 + (i + s) % 64) * 64.0 * (1 << 20)) for i, (_, m) in enumerate(keys)]
        items += [(("node_cpu_usage", ()), 40.0), (("node_memory_usage", ()), 200 * GI)]
        store.series.append_many(ts, items)
    return store


def _training_rows(store: StateStore) -> tuple[list[BenchRow], PredictorService]:
    with tempfile.TemporaryDirectory(prefix="hs-bench-") as tmp:
        service = PredictorService(PredictorSettings(), store=store, checkpoint_dir=tmp, clock=lambda: NOW)
        read_s: list[float] = []
        update_s: list[float] = []
        total_s: list[float] = []
        cpu0 = time.process_time()
        for _ in range(25):
            start = time.perf_counter()
            round_ = collect_training_round(store.snapshot().pods, store.series, now=NOW, window_s=60.0)
            mid = time.perf_counter()
            service.table.train(round_.samples, NOW)
            end = time.perf_counter()
            read_s.append(mid - start)
            update_s.append(end - mid)
            total_s.append(end - start)
        cpu_per_round = (time.process_time() - cpu0) / 25
    total, read, update = summarize(total_s[3:]), summarize(read_s[3:]), summarize(update_s[3:])
    rows = [
        BenchRow("predictor", f"training round, {PODS} pods, 60 x 1 s samples each",
                 f"{total['p50_ms']:.1f} ms",
                 f"p99 {total['p99_ms']:.1f} ms; target 50 ms -> ratio {total['p50_ms'] / 50:.2f}; "
                 f"CPU {cpu_per_round * 1000:.1f} ms/round; {round_.pods_trained} pods trained"),
        BenchRow("predictor", "  of which: P90s from the store", f"{read['p50_ms']:.1f} ms",
                 f"p99 {read['p99_ms']:.1f} ms; share {read['p50_ms'] / total['p50_ms']:.2f}"),
        BenchRow("predictor", "  of which: histogram updates", f"{update['p50_ms']:.1f} ms",
                 f"p99 {update['p99_ms']:.1f} ms; {len(round_.samples)} models x 2 histograms; "
                 f"{update['p50_ms'] * 1000 / len(round_.samples) / 2:.2f} us per sample"),
    ]
    return rows, service


def _micro_rows() -> list[BenchRow]:
    h = DecayingHistogram(CPU_BUCKETS, 43200.0)
    n = 20000
    start = time.perf_counter()
    for i in range(n):
        h.add_sample(0.01 * (i % 300), 1.0, NOW + i * 60.0)
    add_us = (time.perf_counter() - start) / n * 1e6
    start = time.perf_counter()
    for _ in range(2000):
        h.percentile(0.95)
    pct_us = (time.perf_counter() - start) / 2000 * 1e6
    return [BenchRow("predictor", "add_sample / percentile(0.95)", f"{add_us:.2f} us",
                     f"percentile {pct_us:.1f} us (wide histogram, {h.max_bucket - h.min_bucket + 1} live buckets)")]


def _memory_rows() -> list[BenchRow]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    table = ModelTable(cpu_half_life_s=43200.0, memory_half_life_s=86400.0)
    for minute in range(120):  # two hours of minutes; each pod's usage wanders over ~30 CPU and ~25 memory buckets
        swing = 1 + 0.8 * math.sin(minute / 7.0 + 0.3 * (minute % 5))
        table.train([(f"uid-{i:04d}", 0.05 * (1 + i % 40) * swing, (1 + i % 64) * 64.0 * (1 << 20) * swing)
                     for i in range(PODS)], NOW + minute * 60)
    widths = [len(m.cpu.weights) + len(m.memory.weights) for m in table._models.values()]
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    used = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    per = used / PODS
    return [
        BenchRow("predictor", "memory per model (CPU + memory histograms)", f"{per / 1024:.2f} KiB",
                 f"target 4 KiB -> ratio {per / 4096:.2f}; tracemalloc, includes the UID strings and table slot; "
                 f"{sum(widths) / len(widths):.0f} live buckets per model (dense: 363)"),
        BenchRow("predictor", f"memory for {PODS} models", f"{used / (1 << 20):.2f} MiB", ""),
    ]


def _checkpoint_rows(service: PredictorService) -> list[BenchRow]:
    rows: list[BenchRow] = []
    with tempfile.TemporaryDirectory(prefix="hs-bench-ckpt-") as tmp:
        directory = os.path.join(tmp, "predictor")
        service.checkpointer.directory = directory
        write_s = []
        for i in range(3):
            for uid in service.table.uids():
                service.table.with_model(uid, lambda m: setattr(m, "last_checkpointed", 0.0))
            start = time.perf_counter()
            written = service.checkpoint_once(NOW + i, limit=10_000, due_before=NOW + i)
            write_s.append(time.perf_counter() - start)
        n = len(written)
        w = summarize(write_s)
        size = sum(e.stat().st_size for e in os.scandir(directory))
        rows.append(BenchRow("predictor", f"checkpoint {n} models (tmp, fsync, rename each)", f"{w['p50_ms']:.0f} ms",
                             f"p99 {w['p99_ms']:.0f} ms; {w['p50_ms'] * 1000 / n:.0f} us/model; "
                             f"{size / n / 1024:.1f} KiB/file; a 12-model round ~{w['p50_ms'] / n * 12:.1f} ms"))
        restore_s = []
        for _ in range(5):
            fresh = PredictorService(PredictorSettings(), store=StateStore(), checkpoint_dir=directory,
                                     clock=lambda: NOW)
            start = time.perf_counter()
            got = fresh.restore()
            restore_s.append(time.perf_counter() - start)
        r = summarize(restore_s)
        rows.append(BenchRow("predictor", f"restore {got} models at start", f"{r['p50_ms']:.0f} ms",
                             f"p99 {r['p99_ms']:.0f} ms; target 200 ms -> ratio {r['p50_ms'] / 200:.2f}"))
    return rows


def run() -> list[BenchRow]:
    store = _store()
    rows, service = _training_rows(store)
    rows += _micro_rows()
    rows += _memory_rows()
    rows += _checkpoint_rows(service)
    return rows
