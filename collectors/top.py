"""`hookctl top`: node and pod CPU and memory, now (the newest sample) and at p95 over a window.

Pods are listed by current CPU, busiest first, with names from the store snapshot (a pod that has left
the snapshot but still has samples shows with empty names). On a GPU node, `node.gpus` lists each GPU's core %
and memory, and a pod that uses a GPU has `gpus` (per device, with its containers): see top_gpu.py. A node
without GPU series gets neither key. Everything is JSON-ready.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from hookserver.store.state import StateStore
from hookserver.store.timeseries import SeriesKey, TimeSeriesStore

from collectors.top_gpu import gpu_top

__all__ = ["top_report"]


def _first(series: TimeSeriesStore, metric: str) -> SeriesKey | None:
    keys = series.keys(metric)
    return sorted(keys)[0] if keys else None


def top_report(store: StateStore, window_s: float = 300.0, *, limit: int = 0) -> dict[str, Any]:
    """Node and pods: CPU cores and memory bytes, now and p95 over `window_s` (capped at the retention)."""
    series = store.series
    snap = store.snapshot()
    now = series.clock()
    node: dict[str, Any] = {}
    for label, metric in (
        ("cpu_cores", "node_cpu_usage"),
        ("memory_bytes", "node_memory_usage"),
        ("system_cpu_cores", "system_cpu_usage"),
        ("system_memory_bytes", "system_memory_usage"),
        ("be_cpu_cores", "be_cpu_usage"),
    ):
        node[label] = _stat(series, _first(series, metric), window_s, now)
    total = _first(series, "node_memory_total")
    last_total = series.last(total) if total is not None else None
    node["memory_total_bytes"] = None if last_total is None else last_total[1]
    node_gpus, pod_gpus = gpu_top(series, snap, partial(_stat, series, window_s=window_s, now=now))
    if node_gpus:
        node["gpus"] = node_gpus
    pods: list[dict[str, Any]] = []
    memory_keys = {k.label("pod"): k for k in series.keys("pod_memory_usage")}
    cpu_keys = {k.label("pod"): k for k in series.keys("pod_cpu_usage")}
    for uid in sorted(set(memory_keys) | set(cpu_keys)):
        pod = snap.pods.get(uid)
        any_key = cpu_keys.get(uid) or memory_keys[uid]
        cpu = _stat(series, cpu_keys.get(uid), window_s, now)
        mem = _stat(series, memory_keys.get(uid), window_s, now)
        if cpu["now"] is None and mem["now"] is None:
            continue
        entry: dict[str, Any] = {
            "uid": uid,
            "namespace": pod.namespace if pod else "",
            "name": pod.name if pod else "",
            "qos": any_key.label("qos"),
            "priority_class": any_key.label("priority"),
            "cpu_cores": cpu,
            "memory_bytes": mem,
        }
        if uid in pod_gpus:
            entry["gpus"] = pod_gpus[uid]
        pods.append(entry)
    pods.sort(key=lambda p: (-(p["cpu_cores"]["now"] or 0.0), p["uid"]))
    return {
        "at": now,
        "window_s": min(window_s, series.retention_s),
        "node": node,
        "pods": pods[:limit] if limit > 0 else pods,
        "pod_count": len(pods),
    }


def _stat(series: TimeSeriesStore, key: SeriesKey | None, window_s: float, now: float) -> dict[str, float | None]:
    """now = the newest sample inside the window (None if none), p95 over the window, and the sample's age."""
    if key is None:
        return {"now": None, "p95": None, "age_s": None}
    stats = series.window(key, window_s, now=now)
    if stats is None:
        return {"now": None, "p95": None, "age_s": None}
    return {"now": stats.last, "p95": stats.p95, "age_s": round(now - stats.last_ts, 3)}
