"""Interrupting a hook that runs past its call's deadline, on the event loop's thread, with a signal.

Hooks run inline on the event loop (no hand-off), and Python cannot pre-empt code on a thread from
outside. It can from inside, though: a signal handler runs in the main thread between two bytecodes,
and an exception it raises surfaces in whatever that thread was running. `CallDeadline.arm(seconds)`
notes when the current inline call is due (two attribute stores and a clock read: no system call on the
hot path); a watcher thread (the NRI loop watchdog) calls `nudge()` every poll, and once the due time has
passed it sends SIGALRM to the main thread (`pthread_kill`). That interrupts a hook busy in Python code
at its next bytecode and a hook blocked in a system call (a sleep, a read) with EINTR. The handler
raises `HookTimeout` inside the hook; the runner turns it into the hook's failed outcome (and trips the
hook's breaker), the failure policy answers, and the runtime gets its answer inside its deadline. The
interruption comes at most one watcher poll (50 ms) after the due time, and the due time is half the
runtime's request timeout, so the answer is still in time.

Only a hook is ever interrupted: the handler walks the main thread's frames up to `run_stage` and
raises only if `run_stage` is in the middle of calling a hook (its `hook_running` local is set). Hooks
are pure (no I/O, no shared state but memo caches that never cache an exception), so abandoning one
half-way leaves nothing inconsistent. If the signal lands anywhere else (the dispatcher's bookkeeping,
between two hooks), nothing happens and the next poll tries again. A hook blocked inside C code that
holds the GIL is interrupted only when it returns to Python code.

Limits: only on the main thread (where CPython runs signal handlers; the daemon's loop runs there), and
only if nothing else owns SIGALRM. Elsewhere `arm` returns False and only the breaker protects.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

from hookserver.errors import HookTimeout
from hookserver.hooks.runner import run_stage

__all__ = ["CallDeadline"]

log = logging.getLogger(__name__)

_RUN_STAGE = run_stage.__code__


class CallDeadline:
    """One per event loop. Not re-entrant: one inline call at a time (the loop runs one thing at a time).

    Every instance shares one process-wide SIGALRM handler, which acts for the instance armed now.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._armed = False
        self._seconds = 0.0
        self._due = 0.0
        self._main = threading.main_thread().ident
        self.fired = False
        self.interrupts = 0

    @property
    def seconds(self) -> float:
        """The budget of the call armed last."""
        return self._seconds

    @property
    def available(self) -> bool:
        return _install()

    def arm(self, seconds: float) -> bool:
        """Interrupt a hook still running `seconds` from now. False when it cannot here (see module doc)."""
        global _ARMED
        self.fired = False
        if not _STATE["installed"] and (threading.current_thread() is not threading.main_thread() or not _install()):
            return False
        self._seconds = seconds
        self._due = self._clock() + seconds
        self._armed = True
        _ARMED = self
        return True

    def disarm(self) -> None:
        global _ARMED
        self._armed = False
        _ARMED = None

    def nudge(self) -> bool:
        """From the watcher thread: signal the main thread if the armed call is past its due time."""
        if self._armed and self._main is not None and self._clock() >= self._due:
            signal.pthread_kill(self._main, signal.SIGALRM)
            return True
        return False

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
                return
            f = f.f_back


_ARMED: CallDeadline | None = None
_STATE = {"installed": False, "unavailable": ""}


def _install() -> bool:
    """Install the one SIGALRM handler (main thread only, and only if nobody else owns the signal)."""
    if _STATE["installed"]:
        return True
    if _STATE["unavailable"]:
        return False
    if threading.current_thread() is not threading.main_thread():
        return False  # not now; the main thread may still install it
    why = ""
    if not hasattr(signal, "pthread_kill"):
        why = "no pthread_kill on this platform"
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
