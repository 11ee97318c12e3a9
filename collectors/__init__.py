"""Collectors layer: periodic readers of /proc, cgroups, PSI, sysfs and NVML that fill the time-series store.

Layer: beside hooks, qos, predictor and executor; above store and system. Reads files only through
`hookserver.system`; writes nothing but samples into `StateStore.series`. One module per collector, a
scheduler (`CollectorScheduler`), settings (`CollectorSettings`), the metric catalogue (`names`), the
Prometheus export (`StoreExporter`) and the two `hookctl` views (`top_report`, `query_report`).

Only the settings are imported eagerly: `hookserver.config` imports `collectors.settings`, and loading
that must not pull in the store, prometheus_client and every collector (nor risk an import cycle through
a module that reads the config). The other public names load on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from collectors.settings import CollectorSettings, CollectorToggle

if TYPE_CHECKING:
    from collectors.build import build_collectors
    from collectors.export import StoreExporter
    from collectors.names import METRICS, MetricSpec
    from collectors.query import parse_query, query_report
    from collectors.scheduler import CollectorScheduler, CollectorState
    from collectors.top import top_report

__all__ = [
    "METRICS",
    "CollectorScheduler",
    "CollectorSettings",
    "CollectorState",
    "CollectorToggle",
    "MetricSpec",
    "StoreExporter",
    "build_collectors",
    "parse_query",
    "query_report",
    "top_report",
]

_LAZY = {
    "METRICS": "collectors.names",
    "MetricSpec": "collectors.names",
    "CollectorScheduler": "collectors.scheduler",
    "CollectorState": "collectors.scheduler",
    "StoreExporter": "collectors.export",
    "build_collectors": "collectors.build",
    "parse_query": "collectors.query",
    "query_report": "collectors.query",
    "top_report": "collectors.top",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'collectors' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
