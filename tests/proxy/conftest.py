"""A real RuntimeHookService server on a unix socket in tmp_path, with the real dispatcher and store."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from hookserver.hooks.settings import HookServerSettings
from hookserver.dispatch import HookDispatcher
from hookserver.hooks import FailurePolicy, HookRegistry
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.proxy import ProxyServer
from hookserver.store import StateStore
from tests.reference_example import BE_LABELS, SPEC_KEY, WORKED_SPEC_JSON, PlanRecorder  # noqa: F401 - re-exported to the proxy tests


@dataclass
class Harness:
    server: ProxyServer
    store: StateStore
    executor: PlanRecorder
    dispatcher: HookDispatcher
    channel: grpc.Channel
    stub: pb_grpc.RuntimeHookServiceStub
    settings: HookServerSettings


def short_dir(tmp_path: Path) -> Path:
    """tmp_path unless a socket path in it would pass the 107-byte sun_path limit."""
    if len(str(tmp_path)) < 90:
        return tmp_path
    return Path(tempfile.mkdtemp(prefix="hs-proxy-", dir="/tmp"))


def hook_settings(tmp_path: Path, **overrides: object) -> HookServerSettings:
    base = short_dir(tmp_path)
    values: dict[str, object] = {
        "socket": str(base / "h.sock"),
        "registration_dir": str(base / "hookserver.d"),
        "registration_name": "hookserver",
        "max_workers": 4,
    }
    values.update(overrides)
    return HookServerSettings.model_validate(values)


def build(tmp_path: Path, policy: FailurePolicy = FailurePolicy.IGNORE, **overrides: object) -> Harness:
    settings = hook_settings(tmp_path, **{"failure_policy": policy.value, **overrides})
    store = StateStore()
    executor = PlanRecorder()
    registry = HookRegistry([BatchResourcePlugin()])
    dispatcher = HookDispatcher(registry=registry, store=store, executor=executor, policy=policy)
    server = ProxyServer(settings, dispatcher=dispatcher, registry=registry, max_message_bytes=64 * 1024)
    server.start()
    channel = grpc.insecure_channel(server.address)
    return Harness(server, store, executor, dispatcher, channel, pb_grpc.RuntimeHookServiceStub(channel), settings)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = build(tmp_path)
    yield h
    h.channel.close()
    h.server.stop(grace_s=0.5)


@pytest.fixture
def failing(tmp_path: Path) -> Iterator[Harness]:
    h = build(tmp_path, FailurePolicy.FAIL)
    yield h
    h.channel.close()
    h.server.stop(grace_s=0.5)


def pod_request(
    labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **meta: str
) -> pb.PodSandboxHookRequest:
    req = pb.PodSandboxHookRequest(
        pod_meta=pb.PodSandboxMetadata(
            name=meta.get("name", "be-pod"), uid=meta.get("uid", "uid-1"), namespace="default", attempt=1
        ),
        runtime_handler="runc",
        cgroup_parent="/kubepods/besteffort/poduid-1",
    )
    req.labels.update(BE_LABELS if labels is None else labels)
    req.annotations.update({SPEC_KEY: WORKED_SPEC_JSON} if annotations is None else annotations)
    return req


def container_request(
    name: str = "a", labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> pb.ContainerResourceHookRequest:
    req = pb.ContainerResourceHookRequest(
        pod_meta=pb.PodSandboxMetadata(name="be-pod", uid="uid-1", namespace="default"),
        container_meta=pb.ContainerMetadata(name=name, attempt=0),
        container_resources=pb.LinuxContainerResources(
            cpu_period=100000, cpu_shares=2, oom_score_adj=1000, cpuset_cpus="0-3", cpuset_mems="0",
            hugepage_limits=[pb.HugepageLimit(page_size="2MB", limit=0)], unified={"memory.high": "max"},
            memory_swap_limit_in_bytes=7,
        ),
        pod_cgroup_parent="/kubepods/besteffort/poduid-1",
    )
    req.container_annotations["io.kubernetes.container.name"] = name
    req.container_envs["PATH"] = "/usr/bin"
    req.pod_labels.update(BE_LABELS if labels is None else labels)
    req.pod_annotations.update({SPEC_KEY: WORKED_SPEC_JSON} if annotations is None else annotations)
    return req
