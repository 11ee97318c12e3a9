"""Informer metrics: cache size, seconds since last sync, watch connection state, event latency.

Registered on the registry the daemon passes in (never the global one). Cache size and sync age are
computed at scrape time from the store and the reflectors, so they cannot go stale themselves.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["EVENT_BUCKETS_S", "InformerMetrics"]

EVENT_BUCKETS_S = (0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01, 0.1)


class InformerMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.cache_pods = Gauge(
            "hookserver_informer_cache_pods", "Pods in the state store.", registry=registry
        )
        self.since_sync = Gauge(
            "hookserver_informer_seconds_since_last_sync",
            "Seconds since the resource was last listed or received a watch event or bookmark.",
            ["resource"],
            registry=registry,
        )
        self.connected = Gauge(
            "hookserver_informer_watch_connected",
            "1 while the resource's watch (or kubelet poll) is healthy, else 0.",
            ["resource"],
            registry=registry,
        )
        self.stale = Gauge(
            "hookserver_informer_stale", "1 while the store is serving a possibly outdated cache.", registry=registry
        )
        self.event_seconds = Histogram(
            "hookserver_informer_event_handling_seconds",
            "Time from a decoded watch line to the store being updated.",
            ["resource"],
            buckets=EVENT_BUCKETS_S,
            registry=registry,
        )
        self.events = Counter(
            "hookserver_informer_events_total", "Watch events by resource and type.", ["resource", "type"],
            registry=registry,
        )
        self.skipped = Counter(
            "hookserver_informer_malformed_objects_total",
            "Malformed objects or event lines that were logged and skipped.",
            ["resource"],
            registry=registry,
        )
        self.relists = Counter(
            "hookserver_informer_relists_total",
            "Full lists by resource and reason (initial, expired, resync, error).",
            ["resource", "reason"],
            registry=registry,
        )
        self.idle_rewatches = Counter(
            "hookserver_informer_watch_idle_timeouts_total",
            "Watches closed after watch_idle_timeout_s without a byte and re-watched (normal on quiet resources).",
            ["resource"],
            registry=registry,
        )
        self.errors = Counter(
            "hookserver_informer_errors_total", "Failed lists, watches or polls.", ["resource"], registry=registry
        )

    def track_cache(self, count: Callable[[], float]) -> None:
        self.cache_pods.set_function(count)

    def track_since_sync(self, resource: str, age: Callable[[], float]) -> None:
        self.since_sync.labels(resource).set_function(age)
