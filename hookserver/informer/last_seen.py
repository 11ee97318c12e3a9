"""The last version of one watched object the agent has seen: its resourceVersion and status.

The NodeMetric status writer patches the object the informer already watches. Reading it back with a GET
before every report (once a minute on every node) was half of the agent's requests at rest; the watch has
delivered that object already, so the writer takes its resourceVersion and status from here, as koordlet
takes them from its lister. The writer also records its own PATCH's answer, so the next report does not
race the watch event of the previous one.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LastSeen", "SeenObject"]


@dataclass(frozen=True, slots=True)
class SeenObject:
    resource_version: str
    status: Mapping[str, Any]


class LastSeen:
    """Thread-safe: the watch thread writes, the reporter thread reads. `None` until an object is seen, and
    again after it is deleted or its resource is not served."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: SeenObject | None = None

    def get(self) -> SeenObject | None:
        with self._lock:
            return self._seen

    def record(self, obj: Any) -> None:
        """Keep `obj`'s resourceVersion and status; an object without a resourceVersion clears the record."""
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
        status = obj.get("status") if isinstance(obj, Mapping) else None
        seen = SeenObject(str(rv), dict(status) if isinstance(status, Mapping) else {}) if rv else None
        with self._lock:
            self._seen = seen

    def forget(self) -> None:
        with self._lock:
            self._seen = None
