"""The hot path's process tuning, set once everything is built and undone at shutdown: the start-up heap
frozen, GC pauses watched, the GIL switch interval, the heap reserve, the hot gate (background threads step
aside while hooks are answered) and the GC pacer (collections wait for a quiet moment). The event loop's
thread serves NRI: it is exempt from the gate and never pauses itself.
"""

from __future__ import annotations

import gc

from hookserver.aio.gcpacer import GcPacer
from hookserver.aio.heapreserve import HeapReserve, reserve_heap
from hookserver.aio.hotgate import GATE
from hookserver.aio.interpreter import InterpreterTuning, apply_tuning
from hookserver.hooks.settings import HookServerSettings
from hookserver.observability.gcpauses import GcPauses, freeze_startup_heap

__all__ = ["HotPathRuntime"]


class HotPathRuntime:
    """`start()` on the event loop's thread (the heap reserve and the gate's exemption are per thread)."""

    def __init__(self, hook: HookServerSettings, gc_pauses: GcPauses) -> None:
        self.hook = hook
        self.gc_pauses = gc_pauses
        self.interpreter: InterpreterTuning | None = None
        self.heap_reserve: HeapReserve | None = None
        self.gc_pacer: GcPacer | None = None

    def start(self) -> None:
        hook = self.hook
        # Everything imported and built: keep full collections off the start-up heap (gcpauses.py). The
        # freeze's own collection is logged, not counted: the metrics show the pauses of a running agent.
        freeze_startup_heap()
        self.gc_pauses.attach()
        # The hot path shares the GIL with every background thread: bound how long it waits for one.
        self.interpreter = apply_tuning(switch_interval_s=hook.switch_interval_ms / 1000)
        # On the loop's thread, whose heap takes every NRI frame: a sync is read and decoded without faults.
        self.heap_reserve = reserve_heap(hook.heap_reserve_mib << 20)
        # Background threads step aside while hooks are answered, and collections wait for a quiet moment
        # (hookserver/aio/hotgate.py, gcpacer.py).
        GATE.configure(enabled=hook.background_yield, linger_s=hook.yield_linger_ms / 1000,
                       max_defer_s=hook.yield_max_defer_ms / 1000)
        GATE.exempt_current_thread()
        if hook.gc_pace_ms > 0:
            self.gc_pacer = GcPacer(interval_s=hook.gc_pace_ms / 1000, young=hook.gc_pace_young,
                                    quiet_wait_s=hook.gc_quiet_wait_ms / 1000,
                                    freeze_survivors=hook.gc_freeze_survivors,
                                    deep_every_s=hook.gc_deep_every_s)
            self.gc_pacer.start()

    def stop(self) -> None:
        self.gc_pauses.detach()
        if self.gc_pacer is not None:
            self.gc_pacer.stop()
        GATE.configure(enabled=False, linger_s=GATE.linger_s, max_defer_s=GATE.max_defer_s)
        if self.interpreter is not None:
            self.interpreter.restore()

    @staticmethod
    def release_heap() -> None:
        """A process that goes on (tests, an embedding) collects the frozen heap again."""
        gc.unfreeze()
