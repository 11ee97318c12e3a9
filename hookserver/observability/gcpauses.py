"""Garbage-collector pauses: the startup heap frozen out of full collections, and every pause measured.

A full collection walks every tracked object while it holds the GIL, so it pauses the event loop (the NRI
hot path), the gRPC threads and the collectors alike. Built, the daemon holds ~65,000 tracked objects
(modules, protobuf descriptors, pydantic and kubernetes-client classes), and a full collection of them took
35-42 ms on the reference VM, longer than a whole collector cycle, and it lands wherever the allocation
count happens to cross the threshold: inside a hook, too. Those objects live as long as the process, so
after start-up they are moved to the permanent generation (`gc.freeze()`): full collections then walk only
what was allocated since (`make bench`, gc rows, measures both side by side).

`GcPauses` times every collection through `gc.callbacks` and exports the totals with a collector that
implements only `collect()`, so an operator can see whether GC pauses are what their p99 is made of.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["GcPauses", "freeze_startup_heap"]

log = logging.getLogger(__name__)

_GENERATIONS = (0, 1, 2)


def freeze_startup_heap() -> tuple[int, float]:
    """Collect what start-up left as garbage, then freeze what is alive. Returns (objects frozen in all,
    seconds the collection took). Objects allocated later are collected as usual."""
    started = time.perf_counter()
    gc.collect()
    took = time.perf_counter() - started
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("gc: froze the start-up heap (%d objects) out of full collections; the last full one took %.1f ms",
             frozen, took * 1000)
    return frozen, took


class GcPauses(Collector):
    """Counts and times collections per generation. `attach()` once; `detach()` on shutdown."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        # Reentrant: a reader (`status`, a /metrics scrape) allocates while holding it, which can start a
        # collection on its own thread, whose callback takes it again. With a plain Lock that thread waited on
        # itself forever: `hookctl status` hung, and so did SIGTERM (found by `make test` beside `make soak`).
        self._lock = threading.RLock()
        self._started: float | None = None
        self.collections = [0, 0, 0]
        self.pause_s = [0.0, 0.0, 0.0]
        self.max_pause_s = [0.0, 0.0, 0.0]
        self.collected = [0, 0, 0]
        self._attached = False

    # -- gc.callbacks -------------------------------------------------------------------------------
    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        # Collections run with the GIL held, one at a time: start and stop pair up on whichever thread
        # triggered them. The lock only guards the readers' copy.
        if phase == "start":
            self._started = self._clock()
            return
        started = self._started
        if started is None:
            return  # attached in the middle of a collection
        self._started = None
        took = self._clock() - started
        generation = info.get("generation", 2)
        if generation not in _GENERATIONS:
            return
        with self._lock:
            self.collections[generation] += 1
            self.pause_s[generation] += took
            if took > self.max_pause_s[generation]:
                self.max_pause_s[generation] = took
            self.collected[generation] += info.get("collected", 0)

    def attach(self) -> GcPauses:
        if not self._attached:
            gc.callbacks.append(self._on_gc)
            self._attached = True
        return self

    def detach(self) -> None:
        if self._attached:
            try:
                gc.callbacks.remove(self._on_gc)
            except ValueError:
                pass  # someone cleared gc.callbacks
            self._attached = False

    def register(self, registry: CollectorRegistry) -> GcPauses:
        registry.register(self)
        return self

    # -- readers ------------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """For `hookctl status`: per generation, and what is frozen."""
        with self._lock:
            per = {
                str(g): {
                    "collections": self.collections[g],
                    "pause_ms_total": round(self.pause_s[g] * 1000, 3),
                    "pause_ms_max": round(self.max_pause_s[g] * 1000, 3),
                }
                for g in _GENERATIONS
            }
        return {"frozen_objects": gc.get_freeze_count(), "generations": per}

    def collect(self) -> Iterator[Any]:
        with self._lock:
            collections, pause, worst = list(self.collections), list(self.pause_s), list(self.max_pause_s)
        count = CounterMetricFamily(
            "hookserver_gc_collections", "Garbage collections by generation (2: full).", labels=["generation"]
        )
        seconds = CounterMetricFamily(
            "hookserver_gc_pause_seconds", "Time spent in garbage collections (every thread waits), by generation.",
            labels=["generation"],
        )
        longest = GaugeMetricFamily(
            "hookserver_gc_pause_max_seconds", "The longest single collection so far, by generation.",
            labels=["generation"],
        )
        for g in _GENERATIONS:
            count.add_metric([str(g)], collections[g])
            seconds.add_metric([str(g)], pause[g])
            longest.add_metric([str(g)], worst[g])
        yield count
        yield seconds
        yield longest
        yield GaugeMetricFamily(
            "hookserver_gc_frozen_objects",
            "Objects frozen out of collections (gc.freeze): the start-up heap and survivors of paced full ones.",
            value=gc.get_freeze_count(),
        )
