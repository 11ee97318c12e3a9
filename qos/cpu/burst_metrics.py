"""koordlet's CPU burst gauges, under koordlet's names and labels, read from the CPU burst reconciler's
kept state at scrape time (nothing is stored twice, and a container that is gone drops out):

  koordlet_container_scaled_cfs_burst_us{node, pod_namespace, pod_name, container_id, container_name}
  koordlet_container_scaled_cfs_quota_us{...}

Values are what the last round planned (in dry run: what it would have set).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from qos.cpu.burst import BurstState

__all__ = ["BurstMetricsCollector"]

_LABELS = ["node", "pod_namespace", "pod_name", "container_id", "container_name"]


class BurstMetricsCollector(Collector):
    def __init__(self, state: Callable[[], Any], *, node: str) -> None:
        self._state = state
        self._node = node

    def collect(self) -> Iterator[Metric]:
        burst = GaugeMetricFamily("koordlet_container_scaled_cfs_burst_us",
                                  "The maximum accumulated run-time(in microseconds) in container-level set by koordlet",
                                  labels=_LABELS)
        quota = GaugeMetricFamily("koordlet_container_scaled_cfs_quota_us",
                                  "The maximum accumulated run-time(in microseconds) in container-level set by koordlet",
                                  labels=_LABELS)
        state = self._state()
        if isinstance(state, BurstState):
            for (ns, pod, cid, cname), (b, q) in sorted(state.scaled.items()):
                labels = [self._node, ns, pod, cid, cname]
                if b is not None:
                    burst.add_metric(labels, float(b))
                if q is not None:
                    quota.add_metric(labels, float(q))
        yield burst
        yield quota
