"""Prometheus export: one custom collector (`collect()`) that turns the newest sample of every fresh series
into a gauge, plus the collectors' own health (runs, failures, last duration, enabled) and the store's size.

It is registered into the daemon's own `CollectorRegistry`, never the global one. Names come from
`collectors.names` (koordlet equivalents are documented there). A series whose newest sample is older than
`stale_factor` × its interval (a pod that went away) is not exported; the store keeps it until GC.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector as PromCollector

from hookserver.aio.hotgate import paced
from hookserver.store.state import StateStore
from hookserver.system.topology import NodeTopology

from collectors.gpu import GPU_DEVICES_KEY
from collectors.names import METRICS, PROM_LABEL
from collectors.node_info import NODE_TOPOLOGY_KEY
from collectors.nvml import GpuDevice
from collectors.scheduler import CollectorState

__all__ = ["StoreExporter"]


class StoreExporter(PromCollector):
    def __init__(
        self,
        store: StateStore,
        *,
        node_name: str,
        states: Callable[[], Mapping[str, CollectorState]] | None = None,
        stale_factor: float = 3.0,
        stale_min_s: float = 5.0,
    ) -> None:
        self.store = store
        self.node_name = node_name
        self.states = states
        self.stale_factor = stale_factor
        self.stale_min_s = stale_min_s

    def describe(self) -> Iterator[Metric]:
        """Every family we may emit, so `register()` refuses a second collector claiming one of them."""
        for spec in METRICS.values():
            yield GaugeMetricFamily(spec.prom, spec.help)
        yield from self._meta_families().all()
        yield GaugeMetricFamily("hookserver_node_cpu_info", "")
        yield GaugeMetricFamily("hookserver_gpu_device_info", "")

    def collect(self) -> Iterator[Metric]:
        snap = self.store.snapshot()
        series = self.store.series
        now = series.clock()
        families: dict[str, Metric] = {}
        # A scrape of a 500-pod node walks thousands of series: it steps aside for hooks every 256 of them.
        for key, ts, value, interval in paced(series.latest(), every=256):
            spec = METRICS.get(key.metric)
            if spec is None or now - ts > max(self.stale_factor * interval, self.stale_min_s):
                continue
            family = families.get(spec.prom)
            if family is None:
                family = families[spec.prom] = Metric(spec.prom, f"{spec.help} ({spec.unit})", "gauge")
            labels: dict[str, str] = {"node": self.node_name}
            for name, label_value in key.labels:
                labels[spec.label_renames.get(name) or PROM_LABEL.get(name, name)] = label_value
                if name == "pod":
                    pod = snap.pods.get(label_value)
                    labels["pod_name"] = pod.name if pod else ""
                    labels["pod_namespace"] = pod.namespace if pod else ""
                elif name == "container":
                    container = snap.containers.get(label_value)
                    labels["container_name"] = container.name if container else ""
            family.add_sample(spec.prom, labels, value)
        yield from families.values()
        yield from self._statics()
        yield from self._meta()

    def _statics(self) -> Iterator[Metric]:
        topo: Any = self.store.series.get_static(NODE_TOPOLOGY_KEY)
        if isinstance(topo, NodeTopology) and topo.cpus:
            info = GaugeMetricFamily(
                "hookserver_node_cpu_info", "CPU topology: one series per logical CPU (value 1).",
                labels=["node", "cpu", "core", "socket", "numa_node", "l3", "online"],
            )
            for c in topo.cpus:
                info.add_metric(
                    [self.node_name, str(c.cpu), str(c.core), str(c.socket), str(c.numa_node), str(c.l3), str(c.online).lower()], 1.0
                )
            yield info
        devices: Any = self.store.series.get_static(GPU_DEVICES_KEY)
        if devices:
            gpu = GaugeMetricFamily(
                "hookserver_gpu_device_info", "GPU inventory from NVML: one series per device (value 1).",
                labels=["node", "device", "index", "name", "minor", "bus_id"],
            )
            for d in devices:
                if isinstance(d, GpuDevice):
                    gpu.add_metric([self.node_name, d.uuid, str(d.index), d.name, str(d.minor), d.bus_id], 1.0)
            yield gpu

    def _meta_families(self) -> _Meta:
        return _Meta(
            enabled=GaugeMetricFamily(
                "hookserver_collector_enabled", "1 when the collector runs; 0 with its reason.", labels=["collector", "reason"]
            ),
            runs=CounterMetricFamily("hookserver_collector_runs", "Collector runs.", labels=["collector"]),
            failures=CounterMetricFamily("hookserver_collector_failures", "Collector runs that raised.", labels=["collector"]),
            missing=CounterMetricFamily(
                "hookserver_collector_missing_cgroups", "Cgroups or files that were gone when read.", labels=["collector"]
            ),
            read_errors=CounterMetricFamily(
                "hookserver_collector_read_errors", "Files that did not parse (named in the log).", labels=["collector"]
            ),
            duration=GaugeMetricFamily(
                "hookserver_collector_last_run_duration_seconds", "Duration of the collector's last run.", labels=["collector"]
            ),
            series=GaugeMetricFamily("hookserver_timeseries_series", "Series held by the time-series store."),
            samples=GaugeMetricFamily("hookserver_timeseries_samples", "Samples held by the time-series store."),
            nbytes=GaugeMetricFamily("hookserver_timeseries_memory_bytes", "Approximate bytes held by the time-series store."),
            dropped=CounterMetricFamily("hookserver_timeseries_dropped_samples", "Samples refused by the store.", labels=["reason"]),
        )

    def _meta(self) -> Iterator[Metric]:
        meta = self._meta_families()
        for state in (self.states() if self.states else {}).values():
            meta.enabled.add_metric([state.name, state.disabled_reason], 1.0 if state.enabled else 0.0)
            meta.runs.add_metric([state.name], float(state.runs))
            meta.failures.add_metric([state.name], float(state.failures))
            meta.missing.add_metric([state.name], float(state.missing_total))
            meta.read_errors.add_metric([state.name], float(state.read_errors_total))
            if state.last_duration_s is not None:
                meta.duration.add_metric([state.name], state.last_duration_s)
        stats = self.store.series.stats()
        meta.series.add_metric([], float(stats.series))
        meta.samples.add_metric([], float(stats.samples))
        meta.nbytes.add_metric([], float(stats.approx_bytes))
        meta.dropped.add_metric(["out_of_order"], float(stats.dropped_out_of_order))
        meta.dropped.add_metric(["not_finite"], float(stats.dropped_not_finite))
        meta.dropped.add_metric(["series_limit"], float(stats.dropped_series_limit))
        yield from meta.all()


@dataclass(frozen=True, slots=True)
class _Meta:
    enabled: GaugeMetricFamily
    runs: CounterMetricFamily
    failures: CounterMetricFamily
    missing: CounterMetricFamily
    read_errors: CounterMetricFamily
    duration: GaugeMetricFamily
    series: GaugeMetricFamily
    samples: GaugeMetricFamily
    nbytes: GaugeMetricFamily
    dropped: CounterMetricFamily

    def all(self) -> tuple[Metric, ...]:
        return (
            self.enabled, self.runs, self.failures, self.missing, self.read_errors, self.duration,
            self.series, self.samples, self.nbytes, self.dropped,
        )
