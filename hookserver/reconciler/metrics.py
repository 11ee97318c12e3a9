"""The reconciler's Prometheus series. Corrections are the number an operator watches after an outage."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["ReconcilerMetrics"]

_PASS_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class ReconcilerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.passes = Counter(
            "hookserver_reconciler_passes_total",
            "Reconciler passes by trigger (periodic, pods, rules).",
            ["trigger"],
            registry=registry,
        )
        self.pass_duration = Histogram(
            "hookserver_reconciler_pass_duration_seconds",
            "Time one reconciler pass took (decisions, cache checks, writes, pod GC).",
            ["trigger"],
            buckets=_PASS_BUCKETS_S,
            registry=registry,
        )
        self.corrections = Counter(
            "hookserver_reconciler_corrections_total",
            "cgroup values the reconciler found wrong (read before write) and fixed, by resource file and "
            "trigger (start, pods, rules, periodic).",
            ["resource", "trigger"],
            registry=registry,
        )
        self.errors = Counter(
            "hookserver_reconciler_errors_total",
            "Reconciler failures by kind (hook: a hook failed; write: the kernel refused; target: a pod's "
            "cgroup could not be named).",
            ["kind"],
            registry=registry,
        )
        self.pods_collected = Counter(
            "hookserver_reconciler_pods_collected_total",
            "Pods dropped from the store because their cgroups were gone for the grace period.",
            registry=registry,
        )
