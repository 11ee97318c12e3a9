"""QoS metrics: koordlet's names where koordlet has one, `hookserver_qos_*` for the rest.

koordlet's `koordlet_pod_eviction{node,reason}` is a Go counter without a `_total` suffix. prometheus_client
names every counter `<name>_total` in the text format (it even renames the TYPE line of a custom counter), so
the series is exported by a small collector under koordlet's exact sample name, typed `untyped`: dashboards
and `rate()` over `koordlet_pod_eviction` keep working. `hookserver_qos_evictions_total` is the typed counter.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

__all__ = ["QoSMetrics"]

_PLAN_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class _PodEvictionCounter(Collector):
    """`koordlet_pod_eviction{node, reason}` under koordlet's sample name (monotonic; exported untyped)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str], float] = {}

    def inc(self, node: str, reason: str) -> None:
        with self._lock:
            self._values[(node, reason)] = self._values.get((node, reason), 0.0) + 1.0

    def value(self, node: str, reason: str) -> float:
        with self._lock:
            return self._values.get((node, reason), 0.0)

    def collect(self) -> Iterator[Metric]:
        metric = Metric("koordlet_pod_eviction", "Number of eviction launched by koordlet", "unknown")
        with self._lock:
            items = sorted(self._values.items())
        for (node, reason), value in items:
            metric.add_sample("koordlet_pod_eviction", {"node": node, "reason": reason}, value)
        yield metric


class QoSMetrics:
    def __init__(self, registry: CollectorRegistry | None, *, node: str) -> None:
        self.node = node
        self.be_suppress_cpu_cores = Gauge(
            "koordlet_be_suppress_cpu_cores", "Number of cores suppress by koordlet", ["node", "type"], registry=registry
        )
        self.be_suppress_ls_used_cpu_cores = Gauge(
            "koordlet_be_suppress_ls_used_cpu_cores",
            "Number of cpu cores used by LS. We consider non-BE pods and podMeta-missing pods as LS.",
            ["node"], registry=registry,
        )
        self.pod_eviction = _PodEvictionCounter()
        if registry is not None:
            registry.register(self.pod_eviction)
        self.plan_duration = Histogram(
            "hookserver_qos_plan_duration_seconds", "Time one reconciler took to plan one round (snapshot excluded).",
            ["reconciler"], buckets=_PLAN_BUCKETS_S, registry=registry,
        )
        self.round_duration = Histogram(
            "hookserver_qos_round_duration_seconds",
            "Time one QoS round took: snapshot, every due reconciler's plan and its execution.",
            buckets=_PLAN_BUCKETS_S, registry=registry,
        )
        self.rounds = Counter(
            "hookserver_qos_rounds_total", "Reconciler rounds by result (planned, disabled, error).",
            ["reconciler", "result"], registry=registry,
        )
        self.value = Gauge(
            "hookserver_qos_value", "A value a reconciler exports after its round (Reconciler.gauges).",
            ["reconciler", "name"], registry=registry,
        )
        self.evictions = Counter(
            "hookserver_qos_evictions_total", "Evictions asked for by reconciler, koordlet reason and outcome.",
            ["reconciler", "reason", "status"], registry=registry,
        )

    def suppress(self, policy: str, cores: float) -> None:
        self.be_suppress_cpu_cores.labels(self.node, policy).set(cores)

    def ls_used(self, cores: float) -> None:
        self.be_suppress_ls_used_cpu_cores.labels(self.node).set(cores)

    def export(self, reconciler: str, values: dict[str, float]) -> None:
        """A reconciler's gauges: `suppress:<type>` and `ls_used` are koordlet's; any other name goes to
        `hookserver_qos_value{reconciler, name}`."""
        for key, value in values.items():
            if key.startswith("suppress:"):
                self.suppress(key.split(":", 1)[1], value)
            elif key == "ls_used":
                self.ls_used(value)
            else:
                self.value.labels(reconciler, key).set(value)
