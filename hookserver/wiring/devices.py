"""GPU and RDMA nodes: the Device report and the Node's GPU/RDMA share (koordlet's `Accelerators` and
`RDMADevices`), and the GPU inventory the injection hooks check allocations against.

The report runs when its gate is on (koordinator's chart turns `Accelerators` on) or `devices.enabled` /
`devices.rdma` say so; to the apiserver through the informer's writers, standalone to `state_dir/device.json`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from collectors.hami_vgpu import with_hami_vgpu_gate
from hookserver.config import Settings
from hookserver.devices.allocation_warnings import AllocationWarnings, LogEventSink, PodEventSink
from hookserver.devices.node_resources import NodeLabelSink, NodeResourceSink
from hookserver.devices.publisher import DevicePublisher, DeviceSink
from hookserver.devices.settings import DeviceSettings
from hookserver.devices.wiring import GPU_DEVICES_STATIC, build_device_publisher
from hookserver.featuregates import GateValues
from hookserver.informer import Informer
from hookserver.koord_devices import NodeGpu
from hookserver.store import StateStore
from hookserver.system import SystemRoots

__all__ = [
    "DEVICE_GATES",
    "GpuInventory",
    "build_allocation_warnings",
    "build_devices",
    "collector_settings",
    "device_settings",
]

# The agent gates of GPU and RDMA nodes (koordlet's names; all off by default there): the Device report's two,
# and the HAMi-core vGPU monitor (its hook half is GPUEnvInject's cache env and mount, its collector hami_vgpu).
DEVICE_GATES = ("Accelerators", "RDMADevices", "HamiCoreVGPUMonitor")


def device_settings(settings: Settings, gates: GateValues) -> DeviceSettings:
    """`devices:` with the gates folded in: a gate that is on turns its part on (an operator who starts the agent
    with koordlet's chart arguments gets the report without a config change)."""
    ds = settings.devices
    return ds.model_copy(update={
        "enabled": ds.enabled or gates.enabled("Accelerators"),
        "rdma": ds.rdma or gates.enabled("RDMADevices"),
    })


def collector_settings(settings: Settings, gates: GateValues) -> Settings:
    """The settings the collectors are built from: `HamiCoreVGPUMonitor` turns the HAMi-core vGPU collector on,
    reading where GPUEnvInject mounts from (`hook.gpu.hami_core_library_path`'s directory + `/containers`)."""
    collectors = with_hami_vgpu_gate(settings.collectors, gate_on=gates.enabled("HamiCoreVGPUMonitor"),
                                     library_path=settings.hook.gpu.hami_core_library_path)
    return settings.model_copy(update={"collectors": collectors})


def build_devices(
    settings: Settings,
    *,
    store: StateStore,
    roots: SystemRoots,
    informer: Informer,
    gates: GateValues,
    koord_manager_evidence: Callable[[], str],
) -> DevicePublisher | None:
    """The device publisher, or None when neither GPUs nor RDMA are reported."""
    ds = device_settings(settings, gates)
    transport = informer.transport
    device_sink: DeviceSink | None = None
    resource_sink: NodeResourceSink | None = None
    label_sink: NodeLabelSink | None = None
    if transport is not None and informer.mode != "standalone":
        from hookserver.informer.device import DeviceWriter, NodeLabelWriter
        from hookserver.informer.node_capacity import NodeCapacityWriter

        manager = settings.capacity.field_manager
        share_manager = manager + ds.field_manager_suffix
        device_sink = DeviceWriter(transport, node_name=settings.node_name, field_manager=manager)
        resource_sink = NodeCapacityWriter(transport, node_name=settings.node_name, field_manager=share_manager)
        label_sink = NodeLabelWriter(transport, node_name=settings.node_name, field_manager=share_manager + "-labels")
    return build_device_publisher(
        ds, store=store, roots=roots, node_name=settings.node_name, state_dir=settings.state_dir,
        device_sink=device_sink, resource_sink=resource_sink, label_sink=label_sink,
        koord_manager_evidence=koord_manager_evidence, ready=informer.first_sync_done,
    )


class GpuInventory:
    """The GPU collector's inventory as the hooks' view wants it (minor -> `NodeGpu`), refreshed off the hot
    path (`refresh`, every collector interval): `current` stays the same object while the GPUs and their health
    are the same, so the hooks' view and the decision memo are not rebuilt for nothing."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._seen: object = None
        self._current: Mapping[int, NodeGpu] | None = None

    @property
    def current(self) -> Mapping[int, NodeGpu] | None:
        return self._current

    def refresh(self) -> bool:
        """Read the inventory again; True when what the hooks see changed."""
        devices = self._store.series.get_static(GPU_DEVICES_STATIC)
        if devices is self._seen:
            return False
        self._seen = devices
        if not isinstance(devices, (tuple, list)):
            changed = self._current is not None
            self._current = None
            return changed
        gpus = {
            int(d.minor): NodeGpu(int(d.minor), str(d.uuid), bool(d.healthy), str(d.unhealthy_reason))
            for d in devices if int(getattr(d, "minor", -1)) >= 0
        }
        if self._current is not None and dict(self._current) == gpus:
            return False
        self._current = MappingProxyType(gpus)
        return True


def build_allocation_warnings(
    settings: Settings, *, store: StateStore, informer: Informer, gates: GateValues
) -> AllocationWarnings | None:
    """With GPUEnvInject on: Events on pods whose GPU allocation names a missing or unhealthy device (to the log
    when there is no apiserver)."""
    if not gates.enabled("GPUEnvInject"):
        return None
    transport = informer.transport
    sink: PodEventSink = LogEventSink()
    if transport is not None and informer.mode != "standalone":
        from hookserver.informer.pod_events import PodEventWriter

        sink = PodEventWriter(transport, node_name=settings.node_name)
    return AllocationWarnings(store, sink)
