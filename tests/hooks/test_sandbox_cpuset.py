"""The sandbox (pause) container's cpuset as koordlet's CPUSetAllocator sets it (issue 37), through each door:
the proxy's PreRunPodSandbox answer carries it (koord-runtime-proxy's docker path pins the sandbox with it), NRI's
RunPodSandbox writes it to the sandbox's cgroup (a real cgroup v1 cpuset subtree: the kernel's own value), and
the reconciler finds the sandbox's cgroup as koordlet does (the pod cgroup's one child that is no known
container) on v1 cgroupfs and v2 systemd fixture trees. The pod cgroup's own cpuset is never written."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import MappingProxyType

import grpc
import pytest

from hookserver.api import nri_pb2
from hookserver.api import runtime_hook_pb2 as pb
from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from hookserver.dispatch import HookDispatcher
from hookserver.executor import build_executor
from hookserver.executor.settings import CgroupSettings
from hookserver.hooks import HookRegistry
from hookserver.hooks.plugins import BatchResourcePlugin, CPUSetAllocatorPlugin
from hookserver.proxy import ProxyServer
from hookserver.store import PodRecord, StateStore
from hookserver.system import SystemRoots
from hookserver.system.topology import CpuInfo
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from tests.hooks.v1_subtree import ROOT, cpuset_host, mkdirs, v1_subtree
from tests.nri.conftest import nri_world, run, sock_dir  # noqa: F401 - the fixture
from tests.proxy.conftest import hook_settings
from tests.reconciler.conftest import World, make_world
from tests.reference_example import PlanRecorder

CPUS = tuple(CpuInfo(cpu=i, core=i // 2, socket=0, numa_node=0, l3=0, online=True) for i in range(4))
QOS = "koordinator.sh/qosClass"


def _plugins(cpus: tuple[CpuInfo, ...] = CPUS) -> list[object]:
    return [BatchResourcePlugin(), CPUSetAllocatorPlugin(cpus=cpus)]


# -- proxy -----------------------------------------------------------------------------------------------------
def _sandbox_request(uid: str, qos: str, annotations: dict[str, str]) -> pb.PodSandboxHookRequest:
    req = pb.PodSandboxHookRequest(pod_meta=pb.PodSandboxMetadata(name=uid, uid=uid, namespace="default"),
                                   cgroup_parent=f"/kubepods/burstable/pod{uid}")
    req.labels[QOS] = qos
    req.annotations.update(annotations)
    return req


def test_proxy_pre_run_pod_sandbox_answers_the_sandbox_cpuset_and_writes_no_pod_cpuset(tmp_path: Path) -> None:
    registry = HookRegistry(_plugins())  # type: ignore[arg-type]
    executor = PlanRecorder()
    dispatcher = HookDispatcher(registry=registry, store=StateStore(), executor=executor)
    server = ProxyServer(hook_settings(tmp_path), dispatcher=dispatcher, registry=registry)
    server.start()
    channel = grpc.insecure_channel(server.address)
    try:
        stub = pb_grpc.RuntimeHookServiceStub(channel)
        lsr = stub.PreRunPodSandboxHook(
            _sandbox_request("u-lsr", "LSR", {ANNOTATION_RESOURCE_STATUS: '{"cpuset":"2-3"}'}), timeout=5)
        assert (lsr.resources.cpuset_cpus, lsr.resources.cpu_quota) == ("2-3", -1)
        ls = stub.PreRunPodSandboxHook(_sandbox_request("u-ls", "LS", {}), timeout=5)
        assert ls.resources.cpuset_cpus == "0-1"  # the LS share pool: 2-3 is the LSR pod's
        be = stub.PreRunPodSandboxHook(_sandbox_request("u-be", "BE", {}), timeout=5)
        assert be.resources.cpuset_cpus == ""  # CPU suppress's
        # the pod cgroup got the LSR pod's quota and nothing else: no cpuset fences in the pod's containers
        writes = [(w.cgroup_dir, w.resource.value, w.value) for p in executor.plans for w in p.all_writes()]
        assert writes == [("/kubepods/burstable/podu-lsr", "cpu.cfs_quota_us", -1)]
    finally:
        channel.close()
        server.stop(grace_s=0.5)


# -- NRI, a real cgroup v1 cpuset subtree ---------------------------------------------------------------------
@pytest.mark.cgroup
def test_nri_run_pod_sandbox_pins_the_sandbox_cgroup_on_real_v1(sock_dir: Path) -> None:  # noqa: F811
    online, cpus = cpuset_host(("cpu", "cpuset"))
    bound = online[-1]
    with v1_subtree(("cpu", "cpuset")) as top:
        pod_parent = f"{top}/podlsr"
        sandbox = mkdirs("cpuset", f"{pod_parent}/sb-{uuid.uuid4().hex[:8]}")  # containerd names it by sandbox ID
        mkdirs("cpu", pod_parent)
        pod_cpus_before = (ROOT / "cpuset" / pod_parent.lstrip("/") / "cpuset.cpus").read_text()

        async def body() -> None:
            store = StateStore()
            executor = build_executor(CgroupSettings(root=str(ROOT), version="v1", driver="cgroupfs"),
                                      store=store, roots=SystemRoots(cgroup=str(ROOT)))
            async with nri_world(sock_dir, plugins=_plugins(cpus), executor=executor, store=store) as w:
                conn = await w.runtime.ready_conn()
                pod = nri_pb2.PodSandbox(id=sandbox.name, name="lsr", uid="u-lsr", namespace="default")
                pod.labels[QOS] = "LSR"
                pod.annotations[ANNOTATION_RESOURCE_STATUS] = f'{{"cpuset":"{bound}"}}'
                pod.linux.cgroup_parent = pod_parent
                await conn.call("RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=pod), nri_pb2.RunPodSandboxResponse)
                for _ in range(100):  # under Ignore the pod values are written just after the reply
                    if (sandbox / "cpuset.cpus").read_text().strip() == str(bound):
                        break
                    await asyncio.sleep(0.01)

        run(body())
        try:
            assert (sandbox / "cpuset.cpus").read_text().strip() == str(bound)  # the kernel took it
            assert (ROOT / "cpuset" / pod_parent.lstrip("/") / "cpuset.cpus").read_text() == pod_cpus_before
            assert (ROOT / "cpu" / pod_parent.lstrip("/") / "cpu.cfs_quota_us").read_text().strip() == "-1"
        finally:
            sandbox.rmdir()


# -- reconciler, fixture trees ---------------------------------------------------------------------------------
def _pod(world: World, qos: str, annotations: dict[str, str], extra_dirs: int = 1) -> tuple[str, list[str]]:
    """An LS/LSR pod with one started container in the store and its cgroups in the tree, plus `extra_dirs`
    children of the pod cgroup that are no known container (the sandbox, when there is one)."""
    uid, cid = str(uuid.uuid4()), uuid.uuid4().hex
    world.store.upsert_pod(PodRecord(
        uid=uid, namespace="default", name=f"{qos.lower()}-{uid[:4]}", labels=MappingProxyType({QOS: qos}),
        annotations=MappingProxyType(annotations), qos_class=qos, kube_qos="Burstable", phase="Running",
        source="apiserver", container_ids=MappingProxyType({"app": f"containerd://{cid}"}),
        container_specs=MappingProxyType({"app": (MappingProxyType({}), MappingProxyType({}))}),
    ))
    pod_rel = world.layout.pod_dir("burstable", uid)
    others = [world.layout.container_dir(pod_rel, uuid.uuid4().hex) for _ in range(extra_dirs)]
    for rel in (pod_rel, world.layout.container_dir(pod_rel, cid), *others):
        world.tree.cgroup(rel, **{"cpuset.cpus": "0-3", "cpu.cfs_quota_us": "400000", "cpu.max": "400000 100000"})
    return pod_rel, others


@pytest.mark.parametrize("version, driver", [("v1", "cgroupfs"), ("v2", "systemd")])
def test_reconciler_finds_and_pins_the_sandbox_as_koordlet_does(tmp_path: Path, version: str, driver: str) -> None:
    world = make_world(tmp_path / "cg", version=version, driver=driver, plugins=_plugins())
    world.tree.cgroup(world.layout.pod_dir("burstable", "x").rsplit("/", 1)[0])
    lsr_rel, [lsr_sandbox] = _pod(world, "LSR", {ANNOTATION_RESOURCE_STATUS: '{"cpuset":"2-3"}'})
    ls_rel, [ls_sandbox] = _pod(world, "LS", {})
    _, ambiguous = _pod(world, "LS", {}, extra_dirs=2)  # two unknown children: which is the sandbox? neither
    world.engine.run(trigger="start")
    assert world.tree.read(lsr_sandbox, "cpuset.cpus") == "2-3"
    assert world.tree.read(ls_sandbox, "cpuset.cpus") == "0-1"
    assert [world.tree.read(d, "cpuset.cpus") for d in ambiguous] == ["0-3", "0-3"]
    assert world.tree.read(lsr_rel, "cpuset.cpus") == world.tree.read(ls_rel, "cpuset.cpus") == "0-3"  # pods: never
    # a quiet second pass writes nothing again (the cache vouches for the sandbox's value)
    assert world.engine.run(trigger="periodic").written == 0


def test_share_pool_result_is_made_once_per_pools_and_follows_them() -> None:
    """A pod start computes the pool at its sandbox; its containers reuse that decision until the pods change."""
    from hookserver.hooks.context import ContainerRequest, PodRequest
    from hookserver.view import NodeView

    plugin = CPUSetAllocatorPlugin(cpus=CPUS)
    ls = PodRequest(namespace="default", name="ls", uid="u-ls", labels={QOS: "LS"}, cgroup_parent="/kubepods/burstable/podu-ls")
    view = NodeView.build(pods=MappingProxyType({}))
    sandbox = plugin.pre_run_pod_sandbox(ls, view)
    first = plugin.pre_create_container(ContainerRequest(pod=ls, name="a"), view)
    second = plugin.pre_create_container(ContainerRequest(pod=ls, name="b"), view)
    assert sandbox.resources.cpuset_cpus == first.resources.cpuset_cpus == "0-3"
    assert second is first
    bound = PodRecord(uid="u-lsr", namespace="default", name="lsr", labels=MappingProxyType({QOS: "LSR"}),
                      annotations=MappingProxyType({ANNOTATION_RESOURCE_STATUS: '{"cpuset":"3"}'}), phase="Running")
    later = NodeView.build(pods=MappingProxyType({"u-lsr": bound}))
    assert plugin.pre_create_container(ContainerRequest(pod=ls, name="a"), later).resources.cpuset_cpus == "0-2"


def test_explain_lists_the_sandbox_cpuset_beside_the_containers() -> None:
    from hookserver.debug.cpu_sources import cpu_sources
    from hookserver.hooks.context import ContainerRequest, PodRequest
    from hookserver.hooks.stages import Stage

    store = StateStore()
    dispatcher = HookDispatcher(registry=HookRegistry(_plugins()), store=store, executor=PlanRecorder())  # type: ignore[arg-type]
    pod = PodRequest(namespace="default", name="lsr", uid="u-lsr", labels={QOS: "LSR"},
                     annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"2-3"}'}, cgroup_parent="/kubepods/podu-lsr")
    dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, pod, door="nri", rpc="RunPodSandbox")
    dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod, name="db"), door="nri",
                                  rpc="CreateContainer")
    rows = cpu_sources(store.audit.decisions(pod_key="default/lsr"), [])["cpuset"]
    assert [(r["container"], r["cpuset"]) for r in rows] == [("(sandbox)", "2-3"), ("db", "2-3")]
    assert "sandbox cpuset 2-3" in rows[0]["from"]


def test_sandbox_dir_from_the_id_where_the_pod_cgroup_has_it_else_as_koordlet_finds_it(tmp_path: Path) -> None:
    from hookserver.reconciler.targets import ContainerTarget, PodTarget, sandbox_dir_of

    world = make_world(tmp_path / "cg", version="v1", driver="systemd")
    pod = PodRecord(uid="u1", namespace="default", name="p", sandbox_id="sb1")
    parent = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu1.slice"
    target = PodTarget(pod=pod, cgroup_dir=parent, containers=(ContainerTarget("app", "c1", f"{parent}/cri-containerd-c1.scope"),))
    named = ["cri-containerd-c1.scope", "cri-containerd-sb1.scope"]
    assert sandbox_dir_of(target, world.layout, lambda rel: named) == f"{parent}/cri-containerd-sb1.scope"
    # the runtime named it otherwise (a cgroupfs runtime on a node the agent thinks systemd): the one unknown child
    other = ["cri-containerd-c1.scope", "sb1"]
    assert sandbox_dir_of(target, world.layout, lambda rel: other) == f"{parent}/sb1"
    assert sandbox_dir_of(target, world.layout, lambda rel: None) == ""  # the pod cgroup is gone


def test_a_sandbox_cgroup_not_there_is_no_error_of_the_pod_call(tmp_path: Path) -> None:
    """A Synchronize lists stopped sandboxes too: their gone cgroup must not turn the pod's call into an error,
    while the pod's own values are still written."""
    from hookserver.hooks.context import PodRequest
    from hookserver.hooks.stages import Stage

    world = make_world(tmp_path / "cg", version="v1", driver="cgroupfs", plugins=_plugins())
    pod_rel = world.layout.pod_dir("burstable", "u-lsr")
    world.tree.cgroup(pod_rel, **{"cpu.cfs_quota_us": "200000"})
    pod = PodRequest(namespace="default", name="lsr", uid="u-lsr", labels={QOS: "LSR"},
                     annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"2-3"}'}, cgroup_parent=f"/{pod_rel}",
                     sandbox_id="gone", sandbox_cgroup=f"/{pod_rel}/gone")
    result = world.dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, pod, door="nri", rpc="RunPodSandbox")
    assert result.result == "ok", result.error
    assert world.tree.read(pod_rel, "cpu.cfs_quota_us") == "-1"
