"""Interrupting a hook that runs past its call's deadline, on the event loop's thread, with SIGALRM.

Hooks run inline on the event loop (no hand-off), and Python cannot pre-empt code on a thread from
outside. It can from inside, though: a signal handler runs in the main thread between two bytecodes,
and an exception it raises surfaces in whatever that thread was running. `CallDeadline.arm(seconds)`
sets a one-shot `ITIMER_REAL` before an inline call and `disarm()` clears it after (two `setitimer`
calls, ~1 µs each). If the timer fires while a hook is running, the handler raises `HookTimeout`
inside the hook; the runner turns it into the hook's failed outcome (and trips the hook's breaker), the
failure policy answers, and the runtime gets its answer inside its deadline.

Only a hook is ever interrupted: the handler walks the main thread's frames up to `run_stage` and
raises only if `run_stage` is in the middle of calling a hook (its `hook_running` local is set). Hooks
are pure (no I/O, no shared state but memo caches that never cache an exception), so abandoning one
half-way leaves nothing inconsistent. If the timer fires anywhere else (the dispatcher's bookkeeping,
between two hooks), it is re-armed for 2 ms later. A hook blocked inside C code that holds the GIL is
interrupted only when it returns to Python code.

A process timer's signal may be taken by another thread; CPython then still runs the handler in the main
thread at its next bytecode, which interrupts a hook busy in Python code, but not one blocked in a system
call (a sleep, a read). For those, `nudge()` (called by the NRI loop watchdog's thread every poll) sends
SIGALRM to the main thread itself once the deadline has passed, which ends the system call with EINTR.

Limits: only on the main thread (where CPython runs signal handlers; the daemon's loop runs there), and
only if nothing else owns SIGALRM. Elsewhere `arm` returns False and only the breaker protects.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType

from hookserver.errors import HookTimeout
from hookserver.hooks.runner import run_stage

__all__ = ["CallDeadline"]

log = logging.getLogger(__name__)

_RUN_STAGE = run_stage.__code__
_RETRY_S = 0.002


class CallDeadline:
    """One per event loop. Not re-entrant: one inline call at a time (the loop runs one thing at a time).

    Every instance shares one process-wide SIGALRM handler, which acts for the instance armed now.
    """

    def __init__(self) -> None:
        self._armed = False
        self._seconds = 0.0
        self._due = 0.0
        self._main = threading.main_thread().ident
        self.fired = False
        self.interrupts = 0

    @property
    def available(self) -> bool:
        return _install()

    def arm(self, seconds: float) -> bool:
        """Interrupt a hook still running `seconds` from now. False when it cannot here (see module doc)."""
        global _ARMED
        self.fired = False
        if threading.current_thread() is not threading.main_thread() or not _install():
            return False
        self._seconds = seconds
        self._due = time.monotonic() + seconds
        self._armed = True
        _ARMED = self
        signal.setitimer(signal.ITIMER_REAL, seconds)
        return True

    def disarm(self) -> None:
        global _ARMED
        if self._armed:
            self._armed = False
            _ARMED = None
            signal.setitimer(signal.ITIMER_REAL, 0)

    def nudge(self) -> None:
        """From another thread: if the armed deadline has passed, signal the main thread directly."""
        if self._armed and self._main is not None and time.monotonic() >= self._due:
            signal.pthread_kill(self._main, signal.SIGALRM)

    def _alarm(self, frame: FrameType | None) -> None:
        f = frame
        while f is not None:
            if f.f_code is _RUN_STAGE:
                running = f.f_locals.get("hook_running")
                if running:
                    self.disarm()
                    self.fired = True
                    self.interrupts += 1
                    raise HookTimeout(
                        f"hook {running} interrupted: it ran past the call's {self._seconds * 1000:.0f} ms deadline",
                        plugin=str(running),
                    )
                break
            f = f.f_back
        signal.setitimer(signal.ITIMER_REAL, _RETRY_S)  # not inside a hook at this instant: look again soon


_ARMED: CallDeadline | None = None
_STATE = {"installed": False, "unavailable": ""}


def _install() -> bool:
    """Install the one SIGALRM handler (main thread only, and only if nobody else owns the signal)."""
    if _STATE["installed"]:
        return True
    if _STATE["unavailable"]:
        return False
    why = ""
    if threading.current_thread() is not threading.main_thread():
        return False  # not now; the main thread may still install it
    if not hasattr(signal, "setitimer"):
        why = "no setitimer on this platform"
    elif signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, signal.SIG_IGN, None):
        why = "SIGALRM already has a handler"
    if why:
        _STATE["unavailable"] = why
        log.info("hook deadlines cannot interrupt a hook here (%s): only the breakers protect", why)
        return False
    signal.signal(signal.SIGALRM, _on_alarm)
    _STATE["installed"] = True
    return True


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    armed = _ARMED
    if armed is not None and armed._armed:
        armed._alarm(frame)
