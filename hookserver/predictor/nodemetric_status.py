"""The NodeMetric status document (`slo.koordinator.sh/v1alpha1` NodeMetricStatus), built from the store.

Field names and shapes follow koordinator's types exactly: `updateTime`; `nodeMetric` with `nodeUsage`,
`aggregatedNodeUsages` ([{usage: {avg|p50|p90|p95|p99: ResourceMap}, duration}]), `systemUsage`,
`aggregatedSystemUsages`, `numaUsages` ([{numaNodeID, nodeUsage, systemUsage}], koordinator #3138); `podsMetric` ([{namespace, name, podUsage, priority, qos}], sorted by namespace/name);
`hostApplicationMetric` ([{name, usage, priority, qos}]); `prodReclaimableMetric` and `prodPeakMetric`
({resource: ResourceMap}). A ResourceMap is `{"resources": {"cpu": "1500m", "memory": "2Gi"}}`.

As in koordlet: usages are averages over `aggregateDurationSeconds` (floored at 60 s); aggregated usages are
left empty (`{}`) while their window holds less than half its duration of samples (cold start); empty lists
are omitted (the reporter turns omissions into deletions when it patches). On a GPU node the node's and the
pods' ResourceMaps also carry koordlet's per-GPU `devices` (see nodemetric_gpu.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hookserver.errors import InputError
from hookserver.predictor.histogram import format_go_time
from hookserver.predictor.nodemetric_gpu import GpuDeviceUsage, GpuInventoryEntry
from hookserver.predictor.predictors import ReclaimableReport
from hookserver.podclass import pod_priority_class, pod_qos_class
from hookserver.seriesnames import (
    HOST_APP_CPU,
    HOST_APP_MEMORY,
    NODE_CPU,
    NODE_MEMORY,
    NODE_MEMORY_WITH_CACHE,
    NUMA_CPU,
    NUMA_MEMORY,
    NUMA_SYSTEM_CPU,
    NUMA_SYSTEM_MEMORY,
    POD_CPU,
    POD_MEMORY,
    POD_MEMORY_WITH_CACHE,
    SYSTEM_CPU,
    SYSTEM_MEMORY,
)
from hookserver.kubewire import cpu_quantity, format_go_duration, memory_quantity, parse_go_duration
from hookserver.store.state import StoreSnapshot
from hookserver.store.timeseries import SeriesKey, TimeSeriesStore, WindowStats

__all__ = ["ReportPolicy", "build_status", "report_policy"]

log = logging.getLogger(__name__)

DEFAULT_REPORT_INTERVAL_S = 60.0
DEFAULT_AGGREGATE_S = 300.0
DEFAULT_DURATIONS_S = (300.0, 600.0, 1800.0)
COLD_START_RATIO = 0.5
AGGREGATIONS = ("avg", "p50", "p90", "p95", "p99")


@dataclass(frozen=True, slots=True)
class ReportPolicy:
    """The effective `spec.metricCollectPolicy`, with koordlet's floors applied."""

    report_interval_s: float
    aggregate_s: float
    durations_s: tuple[float, ...]
    memory_policy: str
    from_spec: bool
    problems: tuple[str, ...] = ()


def report_policy(
    spec: Any,
    *,
    min_report_s: float,
    min_aggregate_s: float,
    default_report_s: float = DEFAULT_REPORT_INTERVAL_S,
    default_aggregate_s: float = DEFAULT_AGGREGATE_S,
) -> ReportPolicy:
    """From the NodeMetric spec the informer stored (a `NodeMetricSpec` model), or the defaults when None."""
    if spec is None:
        return ReportPolicy(max(default_report_s, min_report_s), max(default_aggregate_s, min_aggregate_s),
                            DEFAULT_DURATIONS_S, "usageWithoutPageCache", False)
    policy = spec.metric_collect_policy
    problems: list[str] = []
    durations: list[float] = []
    for index, text in enumerate(policy.node_aggregate_policy.durations):
        try:
            seconds = parse_go_duration(str(text), field=f"nodeAggregatePolicy.durations[{index}]")
        except InputError as exc:
            problems.append(str(exc))
            continue
        if seconds > 0:
            durations.append(seconds)
    return ReportPolicy(
        max(float(policy.report_interval_seconds), min_report_s),
        max(float(policy.aggregate_duration_seconds), min_aggregate_s),
        tuple(durations),
        policy.node_memory_collect_policy,
        True,
        tuple(problems),
    )


def _resources(cpu_cores: float | None, memory_bytes: float | None) -> dict[str, Any]:
    """A ResourceMap; `{}` when either value is missing (koordlet reports both or neither)."""
    if cpu_cores is None or memory_bytes is None:
        return {}
    return {"resources": {"cpu": cpu_quantity(int(cpu_cores * 1000)), "memory": memory_quantity(int(memory_bytes))}}


class _Reader:
    """Window statistics over one metric, merging every series of it that matches a label."""

    def __init__(self, series: TimeSeriesStore, now: float) -> None:
        self.series = series
        self.now = now

    def stats(self, keys: Iterable[SeriesKey], window_s: float) -> WindowStats | None:
        times: list[float] = []
        values: list[float] = []
        for key in keys:
            for ts, value in self.series.points(key, window_s, now=self.now):
                times.append(ts)
                values.append(value)
        if not values:
            return None
        if len(times) > 1:
            order = sorted(range(len(times)), key=times.__getitem__)
            times = [times[i] for i in order]
            values = [values[i] for i in order]
        return WindowStats.of(times, values)

    def node(self, metric: str, window_s: float) -> WindowStats | None:
        return self.stats(self.series.keys(metric), window_s)


def _pair(cpu: WindowStats | None, memory: WindowStats | None, aggregation: str, *, cold_window_s: float = 0.0) -> dict[str, Any]:
    if cpu is None or memory is None:
        return {}
    if cold_window_s and (cpu.last_ts - cpu.first_ts) < cold_window_s * COLD_START_RATIO:
        return {}
    return _resources(cpu.get(aggregation), memory.get(aggregation))


def _memory_metric(policy: ReportPolicy, *, pod: bool) -> str:
    if policy.memory_policy == "usageWithPageCache":
        return POD_MEMORY_WITH_CACHE if pod else NODE_MEMORY_WITH_CACHE
    return POD_MEMORY if pod else NODE_MEMORY  # usageWithHotPageCache needs cold-page data: degrade as koordlet does


Devices = Callable[[float, str], list[dict[str, Any]]]


def _with_devices(usage: dict[str, Any], devices: Devices | None, window_s: float, aggregation: str) -> dict[str, Any]:
    """koordlet's queryNodeMetric: the GPUs are added only to a ResourceMap that has resources."""
    if usage and devices is not None:
        listed = devices(window_s, aggregation)
        if listed:
            usage["devices"] = listed
    return usage


def _aggregated(reader: _Reader, cpu_metric: str, memory_metric: str, policy: ReportPolicy,
                devices: Devices | None = None) -> list[dict[str, Any]]:
    out = []
    for duration in policy.durations_s:
        cpu = reader.node(cpu_metric, duration)
        memory = reader.node(memory_metric, duration)
        usage = {agg: _with_devices(_pair(cpu, memory, agg, cold_window_s=duration), devices, duration, agg)
                 for agg in AGGREGATIONS}
        out.append({"usage": usage, "duration": format_go_duration(duration)})
    return out


def _by_label(series: TimeSeriesStore, metric: str, label: str) -> dict[str, list[SeriesKey]]:
    out: dict[str, list[SeriesKey]] = {}
    for key in series.keys(metric):
        value = key.label(label)
        if value:
            out.setdefault(value, []).append(key)
    return out


def _host_app_names(node_slo: Any) -> list[str] | None:
    """Names in NodeSLO spec.hostApplications, or None when NodeSLO says nothing we can read."""
    spec = node_slo.get("spec", node_slo) if isinstance(node_slo, Mapping) else getattr(node_slo, "spec", node_slo)
    apps = spec.get("hostApplications") if isinstance(spec, Mapping) else getattr(spec, "host_applications", None)
    if not isinstance(apps, list | tuple):
        return None
    names = []
    for app in apps:
        name = app.get("name") if isinstance(app, Mapping) else getattr(app, "name", None)
        if isinstance(name, str) and name:
            names.append(name)
    return names


def _numa_usages(reader: _Reader, series: TimeSeriesStore, window: float) -> list[dict[str, Any]]:
    """koordlet's `collectNUMAUsages`: per NUMA node, the average CPU and memory over the window; a node
    without both is left out; `systemUsage` is `{}` (Go's serialisation of an empty ResourceMap) unless both
    system figures have samples. Sorted by node id. NUMA memory has no page-cache policy (koordlet: none)."""
    cpu, memory = _by_label(series, NUMA_CPU, "numa"), _by_label(series, NUMA_MEMORY, "numa")
    system_cpu, system_memory = _by_label(series, NUMA_SYSTEM_CPU, "numa"), _by_label(series, NUMA_SYSTEM_MEMORY, "numa")
    out = []
    for node in set(cpu) & set(memory):
        if not node.isdigit():
            continue
        node_usage = _pair(reader.stats(cpu[node], window), reader.stats(memory[node], window), "avg")
        if not node_usage:
            continue
        system = _pair(reader.stats(system_cpu.get(node, ()), window), reader.stats(system_memory.get(node, ()), window), "avg")
        out.append({"numaNodeID": int(node), "nodeUsage": node_usage, "systemUsage": system})
    return sorted(out, key=lambda entry: int(entry["numaNodeID"]))


def build_status(
    snapshot: StoreSnapshot,
    series: TimeSeriesStore,
    *,
    now: float,
    policy: ReportPolicy,
    reclaimable: ReclaimableReport | None,
    gpus: Sequence[GpuInventoryEntry] = (),
) -> dict[str, Any]:
    """The status document. `gpus` is the node's GPU inventory (`nodemetric_gpu.gpu_inventory`); with none,
    no ResourceMap has `devices` (a CPU node's document)."""
    reader = _Reader(series, now)
    gpu_usage = GpuDeviceUsage(series, gpus, reader.stats) if gpus else None
    node_devices = gpu_usage.node if gpu_usage is not None else None
    window = policy.aggregate_s
    node_memory_metric = _memory_metric(policy, pod=False)
    node_cpu = reader.node(NODE_CPU, window)
    node_memory = reader.node(node_memory_metric, window)
    node_metric: dict[str, Any] = {"nodeUsage": _with_devices(_pair(node_cpu, node_memory, "avg"), node_devices,
                                                              window, "avg")}
    aggregated = _aggregated(reader, NODE_CPU, node_memory_metric, policy, node_devices)
    if aggregated:
        node_metric["aggregatedNodeUsages"] = aggregated
    node_metric["systemUsage"] = _pair(reader.node(SYSTEM_CPU, window), reader.node(SYSTEM_MEMORY, window), "avg")
    aggregated_system = _aggregated(reader, SYSTEM_CPU, SYSTEM_MEMORY, policy)
    if aggregated_system:
        node_metric["aggregatedSystemUsages"] = aggregated_system
    numa = _numa_usages(reader, series, window)
    if numa:
        node_metric["numaUsages"] = numa
    status: dict[str, Any] = {"updateTime": format_go_time(float(int(now))), "nodeMetric": node_metric}

    pod_cpu = _by_label(series, POD_CPU, "pod")
    pod_memory = _by_label(series, _memory_metric(policy, pod=True), "pod")
    pods_metric = []
    for pod in sorted(snapshot.pods.values(), key=lambda p: (p.namespace, p.name)):
        cpu = reader.stats(pod_cpu.get(pod.uid, ()), window)
        memory = reader.stats(pod_memory.get(pod.uid, ()), window)
        if cpu is None or memory is None:
            continue  # koordlet skips a pod whose metrics it cannot query
        pod_usage = _resources(cpu.avg, memory.avg)
        if gpu_usage is not None:
            pod_devices = gpu_usage.pod(pod.uid, window)
            if pod_devices:
                pod_usage["devices"] = pod_devices
        entry: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "podUsage": pod_usage}
        priority, qos = pod_priority_class(pod), pod_qos_class(pod)
        if priority:
            entry["priority"] = priority
        if qos:
            entry["qos"] = qos
        pods_metric.append(entry)
    if pods_metric:
        status["podsMetric"] = pods_metric

    apps_cpu = _by_label(series, HOST_APP_CPU, "app")
    apps_memory = _by_label(series, HOST_APP_MEMORY, "app")
    wanted = _host_app_names(snapshot.node_slo) if snapshot.node_slo is not None else []
    host_apps = []
    for name in sorted(set(apps_cpu) if wanted is None else set(wanted)):
        keys = apps_cpu.get(name, [])
        cpu = reader.stats(keys, window)
        memory = reader.stats(apps_memory.get(name, ()), window)
        if cpu is None or memory is None:
            continue
        entry = {"name": name, "usage": _resources(cpu.avg, memory.avg)}
        if keys and keys[0].label("priority"):
            entry["priority"] = keys[0].label("priority")
        if keys and keys[0].label("qos"):
            entry["qos"] = keys[0].label("qos")
        host_apps.append(entry)
    if host_apps:
        status["hostApplicationMetric"] = host_apps

    if reclaimable is not None:
        published = reclaimable.published
        if published.ok:
            resources = {"cpu": cpu_quantity(published.cpu_milli), "memory": memory_quantity(published.memory_bytes)}
            status["prodReclaimableMetric"] = {"resource": {"resources": resources}}
            peak = {"cpu": cpu_quantity(published.peak_cpu_milli), "memory": memory_quantity(published.peak_memory_bytes)}
            status["prodPeakMetric"] = {"resource": {"resources": peak}}
        else:
            status["prodReclaimableMetric"] = {"resource": {}}  # koordlet: an empty ReclaimableMetric on failure
    return status
