"""The kubelet's systemd cgroup driver's layout, made by systemd itself, for the VM tier's guest tests.

Why through systemd: on a real node systemd owns `kubepods.slice` and below (the kubelet and runc start them as
transient units over D-Bus) and re-applies the units' own properties on `daemon-reload`; cgroup directories made
with mkdir would hide exactly that. The slices are started as the kubelet's libcontainer does (DefaultDependencies
no, Wants= the parent slice, CPU/memory/IO/tasks accounting on, CPUWeight from the pod's shares) with `busctl`
(systemd's own D-Bus client, no Python dependency); a container is a `cri-containerd-<id>.scope` with
Delegate=yes in its pod slice, as runc makes it, holding a sleeping process.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CGROUP", "KubeletSlices", "PodSlice", "busctl_properties", "start_slice"]

CGROUP = Path("/sys/fs/cgroup")
_MANAGER = ("org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager")


def _busctl(*args: str) -> str:
    # "--": an argument such as the root slice's name "-.slice" is no option.
    done = subprocess.run(["busctl", "--", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"busctl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def busctl_properties(props: list[tuple[str, str, str]]) -> list[str]:
    """busctl's flat argument form of an a(sv) array: count, then name, signature, value(s) per entry."""
    out = [str(len(props))]
    for name, sig, value in props:
        out += [name, sig, *value.split(" ")] if sig == "as" else [name, sig, value]
    return out


def start_slice(name: str, parent: str, cpu_weight: int | None = None,
                extra: tuple[tuple[str, str, str], ...] = ()) -> Path:
    """StartTransientUnit of a slice as the kubelet's driver does; returns its cgroup directory once it exists."""
    props = [("Description", "s", f"libcontainer container {name}"), ("Wants", "as", f"1 {parent}"),
             ("DefaultDependencies", "b", "false"), ("MemoryAccounting", "b", "true"),
             ("CPUAccounting", "b", "true"), ("IOAccounting", "b", "true"), ("TasksAccounting", "b", "true")]
    if cpu_weight is not None:
        props.append(("CPUWeight", "t", str(cpu_weight)))
    props.extend(extra)
    _busctl("call", *_MANAGER, "StartTransientUnit", "ssa(sv)a(sa(sv))", name, "replace",
            *busctl_properties(props), "0")
    path = slice_path(name)
    _wait(path.is_dir, f"{name}'s cgroup")
    delegate_controllers(path)
    return path


def delegate_controllers(path: Path) -> None:
    """Enable every available controller from the root down to `path`'s parent, as runc's systemd driver does
    when it starts a kubelet slice or a container scope (libcontainer's createCgroupsv2Path): what makes the
    kubepods slices' cpuset.* files exist on a real node."""
    for parent in reversed(path.relative_to(CGROUP).parents):
        d = CGROUP / parent
        wanted = (d / "cgroup.controllers").read_text().split()
        if wanted:
            (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))


def slice_path(name: str) -> Path:
    """A slice's cgroup directory: systemd nests `a-b-c.slice` under `a.slice/a-b.slice/`."""
    stem = name.removesuffix(".slice")
    parts = stem.split("-")
    return CGROUP.joinpath(*("-".join(parts[: i + 1]) + ".slice" for i in range(len(parts))))


def stop_unit(name: str) -> None:
    subprocess.run(["systemctl", "stop", name], capture_output=True, timeout=30)


def _wait(predicate: object, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class PodSlice:
    """One pod: its slice and the container scopes started in it."""

    qos: str  # "besteffort" | "burstable"
    uid: str
    scopes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"kubepods-{self.qos}-pod{self.uid.replace('-', '_')}.slice"

    @property
    def path(self) -> Path:
        return slice_path(self.name)

    @property
    def cgroup_parent(self) -> str:
        """The CRI cgroup parent the kubelet's systemd driver hands the runtime (the expanded slice path)."""
        return "/" + str(self.path.relative_to(CGROUP))

    def start_container(self, container_id: str, *properties: str) -> Path:
        """A `cri-containerd-<id>.scope` with Delegate=yes in this pod's slice, holding `sleep infinity`
        (`properties`: more `Name=value` unit properties, as runc passes the container's resources)."""
        unit = f"cri-containerd-{container_id}.scope"
        props = [arg for prop in ("Delegate=yes", *properties) for arg in ("-p", prop)]
        proc = subprocess.Popen(["systemd-run", "--quiet", "--scope", f"--unit={unit}", f"--slice={self.name}",
                                 *props, "sleep", "infinity"])
        self.scopes[container_id] = proc
        scope = self.path / unit
        _wait(lambda: scope.is_dir() and (scope / "cgroup.procs").read_text().strip() != "", f"{unit}")
        delegate_controllers(scope)
        return scope


@dataclass
class KubeletSlices:
    """kubepods.slice with its burstable and besteffort slices, and the pods started below them."""

    pods: list[PodSlice] = field(default_factory=list)

    def start(self) -> KubeletSlices:
        start_slice("kubepods.slice", "-.slice")
        start_slice("kubepods-burstable.slice", "kubepods.slice")
        start_slice("kubepods-besteffort.slice", "kubepods.slice", cpu_weight=1)
        return self

    def pod(self, qos: str = "besteffort", *, cpu_weight: int = 1,
            extra: tuple[tuple[str, str, str], ...] = ()) -> PodSlice:
        """A pod slice as the kubelet starts it (`extra`: more unit properties, e.g. the pod's CPU quota)."""
        pod = PodSlice(qos, str(uuid.uuid4()))
        start_slice(pod.name, f"kubepods-{qos}.slice", cpu_weight=cpu_weight, extra=extra)
        self.pods.append(pod)
        return pod

    def stop(self) -> None:
        """Every scope and slice this layout started, innermost first; the node is as before."""
        for pod in self.pods:
            for cid, proc in pod.scopes.items():
                stop_unit(f"cri-containerd-{cid}.scope")
                proc.kill()
                proc.wait(timeout=10)
            stop_unit(pod.name)
        for name in ("kubepods-besteffort.slice", "kubepods-burstable.slice", "kubepods.slice"):
            stop_unit(name)
        self.pods.clear()
        # systemd removes the directories after the stop job: the next test's kubepods.slice must not find
        # (and then lose) the old one.
        _wait(lambda: not (CGROUP / "kubepods.slice").exists(), "kubepods.slice's removal")
