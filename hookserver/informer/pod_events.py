"""Writes core/v1 Events on pods, as koordlet's event recorder does: the agent's word to whoever describes the
pod (`kubectl describe pod`). Used for evictions (reason `evictPodSuccess`) and for GPU allocations that name a
device this node does not have or one that is unhealthy. A failed write is logged and counted; what it reports
stands (an Event is never a reason to fail anything).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from hookserver.errors import InformerError
from hookserver.informer.ssa import status_message

__all__ = ["COMPONENT", "PodEventWriter"]

log = logging.getLogger(__name__)

COMPONENT = "hookserver"


def _rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class PodEventWriter:
    """`transport`: the informer's apiserver client (`request_json`)."""

    def __init__(self, transport: Any, *, node_name: str, timeout_s: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        self._transport = transport
        self.node_name = node_name
        self.timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self.failed = 0

    def post(self, *, namespace: str, name: str, uid: str, reason: str, message: str, type_: str = "Warning",
             resource_version: str = "") -> bool:
        now = _rfc3339(self._clock())
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, "uid": uid,
                               "resourceVersion": resource_version},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": COMPONENT, "host": self.node_name},
            "reportingComponent": COMPONENT, "reportingInstance": self.node_name,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            status, reply = self._transport.request_json("POST", f"/api/v1/namespaces/{namespace}/events", event,
                                                         timeout_s=self.timeout_s)
        except InformerError as exc:
            status, reply = 0, {"message": str(exc)}
        if status in (200, 201):
            return True
        with self._lock:
            self.failed += 1
        log.warning("event %s on pod %s/%s not created: HTTP %s %s", reason, namespace, name, status,
                    status_message(reply))
        return False
