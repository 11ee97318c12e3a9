"""What the devices area reads of the GPU collector's inventory in the store (`collectors.gpu` keeps it as
statics; this area does not import the collectors beside it): the GPUs for the Device report, the driver
version, and, for the injection hooks' view, the GPUs by minor with their health (`GpuInventory`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from hookserver.gpu_inventory import GPU_DEVICES_STATIC, GPU_DRIVER_VERSION_STATIC, GpuInfo, gpu_inventory
from hookserver.koord_devices import NodeGpu
from hookserver.store.state import StateStore

__all__ = ["GPU_DEVICES_STATIC", "GPU_DRIVER_VERSION_STATIC", "GpuInventory", "store_driver_version", "store_gpus"]



def store_gpus(store: StateStore) -> Sequence[GpuInfo]:
    return gpu_inventory(store.series.get_static(GPU_DEVICES_STATIC))


def store_driver_version(store: StateStore) -> str:
    value = store.series.get_static(GPU_DRIVER_VERSION_STATIC, "")
    return value if isinstance(value, str) else ""


class GpuInventory:
    """The GPU collector's inventory as the hooks' view wants it (minor -> `NodeGpu`), refreshed off the hot
    path (`refresh`, every collector interval): `current` stays the same object while the GPUs and their health
    are the same, so the hooks' view and the decision memo are not rebuilt for nothing."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._seen: object = None
        # Read by the hooks' view on every call: a plain attribute (no property call on the hot path), set only
        # by `refresh`.
        self.current: Mapping[int, NodeGpu] | None = None

    def refresh(self) -> bool:
        """Read the inventory again; True when what the hooks see changed."""
        devices = self._store.series.get_static(GPU_DEVICES_STATIC)
        if devices is self._seen:
            return False
        self._seen = devices
        if not isinstance(devices, (tuple, list)):
            changed = self.current is not None
            self.current = None
            return changed
        gpus = {d.minor: NodeGpu(d.minor, d.uuid, d.healthy, d.unhealthy_reason)
                for d in gpu_inventory(devices) if d.minor >= 0}
        if self.current is not None and dict(self.current) == gpus:
            return False
        self.current = MappingProxyType(gpus)
        return True
