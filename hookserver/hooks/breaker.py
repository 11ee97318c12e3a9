"""Per-hook time budgets and circuit breakers: how the hot path stays fail-open without a thread hand-off.

Hooks run on the thread that received the call (the NRI event loop, a gRPC worker): a hand-off to a worker
costs more than the hook itself (~0.2 ms against ~0.03 ms). The price is that a hook running on the loop
cannot be pre-empted: a call whose hook runs long is late, and nothing can make *that* call early again.
What a breaker protects is the calls after it:

* every hook run is timed against its budget (`BreakerSettings.budget_s`);
* `trip_after` overruns in a row, or one run over `stuck_s`, trip the hook's breaker: it is **open**, and
  while open the hook is skipped. The stage answers without it ("no change" from that hook), and the
  skip is a `HookResult` whose reason says why, so the audit, `hookctl` and the metrics all show it;
* after `cool_down_s` the breaker is **half-open**: the next call runs the hook once as a probe. A probe
  within budget closes it; an overrun opens it again for twice as long (capped at `max_cool_down_s`).

A hook that is not closed, or overran recently, is *suspect*; front doors that run hooks inline ask
`needs_guard()` and run the call the old, protected way (a worker under a deadline) while it is true, so a
probe never blocks the loop. Thread-safe: the proxy runs hooks on several gRPC threads at once. The common
case (nothing suspect, run within budget) takes no lock: one set lookup before and one compare after.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hookserver.hooks.stages import Stage

__all__ = ["BreakerSettings", "BreakerState", "HookBreakers"]

log = logging.getLogger(__name__)


class BreakerState(enum.Enum):
    CLOSED = "closed"        # the hook runs
    OPEN = "open"            # the hook is skipped until the cool-down ends
    HALF_OPEN = "half-open"  # one probe run decides


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """`budget_s` per hook per call, measured as wall time (a hook blocked in I/O by mistake must count).

    Pure hooks take ~0.01-0.05 ms, but wall time also includes waiting for the GIL: with the collectors'
    or gRPC threads busy, a hook can wait a switch interval (5 ms) or a few mid-run. The defaults sit well
    above that noise (a healthy hook must never trip, or pods would be created without their values),
    and far below NRI's 2 s request timeout, which the call deadline guards on its own."""

    budget_s: float = 0.050
    trip_after: int = 3
    stuck_s: float = 0.500
    cool_down_s: float = 30.0
    max_cool_down_s: float = 300.0

    def __post_init__(self) -> None:
        if self.budget_s <= 0 or self.stuck_s < self.budget_s:
            raise ValueError(f"hook budget {self.budget_s}s must be > 0 and <= stuck limit {self.stuck_s}s")
        if self.trip_after < 1 or self.cool_down_s <= 0 or self.max_cool_down_s < self.cool_down_s:
            raise ValueError("hook breaker: trip_after >= 1, cool_down_s > 0 and max_cool_down_s >= cool_down_s")


Key = tuple[str, Stage]
# (plugin, stage, new state, why) -> None: metrics and logs follow state changes.
OnChange = Callable[[str, Stage, BreakerState, str], None]


class _Breaker:
    __slots__ = (
        "cool_down_s", "last_overrun_s", "max_duration_s", "opened_at", "overruns", "probing", "reason",
        "retry_at", "skips", "state", "trips",
    )

    def __init__(self, cool_down_s: float) -> None:
        self.state = BreakerState.CLOSED
        self.overruns = 0          # in a row
        self.trips = 0
        self.skips = 0
        self.probing = False
        self.opened_at: float | None = None
        self.retry_at = 0.0
        self.cool_down_s = cool_down_s
        self.reason = ""
        self.last_overrun_s = 0.0
        self.max_duration_s = 0.0


class HookBreakers:
    """One breaker per (plugin, stage), created on its first overrun."""

    def __init__(
        self,
        settings: BreakerSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_change: OnChange | None = None,
    ) -> None:
        self.settings = settings or BreakerSettings()
        self._clock = clock
        self._on_change = on_change
        self._lock = threading.Lock()
        self._breakers: dict[Key, _Breaker] = {}
        # Keys whose breaker is not closed or overran lately: the only ones the hot path looks at twice.
        self._suspect: set[Key] = set()

    # -- the hot path ------------------------------------------------------------------------------
    def admit(self, plugin: str, stage: Stage) -> str:
        """"" when the hook should run now; else why it is skipped (its breaker is open)."""
        suspect = self._suspect
        if not suspect:
            return ""  # nothing ever overran lately: no hashing, no lock
        key = (plugin, stage)
        if key not in suspect:
            return ""
        with self._lock:
            b = self._breakers[key]
            if b.state is BreakerState.CLOSED:
                return ""
            now = self._clock()
            if b.state is BreakerState.OPEN and now >= b.retry_at:
                b.state = BreakerState.HALF_OPEN
                b.probing = False
            if b.state is BreakerState.HALF_OPEN and not b.probing:
                b.probing = True
                return ""
            b.skips += 1
            return f"breaker open: {b.reason}; retry in {max(b.retry_at - now, 0.0):.0f}s"

    def record(self, plugin: str, stage: Stage, duration_s: float) -> None:
        """The hook ran for `duration_s` (errors included: a slow failure is still slow)."""
        s = self.settings
        if duration_s <= s.budget_s and not self._suspect:
            return
        key = (plugin, stage)
        if duration_s <= s.budget_s and key not in self._suspect:
            return
        change: tuple[BreakerState, str] | None = None
        with self._lock:
            b = self._breakers.get(key)
            if b is None:
                b = self._breakers[key] = _Breaker(s.cool_down_s)
            b.max_duration_s = max(b.max_duration_s, duration_s)
            now = self._clock()
            if duration_s <= s.budget_s:
                b.overruns = 0
                if b.state is BreakerState.HALF_OPEN:
                    b.state, b.probing, b.opened_at, b.cool_down_s = BreakerState.CLOSED, False, None, s.cool_down_s
                    change = (BreakerState.CLOSED, f"probe ran in {duration_s * 1000:.1f} ms")
                if b.state is BreakerState.CLOSED:
                    self._suspect.discard(key)
            else:
                b.overruns += 1
                b.last_overrun_s = duration_s
                self._suspect.add(key)
                took = f"{duration_s * 1000:.1f} ms over its {s.budget_s * 1000:.1f} ms budget"
                if b.state is BreakerState.HALF_OPEN:
                    b.cool_down_s = min(b.cool_down_s * 2, s.max_cool_down_s)
                    change = self._open(b, now, f"probe ran {took}")
                elif b.state is BreakerState.CLOSED and duration_s >= s.stuck_s:
                    change = self._open(b, now, f"one run took {took}")
                elif b.state is BreakerState.CLOSED and b.overruns >= s.trip_after:
                    change = self._open(b, now, f"{b.overruns} runs in a row over budget, last {took}")
        if change is not None:
            self._changed(plugin, stage, *change)

    def needs_guard(self) -> bool:
        """Whether some hook is suspect enough that an inline caller should run the call protected."""
        if not self._suspect:
            return False
        with self._lock:
            now = self._clock()
            for key in self._suspect:
                b = self._breakers[key]
                if b.state is not BreakerState.OPEN or now >= b.retry_at:
                    return True
        return False

    # -- control and reporting ---------------------------------------------------------------------
    def trip(self, plugin: str, stage: Stage, reason: str) -> None:
        """Open a breaker now (the loop watchdog saw this hook hold the loop)."""
        key = (plugin, stage)
        with self._lock:
            b = self._breakers.get(key)
            if b is None:
                b = self._breakers[key] = _Breaker(self.settings.cool_down_s)
            if b.state is BreakerState.OPEN:
                return
            self._suspect.add(key)
            change = self._open(b, self._clock(), reason)
        self._changed(plugin, stage, *change)

    def state(self, plugin: str, stage: Stage) -> BreakerState:
        b = self._breakers.get((plugin, stage))
        return BreakerState.CLOSED if b is None else b.state

    def status(self) -> dict[str, Any]:
        """JSON-able: settings and every breaker that ever overran, as `hookctl nri` / `status` show them."""
        s = self.settings
        with self._lock:
            now = self._clock()
            hooks = {
                f"{plugin}/{stage.value}": {
                    "state": b.state.value,
                    "reason": b.reason,
                    "overruns_in_a_row": b.overruns,
                    "trips": b.trips,
                    "skipped_calls": b.skips,
                    "retry_in_s": round(max(b.retry_at - now, 0.0), 1) if b.state is BreakerState.OPEN else None,
                    "last_overrun_ms": round(b.last_overrun_s * 1000, 3),
                    "max_duration_ms": round(b.max_duration_s * 1000, 3),
                }
                for (plugin, stage), b in sorted(self._breakers.items(), key=lambda kv: (kv[0][0], kv[0][1].value))
            }
        return {
            "budget_ms": s.budget_s * 1000,
            "trip_after": s.trip_after,
            "stuck_ms": s.stuck_s * 1000,
            "cool_down_s": s.cool_down_s,
            "open": sorted(k for k, v in hooks.items() if v["state"] != "closed"),
            "hooks": hooks,
        }

    def _open(self, b: _Breaker, now: float, reason: str) -> tuple[BreakerState, str]:
        b.state, b.probing, b.reason = BreakerState.OPEN, False, reason
        b.opened_at, b.retry_at = now, now + b.cool_down_s
        b.trips += 1
        b.overruns = 0
        return BreakerState.OPEN, f"{reason}; skipped for {b.cool_down_s:.0f}s"

    def _changed(self, plugin: str, stage: Stage, state: BreakerState, why: str) -> None:
        level = logging.WARNING if state is BreakerState.OPEN else logging.INFO
        log.log(level, "hook %s/%s breaker %s: %s", plugin, stage.value, state.value, why)
        if self._on_change is not None:
            self._on_change(plugin, stage, state, why)
