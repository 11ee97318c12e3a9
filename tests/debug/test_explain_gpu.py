"""`hookctl explain` shows what the GPU/RDMA hooks injected (env, mounts, devices) and where it came from."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

from hookserver.debug import DebugServer
from hookserver.dispatch import HookDispatcher
from hookserver.hooks.context import ContainerRequest, PodRequest, RequestSource
from hookserver.hooks.plugins.gpu_env import GPUEnvInjectPlugin
from hookserver.hooks.plugins.rdma_inject import RDMADeviceInjectPlugin
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.stages import Stage
from hookserver.koord_devices import ANNOTATION_DEVICE_ALLOCATED
from hookserver.store.state import StateStore
from hookserver.system.rdma import CharDevice, RdmaDevices

ALLOC = json.dumps({
    "gpu": [{"minor": 3, "resources": {"koordinator.sh/gpu-core": 20, "koordinator.sh/gpu-memory-ratio": 20,
                                       "koordinator.sh/gpu-memory": "1Gi"}}],
    "rdma": [{"minor": 0, "id": "0000:09:00.0"}],
})


def test_explain_lists_injected_env_mounts_devices_and_their_source(tmp_path: Path, ctl: Any) -> None:
    store = StateStore()
    table = RdmaDevices(CharDevice("/dev/infiniband/rdma_cm", 10, 58),
                        MappingProxyType({"0000:09:00.0": CharDevice("/dev/infiniband/uverbs0", 231, 192)}))
    registry = HookRegistry([GPUEnvInjectPlugin(), RDMADeviceInjectPlugin(devices=table)])  # type: ignore[list-item]
    dispatcher = HookDispatcher(registry=registry, store=store, executor=None)
    pod = PodRequest("ml", "infer", "uid-x", labels={"koordinator.sh/gpu-isolation-provider": "HAMi-core"},
                     annotations={ANNOTATION_DEVICE_ALLOCATED: ALLOC}, source=RequestSource.NRI)
    dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod, "server", container_id="c1",
                                  source=RequestSource.NRI), door="nri", rpc="CreateContainer")
    server = DebugServer(str(tmp_path / "d.sock"), store=store)
    server.start()
    try:
        doc = ctl("--socket", server.socket_path, "explain", "ml/infer", "-o", "json").json()
        hooks = {h["plugin"]: h for g in doc["decisions"] for h in g["hooks"]}
        gpu = hooks["GPUEnvInject"]
        assert gpu["applied"] and gpu["values"] == {
            "env:NVIDIA_VISIBLE_DEVICES": "3",
            "env:CUDA_DEVICE_MEMORY_LIMIT": str(1 << 30),
            "env:CUDA_DEVICE_SM_LIMIT": "20",
            "env:LD_PRELOAD": "/usr/local/vgpu/libvgpu.so",
            "mount:/usr/local/vgpu/libvgpu.so": "/usr/local/vgpu/libvgpu.so (bind, rbind)",
            "mount:/tmp/vgpulock": "/tmp/vgpulock (bind, rbind)",
        }
        assert gpu["inputs"]["device-allocated"] == ALLOC  # the source
        assert "from scheduling.koordinator.sh/device-allocated" in gpu["reason"]
        assert "set at container creation" in gpu["reason"] and "recreated" in gpu["reason"]
        assert hooks["RDMADeviceInject"]["values"] == {
            "device:/dev/infiniband/rdma_cm": "c 10:58 0666", "device:/dev/infiniband/uverbs0": "c 231:192 0666",
        }
        text = ctl("--socket", server.socket_path, "explain", "ml/infer").out
        assert "env:NVIDIA_VISIBLE_DEVICES: 3" in text and "plugin: GPUEnvInject" in text
    finally:
        server.stop(0.1)
