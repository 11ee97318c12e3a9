"""Shared builders for the NRI tests: BE pods from the reference §4.5 worked example, and a world
with a real dispatcher, store and hook registry, a fake runtime on a real unix socket, and a
running `NriPlugin`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from hookserver.api import nri_pb2
from hookserver.nri.settings import NriSettings
from hookserver.dispatch import HookDispatcher
from hookserver.executor.plan import ResourceExecutor
from hookserver.hooks.outcome import FailurePolicy
from hookserver.hooks.plugins.batchresource import BatchResourcePlugin
from hookserver.hooks.registry import HookRegistry
from hookserver.nri import NriPlugin
from hookserver.store.state import StateStore
from tests.nri.fake_runtime import FakeRuntime
from tests.reference_example import SPEC_KEY, WORKED_SPEC

T = TypeVar("T")

# Reference §4.5: container a, container b, and the pod.
EXPECTED = {
    "a": (512, 100000, 1 << 30),
    "b": (1536, 200000, 2 << 30),
}
POD_EXPECTED = (2048, 300000, 3221225472)


def be_pod(
    uid: str = "uid-1", *, name: str = "be-pod", sandbox: str = "sb-1", cgroup_parent: str = "/kubepods/besteffort/poduid-1",
    spec: dict[str, Any] | None = None, qos: str = "BE",
) -> nri_pb2.PodSandbox:
    pod = nri_pb2.PodSandbox(id=sandbox, name=name, uid=uid, namespace="default")
    pod.labels["koordinator.sh/qosClass"] = qos
    pod.annotations[SPEC_KEY] = json.dumps(WORKED_SPEC if spec is None else spec)
    pod.linux.cgroup_parent = cgroup_parent
    return pod


def container(
    pod: nri_pb2.PodSandbox, name: str, cid: str, *, state: int = 3, env: Sequence[str] = ()
) -> nri_pb2.Container:
    ctr = nri_pb2.Container(id=cid, pod_sandbox_id=pod.id, name=name, state=state, env=list(env))
    ctr.linux.resources.cpu.shares.value = 2  # what the kubelet gives a BestEffort container
    return ctr


def run(coro: Coroutine[Any, Any, T], timeout: float = 20.0) -> T:
    """Each async test runs in its own loop, bounded so a hang fails instead of stalling the suite."""
    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short directory: unix socket paths must stay under 108 bytes, and tmp_path may not."""
    path = Path(tempfile.mkdtemp(prefix="nri-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class World:
    runtime: FakeRuntime
    plugin: NriPlugin
    store: StateStore
    dispatcher: HookDispatcher
    registry: HookRegistry
    socket: str
    task: asyncio.Task[None]
    stop: asyncio.Event


@contextlib.asynccontextmanager
async def nri_world(
    sock_dir: Path,
    *,
    plugins: Sequence[object] | None = None,
    policy: FailurePolicy = FailurePolicy.IGNORE,
    executor: ResourceExecutor | None = None,
    start_plugin: bool = True,
    store: StateStore | None = None,
    **runtime_kwargs: Any,
) -> AsyncIterator[World]:
    store = store if store is not None else StateStore()
    registry = HookRegistry(plugins if plugins is not None else [BatchResourcePlugin()])  # type: ignore[arg-type]
    dispatcher = HookDispatcher(registry=registry, store=store, executor=executor, policy=policy)
    runtime = FakeRuntime(**runtime_kwargs)
    path = str(sock_dir / "nri.sock")
    await runtime.serve(path)
    settings = NriSettings(socket=path, backoff_initial_s=0.02, backoff_max_s=0.1, connect_timeout_s=2.0)
    plugin = NriPlugin(
        settings, dispatcher=dispatcher, store=store, registry=registry, failure_policy=policy, environ={}
    )
    stop = asyncio.Event()
    task = asyncio.create_task(plugin.run(stop)) if start_plugin else asyncio.create_task(asyncio.sleep(0))
    try:
        yield World(runtime, plugin, store, dispatcher, registry, path, task, stop)
    finally:
        stop.set()
        async with asyncio.timeout(5):
            await task
        await runtime.aclose()
