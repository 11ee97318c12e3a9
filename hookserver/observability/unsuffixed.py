"""A monotonic counter exported under a Go client's exact sample name, without prometheus_client's `_total`.

koordinator's counters (`koordlet_pod_eviction`, koord-manager's `slo_controller_*_count`) are Go counters
whose names carry no `_total`. prometheus_client names every counter `<name>_total` in the text format (it even
renames the TYPE line of a custom counter family), so a series that must keep koordinator's name for existing
dashboards and `rate()` queries is exported by this collector, typed `untyped`. Keep a typed
`hookserver_*_total` counter beside it for new dashboards.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

__all__ = ["UnsuffixedCounter"]


class UnsuffixedCounter(Collector):
    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._lock = threading.Lock()
        self._values: dict[tuple[str, ...], float] = {}

    def inc(self, *labelvalues: str, amount: float = 1.0) -> None:
        if len(labelvalues) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {labelvalues}")
        if amount < 0:
            raise ValueError(f"{self.name}: a counter only goes up (got {amount})")
        with self._lock:
            self._values[labelvalues] = self._values.get(labelvalues, 0.0) + amount

    def value(self, *labelvalues: str) -> float:
        with self._lock:
            return self._values.get(tuple(labelvalues), 0.0)

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self.documentation, "unknown")
        with self._lock:
            items = sorted(self._values.items())
        for values, value in items:
            metric.add_sample(self.name, dict(zip(self.labelnames, values, strict=True)), value)
        yield metric
