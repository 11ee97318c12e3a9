"""Writes the NodeMetric status through the status subresource: the only apiserver write hookserver makes.

Each delivery sends a JSON merge patch to `nodemetrics/<node>/status` that carries `metadata.resourceVersion`
(so the apiserver refuses a stale write with 409) and the difference from the current status (keys that are
gone become null, so the status ends up exactly the document built, as koordlet's UpdateStatus does). The
current version and status come from the informer's watch of that very object (`LastSeen`), as koordlet takes
them from its lister: no GET before the PATCH. Only without a cached copy (no watch, or not delivered yet), or
after a 409 (the copy was stale), is the object read with a GET; a 409 retries with client-go's DefaultBackoff
(4 tries, 10 ms x5, 10 % jitter). A 404 (no NodeMetric object yet, or the CRD is not installed) and transport
failures are returned as results, not raised: the reporter logs state changes once and tries again next
interval.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hookserver.errors import InformerError
from hookserver.informer.last_seen import LastSeen, SeenObject

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
        seen: LastSeen | None = None,
    ) -> None:
        """`seen`: the informer's copy of this node's NodeMetric (None: read it with a GET every time)."""
        self._seen = seen
        self.reads = 0  # GETs made: only without a cached copy or after a conflict
        self._transport = transport
        self._path = f"{group_path}/nodemetrics/{node_name}"
        self.where = self._path
        self._timeout_s = timeout_s
        self._sleep = sleep

    def deliver(self, status: dict[str, Any]) -> StatusDelivery:
        attempt = 0
        cached = self._seen.get() if self._seen is not None else None
        while True:
            attempt += 1
            try:
                current = cached if cached is not None else self._read()
                cached = None  # a retry (after a 409) reads the object afresh
                patch = {"metadata": {"resourceVersion": current.resource_version},
                         "status": json_merge_patch(current.status, status)}
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
            if self._seen is not None:
                # The next report patches from this answer even if the watch has not delivered it yet.
                self._seen.record(answer)
            return StatusDelivery("ok", "", attempt, str(new_rv))

    def _read(self) -> SeenObject:
        self.reads += 1
        current = self._transport.get_json(self._path, {}, timeout_s=self._timeout_s)
        meta = current.get("metadata") if isinstance(current, Mapping) else None
        rv = meta.get("resourceVersion", "") if isinstance(meta, Mapping) else ""
        old = current.get("status") or {} if isinstance(current, Mapping) else {}
        return SeenObject(str(rv), old if isinstance(old, Mapping) else {})


def _not_found(message: str) -> str:
    return (f"{message} (no NodeMetric for this node yet, or the slo.koordinator.sh CRD is not installed; "
            "koord-manager creates it)")
