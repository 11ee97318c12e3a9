"""One server-side apply of one object, its reply read the same way for every object the agent publishes:
ok, a conflict naming the other manager (`force=false`: never an overwrite), a 404 (for a custom resource: its
CRD is not installed; for a Node: the Node is gone), a 403 naming the grant the ClusterRole lacks, or an error.

The NodeResourceTopology and Device writers and the GPU label writer are this call with their own path and words.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hookserver.informer.ssa import APPLY_PATCH, ApplyTransport, Reply, apply_conflicts, describe_failure, send
from hookserver.informer.ssa import is_apply_conflict, status_message

__all__ = ["ApplyDelivery", "ObjectApplier"]


@dataclass(frozen=True, slots=True)
class ApplyDelivery:
    """`result`: ok | conflict | crd_missing | not_found | forbidden | error; `conflicts`: (manager, field path)."""

    result: str
    detail: str = ""
    attempts: int = 1
    conflicts: tuple[tuple[str, str], ...] = ()


class ObjectApplier:
    """Applies documents to `path` as `field_manager`. `missing` is what a 404 means for this object:
    (result, detail), e.g. ("crd_missing", "the Device CRD is not installed ..."); `grant` names what a 403 lacks."""

    target = "apiserver"

    def __init__(
        self,
        transport: ApplyTransport,
        *,
        path: str,
        field_manager: str,
        missing: tuple[str, str],
        grant: str,
        timeout_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._transport = transport
        self._path = path
        self.where = path
        self.field_manager = field_manager
        self._missing = missing
        self._grant = grant
        self._timeout_s = timeout_s
        self._sleep = sleep

    def apply(self, document: Mapping[str, Any]) -> ApplyDelivery:
        params = {"fieldManager": self.field_manager, "force": "false"}
        reply = send(self._transport, "PATCH", self._path, dict(document), timeout_s=self._timeout_s,
                     sleep=self._sleep, content_type=APPLY_PATCH, params=params)
        return self._read(reply)

    def _read(self, reply: Reply) -> ApplyDelivery:
        status, body = reply.status, reply.body
        if status in (200, 201):
            return ApplyDelivery("ok", "", reply.attempts)
        if status == 409 and is_apply_conflict(body):
            conflicts = apply_conflicts(body)
            owners = "; ".join(f"{manager} owns {path}" for manager, path in conflicts) or status_message(body)
            return ApplyDelivery("conflict", f"conflict: {owners}", reply.attempts, tuple(conflicts))
        if status == 404:
            return ApplyDelivery(self._missing[0], self._missing[1], reply.attempts)
        if status == 403:
            return ApplyDelivery("forbidden", f"forbidden: the agent's ClusterRole must allow {self._grant} "
                                              f"(deploy/hookserver.yaml): {status_message(body)}", reply.attempts)
        return ApplyDelivery("error", describe_failure("PATCH", self._path, reply), reply.attempts)
