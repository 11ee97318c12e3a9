"""The formula's pods and usage, read from the store's pods and the collectors' time series: fresh, local data.

koord-manager reads the same figures from the NodeMetric status a minute or more after they were measured;
here they come from the series the collectors wrote a second ago. Averages are over the report window
(`metricAggregateDurationSeconds`, floored at 60 s as koordlet floors it) and over a short fast window, and
memory follows `metricMemoryCollectPolicy` as koordlet's report does.

Pods are those in the store (informer, kubelet, hooks, NRI). Usage of a pod the store does not know (it
left the apiserver but its cgroup still runs) is koord-manager's "dangling" metric; its priority comes
from the series' labels.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hookserver.aio.hotgate import paced
from hookserver.capacity.inputs import HostAppUsage, PodInput, UsageFacts, WindowedUsage
from hookserver.capacity.quantities import Pair
from hookserver.errors import InputError
from hookserver.podclass import KNOWN_PRIORITY_CLASSES, effective_requests, pod_priority_class, pod_qos_class
from hookserver.seriesnames import (
    HOST_APP_CPU,
    HOST_APP_MEMORY,
    NODE_CPU,
    NODE_MEMORY,
    NODE_MEMORY_WITH_CACHE,
    POD_CPU,
    POD_MEMORY,
    POD_MEMORY_WITH_CACHE,
    SYSTEM_CPU,
    SYSTEM_MEMORY,
)
from hookserver.store.records import named_containers_by_pod
from hookserver.store.state import StoreSnapshot
from hookserver.store.timeseries import SeriesKey, TimeSeriesStore
from hookserver.topology.annotations import pod_numa_nodes

__all__ = ["MIN_REPORT_WINDOW_S", "Freshness", "gather_inputs", "report_window_s"]

log = logging.getLogger(__name__)

MIN_REPORT_WINDOW_S = 60.0  # koordlet's floor on aggregateDurationSeconds


def report_window_s(aggregate_duration_s: float) -> float:
    return max(float(aggregate_duration_s), MIN_REPORT_WINDOW_S)


@dataclass(frozen=True, slots=True)
class Freshness:
    """How current the node's own samples are: the newest of node CPU and memory (the older of the two), and
    the first sample this process took (how much history there is)."""

    newest_at: float | None
    first_at: float | None


_Averages = Callable[[SeriesKey, tuple[float, ...]], list[float | None]]


def _windowed(averages: _Averages, cpu: Iterable[SeriesKey], memory: Iterable[SeriesKey],
              windows: tuple[float, ...]) -> WindowedUsage | None:
    """The window means summed over the given series (several when a pod or host application has more than one
    label set); None when CPU or memory has no sample in the report window (the first window)."""
    means: list[tuple[float, float | None]] = []  # (report window, fast window) for CPU, then memory
    for keys in (cpu, memory):
        total: list[float | None] = [None] * len(windows)
        for key in keys:
            for i, mean in enumerate(averages(key, windows)):
                if mean is not None:
                    total[i] = mean + (total[i] or 0.0)
        report = total[0]
        if report is None:
            return None
        means.append((report, total[1] if len(total) > 1 else None))
    (cpu_avg, cpu_fast), (memory_avg, memory_fast) = means
    avg = Pair(int(cpu_avg * 1000), int(memory_avg))
    fast = None
    if cpu_fast is not None and memory_fast is not None:
        fast = Pair(int(cpu_fast * 1000), int(memory_fast))
    return WindowedUsage.of(avg, fast)


def _by_label(series: TimeSeriesStore, metric: str, label: str) -> dict[str, list[SeriesKey]]:
    out: dict[str, list[SeriesKey]] = {}
    for key in series.keys(metric):
        value = key.label(label)
        if value:
            out.setdefault(value, []).append(key)
    return out


def _koord_class(label: str) -> str:
    return label if label in KNOWN_PRIORITY_CLASSES else ""


def gather_inputs(
    snapshot: StoreSnapshot,
    series: TimeSeriesStore,
    *,
    now: float,
    window_s: float,
    fast_window_s: float,
    memory_policy: str = "usageWithoutPageCache",
) -> tuple[list[PodInput], UsageFacts, Freshness, list[str]]:
    """(pods, usage, freshness, notes) for `compute_capacity`. Notes name pods whose requests or NUMA binding did
    not parse."""
    windows = (window_s, fast_window_s) if fast_window_s > 0 else (window_s,)

    def averages(key: SeriesKey, wins: tuple[float, ...]) -> list[float | None]:
        return series.averages(key, wins, now=now)

    with_cache = memory_policy == "usageWithPageCache"
    pod_cpu = _by_label(series, POD_CPU, "pod")
    pod_memory = _by_label(series, POD_MEMORY_WITH_CACHE if with_cache else POD_MEMORY, "pod")
    notes: list[str] = []
    pods: list[PodInput] = []
    by_pod = named_containers_by_pod(snapshot.containers.values())  # announced resources of spec-less pods
    for pod in paced(snapshot.pods.values(), every=8):  # the hot gate: each pod reads two windows of samples
        try:
            requests = effective_requests(pod, by_pod.get(pod.uid, ()))
            request = Pair(requests.cpu_milli, requests.memory_bytes)
        except InputError as exc:
            notes.append(f"{pod.key}: requests unreadable, counted as 0: {exc}")
            request = Pair()
        try:
            numa_nodes = pod_numa_nodes(pod.annotations)
        except InputError as exc:
            # koord-manager reads an undecodable resource-status as "no NUMA binding" and splits the pod evenly
            notes.append(f"{pod.key}: NUMA binding unreadable, counted on every zone: {exc}")
            numa_nodes = ()
        usage = _windowed(averages, pod_cpu.get(pod.uid, ()), pod_memory.get(pod.uid, ()), windows)
        pods.append(PodInput(pod.uid, pod.key, pod_priority_class(pod), pod_qos_class(pod), pod.phase, request, usage,
                             numa_nodes))
    dangling: list[PodInput] = []
    for uid in sorted(set(pod_cpu) - set(snapshot.pods)):
        usage = _windowed(averages, pod_cpu[uid], pod_memory.get(uid, ()), windows)
        if usage is None:
            continue
        labels = pod_cpu[uid][0]
        dangling.append(PodInput(uid, f"(unknown pod {uid})", _koord_class(labels.label("priority")),
                                 labels.label("qos"), "", Pair(), usage))
    node_cpu = series.keys(NODE_CPU)
    node_memory = series.keys(NODE_MEMORY_WITH_CACHE if with_cache else NODE_MEMORY)
    apps_cpu = _by_label(series, HOST_APP_CPU, "app")
    apps_memory = _by_label(series, HOST_APP_MEMORY, "app")
    host_apps = []
    for name in sorted(apps_cpu):
        usage = _windowed(averages, apps_cpu[name], apps_memory.get(name, ()), windows)
        if usage is not None:
            host_apps.append(HostAppUsage(name, _koord_class(apps_cpu[name][0].label("priority")), usage))
    facts = UsageFacts(
        node=_windowed(averages, node_cpu, node_memory, windows),
        system=_windowed(averages, series.keys(SYSTEM_CPU), series.keys(SYSTEM_MEMORY), windows),
        host_apps=tuple(host_apps),
        dangling=tuple(dangling),
        window_s=window_s,
        fast_window_s=fast_window_s if fast_window_s > 0 else 0.0,
    )
    return pods, facts, _freshness(series, [*node_cpu, *node_memory]), notes


def _freshness(series: TimeSeriesStore, keys: list[SeriesKey]) -> Freshness:
    newest: list[float] = []
    first: float | None = None
    for key in keys:
        last = series.last(key)
        if last is not None:
            newest.append(last[0])
        oldest = series.first(key)
        if oldest is not None:
            first = oldest[0] if first is None else min(first, oldest[0])
    return Freshness(newest_at=min(newest) if newest else None, first_at=first)

