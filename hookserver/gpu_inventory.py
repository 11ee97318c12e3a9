"""The GPU collector's inventory as the areas beside it read it: the store statics it is kept under, the shape
of one GPU (`collectors.nvml.GpuDevice`'s fields), and the bus id spelling of sysfs and koordlet.

A shared helper outside the layers, like `koord_devices`: the collectors write the inventory, and the Device
report, the NodeMetric report and the injection hooks' view read it; areas may not import each other, so the
names and the shape live here, once.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["GPU_DEVICES_STATIC", "GPU_DRIVER_VERSION_STATIC", "GpuInfo", "gpu_inventory", "sysfs_bus_id"]

# Store statics (`StateStore.series.get_static`) the GPU collector keeps.
GPU_DEVICES_STATIC = "gpu_devices"  # tuple of collectors.nvml.GpuDevice
GPU_DRIVER_VERSION_STATIC = "gpu_driver_version"  # NVML's nvmlSystemGetDriverVersion


@runtime_checkable
class GpuInfo(Protocol):
    """One GPU of the inventory."""

    @property
    def index(self) -> int: ...

    @property
    def uuid(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def minor(self) -> int: ...

    @property
    def memory_total_bytes(self) -> int: ...

    @property
    def bus_id(self) -> str: ...

    @property
    def numa_node(self) -> int | None: ...

    @property
    def pcie_root(self) -> str: ...

    @property
    def healthy(self) -> bool: ...

    @property
    def unhealthy_reason(self) -> str: ...


def gpu_inventory(value: Any) -> tuple[GpuInfo, ...]:
    """The inventory static in NVML index order (koordlet's device order); anything that is not a GPU entry is
    ignored, and no inventory (a CPU node) is ()."""
    if not isinstance(value, (tuple, list)):
        return ()
    entries = [entry for entry in value if isinstance(entry, GpuInfo)]
    return tuple(sorted(entries, key=lambda entry: (entry.index, entry.minor)))


def sysfs_bus_id(bus_id: str) -> str:
    """NVML's bus id (`00000000:17:00.0`, 8-hex-digit domain) as sysfs names the device (`0000:17:00.0`).

    sysfs and koordlet's Device topology (`busID`, from NVML's `busIdLegacy`) use a 4-digit domain, lower case;
    a domain wider than 16 bits keeps its digits. '' when `bus_id` is not a PCI address.
    """
    parts = bus_id.strip().lower().split(":")
    if len(parts) != 3 or "." not in parts[2]:
        return ""
    try:
        domain = int(parts[0], 16)
    except ValueError:
        return ""
    return f"{domain:04x}:{parts[1]}:{parts[2]}"
