"""Pod traffic for the soak: a private cgroup v1 subtree with one directory per pod, the runtime proxy's two
creation calls (PreRunPodSandbox, PreCreateContainer) with a deadline, and the test NRI runtime on a thread of
its own so the agent can be restarted, killed or starved while the runtime keeps its socket.

Every creation is one `Answer`: how long it took and whether it came back in time, late, or failed. A creation
"answered within the deadline" is what a kubelet or containerd needs; a failure is a pod that did not start.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc

from hookserver.api import nri_pb2
from hookserver.api import runtime_hook_pb2 as pb
from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from tests.cgroupchild import rmdir_patiently
from tests.nri.fake_runtime import FakeRuntime
from tests.reference_example import BE_LABELS, SPEC_KEY, WORKED_SPEC_JSON

__all__ = ["DEADLINE_S", "POD_VALUES", "Answer", "CgroupTree", "NriHost", "ProxyClient"]

CGROUP = Path("/sys/fs/cgroup")
# containerd's default NRI request timeout is 2 s; a creation answered later than that is a late answer.
DEADLINE_S = 2.0
# What the worked spec gives the pod cgroup (reference §4.5): the values a restarted agent must restore.
POD_VALUES = {"cpu/cpu.shares": "2048", "cpu/cpu.cfs_quota_us": "300000", "memory/memory.limit_in_bytes": "3221225472"}
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Answer:
    seconds: float
    ok: bool
    error: str = ""

    @property
    def late(self) -> bool:
        return self.seconds > DEADLINE_S


@dataclass
class CgroupTree:
    """`/hookserver-soak-<id>/pod<n>` under the cpu and memory hierarchies; `remove()` takes every level away."""

    subsystems: tuple[str, ...] = ("cpu", "memory")
    top: str = field(default_factory=lambda: f"hookserver-soak-{uuid.uuid4().hex[:8]}")
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def dirs(self) -> list[Path]:
        return [CGROUP / sub / self.top for sub in self.subsystems]

    def new_pod(self) -> str:
        """A fresh pod cgroup; returns the cgroup parent to hand the agent ("/hookserver-soak-x/pod7")."""
        rel = f"/{self.top}/pod{next(self.counter)}"
        for sub in self.subsystems:
            (CGROUP / sub / rel.lstrip("/")).mkdir(parents=True, exist_ok=True)
        return rel

    def drop_pod(self, rel: str) -> None:
        for sub in self.subsystems:
            try:
                rmdir_patiently(CGROUP / sub / rel.lstrip("/"), 2.0)
            except OSError:
                pass

    def read(self, rel: str, knob: str) -> str:
        sub, name = knob.split("/")
        return (CGROUP / sub / rel.lstrip("/") / name).read_text().strip()

    def write(self, rel: str, knob: str, value: str) -> None:
        sub, name = knob.split("/")
        (CGROUP / sub / rel.lstrip("/") / name).write_text(value)

    def remove(self) -> None:
        for top in self.dirs():
            if not top.is_dir():
                continue
            for child in sorted(top.iterdir(), reverse=True):
                if child.is_dir():
                    try:
                        rmdir_patiently(child, 2.0)
                    except OSError:
                        pass
            try:
                rmdir_patiently(top, 2.0)
            except OSError:
                pass


def pod_request(rel: str, n: str) -> pb.PodSandboxHookRequest:
    return pb.PodSandboxHookRequest(
        pod_meta=pb.PodSandboxMetadata(name=f"soak-{n}", namespace="soak", uid=f"soak-uid-{n}"),
        labels=dict(BE_LABELS), annotations={SPEC_KEY: WORKED_SPEC_JSON}, cgroup_parent=rel,
    )


class ProxyClient:
    """What koord-runtime-proxy does on a pod creation, over the agent's real hook socket."""

    def __init__(self, socket_path: Path) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket_path}")
        self.stub = pb_grpc.RuntimeHookServiceStub(self.channel)  # type: ignore[no-untyped-call]

    def create(self, rel: str, n: str) -> Answer:
        started = time.monotonic()
        request = pod_request(rel, n)
        try:
            self.stub.PreRunPodSandboxHook(request, timeout=DEADLINE_S * 5)
            self.stub.PreCreateContainerHook(pb.ContainerResourceHookRequest(
                pod_meta=request.pod_meta, container_meta=pb.ContainerMetadata(name="c"),
                container_resources=pb.LinuxContainerResources(cpu_shares=2),
                pod_labels=dict(request.labels), pod_annotations=dict(request.annotations), pod_cgroup_parent=rel,
            ), timeout=DEADLINE_S * 5)
        except grpc.RpcError as exc:
            return Answer(time.monotonic() - started, False, f"{exc.code().name}: {exc.details()}")
        return Answer(time.monotonic() - started, True)

    def close(self) -> None:
        self.channel.close()


def nri_pod(rel: str, n: str) -> tuple[nri_pb2.PodSandbox, nri_pb2.Container]:
    pod = nri_pb2.PodSandbox(id=f"sb-{n}", name=f"soak-{n}", uid=f"soak-uid-{n}", namespace="soak")
    pod.labels.update(BE_LABELS)
    pod.annotations[SPEC_KEY] = WORKED_SPEC_JSON
    pod.linux.cgroup_parent = rel
    ctr = nri_pb2.Container(id=f"ctr-{n}", pod_sandbox_id=pod.id, name="c", state=nri_pb2.CONTAINER_RUNNING)
    ctr.linux.resources.cpu.shares.value = 2
    return pod, ctr


class NriHost:
    """The test NRI runtime (tests/nri/fake_runtime.py) on its own event loop thread, restartable."""

    def __init__(self, socket_path: Path, pods: list[tuple[nri_pb2.PodSandbox, nri_pb2.Container]]) -> None:
        self.socket_path = socket_path
        self.pods = pods
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="soak-nri", daemon=True)
        self.thread.start()
        self.runtime: FakeRuntime | None = None
        self.registrations = 0
        self.max_live = 0

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def start(self) -> None:
        async def go() -> FakeRuntime:
            runtime = FakeRuntime(pods=[p for p, _ in self.pods], containers=[c for _, c in self.pods])
            self.socket_path.unlink(missing_ok=True)
            await runtime.serve(str(self.socket_path))
            return runtime

        self.runtime = self._call(go())

    def stop(self) -> None:
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            self.registrations += runtime.registrations
            self.max_live = max(self.max_live, runtime.max_live)
            self._call(runtime.aclose())

    def wait_ready(self, timeout: float) -> float:
        """Seconds until the agent has registered and answered Synchronize on this runtime."""
        assert self.runtime is not None
        started = time.monotonic()
        self._call(self.runtime.ready_conn(-1, timeout=timeout), timeout + 5)
        return time.monotonic() - started

    def create(self, n: str, rel: str) -> Answer:
        """CreateContainer for a new container of a pod the runtime knows, as containerd sends it."""
        assert self.runtime is not None
        pod, _ = nri_pod(rel, n)

        async def go() -> Answer:
            assert self.runtime is not None
            started = time.monotonic()
            try:
                conn = await self.runtime.ready_conn(-1, timeout=DEADLINE_S)
                ctr = nri_pb2.Container(id=f"new-{n}-{time.monotonic_ns()}", pod_sandbox_id=pod.id, name="n")
                await conn.call("CreateContainer", nri_pb2.CreateContainerRequest(pod=pod, container=ctr),
                                nri_pb2.CreateContainerResponse, timeout=DEADLINE_S * 5)
            except Exception as exc:  # noqa: BLE001 - any failure is a failed creation, recorded with its text
                return Answer(time.monotonic() - started, False, f"{type(exc).__name__}: {exc}")
            return Answer(time.monotonic() - started, True)

        return self._call(go())

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()
