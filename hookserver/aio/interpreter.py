"""Interpreter settings that keep the NRI hot path's answer time independent of the agent's other work.

The hot path (CreateContainer, UpdateContainer) runs inline on the event loop, and everything else that
is busy on a 500-pod node (the collectors' thread, QoS rounds, predictor training and checkpoints, the
reconciler and capacity ticks on `asyncio.to_thread`, the proxy's gRPC threads) runs on other threads of
the same interpreter. They share one GIL. A thread that wants the GIL waits until the holder drops it,
and a busy holder drops it only when the *switch interval* has passed (CPython's default: 5 ms). So
every time the loop thread wakes up for a request (its select() released the GIL) while a background
thread is computing, it may wait up to that long before it can read the frame, and once more for each
release inside the call. Measured side by side (`python -m tests.bench nri_busy`, idle vs busy daemon,
500 pods on real cgroup v1): the busy agent's CreateContainer p99 was 2-10x the idle one's and its
throughput 0.3-0.9x; its slowest 1 % of calls overlapped a collector cycle, a QoS round or a reconciler
pass 2-15x as often as calls in general, and a GC pause over 1 ms (mostly generation 1) in 6-24 % of them.

A shorter interval bounds that wait: the loop gets the GIL within about one interval of asking for it,
at the cost of more switches among the background threads. Whether that helps depends on the CPUs: on the
shared 2-CPU reference VM (load 6-12 from other work) two A/B runs of the same code, 5 ms vs 0.5 ms in the
same rounds, disagreed (busy/idle p99 1.5x vs 7.0x in one, 9.7x vs 2.4x in the other; throughput 0.88 vs
0.32, then 0.39 vs 0.43): a thread that has been handed the GIL still waits for a CPU. So the interval is
a setting, `hook.switch_interval_ms`, set when the daemon starts serving and restored when it stops;
`HOOKSERVER_BENCH_BEFORE=. HOOKSERVER_BENCH_BEFORE_OVERRIDES='{"hook": {"switch_interval_ms": 5}}' python -m
tests.bench nri_busy` compares two values on a node. Its default was CPython's 5 ms until, with the hot gate and
the GC pacer in place, 1 ms measured better in every A/B of 2026-11-26 (same code, same rounds): the busy daemon's
CreateContainer p99 2-15 % lower in four runs on the 2-CPU VM, its p99.9 up to 30 % lower and its throughput
4-11 % higher; the busy/idle p99 1.25 against 1.77 in one run on a 16-CPU host; and CreateContainer right after a
500-2,500-pod sync at most 3.0-3.4 ms against 6.3-9.5 ms. Its cost, the whole process's CPU over the same rounds
(three runs): the busy daemon's moved -5 % to +11 % (11.3-14.3 s), the idle daemon's rose 5-10 % (0.13-0.24 s).

Lowering the background threads' CPU priority (nice) was measured too and left out: a niced thread that
holds the GIL is the one the kernel preempts when the CPUs are contended, and the loop then waits for the
GIL for as long as that thread waits for a CPU (in the one run with it, nice +5 and the 0.5 ms interval, the
busy daemon's GC pauses timed in wall time came to 2.8 s against 0.7 s for the code before it in the same
rounds, and its CreateContainer p99 to 2.3 against 0.5 ms).

What made the busy agent's numbers match the idle one's was not the interval but taking the background's
turns away while hooks are answered (`hotgate.py`) and collecting the older GC generations off the hot path
(`gcpacer.py`). The interval now bounds only the wait of a call that arrives while a background thread is
between two of its pause points.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

__all__ = ["InterpreterTuning", "apply_tuning"]

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

