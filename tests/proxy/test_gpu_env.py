"""GPU env injection through the proxy's real gRPC server: envs in container_envs, the mounts explained."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from hookserver.dispatch import HookDispatcher
from hookserver.hooks import FailurePolicy, HookRegistry
from hookserver.hooks.plugins.gpu_env import GPUEnvInjectPlugin
from hookserver.koord_devices import ANNOTATION_DEVICE_ALLOCATED
from hookserver.proxy import ProxyServer
from hookserver.store import StateStore
from tests.proxy.conftest import container_request, hook_settings
from tests.reference_example import PlanRecorder

ALLOC = {"gpu": [{"minor": 7, "resources": {"koordinator.sh/gpu-core": 25, "koordinator.sh/gpu-memory-ratio": 25,
                                            "koordinator.sh/gpu-memory": "2Gi"}}]}
HAMI = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}


@pytest.fixture
def gpu_proxy(tmp_path: Path) -> Iterator[tuple[pb_grpc.RuntimeHookServiceStub, StateStore]]:
    store = StateStore()
    registry = HookRegistry([GPUEnvInjectPlugin()])  # type: ignore[list-item]
    dispatcher = HookDispatcher(registry=registry, store=store, executor=PlanRecorder(), policy=FailurePolicy.FAIL)
    server = ProxyServer(hook_settings(tmp_path), dispatcher=dispatcher, registry=registry)
    server.start()
    channel = grpc.insecure_channel(server.address)
    try:
        yield pb_grpc.RuntimeHookServiceStub(channel), store
    finally:
        channel.close()
        server.stop(grace_s=0.5)


def test_response_carries_the_envs_and_the_audit_explains_the_mounts(
    gpu_proxy: tuple[pb_grpc.RuntimeHookServiceStub, StateStore],
) -> None:
    stub, store = gpu_proxy
    req = container_request("cuda", labels=HAMI, annotations={ANNOTATION_DEVICE_ALLOCATED: json.dumps(ALLOC)})
    resp = stub.PreCreateContainerHook(req, timeout=5)
    assert dict(resp.container_envs) == {
        "PATH": "/usr/bin",  # the request's own env is echoed
        "NVIDIA_VISIBLE_DEVICES": "7",
        "CUDA_DEVICE_MEMORY_LIMIT": str(2 * 1024**3),
        "CUDA_DEVICE_SM_LIMIT": "25",
        "LD_PRELOAD": "/usr/local/vgpu/libvgpu.so",
    }
    decision = [d for d in store.audit.decisions() if d.plugin == "GPUEnvInject"][-1]
    assert "mounts not carried by the proxy door" in decision.reason


def test_malformed_annotation_passes_even_under_fail(
    gpu_proxy: tuple[pb_grpc.RuntimeHookServiceStub, StateStore],
) -> None:
    stub, store = gpu_proxy
    req = container_request("cuda", labels=HAMI, annotations={ANNOTATION_DEVICE_ALLOCATED: "{not json"})
    resp = stub.PreCreateContainerHook(req, timeout=5)  # no error status: the container is created
    assert dict(resp.container_envs) == {"PATH": "/usr/bin"}
    decision = [d for d in store.audit.decisions() if d.plugin == "GPUEnvInject"][-1]
    assert decision.reason.startswith("error: ") and "not JSON" in decision.reason
