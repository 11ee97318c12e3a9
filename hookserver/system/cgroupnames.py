"""Cgroup directory names for the kubelet's two drivers and the four container runtimes (reference §4.7).

In the system layer so that the executor (which writes) and the collectors (which read) share one
naming without importing each other. Pure string work, no I/O: the systemd driver differs from cgroupfs
only in how directories are named (runc's `ExpandSlice` idea), so everything below the name is shared. IDs and UIDs are checked here so that a
crafted container ID can never smuggle a `/` or `..` into a path; the resolver checks containment again.
"""

from __future__ import annotations

import enum
import re

from hookserver.errors import PathEscapeError

__all__ = [
    "CgroupDriver",
    "ContainerRuntime",
    "KubeQoS",
    "container_dir_name",
    "expand_slice",
    "kube_qos_of_cgroup_parent",
    "kube_qos_of_pod",
    "kube_qos_of_status",
    "normalize_cgroup_dir",
    "pod_dir",
    "qos_dir",
    "runtime_of",
    "sandbox_dir_name",
    "strip_runtime_prefix",
]


class CgroupDriver(enum.Enum):
    SYSTEMD = "systemd"
    CGROUPFS = "cgroupfs"


class ContainerRuntime(enum.Enum):
    CONTAINERD = "containerd"
    DOCKER = "docker"
    CRIO = "cri-o"
    POUCH = "pouch"


class KubeQoS(enum.Enum):
    GUARANTEED = "guaranteed"
    BURSTABLE = "burstable"
    BESTEFFORT = "besteffort"


def kube_qos_of_status(text: str) -> KubeQoS | None:
    """The pod status's qosClass (`BestEffort`, `Burstable`, `Guaranteed`, any case, dashes ignored) as the
    kubelet's QoS level; None when empty or unknown."""
    try:
        return KubeQoS(text.lower().replace("-", "")) if text else None
    except ValueError:
        return None


_SYSTEMD_POD = re.compile(r"kubepods-(?:(besteffort|burstable)-)?pod[^/]+\.slice")


def kube_qos_of_cgroup_parent(parent: str) -> KubeQoS | None:
    """The QoS tier the kubelet put a pod in, read from its cgroup parent: systemd
    `kubepods-besteffort-pod<uid>.slice` / `kubepods-burstable-pod…` / `kubepods-pod…` (guaranteed), cgroupfs
    `/kubepods/besteffort/pod<uid>` / `/kubepods/burstable/pod…` / `/kubepods/pod…`. None for anything else.
    What a pod known only from the runtime (proxy, NRI, standalone) has instead of a status qosClass."""
    parts = [p for p in parent.split("/") if p]
    for part in reversed(parts):
        match = _SYSTEMD_POD.fullmatch(part)
        if match:
            return KubeQoS(match.group(1)) if match.group(1) else KubeQoS.GUARANTEED
    if "kubepods" in parts:
        after = parts[parts.index("kubepods") + 1:]
        if after and after[0] in (KubeQoS.BESTEFFORT.value, KubeQoS.BURSTABLE.value) and len(after) > 1:
            return KubeQoS(after[0])
        if after and after[0].startswith("pod"):
            return KubeQoS.GUARANTEED
    return None


def kube_qos_of_pod(status_qos: str, cgroup_parent: str) -> KubeQoS | None:
    """The pod's kube QoS: the status's qosClass, else the tier of its cgroup parent (None when neither says).
    The one rule every pod classifier uses, so a pod the apiserver never described is classed like one it did."""
    return kube_qos_of_status(status_qos) or kube_qos_of_cgroup_parent(cgroup_parent)


# systemd scope prefix per runtime (`<prefix>-<id>.scope`).
_SCOPE_PREFIX = {
    ContainerRuntime.CONTAINERD: "cri-containerd",
    ContainerRuntime.DOCKER: "docker",
    ContainerRuntime.CRIO: "crio",
    ContainerRuntime.POUCH: "pouch",
}

# `<runtime>://<hash>` prefixes the CRI and the kubelet put on container IDs.
_ID_PREFIXES = ("containerd://", "docker://", "cri-o://", "crio://", "pouch://")

# One safe path component: what container IDs, pod UIDs and unit names are made of. No '/', no NUL.
_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]*")
_SLICE_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@]*")


def _check_component(value: str, what: str) -> str:
    if not value or not _COMPONENT.fullmatch(value) or value in (".", ".."):
        raise PathEscapeError(f"{what} {value!r} is not a single safe path component", value=value)
    return value


def strip_runtime_prefix(container_id: str) -> str:
    """`containerd://abc` -> `abc`. A bare ID is returned unchanged."""
    for prefix in _ID_PREFIXES:
        if container_id.startswith(prefix):
            return container_id[len(prefix):]
    return container_id


_RUNTIMES_BY_PREFIX = {
    "containerd": ContainerRuntime.CONTAINERD,
    "docker": ContainerRuntime.DOCKER,
    "cri-o": ContainerRuntime.CRIO,
    "crio": ContainerRuntime.CRIO,
    "pouch": ContainerRuntime.POUCH,
}


def runtime_of(container_id: str, default: ContainerRuntime) -> ContainerRuntime:
    """The runtime a `<runtime>://<id>` container ID names (it picks the systemd scope name, so a docker
    container on a containerd-configured node still resolves); `default` for a bare ID."""
    prefix, sep, _ = container_id.partition("://")
    return _RUNTIMES_BY_PREFIX.get(prefix, default) if sep else default


def expand_slice(name: str) -> str:
    """A systemd slice name to its path: `a-b-c.slice` -> `a.slice/a-b.slice/a-b-c.slice`.

    Each dash-separated prefix is a parent slice; `-.slice` is the root. Malformed names (leading,
    trailing or doubled dashes, a '/' inside) are refused, as systemd refuses them.
    """
    suffix = ".slice"
    if not name.endswith(suffix) or "/" in name or "\0" in name:
        raise PathEscapeError(f"{name!r} is not a systemd slice name", value=name)
    if name == "-.slice":
        return ""
    base = name[: -len(suffix)]
    if not base or base.startswith("-") or base.endswith("-") or "--" in base:
        raise PathEscapeError(f"{name!r} is not a valid systemd slice name", value=name)
    _check_component(base, "slice")
    parts: list[str] = []
    prefix = ""
    for word in base.split("-"):
        if not _SLICE_WORD.fullmatch(word):
            raise PathEscapeError(f"{name!r} has an invalid slice word {word!r}", value=name)
        prefix = f"{prefix}-{word}" if prefix else word
        parts.append(prefix + suffix)
    return "/".join(parts)


def _expand_cgroups_path(value: str) -> str:
    """runc's systemd form `parent.slice:prefix:name` -> `<expanded parent>/<prefix>-<name>.scope`."""
    parent, prefix, name = value.split(":")
    _check_component(name, "unit name")
    unit = name if name.endswith(".slice") else (f"{prefix}-{name}.scope" if prefix else f"{name}.scope")
    _check_component(unit, "unit name")
    return f"{expand_slice(parent or '-.slice')}/{unit}".lstrip("/")


def normalize_cgroup_dir(cgroup_dir: str) -> str:
    """The relative directory a CRI cgroup parent (or plan dir) names, with no leading '/'.

    Accepts the expanded form (`/kubepods/besteffort/pod<uid>`), a bare systemd slice as the first component
    (`kubepods-besteffort-pod<uid_>.slice[/<scope>]`, expanded the systemd way) and runc's
    `slice:prefix:name`. Refuses NUL bytes and `..` components; `.` and empty components are dropped.
    Containment under the hierarchy root is checked again by the resolver, after symlinks.
    """
    if "\0" in cgroup_dir:
        raise PathEscapeError(f"cgroup dir {cgroup_dir!r} contains a NUL byte", value=cgroup_dir)
    if "/" not in cgroup_dir and cgroup_dir.count(":") == 2:
        return _expand_cgroups_path(cgroup_dir)
    parts = [p for p in cgroup_dir.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise PathEscapeError(f"cgroup dir {cgroup_dir!r} has a '..' component", value=cgroup_dir)
    # A first component with a dash that ends in .slice is a bare (unexpanded) slice: a top-level path
    # always starts with a top-level slice such as kubepods.slice, which has no dash.
    if parts and parts[0].endswith(".slice") and "-" in parts[0] and parts[0] != "-.slice":
        parts = expand_slice(parts[0]).split("/") + parts[1:]
    return "/".join(parts)


def qos_dir(driver: CgroupDriver, qos: KubeQoS) -> str:
    """The kubelet's QoS-level directory (Guaranteed pods sit directly under the kubepods root)."""
    if driver is CgroupDriver.SYSTEMD:
        if qos is KubeQoS.GUARANTEED:
            return "kubepods.slice"
        return f"kubepods.slice/kubepods-{qos.value}.slice"
    if qos is KubeQoS.GUARANTEED:
        return "kubepods"
    return f"kubepods/{qos.value}"


def pod_dir(driver: CgroupDriver, qos: KubeQoS, pod_uid: str) -> str:
    """The pod directory from kube QoS and UID; systemd writes the UID's dashes as underscores."""
    _check_component(pod_uid, "pod UID")
    if driver is CgroupDriver.SYSTEMD:
        uid = pod_uid.replace("-", "_")
        if qos is KubeQoS.GUARANTEED:
            return f"kubepods.slice/kubepods-pod{uid}.slice"
        return f"{qos_dir(driver, qos)}/kubepods-{qos.value}-pod{uid}.slice"
    return f"{qos_dir(driver, qos)}/pod{pod_uid}"


def container_dir_name(driver: CgroupDriver, runtime: ContainerRuntime, container_id: str) -> str:
    """The container's own directory name: `cri-containerd-<id>.scope` etc. under systemd, `<id>` otherwise."""
    cid = _check_component(strip_runtime_prefix(container_id), "container ID")
    if driver is CgroupDriver.SYSTEMD:
        return f"{_SCOPE_PREFIX[runtime]}-{cid}.scope"
    return cid


def sandbox_dir_name(driver: CgroupDriver, runtime: ContainerRuntime, sandbox_id: str) -> str:
    """The pod sandbox's directory: as a container, except CRI-O under systemd uses `crio-<id>` (no .scope)."""
    if driver is CgroupDriver.SYSTEMD and runtime is ContainerRuntime.CRIO:
        sid = _check_component(strip_runtime_prefix(sandbox_id), "sandbox ID")
        return f"crio-{sid}"
    return container_dir_name(driver, runtime, sandbox_id)
