"""Writes this node's NodeResourceTopology (`topology.node.k8s.io/v1alpha1`, cluster-scoped, named after the
node) by server-side apply with the agent's field manager and `force=false`, like the capacity writer: the
object is created when missing, and a field another manager owns (koordlet still running, an operator's edit)
answers 409 naming it instead of being overwritten.

A 404 means the resource type itself is missing (an apply creates a missing object): the CRD is not
installed. That is a state, not an error storm: the result says so and the publisher reports it once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hookserver.informer.ssa import APPLY_PATCH, ApplyTransport, apply_conflicts, describe_failure, send
from hookserver.informer.ssa import is_apply_conflict, status_message

__all__ = ["NRT_RESOURCE_PATH", "NodeResourceTopologyWriter", "NrtDelivery"]

NRT_RESOURCE_PATH = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"


@dataclass(frozen=True, slots=True)
class NrtDelivery:
    """`result`: ok | conflict | crd_missing | forbidden | error."""

    result: str
    detail: str = ""
    attempts: int = 1


class NodeResourceTopologyWriter:
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
        self._path = f"{NRT_RESOURCE_PATH}/{node_name}"
        self.where = self._path
        self.field_manager = field_manager
        self._timeout_s = timeout_s
        self._sleep = sleep

    def apply(self, document: Mapping[str, Any]) -> NrtDelivery:
        params = {"fieldManager": self.field_manager, "force": "false"}
        reply = send(self._transport, "PATCH", self._path, dict(document), timeout_s=self._timeout_s,
                     sleep=self._sleep, content_type=APPLY_PATCH, params=params)
        status, body = reply.status, reply.body
        if status in (200, 201):
            return NrtDelivery("ok", "", reply.attempts)
        if status == 409 and is_apply_conflict(body):
            conflicts = apply_conflicts(body)
            owners = "; ".join(f"{manager} owns {path}" for manager, path in conflicts) or status_message(body)
            return NrtDelivery("conflict", f"conflict: {owners}", reply.attempts)
        if status == 404:
            return NrtDelivery(
                "crd_missing",
                "the NodeResourceTopology CRD (noderesourcetopologies.topology.node.k8s.io, v1alpha1) is not "
                "installed: koord-scheduler's NUMA and cpuset placement needs it",
                reply.attempts,
            )
        if status == 403:
            return NrtDelivery(
                "forbidden",
                "forbidden: the agent's ClusterRole must allow get/create/patch on "
                f"noderesourcetopologies.topology.node.k8s.io (deploy/hookserver.yaml): {status_message(body)}",
                reply.attempts,
            )
        return NrtDelivery("error", describe_failure("PATCH", self._path, reply), reply.attempts)
