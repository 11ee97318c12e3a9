"""GroupIdentity at PreRunPodSandbox (issue 37): a new pod's bvt / BE cpu.idle is in its cgroup when the hook
answers, before any QoS round, through the proxy door (fixture trees, v1 cgroupfs and v2 systemd) and the NRI
door (a real cgroup v1 subtree: the kernel's own cpu.idle). Expected values are koordlet's rule worked out by
hand (`groupidentity/rule.go`: LSE/LSR lsrClass, LS lsClass, BE beClass, others by kube QoS)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest

from hookserver.api import nri_pb2
from hookserver.api import runtime_hook_pb2 as pb
from hookserver.api import runtime_hook_pb2_grpc as pb_grpc
from hookserver.executor import build_executor
from hookserver.executor.settings import CgroupSettings
from hookserver.hooks.context import PodRequest
from hookserver.debug.cpu_sources import cpu_sources
from hookserver.hooks.plugins import BatchResourcePlugin, GroupIdentityPlugin, default_plugins
from hookserver.proxy import ProxyServer
from hookserver.slo import NodeSLOSpec
from hookserver.store import StateStore
from hookserver.system import SystemRoots
from hookserver.view import NodeView
from hookserver.wiring.hooks import cpu_priority_files, group_identity_files
from qos.settings import QoSSettings
from tests.hooks.v1_subtree import ROOT, unusable, v1_subtree
from tests.nri.conftest import nri_world, run, sock_dir  # noqa: F401 - the fixture
from tests.proxy.conftest import hook_settings
from tests.reconciler.conftest import MAIN_SPEC, make_world
from tests.reference_example import SPEC_KEY

BVT_ON = {"resourceQOSStrategy": {
    "lsrClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
    "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 1}},
    "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}},
}}
IDLE_ON = {"resourceQOSStrategy": {"policies": {"cpuPolicy": "coreSched"},
                                   "beClass": {"cpuQOS": {"enable": True, "schedIdle": 1}}}}
BURSTABLE = "/kubepods/burstable/pod1"
BESTEFFORT = "/kubepods/besteffort/pod1"
GUARANTEED = "/kubepods/pod1"


def _decide(plugin: GroupIdentityPlugin, slo: dict[str, Any], qos: str, parent: str) -> Any:
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    request = PodRequest(namespace="default", name="p", uid="1", labels=labels, cgroup_parent=parent)
    return plugin.pre_run_pod_sandbox(request, NodeView.build(node_slo=NodeSLOSpec.model_validate(slo)))


@pytest.mark.parametrize("qos, parent, want", [
    ("LSE", GUARANTEED, 2), ("LSR", GUARANTEED, 2), ("LS", BURSTABLE, 1), ("BE", BESTEFFORT, -1),
    ("SYSTEM", BURSTABLE, 1),  # not a class of the rule: by kube QoS, Burstable = LS's
    ("", GUARANTEED, 2),  # Guaranteed = LSR's while lsrClass is on
    ("", BESTEFFORT, -1),
])
def test_bvt_by_class_then_kube_qos(qos: str, parent: str, want: int) -> None:
    plugin = GroupIdentityPlugin(kernel_files=frozenset({"cpu.bvt_warp_ns"}))
    result = _decide(plugin, BVT_ON, qos, parent)
    assert result.applied and result.resources.cpu_bvt_warp_ns == want, result
    assert result.resources.cpu_idle is None


def test_guaranteed_pod_takes_ls_value_when_lsr_class_is_off() -> None:
    slo = {"resourceQOSStrategy": {**BVT_ON["resourceQOSStrategy"],
                                   "lsrClass": {"cpuQOS": {"enable": False, "groupIdentity": 2}}}}
    plugin = GroupIdentityPlugin(kernel_files=frozenset({"cpu.bvt_warp_ns"}))
    assert _decide(plugin, slo, "", GUARANTEED).resources.cpu_bvt_warp_ns == 1
    assert _decide(plugin, slo, "LSR", GUARANTEED).resources.cpu_bvt_warp_ns == 0  # its class is off: 0


def test_idle_only_for_be_pods_and_nothing_without_kernel_file_or_gate() -> None:
    idle = GroupIdentityPlugin(kernel_files=frozenset({"cpu.idle"}))
    assert _decide(idle, IDLE_ON, "BE", BESTEFFORT).resources.cpu_idle == 1
    assert _decide(idle, IDLE_ON, "", BESTEFFORT).resources.cpu_idle == 1  # unlabelled, besteffort tier
    assert not _decide(idle, IDLE_ON, "LS", BURSTABLE).applied
    assert not _decide(idle, BVT_ON, "BE", BESTEFFORT).applied  # bvt asked, kernel has only cpu.idle
    assert "unsupported" in _decide(idle, BVT_ON, "BE", BESTEFFORT).reason
    assert not _decide(GroupIdentityPlugin(), IDLE_ON, "BE", BESTEFFORT).applied
    off = GroupIdentityPlugin(enabled=False, kernel_files=frozenset({"cpu.idle"}))
    assert _decide(off, IDLE_ON, "BE", BESTEFFORT).reason == "feature gate GroupIdentity is off"
    assert not _decide(idle, {}, "BE", BESTEFFORT).applied  # koordinator's defaults ask for nothing


def test_default_plugins_register_the_hook_only_where_the_kernel_has_a_file() -> None:
    names = lambda plugins: [p.name for p in plugins]  # noqa: E731
    assert "GroupIdentity" not in names(default_plugins())
    on = default_plugins(cpu_priority_files=frozenset({"cpu.idle"}))
    assert "GroupIdentity" in names(on)
    gated = default_plugins(lambda n: n != "GroupIdentity", cpu_priority_files=frozenset({"cpu.idle"}))
    assert [p.enabled for p in gated if p.name == "GroupIdentity"] == [False]  # type: ignore[attr-defined]


@pytest.mark.parametrize("version, driver", [("v1", "cgroupfs"), ("v2", "systemd")])
def test_cpu_priority_files_are_probed_at_the_kubepods_cgroup(tmp_path: Path, version: str, driver: str) -> None:
    world = make_world(tmp_path / "cg", version=version, driver=driver)
    assert cpu_priority_files(world.layout) == frozenset()  # no kubepods cgroup yet
    world.tree.cgroup(world.layout.qos_dir("guaranteed"))
    world.tree.path(world.layout.qos_dir("guaranteed"), "cpu.idle").write_text("0\n")
    assert cpu_priority_files(world.layout) == frozenset({"cpu.idle"})
    # gated as the reconciler: nothing while it would only plan (QoS off, a dry run)
    assert group_identity_files(QoSSettings(), world.layout) == frozenset({"cpu.idle"})
    for off in ({"enabled": False}, {"dry_run": True}, {"reconcilers": {"GroupIdentity": {"dry_run": True}}}):
        assert group_identity_files(QoSSettings.model_validate(off), world.layout) == frozenset(), off


# -- the proxy door, fixture trees ---------------------------------------------------------------------------
@pytest.mark.parametrize("version, driver", [("v1", "cgroupfs"), ("v2", "systemd")])
def test_proxy_pre_run_pod_sandbox_writes_bvt_before_any_qos_round(tmp_path: Path, version: str, driver: str) -> None:
    plugin = GroupIdentityPlugin(kernel_files=frozenset({"cpu.bvt_warp_ns"}))
    world = make_world(tmp_path / "cg", version=version, driver=driver, plugins=[BatchResourcePlugin(), plugin])
    world.store.set_node_slo(NodeSLOSpec.model_validate(BVT_ON))
    uid = str(uuid.uuid4())
    pod_rel = world.layout.pod_dir("besteffort", uid)
    world.tree.cgroup(pod_rel)
    world.tree.path(pod_rel, "cpu.bvt_warp_ns").write_text("0\n")  # the kernel's default for a new cgroup
    server = ProxyServer(hook_settings(tmp_path), dispatcher=world.dispatcher, registry=world.dispatcher.registry)
    server.start()
    channel = grpc.insecure_channel(server.address)
    try:
        request = pb.PodSandboxHookRequest(
            pod_meta=pb.PodSandboxMetadata(name="be", uid=uid, namespace="default"), cgroup_parent=f"/{pod_rel}"
        )
        request.labels["koordinator.sh/qosClass"] = "BE"
        request.annotations[SPEC_KEY] = MAIN_SPEC
        pb_grpc.RuntimeHookServiceStub(channel).PreRunPodSandboxHook(request, timeout=5)
        assert world.tree.read(pod_rel, "cpu.bvt_warp_ns") == "-1"
        assert world.tree.read(pod_rel, "cpu.weight" if version == "v2" else "cpu.shares") != ""  # batch values too
        # one write carries both plugins' values; `hookctl explain` still finds the priority's source
        writes = world.store.audit.writes(path_contains=pod_rel)
        priority = cpu_sources([], writes)["priority"]
        assert [(Path(p["file"]).name, p["value"]) for p in priority] == [("cpu.bvt_warp_ns", "-1")], priority
    finally:
        channel.close()
        server.stop(grace_s=0.5)


# -- the NRI door, a real cgroup v1 subtree ------------------------------------------------------------------
@pytest.mark.cgroup
def test_nri_run_pod_sandbox_makes_a_be_pod_idle_on_a_real_v1_cgroup(sock_dir: Path) -> None:  # noqa: F811
    reason = unusable(("cpu",))
    if reason:
        pytest.skip(reason)
    if not (ROOT / "cpu" / "cpu.idle").exists():
        pytest.skip("this kernel has no cpu.idle in cgroup v1 (needs Linux >= 5.15)")
    with v1_subtree(("cpu",)) as top:
        be_dir, ls_dir = ROOT / "cpu" / top.lstrip("/") / "be", ROOT / "cpu" / top.lstrip("/") / "ls"
        be_dir.mkdir()
        ls_dir.mkdir()

        async def body() -> None:
            store = StateStore()
            store.set_node_slo(NodeSLOSpec.model_validate(IDLE_ON))
            executor = build_executor(CgroupSettings(root=str(ROOT), version="v1", driver="cgroupfs"),
                                      store=store, roots=SystemRoots(cgroup=str(ROOT)))
            plugin = GroupIdentityPlugin(kernel_files=frozenset({"cpu.idle"}))
            async with nri_world(sock_dir, plugins=[plugin], executor=executor, store=store) as w:
                conn = await w.runtime.ready_conn()
                for uid, qos, parent in (("u-be", "BE", f"{top}/be"), ("u-ls", "LS", f"{top}/ls")):
                    pod = nri_pb2.PodSandbox(id=f"sb-{uid}", name=uid, uid=uid, namespace="default")
                    pod.labels["koordinator.sh/qosClass"] = qos
                    pod.linux.cgroup_parent = parent
                    await conn.call("RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=pod), nri_pb2.RunPodSandboxResponse)
                for _ in range(100):  # under Ignore the pod values are written just after the reply
                    if (be_dir / "cpu.idle").read_text().strip() == "1":
                        break
                    await asyncio.sleep(0.01)

        run(body())
        assert (be_dir / "cpu.idle").read_text().strip() == "1"  # the kernel took it
        assert (ls_dir / "cpu.idle").read_text().strip() == "0"
        be_dir.rmdir()
        ls_dir.rmdir()

