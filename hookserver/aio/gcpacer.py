"""Garbage collections on the background's time, not inside a hook.

CPython collects when a thread's allocations cross a threshold, in whatever thread that is, and a
collection holds the GIL until it is done. A generation-0 collection is small (at most ~700 new objects);
the older ones are not: a generation-1 collection walks what survived the last ten, a full one every
object allocated since start-up that is still alive (the start-up heap itself is frozen out,
`observability/gcpauses.py`). In the busy bench (`python -m tests.bench nri_busy`, 500 pods) 44-55 pauses
over 1 ms fell in one run of 3,200 calls, 400 ms in all, most of them generation 1 and 2.

`GcPacer` leaves generation 0 to CPython and takes the older two over while the daemon serves: their
thresholds are set out of reach, and one thread of its own looks at `gc.get_count()` every `interval_s`
and collects a generation when CPython would have (the same thresholds), after waiting at the hot gate
(`hotgate.pause()`: while a call is in flight or has just ended). A full collection is also spaced at
least `full_every_s` apart, in place of CPython's rule of waiting until a quarter of the long-lived objects
are new, which Python does not expose. The garbage is the same, collected up to `interval_s` later (a full
one up to `full_every_s`); a big collection now starts only when no hook is being answered. A hook that
arrives during one still waits for it, and the pause metrics show it. `stop()` puts the thresholds back.

`young=True` (`hook.gc_pace_young`) takes generation 0 over too. Generation 0 is small, but CPython runs it in
whichever thread allocates the object that crosses the threshold, and in a busy agent that is a background
thread (collectors, QoS, the informer's parsing) ~40 times a second, each holding the GIL for 0.3-0.5 ms when
the young objects include a node's worth of fresh containers. Measured on a 16-CPU machine (busy bench, 3,200
calls), 15 of the 32 slowest calls overlapped such a collection against 17 of the other 3,168; the busy
daemon's calls that overlapped none had the idle daemon's p99. Paced, generation 0 is collected when CPython
would have (`gc.get_count()[0]` past its threshold), at a quiet moment; a pod wave's calls, back to back, then
meet a collection only at the wave's start. CPython keeps a backstop at `backstop` times the threshold, so a
burst of allocation (a relist, a big parse) between two looks is still collected in bounded pieces rather than
in one walk over everything the burst made.

Two more rules for the older generations (`hook.gc_quiet_wait_ms`, `hook.gc_freeze_survivors`), from the busy
bench on the 2-CPU VM (24 rounds, 9,600 calls): generation-1 collections took 3.7 ms on average (97 of them, up
to 11.9 ms) and full ones up to 50 ms, and a due one that had waited `hook.yield_max_defer_ms` (50 ms) at the
gate ran in the middle of a pod wave: one call took 51 ms, others 6.6-7 ms.

* **A due collection waits for a quiet moment**, up to `quiet_wait_s` (not the gate's 50 ms): the pacer's
  thread is not blocked meanwhile, and the collection runs at the first look that finds the doors quiet. Only
  past `quiet_wait_s` does it wait at the gate, bounded, as before. Generation 0 goes ahead sooner, at half its
  backstop (CPython's own collection would otherwise take it, unpaced, in whichever thread allocates next), and
  then alone: an older generation due with it waits on. Not under a `CollectionHold` (an NRI sync's answer:
  automatic collection is off, there is no backstop to beat, and a collection would walk the answer). The cost
  is garbage held up to that much longer. With the bench pinned (the runtime on one CPU, the daemons on the
  other), 9-11 of 6,400 busy calls overlapped a generation-0 collection the pacer had started after its 50 ms at
  the gate, mid-wave; 0-3 with this.
* **Survivors of a full collection are frozen** (`gc.freeze()`), as the start-up heap is: what lived through a
  full collection is long-lived, and the next full one walks only what was promoted since, not the whole
  long-lived heap again. Cyclic garbage among frozen objects is not collected until a **deep** collection,
  every `deep_every_s` (10 min): `gc.unfreeze()`, a full collection of everything, and a freeze of what
  survived, at a quiet moment like any other. Frozen objects freed by their reference counts (most of them) are
  freed as usual. A young object frozen with the survivors (allocated by another thread between the collection
  and the freeze) waits for the next deep collection too.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from hookserver.aio.hotgate import GATE, HotGate

__all__ = ["CollectionHold", "GcPacer", "generation_due"]

log = logging.getLogger(__name__)


def generation_due(
    counts: tuple[int, int, int], thresholds: tuple[int, int, int], *, full_allowed: bool, young: bool = False,
) -> int | None:
    """The generation CPython would collect now with these counts (`gc.get_count()`) and its own thresholds, or
    None: 2 when generation 1 has been collected `thresholds[2]` times since the last full one (and
    `full_allowed`), 1 when generation 0 has been collected `thresholds[1]` times since the last gen-1, and with
    `young` 0 when `thresholds[0]` objects were allocated (net) since the last collection."""
    if counts[2] >= thresholds[2] > 0 and full_allowed:
        return 2
    if counts[1] >= thresholds[1] > 0:
        return 1
    if young and counts[0] >= thresholds[0] > 0:
        return 0
    return None


@dataclass(slots=True)
class PacerStats:
    collections: list[int]
    deferred_by_hooks: int = 0  # due collections that found a call in flight (each counted once)
    waited_past_quiet: int = 0  # collections that waited `quiet_wait_s` without finding a quiet moment
    deep: int = 0  # deep collections: everything unfrozen, collected, and the survivors frozen again


class GcPacer:
    """See the module doc. `start()` once the daemon serves; `stop()` on shutdown."""

    # Out of reach: CPython never collects generations 1 and 2 itself while the pacer runs.
    _UNREACHABLE = 1 << 30

    def __init__(
        self, *, interval_s: float = 0.02, full_every_s: float = 30.0, young: bool = False, backstop: int = 10,
        quiet_wait_s: float = 0.0, freeze_survivors: bool = False, deep_every_s: float = 600.0,
        gate: HotGate = GATE, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if backstop < 2:
            raise ValueError(f"backstop must be at least 2 (times generation 0's threshold), got {backstop}")
        if quiet_wait_s < 0 or deep_every_s <= 0:
            raise ValueError(f"quiet_wait_s must be >= 0 and deep_every_s > 0, got {quiet_wait_s}, {deep_every_s}")
        self.interval_s = interval_s
        self.full_every_s = full_every_s
        self.young = young
        self.backstop = backstop
        self.quiet_wait_s = quiet_wait_s
        self.freeze_survivors = freeze_survivors
        self.deep_every_s = deep_every_s
        self._pending_since: float | None = None  # when the collection now due was first put off for a call
        self._last_deep = float("-inf")
        self._gate = gate
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved: tuple[int, int, int] | None = None
        self._last_full = float("-inf")
        self.stats = PacerStats(collections=[0, 0, 0])

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def thresholds(self) -> tuple[int, int, int]:
        """CPython's thresholds the pacer applies (those in force when it started)."""
        saved = self._saved
        return saved if saved is not None else _thresholds()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._saved = _thresholds()
        self._last_deep = self._clock()  # the start-up heap was just collected whole and frozen
        young_threshold = self._saved[0] * self.backstop if self.young else self._saved[0]
        gc.set_threshold(young_threshold, self._UNREACHABLE, self._UNREACHABLE)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gc-pacer", daemon=True)
        self._thread.start()
        log.info("gc: generations %s collected off the hot path, looked at every %.0f ms (thresholds %s%s)",
                 "0, 1 and 2" if self.young else "1 and 2", self.interval_s * 1000, self._saved,
                 f"; CPython's own generation 0 at {young_threshold}" if self.young else "")

    def stop(self) -> None:
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout=2.0)
        self._thread = None
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None

    def step(self) -> int | None:
        """One look: collect the generation that is due (after the gate lets us), or nothing. A collection found
        due while a call is in flight is put off to a later look that finds the doors quiet, for at most
        `quiet_wait_s`; generation 0 goes ahead sooner once its count is half-way to CPython's backstop, which
        would otherwise collect it unpaced, in whichever thread allocates next (the event loop's, too)."""
        now = self._clock()
        counts, thresholds = gc.get_count(), self.thresholds
        full_allowed = now - self._last_full >= self.full_every_s
        generation = generation_due(counts, thresholds, full_allowed=full_allowed, young=self.young)
        if generation is None:
            self._pending_since = None
            return None
        gate = self._gate
        busy = gate.enabled and gate.busy()
        if busy and self.quiet_wait_s > 0:
            if self._pending_since is None:
                self._pending_since = now
                self.stats.deferred_by_hooks += 1
            if now - self._pending_since < self.quiet_wait_s:
                # Under a CollectionHold (an NRI sync's answer) automatic collection is off: no backstop to beat.
                if _holding() or not (self.young and counts[0] >= thresholds[0] * self.backstop // 2 > 0):
                    return None
                generation = 0  # only the young, before the backstop takes it; an older one waits on
            else:
                self.stats.waited_past_quiet += 1
        elif busy:
            self.stats.deferred_by_hooks += 1
        if busy:
            gate.pause()
        if generation == 2 and self.freeze_survivors:
            self._collect_and_freeze()
        else:
            gc.collect(generation)
        if generation == 2:
            self._last_full = self._clock()
        if generation_due(gc.get_count(), thresholds, full_allowed=full_allowed and generation < 2,
                          young=self.young) is None:
            self._pending_since = None  # nothing left waiting (after the young alone, an older one may be)
        self.stats.collections[generation] += 1
        return generation

    def _collect_and_freeze(self) -> None:
        """A full collection whose survivors join the permanent generation; every `deep_every_s` everything
        frozen is put back first, so cyclic garbage among long-lived objects is collected too."""
        if self._clock() - self._last_deep >= self.deep_every_s:
            gc.unfreeze()
            gc.collect(2)
            gc.freeze()
            self._last_deep = self._clock()
            self.stats.deep += 1
            return
        gc.collect(2)
        gc.freeze()

    def status(self) -> dict[str, object]:
        return {"running": self.running, "interval_ms": round(self.interval_s * 1000, 3), "young": self.young,
                "full_every_s": self.full_every_s, "quiet_wait_ms": round(self.quiet_wait_s * 1000, 3),
                "freeze_survivors": self.freeze_survivors, "deep_every_s": self.deep_every_s,
                "collections": list(self.stats.collections), "deferred_by_hooks": self.stats.deferred_by_hooks,
                "waited_past_quiet": self.stats.waited_past_quiet, "deep_collections": self.stats.deep}

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.step()
            except Exception:  # noqa: BLE001 - a failed look must not end pacing
                log.exception("gc pacer: a collection failed")


_HOLD_LOCK = threading.Lock()
_holds = 0
_held_from_enabled = False


class CollectionHold:
    """No automatic collection, in any thread, while a runtime waits on a long answer (an NRI Synchronize's
    decisions, until its reply is written): CPython's backstop would otherwise collect generation 0 inside it,
    walking the thousands of young requests and outcomes the answer is made of, again and again; and ended
    before the reply is written, the first allocation after it collects them all at once (~2 ms at 500 pods).
    Measured in the bench's plugin child, 500 pods through containerd's library: the answer 23.3-25.8 ms with
    them, 21.5-22.5 ms in nine of ten syncs without (five syncs each, twice). The garbage is collected after the reply, by the pacer
    or the next automatic collection. The pacer's explicit collections still run, after waiting for a quiet moment
    at most `hook.gc_quiet_wait_ms` and then at the hot gate, so a long hold does not let garbage grow without bound.

    `hold()` and `release()` are idempotent for one holder; holders (nested, other threads) share one hold, and
    automatic collection comes back when the last releases, and only if it was on when the first held."""

    __slots__ = ("_holding",)

    def __init__(self) -> None:
        self._holding = False

    @property
    def holding(self) -> bool:
        return self._holding

    def hold(self) -> None:
        global _holds, _held_from_enabled
        if self._holding:
            return
        with _HOLD_LOCK:
            if _holds == 0:
                _held_from_enabled = gc.isenabled()
                gc.disable()
            _holds += 1
        self._holding = True

    def release(self, *, collect: bool = False) -> None:
        """End this holder's hold. With `collect`, first collect generation 0 here, after waiting at the hot gate:
        what the hold put off is otherwise collected by whichever thread allocates first once automatic
        collection is back, at once and unpaced (a CreateContainer on the loop, measured: up to 3 ms after a
        500-pod sync)."""
        global _holds
        if not self._holding:
            return
        if collect:
            GATE.pause()
            gc.collect(0)
        self._holding = False
        with _HOLD_LOCK:
            _holds -= 1
            if _holds == 0 and _held_from_enabled:
                gc.enable()


def _holding() -> bool:
    """Some CollectionHold is in force (automatic collection off for it)."""
    return _holds > 0


def _thresholds() -> tuple[int, int, int]:
    t = gc.get_threshold()
    return (t[0], t[1], t[2]) if len(t) >= 3 else (t[0], 10, 10)
