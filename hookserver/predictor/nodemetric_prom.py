"""koordlet's `NodeMetricPromMetrics` series: the usages the NodeMetric status reports, as Prometheus gauges.

koordinator #3138 (`pkg/koordlet/metrics/node_metric.go`, recorded by `recordNodeMetricPromMetrics` in
`statesinformer/impl/states_nodemetric.go`) exports, on every NodeMetric sync and only while the koordlet gate
`NodeMetricPromMetrics` is on (off by default):

    koordlet_node_metric_node_usage{node,resource,unit}                   status.nodeMetric.nodeUsage
    koordlet_node_metric_system_usage{node,resource,unit}                 status.nodeMetric.systemUsage
    koordlet_node_metric_numa_node_usage{node,numa_node_id,resource,unit}   numaUsages[].nodeUsage
    koordlet_node_metric_numa_system_usage{node,numa_node_id,resource,unit} numaUsages[].systemUsage

resource = cpu (unit `core`, the quantity's milli-value / 1000) or memory (unit `byte`, its value). Each
report replaces the whole set (koordlet resets the vectors first), so a NUMA node that drops out of the
report, or a usage that goes missing, stops being exported instead of freezing at its last value.

The numbers are read back from the very document the reporter delivers, so the series and the NodeMetric can
never disagree. With the gate off nothing is recorded and no family is exposed at all (a Go GaugeVec with no
children writes nothing, not even its HELP line), which is what a koordlet scrape shows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hookserver.errors import QuantityError
from hookserver.quantity import parse_quantity

__all__ = ["NODE_METRIC_PROM_GATE", "NODE_METRIC_SERIES", "NodeMetricPromSeries"]

NODE_METRIC_PROM_GATE = "NodeMetricPromMetrics"

NODE_USAGE = "koordlet_node_metric_node_usage"
SYSTEM_USAGE = "koordlet_node_metric_system_usage"
NUMA_NODE_USAGE = "koordlet_node_metric_numa_node_usage"
NUMA_SYSTEM_USAGE = "koordlet_node_metric_numa_system_usage"
NODE_METRIC_SERIES = (NODE_USAGE, SYSTEM_USAGE, NUMA_NODE_USAGE, NUMA_SYSTEM_USAGE)

# koordlet's Help strings, so `# HELP` lines match too.
_HELP = {
    NODE_USAGE: "the node usage reported in the NodeMetric",
    SYSTEM_USAGE: "the system usage reported in the NodeMetric",
    NUMA_NODE_USAGE: "the per-NUMA node usage reported in the NodeMetric",
    NUMA_SYSTEM_USAGE: "the per-NUMA system usage reported in the NodeMetric",
}
_NODE_LABELS = ["node", "resource", "unit"]
_NUMA_LABELS = ["node", "numa_node_id", "resource", "unit"]

# One sample: (family name, label values after `node`, value).
_Sample = tuple[str, tuple[str, ...], float]


def _resource_samples(usage: Any) -> list[tuple[str, str, float]]:
    """(resource, unit, value) of one ResourceMap (`{"resources": {"cpu": "1500m", "memory": "2Gi"}}`), as
    koordlet's `recordResourceList`: cpu in cores from the milli-value, memory in bytes. A quantity that does
    not parse is left out (the document was built here, so this is a guard, not a path)."""
    resources = usage.get("resources") if isinstance(usage, Mapping) else None
    if not isinstance(resources, Mapping):
        return []
    out: list[tuple[str, str, float]] = []
    for resource, unit in (("cpu", "core"), ("memory", "byte")):
        text = resources.get(resource)
        if text is None:
            continue
        try:
            quantity = parse_quantity(text)
        except QuantityError:
            continue
        out.append((resource, unit, quantity.milli_value() / 1000 if resource == "cpu" else float(quantity.value())))
    return out


def status_samples(status: Mapping[str, Any]) -> tuple[_Sample, ...]:
    """Every sample koordlet records for one NodeMetric status document."""
    node_metric = status.get("nodeMetric")
    if not isinstance(node_metric, Mapping):
        return ()
    samples: list[_Sample] = []
    for family, field in ((NODE_USAGE, "nodeUsage"), (SYSTEM_USAGE, "systemUsage")):
        for resource, unit, value in _resource_samples(node_metric.get(field)):
            samples.append((family, (resource, unit), value))
    for numa in node_metric.get("numaUsages") or ():
        if not isinstance(numa, Mapping) or not isinstance(numa.get("numaNodeID"), int):
            continue
        numa_id = str(numa["numaNodeID"])
        for family, field in ((NUMA_NODE_USAGE, "nodeUsage"), (NUMA_SYSTEM_USAGE, "systemUsage")):
            for resource, unit, value in _resource_samples(numa.get(field)):
                samples.append((family, (numa_id, resource, unit), value))
    return tuple(samples)


class NodeMetricPromSeries(Collector):
    """The four families, refreshed whole by `record` at each report. Always registered (as koordlet always
    registers its vectors); `enabled` is the gate, and while it is off `record` keeps nothing."""

    def __init__(self, *, node: str, enabled: bool = False) -> None:
        self.node = node
        self.enabled = enabled
        self._samples: tuple[_Sample, ...] = ()  # replaced in one assignment: a scrape sees one report or the next

    def record(self, status: Mapping[str, Any]) -> None:
        """One NodeMetric sync: the previous set goes, the document's values replace it."""
        self._samples = status_samples(status) if self.enabled else ()

    def describe(self) -> Iterator[Metric]:
        """The families this collector owns, so the registry refuses a second owner at startup."""
        for name in NODE_METRIC_SERIES:
            yield GaugeMetricFamily(name, _HELP[name])

    def collect(self) -> Iterator[Metric]:
        samples = self._samples
        for name in NODE_METRIC_SERIES:
            rows = [(labels, value) for family, labels, value in samples if family == name]
            if not rows:
                continue
            labels = _NUMA_LABELS if name in (NUMA_NODE_USAGE, NUMA_SYSTEM_USAGE) else _NODE_LABELS
            family = GaugeMetricFamily(name, _HELP[name], labels=labels)
            for values, value in rows:
                family.add_metric([self.node, *values], value)
            yield family
