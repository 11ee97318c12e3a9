"""The NodeMetric spec (`slo.koordinator.sh/v1alpha1`): how often and over what windows to report.

koord-manager fills it from `colocation-config`; the agent reads it to decide its reporting cadence.
Defaults are the colocation defaults (reference §7: aggregate 300 s, report every 60 s).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hookserver.slo._base import SLOModel

__all__ = ["AggregatePolicy", "NodeMetricCollectPolicy", "NodeMetricSpec"]


class AggregatePolicy(SLOModel):
    durations: tuple[str, ...] = ("5m", "10m", "30m")


class NodeMetricCollectPolicy(SLOModel):
    aggregate_duration_seconds: int = Field(default=300, ge=1, alias="aggregateDurationSeconds")
    report_interval_seconds: int = Field(default=60, ge=1, alias="reportIntervalSeconds")
    node_aggregate_policy: AggregatePolicy = Field(default_factory=AggregatePolicy, alias="nodeAggregatePolicy")
    node_memory_collect_policy: Literal["usageWithoutPageCache", "usageWithHotPageCache", "usageWithPageCache"] = (
        Field(default="usageWithoutPageCache", alias="nodeMemoryCollectPolicy")
    )


class NodeMetricSpec(SLOModel):
    metric_collect_policy: NodeMetricCollectPolicy = Field(
        default_factory=NodeMetricCollectPolicy, alias="metricCollectPolicy"
    )
