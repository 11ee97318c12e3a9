"""Background work steps aside while hooks are answered: the hot path's claim on the one GIL.

Every hook door (NRI on the event loop, the proxy on gRPC threads) shares one interpreter with the
collectors, QoS rounds, predictor training and checkpoints, the reconciler and the informer's parsing. They
share one GIL, and a thread that wants it waits until the holder drops it: a busy holder drops it only
when the switch interval has passed, and takes it back at the next release of the door (every socket read
and write releases it). Measured side by side (`python -m tests.bench nri_busy`, 500 pods on real cgroup
v1), a busy agent's CreateContainer p99 was 1.6x an idle one's and its p99.9 4x, and the slowest 1 % of
calls overlapped a collector cycle 79 % of the time against 14 % for calls in general.

So the doors mark the time they answer (`door(...).enter()` / `leave()`: an integer each, no lock on the
loop; the NRI mux while it handles a frame, an NRI Synchronize from its first chunk to its reply, the proxy while
a handler runs), and background loops call `pause()` at safe points (between pods, between models, between
files; never while holding a lock a hook takes). `pause()` costs one comparison while the doors are quiet.
While a call is in flight, or within `linger_s` of the last one (a pod wave's calls come back to back, and
the next one must not find a background thread holding the GIL), the caller sleeps in short real sleeps,
which release the GIL, so the door's thread takes it back at once. A background thread is never put off
for more than `max_defer_s` at one pause point, so a stream of hooks delays background work but cannot
starve it; `stats()` (in `hookctl status`) counts the pauses, the time spent in them and how often the
bound was reached.

Why one process-wide gate and not one per daemon: what it guards, the GIL, is process-wide. The first
GIL acquisition of a call that arrives while a background thread computes still waits up to one switch
interval (the door cannot mark itself busy before it holds the GIL), which is what
`hook.switch_interval_ms` bounds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Door", "HotGate", "GATE", "pause", "paced"]

_T = TypeVar("_T")


@dataclass(slots=True)
class Door:
    """One front door's calls in flight. `threadsafe` doors (gRPC's pool) count under a lock; a door served
    by one thread (the NRI event loop) counts without one, since only that thread writes its count."""

    name: str
    gate: HotGate
    threadsafe: bool
    in_flight: int = 0
    calls: int = 0
    _lock: threading.Lock | None = None

    def __post_init__(self) -> None:
        if self.threadsafe:
            self._lock = threading.Lock()

    def enter(self) -> None:
        lock = self._lock
        if lock is None:
            self.in_flight += 1
        else:
            with lock:
                self.in_flight += 1

    def leave(self) -> None:
        lock = self._lock
        if lock is None:
            self.in_flight -= 1
        else:
            with lock:
                self.in_flight -= 1
        self.calls += 1
        self.gate.last_left = self.gate.clock()


class HotGate:
    """See the module doc. `enabled` False makes `pause()` return at once (the setting `hook.background_yield`)."""

    def __init__(
        self, *, linger_s: float = 0.002, max_defer_s: float = 0.05, poll_s: float = 0.005,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.enabled = False
        self.linger_s = linger_s
        self.max_defer_s = max_defer_s
        self.poll_s = poll_s
        self.clock = clock
        self._sleep = sleep
        self.doors: dict[str, Door] = {}
        # What `busy()` walks: a tuple replaced whole when a door is made, so a background thread reading it
        # never sees the dict change size under it (a door is made when a front door first starts serving).
        self._door_list: tuple[Door, ...] = ()
        self.last_left = float("-inf")
        # Written only by the threads that pause; a lost increment between two of them costs a count, no more.
        self.pauses = 0
        self.paused_s = 0.0
        self.bound_reached = 0
        self._exempt: set[int] = set()

    def configure(self, *, enabled: bool, linger_s: float, max_defer_s: float) -> None:
        """Set by the daemon when it starts serving; `enabled=False` (on stop) also forgets the exempt threads."""
        self.enabled = enabled
        if not enabled:
            self._exempt.clear()
        self.linger_s = linger_s
        self.max_defer_s = max_defer_s

    def door(self, name: str, *, threadsafe: bool) -> Door:
        """The door called `name`, made on first use (a door that reconnects keeps its count)."""
        found = self.doors.get(name)
        if found is None:
            found = self.doors[name] = Door(name, self, threadsafe)
            self._door_list = tuple(self.doors.values())
        return found

    def exempt_current_thread(self) -> None:
        """A thread that serves hooks (the event loop) never pauses, even in a shared helper that calls `pause()`."""
        self._exempt.add(threading.get_ident())

    def busy(self) -> bool:
        """A call is in flight, or one ended less than `linger_s` ago."""
        for door in self._door_list:
            if door.in_flight > 0:
                return True
        return self.clock() - self.last_left < self.linger_s

    def pause(self) -> None:
        """A background thread's safe point: return at once while the doors are quiet, else sleep (releasing
        the GIL) until they are, for at most `max_defer_s`."""
        if not self.enabled or not self.busy() or threading.get_ident() in self._exempt:
            return
        started = self.clock()
        deadline = started + self.max_defer_s
        now = started
        nap = self.poll_s
        while True:
            # Sleep until the linger after the last call would end, at least `nap`, which doubles while the calls
            # go on: a paused thread that woke every few hundred µs to look would itself take the GIL and a CPU
            # from the calls it waits for (five paused loops at 5 ms were ~1,000 wake-ups a second in a wave).
            self._sleep(min(max(self.last_left + self.linger_s - now, nap), deadline - now))
            nap = nap * 2
            now = self.clock()
            if not self.busy():
                break
            if now >= deadline:
                self.bound_reached += 1
                break
        self.pauses += 1
        self.paused_s += now - started

    def paced(self, items: Iterable[_T], *, every: int = 1) -> Iterator[_T]:
        """`items`, with a `pause()` before each one (or each `every`-th, for cheap items in long runs):
        `for pod in GATE.paced(pods): ...`."""
        if every <= 1:
            for item in items:
                self.pause()
                yield item
            return
        for index, item in enumerate(items):
            if index % every == 0:
                self.pause()
            yield item

    def stats(self) -> dict[str, object]:
        return {
            "enabled": self.enabled, "linger_ms": round(self.linger_s * 1000, 3),
            "max_defer_ms": round(self.max_defer_s * 1000, 3), "pauses": self.pauses,
            "paused_s": round(self.paused_s, 3), "bound_reached": self.bound_reached,
            "calls": {name: door.calls for name, door in sorted(self.doors.items())},
        }


GATE = HotGate()


def pause() -> None:
    """`GATE.pause()`: the process's gate (see the module doc)."""
    GATE.pause()


def paced(items: Iterable[_T], *, every: int = 1) -> Iterator[_T]:
    """`GATE.paced(items, every=every)`."""
    return GATE.paced(items, every=every)
