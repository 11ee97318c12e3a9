"""Where the offer goes: the Node's status (the informer's server-side-apply writer) or, standalone, the state dir.

The apiserver sink lives in hookserver.informer (only the informer talks to the apiserver); the publisher
sees both through `CapacitySink`. A sink reports what happened and never raises for an outage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from hookserver.system.atomicfile import write_json_atomically

__all__ = ["CapacityDelivery", "CapacitySink", "Delivery", "LocalCapacitySink", "write_document"]


class Delivery(Protocol):
    """result: ok | conflict | not_found | forbidden | error."""

    @property
    def result(self) -> str: ...

    @property
    def detail(self) -> str: ...

    @property
    def attempts(self) -> int: ...

    @property
    def conflicts(self) -> tuple[tuple[str, str], ...]: ...  # (field manager, field)


class CapacitySink(Protocol):
    target: str  # apiserver | file
    where: str

    def apply(self, values: Mapping[str, str], *, force: bool = False) -> Delivery: ...

    def withdraw(self) -> Delivery: ...


@dataclass(frozen=True, slots=True)
class CapacityDelivery:
    result: str
    detail: str = ""
    attempts: int = 1
    conflicts: tuple[tuple[str, str], ...] = ()
    node_values: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


class LocalCapacitySink:
    """Standalone: no Node object to write. The offer lives here and the publisher writes it, with the whole
    `hookctl capacity` document, to the state dir after every tick (`write_document`)."""

    target = "file"

    def __init__(self, path: str) -> None:
        self.where = path
        self.values: dict[str, str] = {}

    def apply(self, values: Mapping[str, str], *, force: bool = False) -> CapacityDelivery:
        self.values = dict(values)
        return CapacityDelivery("ok", node_values=MappingProxyType(dict(values)))

    def withdraw(self) -> CapacityDelivery:
        self.values = {}
        return CapacityDelivery("ok")


def write_document(path: str, *, node_name: str, values: Mapping[str, str], report: Mapping[str, Any]) -> str:
    """The Node status fragment (capacity and allocatable of the offered resources) and the explanation, as
    one JSON file written atomically (temporary file, fsync, rename). Returns "" or what failed."""
    doc = {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name},
        "status": {"capacity": dict(values), "allocatable": dict(values)},
        "explanation": dict(report),
    }
    return write_json_atomically(path, doc)
