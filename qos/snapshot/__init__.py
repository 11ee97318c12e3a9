"""The one input every planner reads, and the one place it is read.

`model.py` holds the snapshot's types (`QoSSnapshot`, pods, usage, the BE tier) and `kernel.py` its kernel
part (`QoSSnapshot.kernel`: CFS files, sysctls, block devices, resctrl). `builder.py` (`SnapshotBuilder`) is
the only reader: it builds the whole snapshot once per round, and asks `kernel_reader.py` for the kernel
part, only for the gates that are on. A new fact is a typed field in `model.py` (or `kernel.py`) and a read
in `builder.py` (or `kernel_reader.py`); `node.py` and `priority.py` turn store records into the facts'
vocabulary (node CPUs and reservations, koordinator priority classes).

Only the types load with this package; the builder (which reads the store and the cgroup tree) loads on first
use, so the flight recorder can decode a snapshot without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from qos.snapshot.kernel import KernelFacts
from qos.snapshot.model import (
    BEStats,
    BETier,
    ContainerFacts,
    HostAppUsage,
    NodeFacts,
    NodeUsage,
    PodFacts,
    QoSSnapshot,
)

if TYPE_CHECKING:
    from qos.snapshot.builder import CgroupView, SnapshotBuilder

__all__ = [
    "BEStats",
    "BETier",
    "CgroupView",
    "ContainerFacts",
    "HostAppUsage",
    "KernelFacts",
    "NodeFacts",
    "NodeUsage",
    "PodFacts",
    "QoSSnapshot",
    "SnapshotBuilder",
]

_LAZY = {"CgroupView": "qos.snapshot.builder", "SnapshotBuilder": "qos.snapshot.builder"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'qos.snapshot' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
