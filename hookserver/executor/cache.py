"""Last-written value per cgroup file, so the reconciler's re-applies cost nothing while nothing changed.

Like koordlet's executor cache (reference §5.9): a cacheable write is skipped when the same value was
written to the same file less than `force_update_seconds` ago; after that it is written again (a kubelet
or admin may have changed the file behind our back). Failed writes are never cached. The clock is injected.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["WriteCache"]


class WriteCache:
    """Thread-safe map (path, resource) -> (value, written_at). Bounded: oldest entries go first."""

    def __init__(self, *, force_update_seconds: float, clock: Callable[[], float], capacity: int = 65536) -> None:
        self._ttl = force_update_seconds
        self._clock = clock
        self._capacity = capacity
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[str, float]] = {}

    def fresh(self, path: str, resource: str, value: str) -> bool:
        """Whether `value` was written to this file within the force-update window."""
        with self._lock:
            entry = self._entries.get((path, resource))
        if entry is None:
            return False
        cached, at = entry
        return cached == value and self._clock() - at < self._ttl

    def remember(self, path: str, resource: str, value: str) -> None:
        now = self._clock()
        with self._lock:
            key = (path, resource)
            self._entries.pop(key, None)
            self._entries[key] = (value, now)
            if len(self._entries) > self._capacity:
                del self._entries[next(iter(self._entries))]

    def forget(self, path: str, resource: str) -> None:
        with self._lock:
            self._entries.pop((path, resource), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
