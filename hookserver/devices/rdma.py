"""The node's RDMA devices, read from sysfs the way koordlet's RDMA collector finds them
(`pkg/koordlet/metricsadvisor/devices/rdma/collector_rdma_linux.go`, `util/system/{rdma,sriov}.go`).

koordlet walks every PCI network device (class 0x02), skips SR-IOV virtual functions (a `physfn` link), and
keeps those with RDMA devices. Here the walk starts at `/sys/class/infiniband/<dev>/device` instead (the same
PCI functions, without reading every PCI device on the host); what each one becomes is koordlet's rule:

* the minor is the number in the first (sorted) RDMA device name of the function, `mlx<N>_<minor>`; a name
  that does not match is not reported (koordlet logs and skips it too);
* the NUMA node is `numa_node`, -1 (no affinity) read as 0; the PCIe root is the `pci<domain>:<bus>` part of
  the function's resolved sysfs path;
* healthy when every port of that RDMA device is ACTIVE (no ports: unhealthy);
* with `sriov_numvfs` > 0 the VFs are the `virtfn<N>` links, by number, each named by its bus id.

A malformed entry (a dangling link, an unreadable `numa_node`) is left out and named in `problems`: one bad
device never hides the others.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from hookserver.system.roots import SystemRoots

__all__ = ["RdmaDevice", "RdmaDiscovery", "discover_rdma"]

_PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_RDMA_NAME = re.compile(r"^mlx\d+_(\d+)$")
_PCIE_ROOT = re.compile(r"pci\d{4}:[0-9a-fA-F]{2}")
_NET_CLASS = 0x02
_VIRTFN = re.compile(r"^virtfn(\d+)$")


@dataclass(frozen=True, slots=True)
class RdmaDevice:
    """One RDMA-capable PCI function (a PF), as the Device report names it."""

    bus_id: str
    names: tuple[str, ...]  # its RDMA devices (/sys/class/infiniband), sorted
    minor: int
    numa_node: int
    pcie_root: str
    healthy: bool
    vf_enabled: bool = False
    vfs: tuple[str, ...] = ()  # VF bus ids, by VF number


@dataclass(frozen=True, slots=True)
class RdmaDiscovery:
    devices: tuple[RdmaDevice, ...] = ()
    problems: tuple[str, ...] = ()


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _functions(roots: SystemRoots, problems: list[str]) -> dict[str, list[str]]:
    """PCI bus id -> the RDMA device names on it."""
    base = roots.sys_path("class", "infiniband")
    try:
        names = sorted(os.listdir(base))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        problems.append(f"{base}: {exc.strerror or exc}")
        return {}
    out: dict[str, list[str]] = {}
    for name in names:
        link = os.path.join(base, name, "device")
        target = os.path.realpath(link)
        bus_id = os.path.basename(target).lower()
        if not os.path.isdir(target) or not _PCI_ADDRESS.match(bus_id):
            problems.append(f"{name}: {link} does not lead to a PCI function")
            continue
        out.setdefault(bus_id, []).append(name)
    return out


def _vfs(pci_dir: str) -> tuple[str, ...]:
    numbered: list[tuple[int, str]] = []
    try:
        entries = os.listdir(pci_dir)
    except OSError:
        return ()
    for entry in entries:
        match = _VIRTFN.match(entry)
        path = os.path.join(pci_dir, entry)
        if match and os.path.islink(path):
            numbered.append((int(match.group(1)), os.path.basename(os.path.realpath(path))))
    return tuple(bus for _, bus in sorted(numbered))


def _healthy(roots: SystemRoots, name: str) -> bool:
    ports_dir = roots.sys_path("class", "infiniband", name, "ports")
    try:
        ports = os.listdir(ports_dir)
    except OSError:
        return False
    if not ports:
        return False
    for port in ports:
        state = _read(os.path.join(ports_dir, port, "state"))
        if state is None or "ACTIVE" not in state:
            return False
    return True


def _one(roots: SystemRoots, bus_id: str, names: list[str], problems: list[str]) -> RdmaDevice | None:
    pci_dir = roots.sys_path("bus", "pci", "devices", bus_id)
    if os.path.lexists(os.path.join(pci_dir, "physfn")):
        return None  # a VF: reported in its PF's vfGroups, not as a device of its own
    raw_class = _read(os.path.join(pci_dir, "class"))
    try:
        net = raw_class is not None and (int(raw_class, 16) >> 16) == _NET_CLASS
    except ValueError:
        net = False
    if not net:
        problems.append(f"{bus_id}: PCI class {raw_class!r} is not a network device")
        return None
    names = sorted(names)
    match = _RDMA_NAME.match(names[0])
    if match is None:
        problems.append(f"{bus_id}: RDMA device name {names[0]!r} is not mlx<N>_<minor>")
        return None
    raw_numa = _read(os.path.join(pci_dir, "numa_node"))
    try:
        numa = int(raw_numa) if raw_numa is not None else None
    except ValueError:
        numa = None
    if numa is None:
        problems.append(f"{bus_id}: numa_node unreadable ({raw_numa!r})")
        return None
    root = _PCIE_ROOT.search(os.path.realpath(pci_dir))
    raw_vfs = _read(os.path.join(pci_dir, "sriov_numvfs"))
    vf_enabled = raw_vfs is not None and raw_vfs.isdigit() and int(raw_vfs) > 0
    return RdmaDevice(
        bus_id=bus_id,
        names=tuple(names),
        minor=int(match.group(1)),
        numa_node=0 if numa == -1 else numa,
        pcie_root=root.group(0) if root else "",
        healthy=_healthy(roots, names[0]),
        vf_enabled=vf_enabled,
        vfs=_vfs(pci_dir) if vf_enabled else (),
    )


def discover_rdma(roots: SystemRoots) -> RdmaDiscovery:
    """Every RDMA PF under `roots.sys`, by bus id; no /sys/class/infiniband means none (not a problem)."""
    problems: list[str] = []
    devices = []
    for bus_id, names in sorted(_functions(roots, problems).items()):
        device = _one(roots, bus_id, names, problems)
        if device is not None:
            devices.append(device)
    return RdmaDiscovery(tuple(devices), tuple(problems))
