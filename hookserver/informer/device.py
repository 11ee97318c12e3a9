"""Writes this node's Device object (`scheduling.koordinator.sh/v1alpha1`, cluster-scoped, named after the node)
and the Node's GPU labels, by server-side apply with the agent's field manager and `force=false`.

Device: koordlet GETs, compares and PUTs the whole object, overwriting anyone's labels; an apply instead owns
only what it sends, creates the object when missing, and a field another manager owns (koordlet still
running) answers 409 naming it. A 404 means the resource type is missing (an apply creates a missing
object): the CRD is not installed, a state the publisher reports once.

Node labels: only `node.koordinator.sh/gpu-vendor`, `gpu-model`, `gpu-driver-version`, applied to the Node
object (labels are metadata, not status); the apply names only those keys, so every other label, whoever set
it, is untouched, and one owned by another manager with another value is a 409, not an overwrite.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hookserver.informer.ssa import APPLY_PATCH, ApplyTransport, Reply, apply_conflicts, describe_failure, send
from hookserver.informer.ssa import is_apply_conflict, status_message

__all__ = ["DEVICE_RESOURCE_PATH", "DeviceWriter", "NodeLabelWriter", "SsaDelivery"]

DEVICE_RESOURCE_PATH = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
GPU_NODE_LABELS = ("node.koordinator.sh/gpu-vendor", "node.koordinator.sh/gpu-model",
                   "node.koordinator.sh/gpu-driver-version")


@dataclass(frozen=True, slots=True)
class SsaDelivery:
    """`result`: ok | conflict | crd_missing | not_found | forbidden | error."""

    result: str
    detail: str = ""
    attempts: int = 1
    conflicts: tuple[tuple[str, str], ...] = ()


def _conflict(reply: Reply) -> SsaDelivery:
    conflicts = apply_conflicts(reply.body)
    owners = "; ".join(f"{manager} owns {path}" for manager, path in conflicts) or status_message(reply.body)
    return SsaDelivery("conflict", f"conflict: {owners}", reply.attempts, conflicts)


class DeviceWriter:
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
        self._path = f"{DEVICE_RESOURCE_PATH}/{node_name}"
        self.where = self._path
        self.field_manager = field_manager
        self._timeout_s = timeout_s
        self._sleep = sleep

    def apply(self, document: Mapping[str, Any]) -> SsaDelivery:
        params = {"fieldManager": self.field_manager, "force": "false"}
        reply = send(self._transport, "PATCH", self._path, dict(document), timeout_s=self._timeout_s,
                     sleep=self._sleep, content_type=APPLY_PATCH, params=params)
        if reply.status in (200, 201):
            return SsaDelivery("ok", "", reply.attempts)
        if reply.status == 409 and is_apply_conflict(reply.body):
            return _conflict(reply)
        if reply.status == 404:
            return SsaDelivery(
                "crd_missing",
                "the Device CRD (devices.scheduling.koordinator.sh, v1alpha1) is not installed: koord-scheduler's "
                "DeviceShare plugin sees no GPU or RDMA device on this node (deploy/crds/device.yaml)",
                reply.attempts,
            )
        if reply.status == 403:
            return SsaDelivery(
                "forbidden",
                "forbidden: the agent's ClusterRole must allow create/patch on devices.scheduling.koordinator.sh "
                f"(deploy/hookserver.yaml): {status_message(reply.body)}",
                reply.attempts,
            )
        return SsaDelivery("error", describe_failure("PATCH", self._path, reply), reply.attempts)


class NodeLabelWriter:
    """The GPU labels on the Node; give it its own field manager (the one GPU capacity uses), so that
    withdrawing them never touches labels another part of the agent applies."""

    def __init__(
        self,
        transport: ApplyTransport,
        *,
        node_name: str,
        field_manager: str,
        timeout_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._transport = transport
        self._node_name = node_name
        self._path = f"/api/v1/nodes/{node_name}"
        self.where = self._path
        self.field_manager = field_manager
        self._timeout_s = timeout_s
        self._sleep = sleep

    def apply(self, labels: Mapping[str, str]) -> SsaDelivery:
        """Make `labels` (a subset of the three GPU keys) this manager's whole share of the Node's labels."""
        stray = sorted(set(labels) - set(GPU_NODE_LABELS))
        if stray:
            raise ValueError(f"only the GPU labels are applied here, not {', '.join(stray)}")
        metadata: dict[str, Any] = {"name": self._node_name}
        if labels:
            metadata["labels"] = dict(labels)
        body = {"apiVersion": "v1", "kind": "Node", "metadata": metadata}
        params = {"fieldManager": self.field_manager, "force": "false"}
        reply = send(self._transport, "PATCH", self._path, body, timeout_s=self._timeout_s, sleep=self._sleep,
                     content_type=APPLY_PATCH, params=params)
        if reply.status in (200, 201):
            return SsaDelivery("ok", "", reply.attempts)
        if reply.status == 409 and is_apply_conflict(reply.body):
            return _conflict(reply)
        if reply.status == 404:
            return SsaDelivery("not_found", f"node {self._node_name} does not exist", reply.attempts)
        if reply.status == 403:
            return SsaDelivery("forbidden", "forbidden: the agent's ClusterRole must allow `patch nodes` "
                                            f"(deploy/hookserver.yaml): {status_message(reply.body)}", reply.attempts)
        return SsaDelivery("error", describe_failure("PATCH", self._path, reply), reply.attempts)

    def withdraw(self) -> SsaDelivery:
        """Take back the labels this manager owns (another manager's stay, with its value)."""
        return self.apply({})
