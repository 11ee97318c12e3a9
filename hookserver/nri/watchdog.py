"""A watchdog thread that notices a hook holding the event loop.

NRI hooks run inline on the event loop (`handlers.PluginService`): no thread hand-off, because that costs
more than the hook. Python cannot pre-empt code running on the loop, so a hook that hangs holds every NRI
call (the runtime serialises them anyway) and the informer and collectors' ticks with it. The breaker
(`hookserver.hooks.breaker`) keeps the *next* calls away from such a hook once it returns; this thread
is what sees it *while* it runs: once a call has held the loop longer than `stall_s`, it logs which call,
for how long, and where the loop thread is (its innermost frames), counts the stall in the NRI status, and
says when the loop got free again. It never touches the loop or the socket; each poll it also calls
`on_poll` (the call deadline's `nudge`, which signals the loop thread to interrupt a hook past its deadline).

Cost on the hot path: two attribute stores per inline call (`enter`/`leave`).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Protocol

__all__ = ["LoopWatchdog"]

log = logging.getLogger(__name__)


class _Pod(Protocol):
    @property
    def key(self) -> str: ...


class _Subject(Protocol):
    """What a stalled call is reported as: a container request's pod key and name."""

    @property
    def pod(self) -> _Pod: ...
    @property
    def name(self) -> str: ...


class LoopWatchdog:
    def __init__(
        self,
        *,
        stall_s: float = 0.5,
        poll_s: float = 0.05,
        on_stall: Callable[[str, float], None] | None = None,
        on_poll: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stall_s = stall_s
        self.poll_s = poll_s
        self._on_stall = on_stall
        self._on_poll = on_poll
        self._clock = clock
        # (rpc, subject, started, sequence, thread id): one attribute, replaced whole, read by the watchdog
        # thread. `subject` is the call's container request (or a pod key), formatted only when reported:
        # the hot path formats nothing.
        self._current: tuple[str, _Subject | str, float, int, int] | None = None
        self._seq = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stalls = 0
        self.longest_stall_s = 0.0

    # -- called on the loop thread ------------------------------------------------------------------
    def enter(self, rpc: str, subject: _Subject | str = "") -> None:
        """A call starts holding the loop; `subject` is its container request, or a pod key."""
        self._seq += 1
        self._current = (rpc, subject, self._clock(), self._seq, threading.get_ident())

    def leave(self) -> None:
        self._current = None

    # -- the thread -----------------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="nri-loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=2.0)

    def check(self) -> tuple[str, float] | None:
        """One look (the thread calls this every `poll_s`; tests call it directly): the stalled call and
        for how long, when the current call has held the loop over `stall_s` and was not reported yet."""
        current = self._current
        if current is None:
            return None
        rpc, subject, started, seq, ident = current
        held = self._clock() - started
        if held < self.stall_s or seq == self._reported:
            return None
        if isinstance(subject, str):
            what = f"{rpc} for {subject or '-'}"
        else:
            what = f"{rpc} for {subject.pod.key}/{subject.name}"
        self._reported = seq
        self.stalls += 1
        self.longest_stall_s = max(self.longest_stall_s, held)
        log.warning(
            "nri: %s has held the event loop for %.0f ms (a hook cannot be pre-empted; its breaker will skip it "
            "once it returns); the loop thread is at: %s", what, held * 1000, _where(ident),
        )
        if self._on_stall is not None:
            self._on_stall(what, held)
        return what, held

    _reported = 0

    def _watch(self) -> None:
        stalled_seq = 0
        while not self._stop.wait(self.poll_s):
            if self._on_poll is not None:
                self._on_poll()  # e.g. `CallDeadline.nudge`: interrupt a hook past its deadline
            found = self.check()
            if found is not None:
                stalled_seq = self._reported
            elif stalled_seq and (self._current is None or self._current[3] != stalled_seq):
                log.warning("nri: the event loop is free again")
                stalled_seq = 0


def _where(ident: int) -> str:
    frame = sys._current_frames().get(ident)
    if frame is None:
        return "unknown"
    lines = traceback.format_stack(frame, limit=4)
    return " <- ".join(line.strip().splitlines()[0] for line in reversed(lines))
