"""QoS metrics: koordlet's names where koordlet has one, `hookserver_qos_*` for the rest.

koordlet's `koordlet_pod_eviction{node,reason}` is a Go counter without a `_total` suffix: it is exported under
koordlet's exact sample name, typed `untyped` (hookserver/observability/unsuffixed.py), so dashboards and
`rate()` over `koordlet_pod_eviction` keep working. `hookserver_qos_evictions_total` is the typed counter.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hookserver.observability.unsuffixed import UnsuffixedCounter

__all__ = ["QoSMetrics"]

_PLAN_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


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
        self.pod_eviction = UnsuffixedCounter(
            "koordlet_pod_eviction", "Number of eviction launched by koordlet", ("node", "reason"))
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
