"""CPUNormalization for LS pods: ceil(limit quota / ratio) like the batch quota, only for running pods and only
from the reconciler (koordinator#2694), never against CPU burst (koordinator#2306)."""

from __future__ import annotations

import uuid
from pathlib import Path
from types import MappingProxyType

from hookserver.hooks import ContainerRequest, PodRequest
from hookserver.hooks.context import RequestSource
from hookserver.hooks.plugins import CPUNormalizationPlugin, default_plugins
from hookserver.resources import Resources
from hookserver.store import NodeRecord, PodRecord
from hookserver.view import NodeView
from tests.reconciler.conftest import make_world

SPECS = MappingProxyType({"a": (MappingProxyType({"cpu": "1"}), MappingProxyType({"cpu": "2"})),
                          "b": (MappingProxyType({}), MappingProxyType({"cpu": "500m"}))})


def _record(uid: str = "u1", phase: str = "Running", qos: str = "LS") -> PodRecord:
    return PodRecord(uid=uid, namespace="ns", name="web", labels=MappingProxyType({"koordinator.sh/qosClass": qos}),
                     phase=phase, container_specs=SPECS, kube_qos="Burstable")


def _view(ratio: str | None, *pods: PodRecord) -> NodeView:
    node = NodeRecord(name="n", annotations=MappingProxyType(
        {"node.koordinator.sh/cpu-normalization-ratio": ratio} if ratio else {}))
    return NodeView.build(node=node, pods=MappingProxyType({p.uid: p for p in pods}))


def _request(source: RequestSource = RequestSource.RECONCILER, qos: str = "LS") -> PodRequest:
    return PodRequest("ns", "web", "u1", labels={"koordinator.sh/qosClass": qos}, source=source)


PLUGIN = CPUNormalizationPlugin(enabled=True)


def test_running_ls_pod_scaled_like_the_batch_quota() -> None:
    view = _view("1.5", _record())
    pod = PLUGIN.pre_run_pod_sandbox(_request(), view)
    assert pod.resources == Resources(cpu_quota_us=166667)  # ceil(250000 / 1.5)
    a = PLUGIN.pre_update_container_resources(ContainerRequest(pod=_request(), name="a"), view)
    b = PLUGIN.pre_update_container_resources(ContainerRequest(pod=_request(), name="b"), view)
    assert (a.resources.cpu_quota_us, b.resources.cpu_quota_us) == (133334, 33334)
    assert "ceil(200000 / 1.5)" in a.reason
    unscaled = PLUGIN.pre_update_container_resources(ContainerRequest(pod=_request(), name="a"), _view("0.8", _record()))
    assert unscaled.resources.cpu_quota_us == 200000  # ratio <= 1 writes the kubelet's value back


def test_creation_and_pods_not_running_are_left_to_the_kubelet() -> None:
    for source in (RequestSource.PROXY, RequestSource.NRI):
        assert not PLUGIN.pre_run_pod_sandbox(_request(source), _view("2", _record())).applied
        assert not PLUGIN.pre_update_container_resources(ContainerRequest(pod=_request(source), name="a"),
                                                         _view("2", _record())).applied
    pending = PLUGIN.pre_run_pod_sandbox(_request(), _view("2", _record(phase="Pending")))
    assert not pending.applied and "2694" in pending.reason


def test_only_cpu_share_pods_with_a_ratio_and_a_limit() -> None:
    assert not PLUGIN.pre_run_pod_sandbox(_request(qos="LSR"), _view("2", _record(qos="LSR"))).applied
    assert not PLUGIN.pre_run_pod_sandbox(_request(), _view(None, _record())).applied
    no_limit = PodRecord(uid="u1", namespace="ns", name="web", phase="Running",
                         labels=MappingProxyType({"koordinator.sh/qosClass": "LS"}),
                         container_specs=MappingProxyType({"a": (MappingProxyType({}), MappingProxyType({}))}))
    assert "no CPU limit" in PLUGIN.pre_run_pod_sandbox(_request(), _view("2", no_limit)).reason


def test_stands_down_while_cpu_burst_owns_ls_quota() -> None:
    def gates(values: dict[str, bool]) -> dict[str, bool]:
        plugins = {p.name: p for p in default_plugins(lambda name: values.get(name, False))}  # type: ignore[attr-defined]
        return {"CPUNormalization": plugins["CPUNormalization"].enabled}  # type: ignore[attr-defined]

    assert gates({"CPUNormalization": True, "CPUBurst": True}) == {"CPUNormalization": False}
    assert gates({"CPUNormalization": True, "CPUBurst": False}) == {"CPUNormalization": True}
    assert gates({"CPUNormalization": False, "CPUBurst": False}) == {"CPUNormalization": False}


def test_the_reconciler_scales_a_running_pod_leveled(tmp_path: Path) -> None:
    world = make_world(tmp_path / "cg", plugins=[CPUNormalizationPlugin(enabled=True)])
    world.store.set_node(NodeRecord(name="n", annotations=MappingProxyType(
        {"node.koordinator.sh/cpu-normalization-ratio": "2"})))
    uid, cid = str(uuid.uuid4()), uuid.uuid4().hex
    world.store.upsert_pod(PodRecord(
        uid=uid, namespace="default", name="web", labels=MappingProxyType({"koordinator.sh/qosClass": "LS"}),
        kube_qos="Burstable", phase="Running", source="apiserver",
        container_ids=MappingProxyType({"a": f"containerd://{cid}"}),
        container_specs=MappingProxyType({"a": (MappingProxyType({}), MappingProxyType({"cpu": "2"}))}),
    ))
    pod_rel = world.layout.pod_dir("burstable", uid)
    crel = world.layout.container_dir(pod_rel, cid)
    for rel in (pod_rel, crel):  # the kubelet's values
        world.tree.cgroup(rel, **{"cpu.cfs_quota_us": "200000"})
    world.engine.run(trigger="start")
    assert world.tree.read(pod_rel, "cpu.cfs_quota_us") == "100000"
    assert world.tree.read(crel, "cpu.cfs_quota_us") == "100000"
