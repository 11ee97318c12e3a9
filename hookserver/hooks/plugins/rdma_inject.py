"""RDMADeviceInject: the RDMA devices koord-scheduler allocated, as device nodes of a new container.

koordlet's "rdma device inject" hook (`pkg/koordlet/runtimehooks/hooks/rdma/rdma.go`, PreCreateContainer):
for a pod whose `scheduling.koordinator.sh/device-allocated` has `rdma` entries, the container gets
`/dev/infiniband/rdma_cm` first, then per allocation the `uverbsN` of its PCI function (`id`, the bus id), or,
where the allocation lists virtual functions (`extension.vfs`), the `uverbsN` of each VF's `busID` instead of
the PF's. Every device is a character device with mode 0666 and the host's major:minor.

koordlet stats the device files on every call; here the node's table is read from sysfs by
`hookserver.system.rdma.read_rdma_devices` (at start, by the daemon) and handed to the plugin, so the hook
stays pure for every allocation the table knows. A bus id the table lacks, or a node without `rdma_cm`, is
looked up again in sysfs (`reread`, at most once per `reread_after_s`): SR-IOV VFs are usually created after
the agent started (by an operator or a device plugin), and a table fixed at start would refuse every pod
placed on them. Still missing, it fails koordlet's hook; here it is a not-applied result whose reason starts
with `error:` and names the bus id, nothing is injected, and the container is still created (an error outcome
is never memoized, so the next container asks again). A malformed annotation likewise.

The doors: NRI carries the devices (`LinuxContainerAdjustment.devices`). koord-runtime-proxy's response has no
devices field, so at the proxy door nothing can be injected: the result is not applied and the reason lists
the devices the container did not get (the RDMA device plugin's own allocation is what it has then). The
reconciler never runs PreCreateContainer: device nodes of a running container cannot be added from outside.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import MappingProxyType

from hookserver.errors import AnnotationError, SystemFileError
from hookserver.hooks.context import ContainerRequest, RequestSource
from hookserver.hooks.outcome import ContainerDevice, HookResult
from hookserver.hooks.plugins.allocation_results import NO_ANNOTATION, allocation_error
from hookserver.koord_devices import (
    ANNOTATION_DEVICE_ALLOCATED,
    DEVICE_RDMA,
    DeviceAllocation,
    cached_device_allocations,
)
from hookserver.system.rdma import CharDevice, RdmaDevices
from hookserver.view import NodeView

__all__ = ["RDMADeviceInjectPlugin"]

_GATE_OFF = HookResult.skip("feature gate RDMADeviceInject is off")
_NO_RDMA = HookResult.skip(f"{ANNOTATION_DEVICE_ALLOCATED} allocates no RDMA device")


def _device(dev: CharDevice) -> ContainerDevice:
    return ContainerDevice(path=dev.path, major=dev.major, minor=dev.minor, type="c", file_mode=0o666)


class RDMADeviceInjectPlugin:
    name = "RDMADeviceInject"
    feature_gate = "RDMADeviceInject"
    pure_decision = True  # the pod and the node's device table, fixed at construction

    def __init__(
        self,
        *,
        enabled: bool = True,
        devices: RdmaDevices | None = None,
        reread: Callable[[], RdmaDevices] | None = None,
        reread_after_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = enabled
        self.devices = devices if devices is not None else RdmaDevices()
        self._reread = reread
        self._reread_after_s = reread_after_s
        self._clock = clock
        self._last_reread: float | None = None
        self.rereads = 0

    def _fresh_table(self) -> bool:
        """Read the node's table again, unless it was read less than `reread_after_s` ago: True when a new
        table was read. An unreadable sysfs keeps the table as it was."""
        if self._reread is None:
            return False
        now = self._clock()
        if self._last_reread is not None and now - self._last_reread < self._reread_after_s:
            return False
        self._last_reread = now
        try:
            self.devices = self._reread()
        except SystemFileError:
            return False
        self.rereads += 1
        return True

    def pre_create_container(self, request: ContainerRequest, view: NodeView) -> HookResult:
        if not self.enabled:
            return _GATE_OFF
        pod = request.pod
        text = pod.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
        if text is None:
            return NO_ANNOTATION
        try:
            allocated = cached_device_allocations(text).get(DEVICE_RDMA)
        except AnnotationError as exc:
            return allocation_error(str(exc), text)
        if not allocated:
            return _NO_RDMA
        found = self._lookup(allocated)
        if isinstance(found, str) and self._fresh_table():
            found = self._lookup(allocated)  # a device created since the table was read (an SR-IOV VF)
        if isinstance(found, str):
            return allocation_error(found, text)
        devices, bus_ids = found
        paths = ", ".join(d.path for d in devices)
        inputs = MappingProxyType({"device-allocated": text, "rdma_bus_ids": ",".join(bus_ids)})
        if pod.source is RequestSource.PROXY:
            return HookResult(
                applied=False, inputs=inputs,
                reason=f"proxy door: koord-runtime-proxy's response has no devices; not injected: {paths}",
            )
        return HookResult(reason=f"RDMA devices {paths}", inputs=inputs, devices=tuple(devices))

    def _lookup(self, allocated: Sequence[DeviceAllocation]) -> tuple[list[ContainerDevice], list[str]] | str:
        """The device nodes for `allocated` from the current table, or the error text naming what is missing."""
        cm = self.devices.rdma_cm
        if cm is None:
            return "the node has no /dev/infiniband/rdma_cm (no RDMA CM in sysfs)"
        table = self.devices.uverbs_by_bus_id
        devices = [_device(cm)]
        bus_ids: list[str] = []
        for i, alloc in enumerate(allocated):
            wanted = [vf.bus_id for vf in alloc.vfs] if alloc.vfs else [alloc.id]
            for bus_id in wanted:
                uverbs = table.get(bus_id)
                if uverbs is None:
                    return f"rdma[{i}]: PCI function {bus_id!r} has no uverbs device on this node"
                devices.append(_device(uverbs))
                bus_ids.append(bus_id)
        return devices, bus_ids
