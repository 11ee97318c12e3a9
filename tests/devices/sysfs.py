"""Fixture sys trees for RDMA discovery: PCI functions under devices/pci<root>/..., the bus/pci/devices links
and class/infiniband/<dev>/device links, as the kernel lays them out."""

from __future__ import annotations

import os
from pathlib import Path

from hookserver.system.roots import SystemRoots


def pci_function(sys: Path, root: str, bus_id: str, *, numa: str = "0", pci_class: str = "0x020700",
                 numvfs: int | None = None, parent: str = "") -> Path:
    """A PCI function under devices/<root>[/<parent>]/<bus_id>, linked from bus/pci/devices."""
    base = sys / "devices" / root
    if parent:
        base = base / parent
    fn = base / bus_id
    fn.mkdir(parents=True, exist_ok=True)
    (fn / "numa_node").write_text(numa + "\n")
    (fn / "class").write_text(pci_class + "\n")
    if numvfs is not None:
        (fn / "sriov_numvfs").write_text(f"{numvfs}\n")
    links = sys / "bus" / "pci" / "devices"
    links.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(fn, links), links / bus_id)
    return fn


def add_vf(sys: Path, pf: Path, number: int, bus_id: str) -> None:
    vf = pci_function(sys, pf.parent.relative_to(sys / "devices").as_posix(), bus_id)
    os.symlink(os.path.relpath(pf, vf), vf / "physfn")
    os.symlink(os.path.relpath(vf, pf), pf / f"virtfn{number}")


def rdma_device(sys: Path, name: str, function: Path, *, ports: dict[str, str] | None = None) -> None:
    dev = sys / "class" / "infiniband" / name
    dev.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(function, dev), dev / "device")
    for port, state in (ports if ports is not None else {"1": "4: ACTIVE"}).items():
        (dev / "ports" / port).mkdir(parents=True)
        (dev / "ports" / port / "state").write_text(state + "\n")


def roots(sys: Path) -> SystemRoots:
    return SystemRoots(sys=str(sys))
