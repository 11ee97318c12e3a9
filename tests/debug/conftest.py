"""A store filled by a real HookDispatcher, and a real debug server on a unix socket in tmp_path."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from hookserver.cli.hookctl import main as hookctl_main
from hookserver.debug.server import DebugServer, Provider
from hookserver.dispatch import HookDispatcher
from hookserver.hooks import ContainerRequest, HookRegistry, PodRequest, Stage
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.store import StateStore, WriteRecord

from tests.reference_example import SPEC_KEY as SPEC, PlanRecorder

BE_UID = "6f1c2d3e-0000-4000-8000-00000000be01"
LS_UID = "6f1c2d3e-0000-4000-8000-00000000a501"
BAD_UID = "6f1c2d3e-0000-4000-8000-0000000bad01"
BE_SPEC = json.dumps(
    {
        "containers": {
            "main": {
                "requests": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "1Gi"},
                "limits": {"kubernetes.io/batch-cpu": "4000", "kubernetes.io/batch-memory": "2Gi"},
            }
        }
    }
)
# What the real executor records for the BE pod: cgroupfs form, systemd form, and one unrelated write.
BE_WRITE_CGROUPFS = f"/sys/fs/cgroup/cpu/kubepods/besteffort/pod{BE_UID}/cpu.shares"
BE_WRITE_SYSTEMD = (
    "/sys/fs/cgroup/memory/kubepods.slice/kubepods-besteffort.slice/"
    f"kubepods-besteffort-pod{BE_UID.replace('-', '_')}.slice/memory.limit_in_bytes"
)
OTHER_WRITE = "/sys/fs/cgroup/cpu/kubepods/besteffort/podffffffff-0000-4000-8000-000000000000/cpu.shares"


@dataclass
class World:
    store: StateStore
    executor: PlanRecorder


def fill_store() -> World:
    store = StateStore()
    executor = PlanRecorder()
    dispatcher = HookDispatcher(registry=HookRegistry([BatchResourcePlugin()]), store=store, executor=executor)
    be = PodRequest(
        "batch", "be-job-0", BE_UID, labels={"koordinator.sh/qosClass": "BE"}, annotations={SPEC: BE_SPEC},
        cgroup_parent=f"/kubepods/besteffort/pod{BE_UID}", sandbox_id="sandbox-be",
    )
    ls = PodRequest(
        "web", "frontend-1", LS_UID, labels={"koordinator.sh/qosClass": "LS"},
        cgroup_parent=f"/kubepods/burstable/pod{LS_UID}", sandbox_id="sandbox-ls",
    )
    bad = PodRequest(
        "batch", "broken", BAD_UID, labels={"koordinator.sh/qosClass": "BE"}, annotations={SPEC: "{not json"},
        cgroup_parent=f"/kubepods/besteffort/pod{BAD_UID}", sandbox_id="sandbox-bad",
    )
    for request in (be, ls, bad):
        dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, request, door="proxy", rpc="PreRunPodSandboxHook")
    dispatcher.dispatch_container(
        Stage.PRE_CREATE_CONTAINER, ContainerRequest(be, "main", container_id="c-be-main"),
        door="nri", rpc="CreateContainer",
    )
    dispatcher.dispatch_container(
        Stage.PRE_CREATE_CONTAINER, ContainerRequest(ls, "nginx", container_id="c-ls-nginx"),
        door="nri", rpc="CreateContainer",
    )
    now = store.clock()
    store.audit.record_write(WriteRecord(now, BE_WRITE_CGROUPFS, "2048", True, "BatchResource", "BE pod"))
    store.audit.record_write(WriteRecord(now, BE_WRITE_SYSTEMD, "2147483648", True, "BatchResource", "BE pod"))
    store.audit.record_write(
        WriteRecord(now, OTHER_WRITE, "2", False, "cpusuppress", "suppress", error="Invalid argument")
    )
    return World(store, executor)


@pytest.fixture
def world() -> World:
    return fill_store()


ServerFactory = Callable[..., DebugServer]


@pytest.fixture
def make_server(tmp_path: Any, world: World) -> Iterator[ServerFactory]:
    """Start a debug server over `world.store`; every server started is stopped after the test."""
    started: list[DebugServer] = []

    def factory(
        providers: Mapping[str, Provider] | None = None,
        info: Callable[[], dict[str, Any]] | None = None,
        name: str = "debug.sock",
    ) -> DebugServer:
        server = DebugServer(str(tmp_path / "run" / name), store=world.store, providers=providers, info=info)
        server.start()
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop(0.1)


@dataclass
class CtlResult:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def ctl(capsys: pytest.CaptureFixture[str]) -> Callable[..., CtlResult]:
    """Run hookctl's main in-process and capture what it printed."""

    def run(*argv: str) -> CtlResult:
        capsys.readouterr()
        rc = hookctl_main(list(argv))
        captured = capsys.readouterr()
        return CtlResult(rc, captured.out, captured.err)

    return run
