"""Naming a running pod's cgroups: container statuses from the informer, IDs from hooks/NRI, drivers, runtimes."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from hookserver.errors import InputError, PathEscapeError
from hookserver.executor import CgroupLayout
from hookserver.informer.convert import pod_from_json
from hookserver.informer.handlers import PodHandler
from hookserver.reconciler import pod_target, runtime_of
from hookserver.store import ContainerRecord, PodRecord, StateStore
from hookserver.store.changes import pod_changed_fields
from hookserver.store.records import started_containers
from hookserver.system import SystemRoots
from hookserver.system.cgroupnames import ContainerRuntime, strip_runtime_prefix

UID = "0b7c1e2a-1111-2222-3333-444455556666"
CTR = "a" * 64


def _json(statuses: Any = None, init: Any = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running", "qosClass": "BestEffort"}
    if statuses is not None:
        status["containerStatuses"] = statuses
    if init is not None:
        status["initContainerStatuses"] = init
    return {"metadata": {"name": "p", "namespace": "ns", "uid": UID},
            "spec": {"containers": [{"name": "main"}]}, "status": status}


def test_container_ids_come_from_container_and_init_container_statuses() -> None:
    pod = pod_from_json(_json(
        statuses=[{"name": "main", "containerID": f"containerd://{CTR}"}, {"name": "waiting"}],
        init=[{"name": "setup", "containerID": "docker://" + "b" * 64}],
    ), source="apiserver", now=1.0)
    assert dict(pod.container_ids) == {"setup": "docker://" + "b" * 64, "main": f"containerd://{CTR}"}
    assert pod_from_json(_json(), source="kubelet", now=1.0).container_ids == {}


@pytest.mark.parametrize(("statuses", "field"), [
    ({"main": 1}, "status.containerStatuses"),
    (["nope"], "status.containerStatuses[0]"),
    ([{"containerID": "containerd://x"}], "status.containerStatuses[0].name"),
    ([{"name": "main", "containerID": 7}], "status.containerStatuses[0].containerID"),
])
def test_malformed_statuses_are_refused_naming_the_field(statuses: Any, field: str) -> None:
    with pytest.raises(InputError) as caught:
        pod_from_json(_json(statuses=statuses), source="apiserver", now=1.0)
    assert caught.value.field == field


def test_a_started_container_is_a_pod_change_and_the_handler_knows_what_it_lists() -> None:
    before = pod_from_json(_json(statuses=[{"name": "main"}]), source="apiserver", now=1.0)
    after = pod_from_json(_json(statuses=[{"name": "main", "containerID": f"containerd://{CTR}"}]),
                          source="apiserver", now=2.0)
    assert pod_changed_fields(before, after) == {"containers"}
    store = StateStore()
    handler = PodHandler(store, source="apiserver")
    handler.replace([_json()])
    assert handler.lists(UID) and not handler.lists("other")
    handler.apply("DELETED", _json())
    assert not handler.lists(UID)


def _layout(driver: str, runtime: str = "containerd") -> CgroupLayout:
    return CgroupLayout(version="v1", driver=driver, runtime=runtime, roots=SystemRoots(cgroup="/nonexistent"))  # type: ignore[arg-type]


def _pod(**changes: Any) -> PodRecord:
    base = PodRecord(uid=UID, namespace="ns", name="p", kube_qos="BestEffort",
                     container_ids=MappingProxyType({"main": f"containerd://{CTR}"}))
    return replace(base, **changes)


def test_cgroupfs_and_systemd_names_and_the_runtime_prefix() -> None:
    never = lambda rel: False  # noqa: E731
    t = pod_target(_pod(), (), _layout("cgroupfs"), probe=never)
    assert t is not None and t.cgroup_dir == f"kubepods/besteffort/pod{UID}"
    assert [(c.name, c.id, c.cgroup_dir) for c in t.containers] == [("main", CTR, f"kubepods/besteffort/pod{UID}/{CTR}")]
    t = pod_target(_pod(container_ids=MappingProxyType({"main": f"cri-o://{CTR}"})), (), _layout("systemd"), probe=never)
    uid_ = UID.replace("-", "_")
    assert t is not None and t.containers[0].cgroup_dir == (
        f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid_}.slice/crio-{CTR}.scope")
    assert runtime_of(f"docker://{CTR}", ContainerRuntime.CONTAINERD) is ContainerRuntime.DOCKER
    assert runtime_of(CTR, ContainerRuntime.CRIO) is ContainerRuntime.CRIO


def test_hook_learnt_containers_pending_ones_and_an_nri_parent_that_is_already_the_container() -> None:
    layout = _layout("cgroupfs")
    parent = f"/kubepods/besteffort/pod{UID}"
    pod = _pod(cgroup_parent=parent, container_ids=MappingProxyType({}))
    pending = ContainerRecord(id=f"pending:{UID}/main", pod_uid=UID, name="main")
    t = pod_target(pod, (pending,), layout, probe=lambda rel: False)
    assert t is not None and t.cgroup_dir == parent and t.containers == () and t.pending == 1
    nri = ContainerRecord(id=CTR, pod_uid=UID, name="main", cgroup_parent=f"{parent}/{CTR}")
    t = pod_target(pod, (nri, pending), layout, probe=lambda rel: False)
    assert t is not None and [c.cgroup_dir for c in t.containers] == [f"kubepods/besteffort/pod{UID}/{CTR}"]
    assert t.pending == 0  # a started container: the pod is no longer being created


def test_unknown_qos_is_probed_and_bad_names_are_refused() -> None:
    layout = _layout("cgroupfs")
    pod = _pod(kube_qos="")
    found = pod_target(pod, (), layout, probe=lambda rel: rel.startswith("kubepods/burstable/"))
    assert found is not None and found.cgroup_dir == f"kubepods/burstable/pod{UID}"
    assert pod_target(pod, (), layout, probe=lambda rel: False) is None
    with pytest.raises(PathEscapeError):
        pod_target(_pod(cgroup_parent="/kubepods/../../etc"), (), layout, probe=lambda rel: True)
    with pytest.raises(PathEscapeError):
        pod_target(_pod(container_ids=MappingProxyType({"x": "containerd://../../etc"})), (), layout,
                   probe=lambda rel: True)


def test_containers_follow_the_stores_started_containers_rule() -> None:
    """The reconciler names the containers the collectors and QoS readers measure and tune
    (`hookserver.store.records.started_containers`). It used to keep its own list, which refused the whole pod
    (a PathEscapeError: "cgroup not named", then forgotten as gone) for a status whose containerID is only a
    runtime prefix, an entry the shared rule skips because it names no cgroup."""
    layout = _layout("cgroupfs")
    side = ContainerRecord(id="c" * 64, pod_uid=UID, name="side")
    pending = ContainerRecord(id=f"pending:{UID}/late", pod_uid=UID, name="late")
    pod = _pod(container_ids=MappingProxyType({"main": f"containerd://{CTR}", "setup": "containerd://"}))
    t = pod_target(pod, (side, pending), layout, probe=lambda rel: False)
    assert t is not None
    shared = [(r.name, strip_runtime_prefix(r.id)) for r in started_containers(pod, (side,))]
    assert [(c.name, c.id) for c in t.containers] == shared == [("main", CTR), ("side", "c" * 64)]
    assert t.pending == 0
