"""The GPU collector's inventory reaches the hooks' view: GPUEnvInject names an unhealthy or unknown minor in its
reason through the real dispatcher, and the view (and so the decision memo) is rebuilt only when the GPUs change."""

from __future__ import annotations

import json
from types import MappingProxyType

from hookserver.dispatch import HookDispatcher
from hookserver.hooks.context import ContainerRequest, PodRequest, RequestSource
from hookserver.hooks.plugins.gpu_env import GPUEnvInjectPlugin
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.stages import Stage
from hookserver.koord_devices import ANNOTATION_DEVICE_ALLOCATED
from hookserver.store import StateStore
from hookserver.devices.inventory import GpuInventory

from collectors.gpu import GPU_DEVICES_KEY
from collectors.nvml import GpuDevice


def _gpu(minor: int, *, healthy: bool = True, reason: str = "") -> GpuDevice:
    return GpuDevice(index=minor, uuid=f"GPU-{minor}", name="NVIDIA H200", minor=minor,
                     memory_total_bytes=141 << 30, bus_id=f"0000:{minor:02x}:00.0", healthy=healthy,
                     unhealthy_reason=reason)


def _request(minors: list[int]) -> ContainerRequest:
    alloc = {"gpu": [{"minor": m, "resources": {"koordinator.sh/gpu-memory-ratio": 100}} for m in minors]}
    pod = PodRequest("default", "train", "uid-7", annotations=MappingProxyType(
        {ANNOTATION_DEVICE_ALLOCATED: json.dumps(alloc)}), source=RequestSource.NRI)
    return ContainerRequest(pod, "main", container_id="c1", source=RequestSource.NRI)


def test_the_inventory_is_the_same_object_until_the_gpus_change() -> None:
    store = StateStore()
    inventory = GpuInventory(store)
    assert not inventory.refresh() and inventory.current is None  # no GPU collector: nothing known
    store.series.put_static(GPU_DEVICES_KEY, (_gpu(0), _gpu(1)))
    assert inventory.refresh()
    first = inventory.current
    assert first is not None and sorted(first) == [0, 1] and first[1].uuid == "GPU-1"
    store.series.put_static(GPU_DEVICES_KEY, (_gpu(0), _gpu(1)))  # a new tuple, the same GPUs (every cycle)
    assert not inventory.refresh() and inventory.current is first
    store.series.put_static(GPU_DEVICES_KEY, (_gpu(0), _gpu(1, healthy=False, reason="Xid 79")))
    assert inventory.refresh()
    assert inventory.current is not first and inventory.current is not None
    assert (inventory.current[1].healthy, inventory.current[1].reason) == (False, "Xid 79")


def test_gpu_env_inject_names_an_unhealthy_and_an_unknown_minor_through_the_dispatcher() -> None:
    store = StateStore()
    inventory = GpuInventory(store)
    store.series.put_static(GPU_DEVICES_KEY, (_gpu(0), _gpu(1)))
    inventory.refresh()
    dispatcher = HookDispatcher(registry=HookRegistry([GPUEnvInjectPlugin(enabled=True)]), store=store,
                                executor=None, gpus=inventory)

    healthy = dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, _request([1, 0]), door="nri", rpc="Create")
    assert dict(healthy.envs) == {"NVIDIA_VISIBLE_DEVICES": "1,0"}
    assert healthy.outcome is not None and "warning" not in healthy.outcome.outcomes[0].result.reason  # type: ignore[union-attr]

    store.series.put_static(GPU_DEVICES_KEY, (_gpu(0), _gpu(1, healthy=False, reason="Xid 79")))
    inventory.refresh()
    sick = dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, _request([1, 5]), door="nri", rpc="Create")
    # The allocation is koord-scheduler's: injected as allocated, and the audit says what is wrong with it.
    assert dict(sick.envs) == {"NVIDIA_VISIBLE_DEVICES": "1,5"}
    assert sick.outcome is not None
    reason = sick.outcome.outcomes[0].result.reason  # type: ignore[union-attr]
    assert "minor 1 (GPU-1) is unhealthy: Xid 79" in reason and "minor 5 is not a GPU of this node" in reason
