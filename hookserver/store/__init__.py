"""Store layer: the one state store (pods, containers, node, NodeSLO, audit, time series)."""

from hookserver.store.audit import AuditLog, DecisionRecord, HookEventRecord, WriteRecord
from hookserver.store.records import ContainerRecord, NodeRecord, PodRecord
from hookserver.store.state import StateStore, StoreSnapshot
from hookserver.store.timeseries import SeriesKey, TimeSeriesStore, WindowStats, series_key

__all__ = [
    "AuditLog",
    "ContainerRecord",
    "DecisionRecord",
    "HookEventRecord",
    "NodeRecord",
    "PodRecord",
    "SeriesKey",
    "StateStore",
    "StoreSnapshot",
    "TimeSeriesStore",
    "WindowStats",
    "WriteRecord",
    "series_key",
]
