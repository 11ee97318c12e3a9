"""The hot gate's counters as Prometheus metrics (`hookserver.aio.hotgate`): how often background work
stepped aside for hooks, for how long, and how often a stream of hooks was long enough that it went on anyway.

A collector that implements only `collect()`, reading the process's gate when scraped: the gate's counters
are plain integers written by the threads that pause, and a scrape needs no lock to read them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from hookserver.aio.hotgate import GATE, HotGate

__all__ = ["HotGateMetrics"]


class HotGateMetrics(Collector):
    def __init__(self, gate: HotGate = GATE) -> None:
        self._gate = gate

    def register(self, registry: CollectorRegistry) -> HotGateMetrics:
        registry.register(self)
        return self

    def collect(self) -> Iterator[Any]:
        gate = self._gate
        yield CounterMetricFamily(
            "hookserver_hot_gate_pauses", "Times a background loop stepped aside because a hook was being answered.",
            value=gate.pauses,
        )
        yield CounterMetricFamily(
            "hookserver_hot_gate_paused_seconds", "Time background loops spent stepped aside for hooks.",
            value=gate.paused_s,
        )
        yield CounterMetricFamily(
            "hookserver_hot_gate_bound_reached",
            "Times a stream of hooks outlasted hook.yield_max_defer_ms and background work went on anyway.",
            value=gate.bound_reached,
        )
        calls = CounterMetricFamily(
            "hookserver_hot_gate_door_calls", "Frames (NRI) and rpcs (proxy) each door marked at the gate.",
            labels=["door"],
        )
        for name, door in sorted(gate.doors.items()):
            calls.add_metric([name], door.calls)
        yield calls
