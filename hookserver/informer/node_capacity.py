"""Publishes batch/mid capacity into this Node's status, next to koord-manager and never against it.

A cluster without koord-manager has nobody to write `kubernetes.io/batch-cpu` and friends into the Node,
so batch pods cannot be scheduled; the capacity publisher computes them with koord-manager's formula and
this writer puts them into `status.capacity` and `status.allocatable` (the same value in both, as
koord-manager does). Where koord-manager (field manager `koordinator-manager`) or a second agent writes
them too, ours must lose, not flap: every write is a server-side apply of `nodes/<node>/status` with our
own field manager and `force=false`, so the apiserver answers 409 naming the other manager instead of
letting us overwrite its value. A value another manager wrote equal to ours is shared, not a conflict.

An apply carries the whole set we publish: a name we published before and leave out is removed by the
apiserver unless another manager owns it too, and `withdraw()` (an apply of nothing) takes back all of
ours. Quantities go as given; the apiserver may store a canonical form ("1.5" becomes "1500m").

Nothing here raises for an HTTP or transport failure: the result says what happened, and the caller logs
state changes and tries again next round (transient failures are retried within the call, see `ssa`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hookserver.informer.ssa import APPLY_PATCH, ApplyTransport, Reply, apply_conflicts, describe_failure, send
from hookserver.informer.ssa import is_apply_conflict, resource_version, status_message
from hookserver.koord_resources import PUBLISHED_RESOURCES

__all__ = ["CapacityDelivery", "NodeCapacityWriter"]

_NO_VALUES: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CapacityDelivery:
    """What one apply did. `result`: ok | conflict | not_found | forbidden | error.

    `conflicts` names (manager, field) for each field another manager owns with another value (nothing
    was written then); `node_values` (on ok) the published resources now in the Node's allocatable."""

    result: str
    detail: str = ""
    attempts: int = 1
    conflicts: tuple[tuple[str, str], ...] = ()
    node_values: Mapping[str, str] = field(default_factory=lambda: _NO_VALUES)
    resource_version: str = ""


class NodeCapacityWriter:
    target = "apiserver"

    def __init__(
        self,
        transport: ApplyTransport,
        *,
        node_name: str,
        field_manager: str = "hookserver",
        timeout_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._transport = transport
        self._node_name = node_name
        self._path = f"/api/v1/nodes/{node_name}/status"
        self.where = self._path
        self.field_manager = field_manager
        self._timeout_s = timeout_s
        self._sleep = sleep

    def apply(self, values: Mapping[str, str], *, force: bool = False) -> CapacityDelivery:
        """Make `values` (resource name -> quantity string) our whole share of the Node's capacity and
        allocatable. `force=True` takes fields from other managers: for an operator's explicit order only."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": self._node_name}}
        if values:
            body["status"] = {"capacity": dict(values), "allocatable": dict(values)}
        params = {"fieldManager": self.field_manager, "force": "true" if force else "false"}
        reply = send(self._transport, "PATCH", self._path, body, timeout_s=self._timeout_s, sleep=self._sleep,
                     content_type=APPLY_PATCH, params=params)
        return self._delivery(reply)

    def withdraw(self) -> CapacityDelivery:
        """Take back every field we own (those another manager owns too stay, with its value)."""
        return self.apply({})

    def _delivery(self, reply: Reply) -> CapacityDelivery:
        status, body, attempts = reply.status, reply.body, reply.attempts
        if status in (200, 201):
            return CapacityDelivery("ok", "", attempts, node_values=_published(body), resource_version=resource_version(body))
        if status == 409 and is_apply_conflict(body):
            conflicts = apply_conflicts(body)
            return CapacityDelivery("conflict", _conflict_detail(conflicts, body), attempts, conflicts)
        if status == 404:
            return CapacityDelivery("not_found", f"node {self._node_name} does not exist", attempts)
        if status == 403:
            return CapacityDelivery(
                "forbidden",
                f"forbidden: the agent's ClusterRole must allow `patch nodes/status` (deploy/hookserver.yaml): "
                f"{status_message(body)}",
                attempts,
            )
        return CapacityDelivery("error", describe_failure("PATCH", self._path, reply), attempts)


def _conflict_detail(conflicts: tuple[tuple[str, str], ...], body: Any) -> str:
    if not conflicts:
        return f"conflict: {status_message(body) or 'another field manager owns a published field'}"
    return "conflict: " + "; ".join(f"{manager} owns {path}" for manager, path in conflicts)


def _published(obj: Any) -> Mapping[str, str]:
    status = obj.get("status") if isinstance(obj, Mapping) else None
    allocatable = status.get("allocatable") if isinstance(status, Mapping) else None
    if not isinstance(allocatable, Mapping):
        return _NO_VALUES
    return MappingProxyType({name: str(allocatable[name]) for name in PUBLISHED_RESOURCES if name in allocatable})

