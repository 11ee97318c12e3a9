"""A minimal CRI client: what the kubelet would ask containerd, for the containerd tier's tests.

Debian packages no CRI client (no crictl), and the kube-e2e harness's kubelet runs against its own containerd
1.6, which has no NRI. So the tests that need containerd's NRI door talk CRI themselves: `cri_subset.proto`
(written from the CRI's field tables) is compiled once per process with grpcio-tools, and the calls go through
grpc's generic unary stubs on the `runtime.v1.RuntimeService` method paths.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc

_PROTO = Path(__file__).with_name("cri_subset.proto")
_SERVICE = "/runtime.v1.RuntimeService/"
_lock = threading.Lock()
_module: ModuleType | None = None

# CRI NamespaceMode values.
NAMESPACE_POD = 0
NAMESPACE_NODE = 2


def compile_cri_proto(out: Path) -> Path:
    """protoc (grpcio-tools) on `cri_subset.proto` into `out`: the generated module's path."""
    from grpc_tools import protoc

    rc = protoc.main(["protoc", f"-I{_PROTO.parent}", f"--python_out={out}", _PROTO.name])
    if rc != 0:
        raise RuntimeError(f"protoc failed on {_PROTO} (rc {rc})")
    return out / "cri_subset_pb2.py"


def cri_messages() -> ModuleType:
    """The compiled message classes (protoc from grpcio-tools, into a private temporary directory). Where
    CRI_SUBSET_PB2 names a module compiled elsewhere, that one: the VM tier's guest has no grpcio-tools, so the
    host compiles it (tests/vm/boot.sh)."""
    global _module
    with _lock:
        if _module is None:
            prebuilt = os.environ.get("CRI_SUBSET_PB2", "")
            path = Path(prebuilt) if prebuilt else compile_cri_proto(Path(tempfile.mkdtemp(prefix="cri-proto-")))
            spec = importlib.util.spec_from_file_location("cri_subset_pb2", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _module = module
        return _module


@dataclass(frozen=True)
class PodSpec:
    """A host-network pod sandbox: what the kubelet sends for a `hostNetwork: true` pod."""

    name: str
    uid: str
    namespace: str
    cgroup_parent: str
    labels: dict[str, str]
    annotations: dict[str, str]


class CriClient:
    """RuntimeService calls over containerd's CRI socket (unix)."""

    def __init__(self, socket: str, timeout_s: float = 60.0) -> None:
        self._channel = grpc.insecure_channel(f"unix://{socket}")
        self._timeout = timeout_s
        self._pb = cri_messages()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: str, request: Any, response_type: str) -> Any:
        stub = self._channel.unary_unary(
            _SERVICE + method,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=getattr(self._pb, response_type).FromString,
        )
        return stub(request, timeout=self._timeout)

    def version(self) -> Any:
        return self._call("Version", self._pb.VersionRequest(version="v1"), "VersionResponse")

    def sandbox_config(self, pod: PodSpec) -> Any:
        pb = self._pb
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=pod.name, uid=pod.uid, namespace=pod.namespace),
            labels=pod.labels,
            annotations=pod.annotations,
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=pod.cgroup_parent,
                security_context=pb.LinuxSandboxSecurityContext(
                    namespace_options=pb.NamespaceOption(network=NAMESPACE_NODE, pid=NAMESPACE_POD, ipc=NAMESPACE_POD)
                ),
            ),
        )

    def run_pod_sandbox(self, pod: PodSpec) -> str:
        reply = self._call(
            "RunPodSandbox", self._pb.RunPodSandboxRequest(config=self.sandbox_config(pod)), "RunPodSandboxResponse"
        )
        return str(reply.pod_sandbox_id)

    def create_container(
        self, sandbox_id: str, pod: PodSpec, name: str, image: str, command: list[str], envs: dict[str, str]
    ) -> str:
        pb = self._pb
        config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name),
            image=pb.ImageSpec(image=image),
            command=command,
            envs=[pb.KeyValue(key=k, value=v) for k, v in envs.items()],
            linux=pb.LinuxContainerConfig(resources=pb.LinuxContainerResources(cpu_period=100000, cpu_shares=2)),
        )
        request = pb.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=config, sandbox_config=self.sandbox_config(pod)
        )
        return str(self._call("CreateContainer", request, "CreateContainerResponse").container_id)

    def start_container(self, container_id: str) -> None:
        self._call("StartContainer", self._pb.StartContainerRequest(container_id=container_id), "StartContainerResponse")

    def container_pid(self, container_id: str) -> int:
        """The container's init pid, from containerd's verbose status (`info` JSON, key `pid`)."""
        reply = self._call(
            "ContainerStatus",
            self._pb.ContainerStatusRequest(container_id=container_id, verbose=True),
            "ContainerStatusResponse",
        )
        info = json.loads(reply.info["info"])
        return int(info["pid"])

    def stop_and_remove_sandbox(self, sandbox_id: str) -> None:
        """Stop (kills the pod's containers) and remove the sandbox, with its containers."""
        self._call("StopPodSandbox", self._pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), "StopPodSandboxResponse")
        self._call(
            "RemovePodSandbox", self._pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), "RemovePodSandboxResponse"
        )
