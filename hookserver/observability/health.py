"""Liveness and readiness, as the kubelet's probes ask for them.

Readiness is a set of named checks that the parts of the daemon set themselves ("proxy", "nri",
"informer"): ready only when every one is. Liveness asks the daemon's event loop to run a no-op and
waits briefly for it, so a loop that is wedged (a blocking call on the hot path, a deadlock) fails the
probe even though the HTTP thread itself still answers; parts whose work runs off the loop add their own
liveness checks (the capacity publisher: a tick stuck on a hung apiserver call must get the agent
restarted, or the offer it can no longer vouch for would stay on the Node). Both are read from the HTTP
server's threads and written from the loop, so state sits behind a lock and is copied out.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["HealthState", "Readiness"]

_NOT_REPORTED = "not reported yet"


@dataclass(frozen=True, slots=True)
class Readiness:
    """One named check: is that part ready, and if not, why."""

    name: str
    ready: bool
    reason: str = ""


class HealthState:
    """Named readiness checks plus a liveness probe of the daemon's event loop.

    `required` names checks that start as not ready ("not reported yet"), so `/readyz` stays 503
    until each part has said it is up. With no checks at all, the process is ready.
    """

    def __init__(self, *, required: Iterable[str] = (), loop_timeout_s: float = 2.0) -> None:
        if loop_timeout_s <= 0:
            raise ValueError(f"loop_timeout_s must be positive, got {loop_timeout_s}")
        self._lock = threading.Lock()
        self._checks: dict[str, Readiness] = {
            name: Readiness(name, False, _NOT_REPORTED) for name in required
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_timeout_s = loop_timeout_s
        self._liveness_checks: dict[str, Callable[[], tuple[bool, str]]] = {}

    # -- readiness ---------------------------------------------------------------------------------
    def set_ready(self, name: str, ready: bool, reason: str = "") -> None:
        """Report one part's readiness; `reason` says why it is not ready (shown in /readyz)."""
        if not name:
            raise ValueError("a readiness check needs a name")
        with self._lock:
            self._checks[name] = Readiness(name, ready, reason)

    def remove(self, name: str) -> None:
        """Forget a check (a part that was switched off no longer counts)."""
        with self._lock:
            self._checks.pop(name, None)

    def readiness(self) -> tuple[bool, list[Readiness]]:
        """(all ready, every check sorted by name)."""
        with self._lock:
            checks = sorted(self._checks.values(), key=lambda c: c.name)
        return all(c.ready for c in checks), checks

    # -- liveness ----------------------------------------------------------------------------------
    def attach_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch this event loop: /healthz fails when it is closed, stopped or does not respond."""
        with self._lock:
            self._loop = loop

    def add_liveness_check(self, name: str, hung: Callable[[], tuple[bool, str]]) -> None:
        """A part that works off the loop: `hung()` returns (True, why) when it is stuck; /healthz then fails."""
        with self._lock:
            self._liveness_checks[name] = hung

    def liveness(self) -> tuple[bool, str]:
        """(alive, reason). Without an attached loop, a process that answers is alive (unless a part's
        liveness check says it is stuck)."""
        with self._lock:
            loop = self._loop
            checks = list(self._liveness_checks.values())
        for check in checks:
            hung, why = check()
            if hung:
                return False, why
        if loop is None:
            return True, "ok"
        if loop.is_closed():
            return False, "event loop is closed"
        if not loop.is_running():
            return False, "event loop is not running"
        answered = threading.Event()
        try:
            loop.call_soon_threadsafe(answered.set)
        except RuntimeError:
            return False, "event loop is closed"
        if not answered.wait(self._loop_timeout_s):
            return False, f"event loop did not respond within {self._loop_timeout_s:g}s"
        return True, "ok"
