"""The NRI connection's state, as `hookctl nri` shows it.

One mutable record per plugin, touched only from the event loop; `as_dict()` is the JSON-able copy
the debug provider returns.
"""

from __future__ import annotations

import datetime

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hookserver.nri.events import mask_words

__all__ = ["ConnState", "NriStatus"]


class ConnState(enum.Enum):
    IDLE = "idle"                  # run() not started
    CONNECTING = "connecting"      # dialing the socket
    REGISTERING = "registering"    # RegisterPlugin sent, not yet configured and answered
    REGISTERED = "registered"      # registered and configured; waiting for Synchronize
    READY = "ready"                # synchronized: receiving events
    BACKOFF = "backoff"            # closed; waiting before the next dial
    STOPPED = "stopped"            # run() returned


@dataclass(slots=True)
class NriStatus:
    plugin: str
    socket: str
    state: ConnState = ConnState.IDLE
    runtime_name: str = ""
    runtime_version: str = ""
    nri_version: str = ""
    registration_timeout_ms: int = 0
    request_timeout_ms: int = 0
    event_mask: int = 0
    valid_mask: int = 0
    connections: int = 0
    reconnects: int = 0
    connected_since: float | None = None
    last_error: str = ""
    last_error_at: float | None = None
    next_retry_s: float | None = None
    sync_pods: int = 0
    sync_containers: int = 0
    sync_updates: int = 0
    sync_chunks: int = 0
    sync_ms: float = 0.0
    sync_complete: bool = True  # the last Synchronize answered every update and wrote every pod's values
    sync_pending_pods: int = 0  # pods the last Synchronize left to the reconciler
    sync_partial: int = 0  # Synchronize answers that ran out of budget (partial), this process
    last_sync_partial: str = ""
    # The last Synchronize's `sync.SyncProgress` (its worker writes the pod values after the reply).
    sync_progress: Any = None
    calls: Counter[str] = field(default_factory=Counter)
    timeouts: int = 0
    errors: int = 0
    rejections: int = 0
    # The current connection's stage memo (`hooks.memo.StageMemo`, set by the hot path): hits, misses, entries.
    memo: Any = None

    def error(self, message: str, now: float) -> None:
        self.last_error = message
        self.last_error_at = now

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "plugin": self.plugin,
            "socket": self.socket,
            "runtime": {
                "name": self.runtime_name,
                "version": self.runtime_version,
                "nri_version": self.nri_version,
                "registration_timeout_ms": self.registration_timeout_ms,
                "request_timeout_ms": self.request_timeout_ms,
            },
            "events": mask_words(self.event_mask),
            "event_mask": f"{self.event_mask:#x}",
            "valid_mask": f"{self.valid_mask:#x}",
            "connections": self.connections,
            "reconnects": self.reconnects,
            "connected_since": _iso(self.connected_since),
            "last_error": self.last_error,
            "last_error_at": _iso(self.last_error_at),
            "next_retry_s": self.next_retry_s,
            "sync": {
                "pods": self.sync_pods,
                "containers": self.sync_containers,
                "updates": self.sync_updates,
                "chunks": self.sync_chunks,
                "ms": self.sync_ms,
                "complete": self.sync_complete,
                "handed_to_reconciler": self.sync_pending_pods,
                "partial_total": self.sync_partial,
                "last_partial": self.last_sync_partial,
                "pods_written": self.sync_progress.pods_written if self.sync_progress is not None else 0,
                # Of a split sync's updates, those decided while the runtime was still sending its chunks.
                "decided_before_last_chunk": (
                    self.sync_progress.decided_before_last if self.sync_progress is not None else 0
                ),
            },
            "calls": dict(sorted(self.calls.items())),
            "timeouts": self.timeouts,
            "errors": self.errors,
            "rejections": self.rejections,
            "decision_memo": self.memo.status() if self.memo is not None else None,
        }


def _iso(ts: float | None) -> str | None:
    """Epoch seconds as ISO-8601 UTC, like every other time hookctl prints."""
    if ts is None:
        return None
    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
