"""The rules every eviction passes, whatever carries it out: never the same pod twice within the cool-down,
never a pod that is already terminating; and the standalone report-only backend.

The backend (the Eviction API, the standalone killer, or report-only) is handed in by the daemon: qos
knows only the `hookserver.eviction` contract.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from hookserver.eviction import EvictionBackend, EvictionRequest, EvictionResult, EvictionStatus

__all__ = ["EvictionGuard", "ReportOnlyBackend"]


class ReportOnlyBackend:
    """Standalone without `--evict-standalone=kill`: the decision is recorded, nothing is done."""

    kind = "report"

    def evict(self, request: EvictionRequest) -> EvictionResult:
        return EvictionResult(request, EvictionStatus.REPORTED, detail="standalone mode: reported only")


class EvictionGuard:
    """Wraps a backend with the cool-down memory. Thread-safe (the runner evicts from a worker thread,
    `hookctl qos` reads from gRPC threads)."""

    def __init__(
        self, backend: EvictionBackend, *, cooldown_s: float = 300.0, clock: Callable[[], float] = time.time
    ) -> None:
        self.backend = backend
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._evicted: dict[str, float] = {}

    @property
    def kind(self) -> str:
        return self.backend.kind

    def _forget_old(self, now: float) -> None:
        cutoff = now - self.cooldown_s
        for uid in [u for u, ts in self._evicted.items() if ts < cutoff]:
            del self._evicted[uid]

    def recently_evicted(self) -> frozenset[str]:
        """UIDs evicted within the cool-down: planners skip them (they are already on their way out)."""
        with self._lock:
            self._forget_old(self._clock())
            return frozenset(self._evicted)

    def evict(self, request: EvictionRequest, *, terminating: bool = False) -> EvictionResult:
        now = self._clock()
        with self._lock:
            self._forget_old(now)
            since = self._evicted.get(request.pod_uid)
        if since is not None:
            return EvictionResult(
                request, EvictionStatus.ALREADY_EVICTED,
                detail=f"evicted {now - since:.0f}s ago (cool-down {self.cooldown_s:.0f}s)",
            )
        if terminating:
            return EvictionResult(request, EvictionStatus.TERMINATING, detail="pod is already terminating")
        try:
            result = self.backend.evict(request)
        except Exception as exc:  # noqa: BLE001 - a backend bug must not stop the round; it is reported
            result = EvictionResult(request, EvictionStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        if result.done:
            with self._lock:
                self._evicted[request.pod_uid] = now
        return result
