"""The node's RDMA character devices, read from sysfs once, for the RDMA injection hook.

koordlet's rdma hook (`pkg/koordlet/runtimehooks/hooks/rdma/rdma.go`) stats `/dev/infiniband/rdma_cm` and,
per allocated PCI function, lists `/sys/bus/pci/devices/<bdf>/infiniband_verbs/` for its `uverbsN`, then
stats `/dev/infiniband/uverbsN` for the device numbers, on every CreateContainer. Hooks here are pure, so the
same facts are read here instead, under the configured sys root: `<sys>/class/misc/rdma_cm/dev` and
`<sys>/bus/pci/devices/<bdf>/infiniband_verbs/uverbsN/dev` hold the `major:minor` the device nodes carry
(sysfs is where udev takes them from). The table is read at start and whenever the caller asks again
(VFs created later need a new read: `read_rdma_devices` is cheap, a few small files per function).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.system.files import read_text
from hookserver.system.roots import SystemRoots

__all__ = ["IB_DEV_DIR", "RDMA_CM_PATH", "CharDevice", "RdmaDevices", "read_rdma_devices"]

IB_DEV_DIR = "/dev/infiniband"
RDMA_CM_PATH = IB_DEV_DIR + "/rdma_cm"
_NO_FUNCTIONS: Mapping[str, CharDevice] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CharDevice:
    """A character device node: its path under /dev and its numbers."""

    path: str
    major: int
    minor: int


@dataclass(frozen=True, slots=True)
class RdmaDevices:
    """`rdma_cm` (None when the node has no RDMA CM) and each PCI function's uverbs device, by bus id."""

    rdma_cm: CharDevice | None = None
    uverbs_by_bus_id: Mapping[str, CharDevice] = field(default_factory=lambda: _NO_FUNCTIONS)


def _numbers(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    major, sep, minor = text.strip().partition(":")
    if not sep or not major.isdigit() or not minor.isdigit():
        return None
    return int(major), int(minor)


def read_rdma_devices(roots: SystemRoots) -> RdmaDevices:
    """The node's RDMA devices. A node without RDMA gives an empty table; a file that exists but cannot be
    read (EACCES, EIO) raises `SystemFileError` naming it, as every sysfs read does."""
    cm_numbers = _numbers(read_text(roots.sys_path("class", "misc", "rdma_cm", "dev")))
    cm = CharDevice(RDMA_CM_PATH, *cm_numbers) if cm_numbers is not None else None
    pci = roots.sys_path("bus", "pci", "devices")
    functions: dict[str, CharDevice] = {}
    try:
        bus_ids = sorted(os.listdir(pci))
    except OSError:
        bus_ids = []
    for bus_id in bus_ids:
        verbs_dir = os.path.join(pci, bus_id, "infiniband_verbs")
        try:
            names = sorted(os.listdir(verbs_dir))
        except OSError:
            continue  # not an RDMA function
        for name in names:  # koordlet takes the first entry
            numbers = _numbers(read_text(os.path.join(verbs_dir, name, "dev")))
            if numbers is not None:
                functions[bus_id] = CharDevice(f"{IB_DEV_DIR}/{name}", *numbers)
                break
    return RdmaDevices(cm, MappingProxyType(functions))
