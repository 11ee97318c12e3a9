"""Both hook doors mark the time they answer at the hot gate: the NRI mux while it handles a frame (on the
event loop), the proxy while a gRPC handler runs; and the gate's counters reach /metrics. (The daemon's part,
on while serving and off after, is in test_interpreter.py.)"""

from __future__ import annotations

import asyncio

from hookserver.aio.hotgate import GATE
from hookserver.executor.plan import ApplyReport, ResourcePlan
from hookserver.nri.mux import MUX_HEADER, Multiplexer
from tests.proxy.conftest import Harness, harness, pod_request  # noqa: F401 - harness is a fixture


def test_the_nri_door_is_in_flight_while_a_frame_is_handled_and_not_after() -> None:
    seen: list[int] = []
    before = GATE.door("nri", threadsafe=False).calls

    async def feed() -> None:
        mux = Multiplexer()
        mux.open(1, lambda payload: seen.append(GATE.door("nri", threadsafe=False).in_flight))
        mux.data_received(MUX_HEADER.pack(1, 3) + b"abc" + MUX_HEADER.pack(1, 2) + b"de")

    asyncio.run(feed())
    assert seen == [1, 1]
    door = GATE.door("nri", threadsafe=False)
    assert door.in_flight == 0
    assert door.calls == before + 1


def test_the_nri_door_is_left_even_when_the_frame_breaks_the_connection() -> None:
    async def feed() -> None:
        mux = Multiplexer(max_frame=16)
        mux.open(1, lambda payload: None)
        mux.data_received(MUX_HEADER.pack(1, 1 << 20))  # over the limit: the connection ends

    asyncio.run(feed())
    assert GATE.door("nri", threadsafe=False).in_flight == 0


def test_the_proxy_door_is_in_flight_while_its_handler_runs(harness: Harness) -> None:
    seen: list[int] = []
    record = harness.executor.apply

    def apply(plan: ResourcePlan) -> ApplyReport:
        seen.append(GATE.door("proxy", threadsafe=True).in_flight)
        return record(plan)

    harness.executor.apply = apply  # type: ignore[method-assign]
    harness.stub.PreRunPodSandboxHook(pod_request(), timeout=5)
    assert seen == [1]
    assert GATE.door("proxy", threadsafe=True).in_flight == 0


def test_the_gate_counters_are_exported_for_prometheus() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from hookserver.aio.hotgate import HotGate
    from hookserver.observability.hotgate_metrics import HotGateMetrics

    gate = HotGate(poll_s=0.001)
    gate.configure(enabled=True, linger_s=0.0, max_defer_s=0.005)
    door = gate.door("nri", threadsafe=False)
    door.enter()
    gate.pause()  # the call never ends: the bound is reached
    door.leave()
    registry = CollectorRegistry()
    HotGateMetrics(gate).register(registry)
    text = generate_latest(registry).decode()
    assert "hookserver_hot_gate_pauses_total 1.0" in text
    assert "hookserver_hot_gate_bound_reached_total 1.0" in text
    assert 'hookserver_hot_gate_door_calls_total{door="nri"} 1.0' in text
    paused = next(line for line in text.splitlines() if line.startswith("hookserver_hot_gate_paused_seconds_total"))
    assert float(paused.split()[-1]) >= 0.005
