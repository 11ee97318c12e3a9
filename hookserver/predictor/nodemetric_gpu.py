"""GPU use in the NodeMetric status: the `devices` list of a ResourceMap, where koordlet puts it.

koordinator's `ResourceMap` is `{resources, devices}` with `devices` a list of scheduling.koordinator.sh
`DeviceInfo` (apis/slo/v1alpha1/resources.go). koordlet's statesinformer (impl/states_nodemetric.go) fills it
in two places only, and this module repeats both:

* `nodeMetric.nodeUsage.devices` and every `aggregatedNodeUsages[*].usage.<agg>.devices`: per GPU of the
  node's inventory (in NVML index order), the aggregate (avg over `aggregateDurationSeconds` for nodeUsage,
  avg/p50/p90/p95/p99 over each duration for the aggregated ones) of `node_gpu_core_usage` and
  `node_gpu_memory_usage`. Only where that ResourceMap has resources: a ResourceMap left empty (no node
  samples, cold start) gets no devices either.
* `podsMetric[*].podUsage.devices`: the same for `pod_gpu_core_usage` / `pod_gpu_memory_usage` of the pod,
  avg over the report window, for a pod that is reported at all.

An entry is `{"type": "gpu", "id": <uuid>, "minor": <n>, "health": <bool>, "resources": {gpu-core,
gpu-memory, gpu-memory-ratio}}` with koordlet's truncations: `gpu-core` = int(SM %), a DecimalSI count;
`gpu-memory` = int(bytes), BinarySI; `gpu-memory-ratio` = int(100 x memory / the device's total).
A GPU without a core or a memory sample in the window is left out, and an empty list is left out (Go's
omitempty), so a CPU node's document is exactly what it was. Two deliberate differences, both safe for
koordinator's readers (none of which reads these lists): `health` is the inventory's health, where koordlet
always writes false (its code carries a TODO for it; the CRD requires the field), and a GPU whose total
memory NVML does not give has no `gpu-memory-ratio` (koordlet would divide by zero).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from hookserver.gpu_inventory import GPU_DEVICES_STATIC, GpuInfo, gpu_inventory
from hookserver.koord_devices import DEVICE_GPU, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO
from hookserver.kubewire import decimal_quantity, memory_quantity
from hookserver.seriesnames import NODE_GPU_CORE, NODE_GPU_MEMORY, POD_GPU_CORE, POD_GPU_MEMORY
from hookserver.store.timeseries import SeriesKey, TimeSeriesStore, WindowStats

__all__ = ["GPU_DEVICES_STATIC", "GpuDeviceUsage", "GpuInventoryEntry", "gpu_inventory"]

Stats = Callable[[Iterable[SeriesKey], float], WindowStats | None]


# What the report reads of a GPU: the shared inventory shape.
GpuInventoryEntry = GpuInfo


def _device_key(key: SeriesKey) -> tuple[str, str]:
    return key.label("device"), key.label("minor")


class GpuDeviceUsage:
    """The `devices` lists of one report: built once per report, from one series store and one inventory."""

    def __init__(self, series: TimeSeriesStore, gpus: Sequence[GpuInventoryEntry], stats: Stats) -> None:
        self.gpus = tuple(gpus)
        self._stats = stats
        self._node: dict[str, dict[tuple[str, str], list[SeriesKey]]] = {}
        self._pod: dict[str, dict[tuple[str, str, str], list[SeriesKey]]] = {}
        if not self.gpus:
            return  # a CPU node: no series are looked at
        for metric in (NODE_GPU_CORE, NODE_GPU_MEMORY):
            table = self._node[metric] = {}
            for key in series.keys(metric):
                table.setdefault(_device_key(key), []).append(key)
        for metric in (POD_GPU_CORE, POD_GPU_MEMORY):
            pods = self._pod[metric] = {}
            for key in series.keys(metric):
                pods.setdefault((key.label("pod"), *_device_key(key)), []).append(key)

    def node(self, window_s: float, aggregation: str) -> list[dict[str, Any]]:
        """The node's devices for one ResourceMap: `aggregation` of each GPU's node series over the window."""
        out = []
        for gpu in self.gpus:
            ids = (gpu.uuid, str(gpu.minor))
            entry = self._entry(gpu, self._node[NODE_GPU_CORE].get(ids, ()), self._node[NODE_GPU_MEMORY].get(ids, ()),
                                window_s, aggregation)
            if entry is not None:
                out.append(entry)
        return out

    def pod(self, uid: str, window_s: float) -> list[dict[str, Any]]:
        """A pod's devices: the average of its GPU series over the window (koordlet's pod query)."""
        out = []
        for gpu in self.gpus:
            ids = (uid, gpu.uuid, str(gpu.minor))
            entry = self._entry(gpu, self._pod[POD_GPU_CORE].get(ids, ()), self._pod[POD_GPU_MEMORY].get(ids, ()),
                                window_s, "avg")
            if entry is not None:
                out.append(entry)
        return out

    def _entry(self, gpu: GpuInventoryEntry, core_keys: Iterable[SeriesKey], memory_keys: Iterable[SeriesKey],
               window_s: float, aggregation: str) -> dict[str, Any] | None:
        core = self._stats(core_keys, window_s)
        memory = self._stats(memory_keys, window_s)
        if core is None or memory is None:
            return None  # koordlet: a GPU without samples in the window is skipped
        used = memory.get(aggregation)
        resources = {GPU_CORE: decimal_quantity(int(core.get(aggregation))), GPU_MEMORY: memory_quantity(int(used))}
        if gpu.memory_total_bytes > 0:
            resources[GPU_MEMORY_RATIO] = decimal_quantity(int(100 * used / float(gpu.memory_total_bytes)))
        return {"type": DEVICE_GPU, "id": gpu.uuid, "minor": int(gpu.minor), "health": bool(gpu.healthy),
                "resources": resources}
