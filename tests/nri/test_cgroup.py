"""NRI RunPodSandbox writes the pod-level batch values into a real cgroup v1 pod directory.

The fake runtime sends RunPodSandbox for a BE pod whose `linux.cgroup_parent` is a private subtree
of the host's cgroup v1 cpu and memory hierarchies; the real executor writes it, and the test reads
back what the kernel holds (reference §4.5: shares 2048, quota 300000, memory 3221225472). The
subtree is removed afterwards, also on failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookserver.api import nri_pb2
from hookserver.executor.settings import CgroupSettings
from hookserver.store.state import StateStore
from hookserver.system.roots import SystemRoots
from tests.nri.conftest import EXPECTED, POD_EXPECTED, be_pod, container, nri_world, run

CGROUP_ROOT = Path("/sys/fs/cgroup")
SUBSYSTEMS = ("cpu", "memory")

pytestmark = pytest.mark.cgroup


def _writable_v1() -> str:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for subsystem in SUBSYSTEMS:
        path = CGROUP_ROOT / subsystem
        if not (path / "cgroup.procs").exists():
            return f"no cgroup v1 {subsystem} hierarchy at {path}"
        if not os.access(path, os.W_OK):
            return f"{path} is not writable"
    return ""


@pytest.fixture
def pod_cgroup() -> Iterator[str]:
    reason = _writable_v1()
    if reason:
        pytest.skip(reason)
    name = f"hookserver-nri-test-{uuid.uuid4().hex[:10]}"
    made: list[Path] = []
    try:
        for subsystem in SUBSYSTEMS:
            path = CGROUP_ROOT / subsystem / name
            path.mkdir()
            made.append(path)
        yield f"/{name}"
    finally:
        for path in reversed(made):
            try:
                path.rmdir()
            except OSError as exc:  # a leftover cgroup is worth a loud failure
                pytest.fail(f"could not remove test cgroup {path}: {exc}")


def test_run_pod_sandbox_writes_the_pod_cgroup(sock_dir: Path, pod_cgroup: str) -> None:
    executor_mod = pytest.importorskip("hookserver.executor", reason="the executor package is not available")
    store_for_exec: list[StateStore] = []

    async def body() -> None:
        store = StateStore()
        store_for_exec.append(store)
        executor = executor_mod.build_executor(
            CgroupSettings(root=str(CGROUP_ROOT), version="v1", driver="cgroupfs"),
            store=store, roots=SystemRoots(cgroup=str(CGROUP_ROOT)),
        )
        async with nri_world(sock_dir, executor=executor, store=store) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod(cgroup_parent=pod_cgroup)
            await conn.call("RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=pod), nri_pb2.RunPodSandboxResponse)
            cpu = CGROUP_ROOT / "cpu" / pod_cgroup.lstrip("/")
            memory = CGROUP_ROOT / "memory" / pod_cgroup.lstrip("/")
            held = (
                int((cpu / "cpu.shares").read_text()),
                int((cpu / "cpu.cfs_quota_us").read_text()),
                int((memory / "memory.limit_in_bytes").read_text()),
            )
            assert held == POD_EXPECTED
            events = [e for e in store.audit.events() if e.rpc == "RunPodSandbox"]
            assert events and events[-1].result == "ok", events
            # The containers still get their values as an adjustment, not as file writes.
            reply = await conn.call(
                "CreateContainer", nri_pb2.CreateContainerRequest(pod=pod, container=container(pod, "b", "ctr-b")),
                nri_pb2.CreateContainerResponse,
            )
            res = reply.adjust.linux.resources
            assert (res.cpu.shares.value, res.cpu.quota.value, res.memory.limit.value) == EXPECTED["b"]

    run(body())
    writes = store_for_exec[0].audit.writes(path_contains=pod_cgroup.lstrip("/"))
    assert {os.path.basename(w.path) for w in writes if w.ok} >= {"cpu.shares", "cpu.cfs_quota_us", "memory.limit_in_bytes"}
