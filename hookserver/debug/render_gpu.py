"""GPUs in `hookctl top` and `hookctl nodemetric` as text. For top (collectors/top_gpu.py builds it): a line per
GPU under the node line, GPU columns in the pod table, and a table of containers on each GPU. For the NodeMetric:
a row per GPU entry of the node's and the pods' usage `devices`. A document without GPUs renders as before.

Sizes are formatted by the caller's formatter (render.py's), so both halves of `top` print memory alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["gpu_container_rows", "gpu_node_lines", "gpu_pod_cells", "nodemetric_gpu_rows"]

Format = Callable[[Any], str]


def _text(value: Any) -> str:
    """One printable line: a device name comes from the driver, and is never sent raw to the terminal."""
    text = str(value)
    return text if text.isprintable() else repr(text)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _percent(value: Any) -> str:
    number = _number(value)
    return "-" if number is None else f"{number:.0f}%"


def _stat(entry: Mapping[str, Any], field: str, which: str) -> Any:
    stat = entry.get(field)
    return stat.get(which) if isinstance(stat, Mapping) else None


def _entries(value: Any) -> list[Mapping[str, Any]]:
    return [entry for entry in value if isinstance(entry, Mapping)] if isinstance(value, list) else []


def gpu_node_lines(node: Mapping[str, Any], size: Format) -> list[str]:
    """One line per GPU: koordlet's core % and memory of its processes (now and p95), NVML's device-wide
    utilisation, and the device's memory."""
    lines = []
    for gpu in _entries(node.get("gpus")):
        name = f"gpu {_text(gpu.get('minor'))} {_text(gpu.get('device'))}"
        lines.append(
            f"{name}: core {_percent(_stat(gpu, 'core_percent', 'now'))} "
            f"(p95 {_percent(_stat(gpu, 'core_percent', 'p95'))}), memory {size(_stat(gpu, 'memory_bytes', 'now'))} "
            f"(p95 {size(_stat(gpu, 'memory_bytes', 'p95'))}) of {size(gpu.get('memory_total_bytes'))}, "
            f"device utilisation {_percent(_stat(gpu, 'utilization_percent', 'now'))}")
    return lines


def gpu_pod_cells(pod: Mapping[str, Any], size: Format) -> dict[str, str]:
    """The pod's GPU use now, summed over its GPUs ("-" for a pod without any)."""
    gpus = _entries(pod.get("gpus"))
    cores = [v for v in (_number(_stat(g, "core_percent", "now")) for g in gpus) if v is not None]
    memory = [v for v in (_number(_stat(g, "memory_bytes", "now")) for g in gpus) if v is not None]
    return {"gpu_core": _percent(sum(cores)) if cores else "-", "gpu_memory": size(sum(memory)) if memory else "-"}


def gpu_container_rows(pods: list[Any], size: Format) -> list[dict[str, str]]:
    """A row per container per GPU, in the pods' order."""
    rows = []
    for pod in _entries(pods):
        name = f"{pod.get('namespace')}/{pod.get('name')}" if pod.get("name") else str(pod.get("uid", "?"))
        for gpu in _entries(pod.get("gpus")):
            for container in _entries(gpu.get("containers")):
                rows.append({
                    "pod": name, "container": str(container.get("name") or container.get("id") or "?"),
                    "gpu": str(gpu.get("minor")),
                    "core": _percent(_stat(container, "core_percent", "now")),
                    "core_p95": _percent(_stat(container, "core_percent", "p95")),
                    "memory": size(_stat(container, "memory_bytes", "now")),
                    "memory_p95": size(_stat(container, "memory_bytes", "p95")),
                })
    return rows


def _device_rows(scope: str, usage: Any) -> list[dict[str, str]]:
    devices = _entries(usage.get("devices")) if isinstance(usage, Mapping) else []
    rows = []
    for device in devices:
        resources = device.get("resources")
        res = resources if isinstance(resources, Mapping) else {}
        rows.append({
            "usage": scope, "gpu": _text(device.get("minor")), "id": _text(device.get("id")),
            "health": "true" if device.get("health") is True else "false",
            "core": _text(res.get("koordinator.sh/gpu-core", "-")),
            "memory": _text(res.get("koordinator.sh/gpu-memory", "-")),
            "memory_ratio": _text(res.get("koordinator.sh/gpu-memory-ratio", "-")),
        })
    return rows


def nodemetric_gpu_rows(status: Mapping[str, Any]) -> list[dict[str, str]]:
    """A row per GPU entry of the status's node usage, then of each pod's usage (the averages over the report
    window; the aggregated usages' devices are in `-o json`)."""
    node = status.get("nodeMetric")
    rows = _device_rows("node", node.get("nodeUsage") if isinstance(node, Mapping) else None)
    for pod in _entries(status.get("podsMetric")):
        rows += _device_rows(f"{_text(pod.get('namespace'))}/{_text(pod.get('name'))}", pod.get("podUsage"))
    return rows
