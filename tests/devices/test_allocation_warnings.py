"""A GPU allocation that names a device the node lacks, or a sick one, becomes one Event on the pod: from the real
dispatcher's audit, through the informer's Event writer, to the apiserver (the HTTP fake), once per pod and
problem, retried when the apiserver refused it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import pytest

from collectors.gpu import GPU_DEVICES_KEY
from collectors.nvml import GpuDevice
from hookserver.devices.allocation_warnings import EVENT_REASON, AllocationWarnings, LogEventSink
from hookserver.dispatch import HookDispatcher
from hookserver.hooks.context import ContainerRequest, PodRequest, RequestSource
from hookserver.hooks.plugins.gpu_env import GPUEnvInjectPlugin
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.stages import Stage
from hookserver.informer.pod_events import PodEventWriter
from hookserver.informer.transport import ApiClientTransport, load_client_configuration
from hookserver.koord_devices import ANNOTATION_DEVICE_ALLOCATED
from hookserver.store import StateStore
from hookserver.devices.inventory import GpuInventory
from tests.informer.fake_apiserver import FakeApiServer


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer(token="t0ken").start()
    try:
        yield server
    finally:
        server.kill()


def _gpu(minor: int, healthy: bool = True) -> GpuDevice:
    return GpuDevice(index=minor, uuid=f"GPU-{minor}", name="NVIDIA H200", minor=minor, memory_total_bytes=1 << 30,
                     bus_id=f"0000:{minor:02x}:00.0", healthy=healthy, unhealthy_reason="" if healthy else "Xid 79")


def _create(dispatcher: HookDispatcher, name: str, minors: list[int], container: str = "main") -> None:
    alloc = {"gpu": [{"minor": m, "resources": {"koordinator.sh/gpu-memory-ratio": 100}} for m in minors]}
    pod = PodRequest("ml", name, f"uid-{name}", annotations=MappingProxyType(
        {ANNOTATION_DEVICE_ALLOCATED: json.dumps(alloc)}), source=RequestSource.NRI)
    dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod, container, source=RequestSource.NRI),
                                  door="nri", rpc="CreateContainer")


def _node(store: StateStore) -> HookDispatcher:
    store.series.put_static(GPU_DEVICES_KEY, (_gpu(0), _gpu(1, healthy=False)))
    inventory = GpuInventory(store)
    inventory.refresh()
    return HookDispatcher(registry=HookRegistry([GPUEnvInjectPlugin()]), store=store, executor=None, gpus=inventory)


def test_one_event_per_pod_and_problem_on_the_apiserver(fake: FakeApiServer, tmp_path: Path) -> None:
    store = StateStore()
    dispatcher = _node(store)
    transport = ApiClientTransport(load_client_configuration(fake.kubeconfig(str(tmp_path / "kc"))))
    warnings = AllocationWarnings(store, PodEventWriter(transport, node_name="gpu-node", timeout_s=5))
    _create(dispatcher, "fine", [0])
    _create(dispatcher, "sick", [1, 0])
    _create(dispatcher, "sick", [1, 0], container="sidecar")  # the same pod and problem: no second Event
    _create(dispatcher, "ghost", [7])
    assert warnings.tick() == 2
    events = {e["involvedObject"]["name"]: e for e in fake.events}
    assert sorted(events) == ["ghost", "sick"]
    sick = events["sick"]
    assert (sick["reason"], sick["type"], sick["involvedObject"]["uid"]) == (EVENT_REASON, "Warning", "uid-sick")
    assert "minor 1 (GPU-1) is unhealthy: Xid 79" in sick["message"]
    assert sick["source"] == {"component": "hookserver", "host": "gpu-node"}
    assert "minor 7 is not a GPU of this node" in events["ghost"]["message"]
    _create(dispatcher, "sick", [1, 0])  # a later container of the same pod, same problem
    assert warnings.tick() == 0 and len(fake.events) == 2


class _Refusing(LogEventSink):
    def __init__(self) -> None:
        self.calls = 0

    def post(self, **kwargs: str) -> bool:  # type: ignore[override]
        self.calls += 1
        return self.calls > 1  # the apiserver refuses the first one


def test_a_refused_event_is_posted_again_at_the_next_tick() -> None:
    store = StateStore()
    dispatcher = _node(store)
    sink = _Refusing()
    warnings = AllocationWarnings(store, sink)
    _create(dispatcher, "ghost", [7])
    assert warnings.tick() == 0 and warnings.failed == 1
    assert warnings.tick() == 1 and sink.calls == 2
    assert warnings.tick() == 0 and sink.calls == 2
