"""What one reconciler pass did: `hookctl status` shows the last one, the metrics count them all."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PassReport"]

_MAX_ERRORS_KEPT = 20


@dataclass(slots=True)
class PassReport:
    trigger: str  # start | pods | rules | periodic
    started_at: float  # epoch seconds (store clock)
    duration_s: float = 0.0
    pods: int = 0  # pods looked at
    reconciled: int = 0  # pods whose values were decided
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> pods (or containers)
    planned: int = 0  # writes the cache could not vouch for (read before write)
    written: int = 0  # file writes made
    corrections: int = 0  # files that held a wrong value and were fixed
    corrections_by_resource: dict[str, int] = field(default_factory=dict)
    drifted: int = 0  # targets whose shares changed behind the cache's back (re-read, then corrected)
    vanished: int = 0  # writes that met a cgroup removed meanwhile
    errors: list[str] = field(default_factory=list)  # the first few, for status and the log
    error_count: int = 0
    collected: int = 0  # pods garbage-collected

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def error(self, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < _MAX_ERRORS_KEPT:
            self.errors.append(message)
