"""CPUSetAllocator through the three front doors: the proxy's response, NRI's CreateContainer adjustment and
the reconciler's writes (cgroup v1 cgroupfs and v2 systemd fixture trees) carry the same cpuset and quota."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from types import MappingProxyType

import grpc
import pytest

from hookserver.api import nri_pb2
from hookserver.api import runtime_hook_pb2 as pb
from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from hookserver.dispatch import HookDispatcher
from hookserver.hooks import FailurePolicy, HookRegistry
from hookserver.hooks.plugins import BatchResourcePlugin, CPUSetAllocatorPlugin
from hookserver.proxy import ProxyServer
from hookserver.store import PodRecord, StateStore
from hookserver.system.topology import CpuInfo
from hookserver.topology import ANNOTATION_RESOURCE_STATUS
from tests.nri.conftest import nri_world, run, sock_dir  # noqa: F401 - the fixture
from tests.proxy.conftest import PlanRecorder, hook_settings
from tests.reconciler.conftest import World, make_world

CPUS = tuple(CpuInfo(cpu=i, core=i // 2, socket=0, numa_node=0, l3=0, online=True) for i in range(4))
LSR = {"koordinator.sh/qosClass": "LSR"}
BOUND = {ANNOTATION_RESOURCE_STATUS: '{"cpuset":"2-3"}'}


def _plugins() -> list[object]:
    return [BatchResourcePlugin(), CPUSetAllocatorPlugin(cpus=CPUS)]


# -- proxy -------------------------------------------------------------------------------------------------
def _proxy(tmp_path: Path, policy: FailurePolicy) -> tuple[ProxyServer, grpc.Channel, PlanRecorder]:
    settings = hook_settings(tmp_path, failure_policy=policy.value)
    registry = HookRegistry(_plugins())  # type: ignore[arg-type]
    executor = PlanRecorder()
    dispatcher = HookDispatcher(registry=registry, store=StateStore(), executor=executor, policy=policy)
    server = ProxyServer(settings, dispatcher=dispatcher, registry=registry)
    server.start()
    return server, grpc.insecure_channel(server.address), executor


def _container_request(
    labels: dict[str, str], annotations: dict[str, str], uid: str = "uid-9"
) -> pb.ContainerResourceHookRequest:
    req = pb.ContainerResourceHookRequest(
        pod_meta=pb.PodSandboxMetadata(name=uid, uid=uid, namespace="default"),
        container_meta=pb.ContainerMetadata(name="app"),
        container_resources=pb.LinuxContainerResources(cpu_period=100000, cpu_quota=200000, cpu_shares=2048),
        pod_cgroup_parent="/kubepods/burstable/poduid-9",
    )
    req.pod_labels.update(labels)
    req.pod_annotations.update(annotations)
    return req


@pytest.mark.parametrize("policy", [FailurePolicy.IGNORE, FailurePolicy.FAIL])
def test_proxy_binds_the_schedulers_cpus_and_reports_bad_annotations_without_failing(
    tmp_path: Path, policy: FailurePolicy
) -> None:
    server, channel, executor = _proxy(tmp_path, policy)
    try:
        stub = pb_grpc.RuntimeHookServiceStub(channel)
        got = stub.PreCreateContainerHook(_container_request(LSR, BOUND), timeout=5).container_resources
        assert (got.cpuset_cpus, got.cpu_quota, got.cpu_shares) == ("2-3", -1, 2048)
        ls = stub.PreCreateContainerHook(_container_request({"koordinator.sh/qosClass": "LS"}, {}, "uid-10"), timeout=5)
        # the proxy's pods are only those it saw: uid-9 is in the store, bound to 2-3 (PreRunPodSandbox came first
        # in life; here the container call taught the store)
        assert ls.container_resources.cpuset_cpus == "0-1"
        bad = _container_request(LSR, {ANNOTATION_RESOURCE_STATUS: '{"cpuset":"2-9"}'}, "uid-11")
        echoed = stub.PreCreateContainerHook(bad, timeout=5).container_resources  # no error under Fail either
        assert (echoed.cpuset_cpus, echoed.cpu_quota) == ("", 200000)
        pod = pb.PodSandboxHookRequest(pod_meta=pb.PodSandboxMetadata(name="uid-9", uid="uid-9", namespace="default"),
                                       cgroup_parent="/kubepods/burstable/poduid-9")
        pod.labels.update(LSR)
        pod.annotations.update(BOUND)
        stub.PreRunPodSandboxHook(pod, timeout=5)
        # the pod level is written by hookserver itself behind the proxy: quota unset on the pod cgroup
        assert [(w.resource.value, w.value) for p in executor.plans for w in p.all_writes()] == [("cpu.cfs_quota_us", -1)]
    finally:
        channel.close()
        server.stop(grace_s=0.5)


# -- NRI ---------------------------------------------------------------------------------------------------
def test_nri_create_container_adjusts_cpuset_and_quota(sock_dir: Path) -> None:  # noqa: F811
    async def body() -> None:
        async with nri_world(sock_dir, plugins=_plugins()) as w:
            conn = await w.runtime.ready_conn()
            pod = nri_pb2.PodSandbox(id="sb", name="lsr", uid="uid-9", namespace="default")
            pod.labels.update(LSR)
            pod.annotations.update(BOUND)
            pod.linux.cgroup_parent = "/kubepods/burstable/poduid-9"
            ctr = nri_pb2.Container(id="c1", pod_sandbox_id="sb", name="app", state=1)
            reply = await conn.call("CreateContainer", nri_pb2.CreateContainerRequest(pod=pod, container=ctr),
                                    nri_pb2.CreateContainerResponse)
            res = reply.adjust.linux.resources
            assert (res.cpu.cpus, res.cpu.quota.value) == ("2-3", -1)
            pod.labels["koordinator.sh/qosClass"] = "LS"
            del pod.annotations[ANNOTATION_RESOURCE_STATUS]
            pod.uid = "uid-10"
            reply = await conn.call("CreateContainer", nri_pb2.CreateContainerRequest(pod=pod, container=ctr),
                                    nri_pb2.CreateContainerResponse)
            assert reply.adjust.linux.resources.cpu.cpus == "0-1"  # uid-9 holds 2-3
            assert not reply.adjust.linux.resources.cpu.HasField("quota")

    run(body())


# -- reconciler --------------------------------------------------------------------------------------------
def _lsr_pod(world: World, qos: str, annotations: dict[str, str]) -> tuple[str, str]:
    uid = str(uuid.uuid4())
    cid = uuid.uuid4().hex
    pod = PodRecord(
        uid=uid, namespace="default", name=f"{qos.lower()}-pod", labels=MappingProxyType({"koordinator.sh/qosClass": qos}),
        annotations=MappingProxyType(annotations), qos_class=qos, kube_qos="Burstable", phase="Running",
        source="apiserver", container_ids=MappingProxyType({"app": f"containerd://{cid}"}),
        container_specs=MappingProxyType({"app": (MappingProxyType({}), MappingProxyType({}))}),
    )
    world.store.upsert_pod(pod)
    pod_rel = world.layout.pod_dir("burstable", uid)
    crel = world.layout.container_dir(pod_rel, cid)
    for rel in (pod_rel, crel):
        world.tree.cgroup(rel, **{"cpuset.cpus": "0-3", "cpu.cfs_quota_us": "400000", "cpu.max": "400000 100000"})
    return pod_rel, crel


@pytest.mark.parametrize("version, driver", [("v1", "cgroupfs"), ("v2", "systemd")])
def test_reconciler_writes_the_cpuset_and_unsets_the_quota(tmp_path: Path, version: str, driver: str) -> None:
    world = make_world(tmp_path / "cg", version=version, driver=driver, plugins=_plugins())
    world.tree.cgroup(world.layout.pod_dir("burstable", "x").rsplit("/", 1)[0])
    pod_rel, crel = _lsr_pod(world, "LSR", BOUND)
    _, ls_crel = _lsr_pod(world, "LS", {})
    world.engine.run(trigger="start")
    assert world.tree.read(crel, "cpuset.cpus") == "2-3"
    assert world.tree.read(ls_crel, "cpuset.cpus") == "0-1"
    if version == "v1":
        assert world.tree.read(pod_rel, "cpu.cfs_quota_us") == "-1"
        assert world.tree.read(crel, "cpu.cfs_quota_us") == "-1"
    else:
        assert world.tree.read(pod_rel, "cpu.max").split()[0] == "max"
        assert world.tree.read(crel, "cpu.max").split()[0] == "max"
    # the pod cgroup's cpuset is the kubelet's (all CPUs): the hook writes containers only
    assert world.tree.read(pod_rel, "cpuset.cpus") == "0-3"
