"""Writes the NodeMetric status through the status subresource: the only apiserver write hookserver makes.

Each delivery GETs `nodemetrics/<node>` (for its resourceVersion and current status) and sends a JSON merge
patch to `nodemetrics/<node>/status` that carries `metadata.resourceVersion` (so the apiserver refuses a
stale write with 409) and the difference from the current status (keys that are gone become null, so the
status ends up exactly the document built, as koordlet's UpdateStatus does). A 409 re-reads and retries with
client-go's DefaultBackoff (4 tries, 10 ms x5, 10 % jitter). A 404 (no NodeMetric object yet, or the CRD is not
installed) and transport failures are returned as results, not raised: the reporter logs state changes once
and tries again next interval.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hookserver.errors import InformerError

__all__ = ["NodeMetricStatusWriter", "StatusDelivery", "json_merge_patch"]

SLO_GROUP = "/apis/slo.koordinator.sh/v1alpha1"
MERGE_PATCH = "application/merge-patch+json"
_BACKOFF_S = (0.010, 0.050, 0.250)  # DefaultBackoff: Steps 4, Duration 10 ms, Factor 5, Jitter 0.1


class StatusTransport(Protocol):
    def get_json(self, path: str, params: Mapping[str, str], *, timeout_s: float) -> Any: ...

    def send_json(self, method: str, path: str, body: Any, *, content_type: str, timeout_s: float) -> Any: ...


@dataclass(frozen=True, slots=True)
class StatusDelivery:
    result: str  # ok | not_found | error
    detail: str = ""
    attempts: int = 1
    resource_version: str = ""


def json_merge_patch(old: Any, new: Any) -> Any:
    """RFC 7386 patch that turns `old` into `new` (objects recurse, anything else is replaced)."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return new
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = json_merge_patch(old[key], value) if isinstance(value, Mapping) else value
    return patch


class NodeMetricStatusWriter:
    target = "apiserver"

    def __init__(
        self,
        transport: StatusTransport,
        *,
        node_name: str,
        timeout_s: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
        group_path: str = SLO_GROUP,
    ) -> None:
        self._transport = transport
        self._path = f"{group_path}/nodemetrics/{node_name}"
        self.where = self._path
        self._timeout_s = timeout_s
        self._sleep = sleep

    def deliver(self, status: dict[str, Any]) -> StatusDelivery:
        attempt = 0
        while True:
            attempt += 1
            try:
                current = self._transport.get_json(self._path, {}, timeout_s=self._timeout_s)
                meta = current.get("metadata") if isinstance(current, Mapping) else None
                rv = meta.get("resourceVersion", "") if isinstance(meta, Mapping) else ""
                old = current.get("status") or {} if isinstance(current, Mapping) else {}
                patch = {"metadata": {"resourceVersion": rv}, "status": json_merge_patch(old, status)}
                answer = self._transport.send_json("PATCH", f"{self._path}/status", patch, content_type=MERGE_PATCH,
                                                   timeout_s=self._timeout_s)
            except InformerError as exc:
                if exc.status == 409 and attempt <= len(_BACKOFF_S):
                    self._sleep(_BACKOFF_S[attempt - 1] * (1 + 0.1 * random.random()))
                    continue
                if exc.status == 404:
                    return StatusDelivery("not_found", _not_found(str(exc)), attempt)
                return StatusDelivery("error", str(exc), attempt)
            new_meta = answer.get("metadata") if isinstance(answer, Mapping) else None
            new_rv = new_meta.get("resourceVersion", "") if isinstance(new_meta, Mapping) else ""
            return StatusDelivery("ok", "", attempt, str(new_rv))


def _not_found(message: str) -> str:
    return (f"{message} (no NodeMetric for this node yet, or the slo.koordinator.sh CRD is not installed; "
            "koord-manager creates it)")
