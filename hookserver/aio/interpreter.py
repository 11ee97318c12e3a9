"""Interpreter settings that keep the NRI hot path's answer time independent of the agent's other work.

The hot path (CreateContainer, UpdateContainer) runs inline on the event loop, and everything else that
is busy on a 500-pod node (the collectors' thread, QoS rounds, predictor training and checkpoints, the
reconciler and capacity ticks on `asyncio.to_thread`, the proxy's gRPC threads) runs on other threads of
the same interpreter. They share one GIL. A thread that wants the GIL waits until the holder drops it,
and a busy holder drops it only when the *switch interval* has passed (CPython's default: 5 ms). So
every time the loop thread wakes up for a request (its select() released the GIL) while a background
thread is computing, it waited up to 5 ms before it could read the frame, and once more for each
release inside the call. Measured side by side (`python -m tests.bench nri_busy`, idle vs busy daemon,
500 pods on real cgroup v1): with 5 ms the busy agent's CreateContainer p99 was ~14x the idle one's and
its throughput 0.4x; the slow calls overlapped a collector cycle or a QoS round 4x as often as calls
in general, and none overlapped a GC pause over 1 ms.

A shorter interval bounds that wait by itself: the loop gets the GIL within about one interval of asking
for it. The cost is more switches among the background threads (each ~a microsecond), which do not wait
for anything. The interval is `hook.switch_interval_ms` (default 0.5 ms), set once when the daemon
starts serving and restored when it stops.

The GIL is half of it; the CPU is the other. When the node's CPUs are busy, a runnable background thread
and the loop thread queue for the same CPU, and the kernel shares it fairly. Background threads (the
collectors' worker, and the loop's default executor behind every `asyncio.to_thread`: QoS, predictor,
capacity, reconciler, informer polls) lower their own scheduling priority when they start
(`background_thread_setup`, `hook.background_nice`, default +5), so the loop thread and the proxy's gRPC
threads, which keep the default, win the CPU when they wake up for a call. A niced thread that holds the
GIL is not starved by the thread waiting for it: that one sleeps until the GIL is handed over.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["InterpreterTuning", "apply_tuning", "background_thread_setup"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class InterpreterTuning:
    """What `apply_tuning` set and what it replaced (for `restore` and `hookctl status`)."""

    switch_interval_s: float
    previous_switch_interval_s: float

    def restore(self) -> None:
        sys.setswitchinterval(self.previous_switch_interval_s)

    def status(self) -> dict[str, float]:
        return {
            "switch_interval_ms": round(self.switch_interval_s * 1000, 3),
            "default_switch_interval_ms": round(self.previous_switch_interval_s * 1000, 3),
        }


def apply_tuning(*, switch_interval_s: float) -> InterpreterTuning:
    """Set the GIL switch interval for the hot path (see the module doc); returns how to undo it."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval_s)
    applied = sys.getswitchinterval()
    log.info("interpreter: GIL switch interval %.3f ms (was %.3f ms), so the event loop's hot path waits at most "
             "about that long for a busy background thread", applied * 1000, previous * 1000)
    return InterpreterTuning(switch_interval_s=applied, previous_switch_interval_s=previous)


def background_thread_setup(nice: int) -> Callable[[], None]:
    """A thread initializer that raises the calling thread's nice value by `nice` (Linux: per thread). A
    refusal (no permission, no such call) is logged once per thread at DEBUG and changes nothing."""

    def lower_priority() -> None:
        if nice <= 0:
            return
        tid = threading.get_native_id()
        try:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
        except (OSError, AttributeError) as exc:
            log.debug("interpreter: thread %s keeps its priority: %s", threading.current_thread().name, exc)

    return lower_priority
