"""Store layer: the one state store (pods, containers, node, NodeSLO, audit; time series in issue 5)."""

from hookserver.store.audit import AuditLog, DecisionRecord, HookEventRecord, WriteRecord
from hookserver.store.records import ContainerRecord, NodeRecord, PodRecord
from hookserver.store.state import StateStore, StoreSnapshot

__all__ = [
    "AuditLog",
    "ContainerRecord",
    "DecisionRecord",
    "HookEventRecord",
    "NodeRecord",
    "PodRecord",
    "StateStore",
    "StoreSnapshot",
    "WriteRecord",
]
