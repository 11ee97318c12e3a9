"""Series under koordlet's names and labels, so dashboards and alerts written for koordlet keep working
on a node that runs hookserver; and the few agent-level series of our own that the shipped dashboard
(deploy/grafana/) needs. Everything hookserver-specific stays `hookserver_*` elsewhere.

koordlet names and labels (koordinator `pkg/koordlet/metrics/`): subsystem `koordlet`, label `node`
on every series, `status` = succeeded|failed. What this module exports, and where the data comes from:

    koordlet_start_time{node}                                         the daemon's start (unix seconds)
    koordlet_node_used_cpu_cores{node}                                collectors: node_cpu_usage
    koordlet_node_used_memory_bytes{node}                             collectors: node_memory_usage
    koordlet_host_application_resource_usage{node,host_application_name,resource,priority_class,qos}
                                                                      collectors: host_app_{cpu,memory}_usage
    koordlet_node_resource_allocatable{node,resource,unit}            the Node's status.allocatable of
                                                                      kubernetes.io/batch-cpu (unit integer,
                                                                      milli-cores) and batch-memory (unit byte);
                                                                      0 when absent, as koordlet records it
    koordlet_runtime_hook_invoked_duration_milliseconds{node,hook,stage,status}
                                                                      every hook plugin run (proxy and NRI doors)

Other areas export their own koordlet-named series next to these (BE suppress cores, evictions,
reclaimable); see the coordinator's notes. Names here are defined once and imported by the dashboard test.

The hot path (one histogram observation per plugin run) goes through label children cached per
(hook, stage, status); the store-backed series are computed at scrape time from the newest samples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hookserver.errors import QuantityError
from hookserver.quantity import parse_quantity


class _Store(Protocol):
    """What is read here of hookserver.store.StateStore (observability is a leaf: it imports no layer)."""

    @property
    def series(self) -> Any: ...

    def snapshot(self) -> Any: ...

__all__ = [
    "AGENT_SERIES",
    "KOORDLET_SERIES",
    "KoordletHookMetrics",
    "StoreSeriesCollector",
    "register_store_series",
]

SUBSYSTEM = "koordlet"
STATUS_SUCCEEDED = "succeeded"
STATUS_FAILED = "failed"

START_TIME = "koordlet_start_time"
NODE_USED_CPU = "koordlet_node_used_cpu_cores"
NODE_USED_MEMORY = "koordlet_node_used_memory_bytes"
HOST_APPLICATION_USAGE = "koordlet_host_application_resource_usage"
NODE_RESOURCE_ALLOCATABLE = "koordlet_node_resource_allocatable"
RUNTIME_HOOK_DURATION = "koordlet_runtime_hook_invoked_duration_milliseconds"

QOS_USED_CPU = "hookserver_qos_used_cpu_cores"
QOS_USED_MEMORY = "hookserver_qos_used_memory_bytes"
NRI_STATE = "hookserver_nri_connection_state"
NRI_RECONNECTS = "hookserver_nri_reconnects_total"

KOORDLET_SERIES = (
    START_TIME, NODE_USED_CPU, NODE_USED_MEMORY, HOST_APPLICATION_USAGE, NODE_RESOURCE_ALLOCATABLE,
    RUNTIME_HOOK_DURATION,
)
AGENT_SERIES = (QOS_USED_CPU, QOS_USED_MEMORY, NRI_STATE, NRI_RECONNECTS)

# koordlet: prometheus.ExponentialBuckets(0.01, 4, 8), i.e. 10 µs .. 164 ms, in milliseconds.
RUNTIME_HOOK_BUCKETS_MS = tuple(0.01 * 4**i for i in range(8))

# The NRI plugin's connection states (hookserver.nri.status.ConnState values), exported as a state set.
NRI_STATES = ("idle", "connecting", "registering", "registered", "ready", "backoff", "stopped")

# Store series (collector names, see collectors.names) read here by name: observability sits below the
# areas and must not import them.
_NODE_CPU, _NODE_MEMORY = "node_cpu_usage", "node_memory_usage"
_POD_CPU, _POD_MEMORY = "pod_cpu_usage", "pod_memory_usage"
_HOST_APP = {"host_app_cpu_usage": "cpu", "host_app_memory_usage": "memory"}
# koordlet: RecordNodeResourceAllocatable(BatchCPU, UnitInteger, Value()) and (BatchMemory, UnitByte, Value()).
_BATCH_ALLOCATABLE = (("kubernetes.io/batch-cpu", "integer"), ("kubernetes.io/batch-memory", "byte"))


class KoordletHookMetrics:
    """koordlet_runtime_hook_invoked_duration_milliseconds, observed once per hook plugin run."""

    def __init__(self, registry: CollectorRegistry, *, node: str) -> None:
        self.node = node
        self.duration = Histogram(
            RUNTIME_HOOK_DURATION,
            "time duration of invocations of runtime hook plugins",
            ["node", "hook", "stage", "status"],
            buckets=RUNTIME_HOOK_BUCKETS_MS,
            registry=registry,
        )
        self._children: dict[tuple[str, str, bool], Any] = {}

    def child(self, hook: str, stage: str, failed: bool) -> Any:
        """The histogram child for one hook, stage and status (cached: `labels()` is not free)."""
        key = (hook, stage, failed)
        child = self._children.get(key)
        if child is None:
            child = self.duration.labels(self.node, hook, stage, STATUS_FAILED if failed else STATUS_SUCCEEDED)
            self._children[key] = child
        return child

    def observe(self, hook: str, stage: str, duration_s: float, failed: bool) -> None:
        self.child(hook, stage, failed).observe(duration_s * 1000.0)


class StoreSeriesCollector(Collector):
    """Scrape-time series from the state store and the NRI status: koordlet's node and host-application
    usage, our usage by QoS class, the NRI connection state. A sample older than three collection
    intervals (at least 5 s) is not exported, as in the collectors' own exporter: a collector that
    stopped must not freeze its last value on a dashboard."""

    def __init__(
        self,
        store: _Store,
        *,
        node: str,
        started_at: float,
        nri_status: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.store = store
        self.node = node
        self.started_at = started_at
        self.nri_status = nri_status

    def describe(self) -> Iterator[Metric]:
        """Every family this collector owns, so a second registration of one of them is refused."""
        for name in (START_TIME, NODE_USED_CPU, NODE_USED_MEMORY, HOST_APPLICATION_USAGE, NODE_RESOURCE_ALLOCATABLE,
                     QOS_USED_CPU, QOS_USED_MEMORY, NRI_STATE):
            yield GaugeMetricFamily(name, "")
        yield CounterMetricFamily(NRI_RECONNECTS, "")

    def collect(self) -> Iterator[Metric]:
        node = self.node
        start = GaugeMetricFamily(START_TIME, "the start time of koordlet", labels=["node"])
        start.add_metric([node], self.started_at)
        yield start
        yield from self._usage()
        yield from self._allocatable()
        yield from self._nri()

    def _allocatable(self) -> Iterator[Metric]:
        node_record = self.store.snapshot().node
        if node_record is None:
            return
        family = GaugeMetricFamily(
            NODE_RESOURCE_ALLOCATABLE, "the node allocatable of resources updated by koordinator",
            labels=["node", "resource", "unit"],
        )
        for resource, unit in _BATCH_ALLOCATABLE:
            text = node_record.allocatable.get(resource)
            try:
                value = float(parse_quantity(text).value()) if text is not None else 0.0
            except QuantityError:
                continue  # the informer reports malformed node fields; a scrape just leaves it out
            family.add_metric([self.node, resource, unit], value)
        yield family

    def _fresh(self, metric: str) -> list[tuple[Any, float]]:
        series = self.store.series
        now = series.clock()
        return [
            (key, value) for key, ts, value, interval in series.latest(metric) if now - ts <= max(3 * interval, 5.0)
        ]

    def _usage(self) -> Iterator[Metric]:
        node = self.node
        for name, metric, help_ in (
            (NODE_USED_CPU, _NODE_CPU, "Number of cpu cores used by node in realtime"),
            (NODE_USED_MEMORY, _NODE_MEMORY, "Memory used by node in realtime"),
        ):
            fresh = self._fresh(metric)
            if fresh:
                family = GaugeMetricFamily(name, help_, labels=["node"])
                family.add_metric([node], fresh[0][1])
                yield family
        apps = GaugeMetricFamily(
            HOST_APPLICATION_USAGE, "Host application resource usage collected by koordlet",
            labels=["node", "host_application_name", "resource", "priority_class", "qos"],
        )
        for metric, resource in _HOST_APP.items():
            for key, value in self._fresh(metric):
                apps.add_metric([node, key.label("app"), resource, key.label("priority"), key.label("qos")], value)
        if apps.samples:
            yield apps
        pods = self.store.snapshot().pods
        for name, metric, help_ in (
            (QOS_USED_CPU, _POD_CPU, "CPU cores used by this node's pods, summed by Koordinator QoS class."),
            (QOS_USED_MEMORY, _POD_MEMORY,
             "Memory (without page cache) used by this node's pods, summed by Koordinator QoS class."),
        ):
            by_qos: dict[str, float] = {}
            for key, value in self._fresh(metric):
                pod = pods.get(key.label("pod"))
                qos = (pod.qos_class if pod is not None else "") or "NONE"
                by_qos[qos] = by_qos.get(qos, 0.0) + value
            family = GaugeMetricFamily(name, help_, labels=["node", "qos"])
            for qos, total in sorted(by_qos.items()):
                family.add_metric([node, qos], total)
            yield family

    def _nri(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            NRI_STATE, "NRI plugin connection: 1 for the current state (ready = registered and synchronized), "
            "0 for the others; state=disabled when NRI is off.", labels=["node", "state"],
        )
        reconnects = CounterMetricFamily(
            NRI_RECONNECTS, "NRI connection retries since start: each ended session or failed dial that is retried (a runtime restart costs one, plus one per dial while its socket is missing).", labels=["node"]
        )
        if self.nri_status is None:
            state.add_metric([self.node, "disabled"], 1.0)
            reconnects.add_metric([self.node], 0.0)
        else:
            status = self.nri_status()
            current = str(status.get("state", ""))
            for name in NRI_STATES:
                state.add_metric([self.node, name], 1.0 if name == current else 0.0)
            reconnects.add_metric([self.node], float(status.get("reconnects", 0) or 0))
        yield state
        yield reconnects


def register_store_series(
    registry: CollectorRegistry,
    store: _Store,
    *,
    node: str,
    started_at: float,
    nri_status: Callable[[], Mapping[str, Any]] | None = None,
) -> StoreSeriesCollector:
    collector = StoreSeriesCollector(store, node=node, started_at=started_at, nri_status=nri_status)
    registry.register(collector)
    return collector
