"""Driver and runtime naming (reference §4.7): slices, pod dirs, container scopes, ID prefixes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.errors import PathEscapeError
from hookserver.executor import CgroupDriver, CgroupLayout, ContainerRuntime, KubeQoS
from hookserver.system.cgroupnames import (
    container_dir_name,
    expand_slice,
    normalize_cgroup_dir,
    pod_dir,
    sandbox_dir_name,
    strip_runtime_prefix,
)
from hookserver.system import SystemRoots

UID = "1b2c3d4e-aaaa-bbbb-cccc-0123456789ab"
UID_ = UID.replace("-", "_")
CID = "0123456789abcdef" * 4


def test_expand_slice() -> None:
    assert expand_slice("kubepods.slice") == "kubepods.slice"
    assert expand_slice(f"kubepods-besteffort-pod{UID_}.slice") == (
        f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice"
    )
    assert expand_slice("-.slice") == ""


@pytest.mark.parametrize(
    "bad", ["kubepods", "-kubepods.slice", "kubepods-.slice", "a--b.slice", "a/b.slice", ".slice", "a-..slice"]
)
def test_expand_slice_refuses_malformed(bad: str) -> None:
    with pytest.raises(PathEscapeError):
        expand_slice(bad)


@pytest.mark.parametrize(
    ("qos", "systemd", "cgroupfs"),
    [
        ("besteffort", f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice",
         f"kubepods/besteffort/pod{UID}"),
        ("burstable", f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice",
         f"kubepods/burstable/pod{UID}"),
        ("guaranteed", f"kubepods.slice/kubepods-pod{UID_}.slice", f"kubepods/pod{UID}"),
    ],
)
def test_pod_dir_both_drivers(qos: str, systemd: str, cgroupfs: str) -> None:
    assert pod_dir(CgroupDriver.SYSTEMD, KubeQoS(qos), UID) == systemd
    assert pod_dir(CgroupDriver.CGROUPFS, KubeQoS(qos), UID) == cgroupfs


@pytest.mark.parametrize(
    ("runtime", "scope"),
    [("containerd", f"cri-containerd-{CID}.scope"), ("docker", f"docker-{CID}.scope"),
     ("cri-o", f"crio-{CID}.scope"), ("pouch", f"pouch-{CID}.scope")],
)
def test_container_dir_names_for_every_runtime(runtime: str, scope: str) -> None:
    rt = ContainerRuntime(runtime)
    prefixed = f"{'cri-o' if runtime == 'cri-o' else runtime}://{CID}"
    assert container_dir_name(CgroupDriver.SYSTEMD, rt, prefixed) == scope
    assert container_dir_name(CgroupDriver.SYSTEMD, rt, CID) == scope
    assert container_dir_name(CgroupDriver.CGROUPFS, rt, prefixed) == CID


def test_crio_sandbox_has_no_scope_suffix_under_systemd() -> None:
    assert sandbox_dir_name(CgroupDriver.SYSTEMD, ContainerRuntime.CRIO, f"cri-o://{CID}") == f"crio-{CID}"
    assert sandbox_dir_name(CgroupDriver.CGROUPFS, ContainerRuntime.CRIO, CID) == CID
    assert sandbox_dir_name(CgroupDriver.SYSTEMD, ContainerRuntime.CONTAINERD, CID) == f"cri-containerd-{CID}.scope"


def test_strip_runtime_prefix() -> None:
    assert strip_runtime_prefix(f"containerd://{CID}") == CID
    assert strip_runtime_prefix(f"docker://{CID}") == CID
    assert strip_runtime_prefix(CID) == CID


@pytest.mark.parametrize("bad", ["../../etc", "a/b", "..", ".", "", "containerd://../x", "x\0y", "/abs"])
def test_unsafe_container_ids_refused(bad: str) -> None:
    with pytest.raises(PathEscapeError):
        container_dir_name(CgroupDriver.CGROUPFS, ContainerRuntime.CONTAINERD, bad)


@pytest.mark.parametrize("bad", ["../x", "a/b", "x\0"])
def test_unsafe_pod_uid_refused(bad: str) -> None:
    with pytest.raises(PathEscapeError):
        pod_dir(CgroupDriver.CGROUPFS, KubeQoS.BESTEFFORT, bad)


def test_normalize_expanded_and_bare_and_runc_forms() -> None:
    expanded = f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice"
    assert normalize_cgroup_dir(expanded) == expanded.lstrip("/")
    assert normalize_cgroup_dir(f"kubepods-besteffort-pod{UID_}.slice") == expanded.lstrip("/")
    assert normalize_cgroup_dir(f"kubepods-besteffort-pod{UID_}.slice/cri-containerd-x.scope") == (
        expanded.lstrip("/") + "/cri-containerd-x.scope"
    )
    assert normalize_cgroup_dir(f"kubepods-besteffort-pod{UID_}.slice:cri-containerd:{CID}") == (
        expanded.lstrip("/") + f"/cri-containerd-{CID}.scope"
    )
    assert normalize_cgroup_dir(f"/kubepods/besteffort/pod{UID}/") == f"kubepods/besteffort/pod{UID}"
    assert normalize_cgroup_dir("//kubepods/./x") == "kubepods/x"
    assert normalize_cgroup_dir("/") == ""


@pytest.mark.parametrize("bad", ["../../etc", "/kubepods/../../..", "kubepods/..", "a\0b", "x.slice:..:y"])
def test_normalize_refuses_traversal(bad: str) -> None:
    with pytest.raises(PathEscapeError):
        normalize_cgroup_dir(bad)


def test_layout_container_dir_from_bare_and_expanded_parents() -> None:
    systemd = CgroupLayout(version="v1", driver="systemd", runtime="containerd", roots=SystemRoots())  # type: ignore[arg-type]
    bare = f"kubepods-besteffort-pod{UID_}.slice"
    want = f"kubepods.slice/kubepods-besteffort.slice/{bare}/cri-containerd-{CID}.scope"
    assert systemd.container_dir(bare, f"containerd://{CID}") == want
    assert systemd.container_dir("/" + want.rsplit("/", 1)[0], CID) == want
    assert systemd.pod_dir("besteffort", UID) == want.rsplit("/", 1)[0]
    cgroupfs = CgroupLayout(version="v1", driver="cgroupfs", runtime="docker", roots=SystemRoots())  # type: ignore[arg-type]
    assert cgroupfs.container_dir(f"/kubepods/besteffort/pod{UID}", f"docker://{CID}") == (
        f"kubepods/besteffort/pod{UID}/{CID}"
    )
    crio = CgroupLayout(version="v2", driver="systemd", runtime="cri-o", roots=SystemRoots())  # type: ignore[arg-type]
    assert crio.sandbox_dir(bare, CID).endswith(f"{bare}/crio-{CID}")
    assert crio.qos_dir("guaranteed") == "kubepods.slice"


_words = st.lists(st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True), min_size=1, max_size=6)


@given(_words)
def test_expand_slice_structure(words: list[str]) -> None:
    name = "-".join(words) + ".slice"
    parts = expand_slice(name).split("/")
    assert len(parts) == len(words)
    assert parts[-1] == name
    for parent, child in zip(parts, parts[1:]):
        # each parent is a dash-prefix of its child
        assert child.startswith(parent.removesuffix(".slice") + "-")
