"""The GPU part of `hookctl top`: per device, and per pod and container on each device, GPU core % and memory.

Read from koordlet's series (`node_gpu_core_usage`, `pod_gpu_memory_usage`, ...; per device, labelled with its
UUID and minor), plus NVML's device-wide utilisation and total memory for the node rows. A node without GPU
series gets empty results, so `top` shows nothing new there. A device, pod or container whose samples all
fell out of the window (a GPU that disappeared, a pod that left) is not listed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hookserver.store.state import StoreSnapshot
from hookserver.store.timeseries import SeriesKey, TimeSeriesStore

__all__ = ["gpu_top"]

Stat = Callable[[SeriesKey | None], dict[str, float | None]]

_NODE = {"core_percent": "node_gpu_core_usage", "memory_bytes": "node_gpu_memory_usage",
         "utilization_percent": "gpu_utilization"}
_POD = {"core_percent": "pod_gpu_core_usage", "memory_bytes": "pod_gpu_memory_usage"}
_CONTAINER = {"core_percent": "container_gpu_core_usage", "memory_bytes": "container_gpu_memory_usage"}


def _device(key: SeriesKey) -> tuple[str, str]:
    return key.label("device"), key.label("minor")


def _minor_order(device: tuple[str, ...]) -> tuple[int, str, str]:
    """GPUs by minor number (numerically); the UUID breaks ties."""
    uuid, minor = device[0], device[1]
    return (int(minor) if minor.isdigit() else 1 << 31, minor, uuid)


def _minor(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def _group(series: TimeSeriesStore, metrics: dict[str, str], by: Callable[[SeriesKey], tuple[str, ...]],
           ) -> dict[tuple[str, ...], dict[str, SeriesKey]]:
    out: dict[tuple[str, ...], dict[str, SeriesKey]] = {}
    for field, metric in metrics.items():
        for key in series.keys(metric):
            out.setdefault(by(key), {}).setdefault(field, key)
    return out


def _stats(keys: dict[str, SeriesKey], fields: dict[str, str], stat: Stat) -> dict[str, Any] | None:
    """The fields' stats, or None when none of them has a sample in the window."""
    values = {field: stat(keys.get(field)) for field in fields}
    return values if any(value["now"] is not None for value in values.values()) else None


def gpu_top(series: TimeSeriesStore, snap: StoreSnapshot, stat: Stat,
            ) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """(the node's GPUs sorted by minor, pod UID -> that pod's GPUs with their containers); `stat` is top's
    now/p95/age of one series over its window."""
    node: list[dict[str, Any]] = []
    for (uuid, minor), keys in sorted(_group(series, _NODE, _device).items(), key=lambda kv: _minor_order(kv[0])):
        values = _stats(keys, _NODE, stat)
        if values is None:
            continue
        total_key = next(iter(series.select("node_gpu_memory_total", {"device": uuid, "minor": minor})), None)
        last_total = series.last(total_key) if total_key is not None else None
        node.append({"device": uuid, "minor": _minor(minor), **values,
                     "memory_total_bytes": None if last_total is None else last_total[1]})
    containers: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    by_container = _group(series, _CONTAINER, lambda k: (k.label("pod"), *_device(k), k.label("container")))
    for (uid, uuid, minor, cid), keys in sorted(by_container.items()):
        values = _stats(keys, _CONTAINER, stat)
        if values is None:
            continue
        container = snap.containers.get(cid)
        containers.setdefault((uid, uuid, minor), []).append(
            {"id": cid, "name": container.name if container else "", **values})
    pods: dict[str, list[dict[str, Any]]] = {}
    by_pod = _group(series, _POD, lambda k: (k.label("pod"), *_device(k)))
    for (uid, uuid, minor), keys in sorted(by_pod.items(), key=lambda kv: (kv[0][0], _minor_order(kv[0][1:]))):
        values = _stats(keys, _POD, stat)
        if values is None:
            continue
        pods.setdefault(uid, []).append({"device": uuid, "minor": _minor(minor), **values,
                                         "containers": containers.get((uid, uuid, minor), [])})
    return node, pods
