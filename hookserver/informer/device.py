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
from typing import Any

from hookserver.informer.apply_object import ApplyDelivery, ObjectApplier
from hookserver.informer.ssa import ApplyTransport

__all__ = ["DEVICE_RESOURCE_PATH", "DeviceWriter", "NodeLabelWriter", "SsaDelivery"]

DEVICE_RESOURCE_PATH = "/apis/scheduling.koordinator.sh/v1alpha1/devices"
GPU_NODE_LABELS = ("node.koordinator.sh/gpu-vendor", "node.koordinator.sh/gpu-model",
                   "node.koordinator.sh/gpu-driver-version")

SsaDelivery = ApplyDelivery


class DeviceWriter(ObjectApplier):
    def __init__(self, transport: ApplyTransport, *, node_name: str, field_manager: str = "hookserver",
                 timeout_s: float = 10.0, sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(
            transport, path=f"{DEVICE_RESOURCE_PATH}/{node_name}", field_manager=field_manager, timeout_s=timeout_s,
            sleep=sleep,
            missing=("crd_missing", "the Device CRD (devices.scheduling.koordinator.sh, v1alpha1) is not installed: "
                                    "koord-scheduler's DeviceShare plugin sees no GPU or RDMA device on this node "
                                    "(deploy/crds/scheduling.koordinator.sh_devices.yaml)"),
            grant="create/patch on devices.scheduling.koordinator.sh",
        )


class NodeLabelWriter:
    """The GPU labels on the Node; give it its own field manager (the one GPU capacity uses), so that
    withdrawing them never touches labels another part of the agent applies."""

    target = "apiserver"

    def __init__(self, transport: ApplyTransport, *, node_name: str, field_manager: str, timeout_s: float = 10.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._node_name = node_name
        self._applier = ObjectApplier(
            transport, path=f"/api/v1/nodes/{node_name}", field_manager=field_manager, timeout_s=timeout_s,
            sleep=sleep, missing=("not_found", f"node {node_name} does not exist"), grant="`patch nodes`",
        )
        self.where = self._applier.where
        self.field_manager = field_manager

    def apply(self, labels: Mapping[str, str]) -> ApplyDelivery:
        """Make `labels` (a subset of the three GPU keys) this manager's whole share of the Node's labels."""
        stray = sorted(set(labels) - set(GPU_NODE_LABELS))
        if stray:
            raise ValueError(f"only the GPU labels are applied here, not {', '.join(stray)}")
        metadata: dict[str, Any] = {"name": self._node_name}
        if labels:
            metadata["labels"] = dict(labels)
        return self._applier.apply({"apiVersion": "v1", "kind": "Node", "metadata": metadata})

    def withdraw(self) -> ApplyDelivery:
        """Take back the labels this manager owns (another manager's stay, with its value)."""
        return self.apply({})
