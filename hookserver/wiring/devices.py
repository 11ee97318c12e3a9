"""GPU and RDMA nodes: the Device report and the Node's GPU/RDMA share (koordlet's `Accelerators` and
`RDMADevices`), the HAMi-core vGPU collector, and the Events on pods whose GPU allocation is wrong.

The report runs when its gate is on (koordinator's chart turns `Accelerators` on) or `devices.enabled` /
`devices.rdma` say so; to the apiserver through the informer's writers, standalone to `state_dir/device.json`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial

from collectors.hami_vgpu import with_hami_vgpu_gate
from hookserver.config import Settings
from hookserver.devices.allocation_warnings import AllocationWarnings, LogEventSink, PodEventSink
from hookserver.devices.node_resources import NodeDeviceResources, NodeLabelSink, NodeResourceSink
from hookserver.devices.publisher import DevicePublisher, DeviceSink, LocalDeviceSink
from hookserver.devices.rdma import discover_rdma
from hookserver.devices.inventory import store_driver_version, store_gpus
from hookserver.devices.settings import DeviceSettings
from hookserver.featuregates import GateValues
from hookserver.informer import Informer
from hookserver.store import StateStore
from hookserver.system import SystemRoots

__all__ = [
    "DEVICE_DOCUMENT",
    "DEVICE_GATES",
    "build_allocation_warnings",
    "build_device_publisher",
    "build_devices",
    "collector_settings",
    "device_settings",
]

# The agent gates of GPU and RDMA nodes (koordlet's names; all off by default there): the Device report's two,
# and the HAMi-core vGPU monitor (its hook half is GPUEnvInject's cache env and mount, its collector hami_vgpu).
DEVICE_GATES = ("Accelerators", "RDMADevices", "HamiCoreVGPUMonitor")
DEVICE_DOCUMENT = "device.json"


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


def _node_uid(store: StateStore) -> str:
    node = store.snapshot().node
    return node.uid if node is not None else ""


def build_device_publisher(
    settings: DeviceSettings,
    *,
    store: StateStore,
    roots: SystemRoots,
    node_name: str,
    state_dir: str,
    device_sink: DeviceSink | None = None,
    resource_sink: NodeResourceSink | None = None,
    label_sink: NodeLabelSink | None = None,
    koord_manager_evidence: Callable[[], str] = str,
    ready: Callable[[], bool] = lambda: True,
) -> DevicePublisher | None:
    """None when neither GPUs nor RDMA are reported (settings.enabled and settings.rdma both off).

    Standalone: no sinks; the Device goes to `state_dir/device.json`. Apiserver mode: `device_sink` is the
    informer's DeviceWriter (agent field manager), `resource_sink` a NodeCapacityWriter with field manager
    `<agent>{settings.field_manager_suffix}`, `label_sink` a NodeLabelWriter with `<that manager>-labels`, only
    with `settings.node_labels` (kube-apiserver before 1.22 keeps one managedFields entry per manager for an
    object and its status subresource together: one manager for both would lose track of its status fields)."""
    if not settings.enabled and not settings.rdma:
        return None
    document_path = os.path.join(state_dir, DEVICE_DOCUMENT) if state_dir else ""
    sink: DeviceSink = device_sink if device_sink is not None else LocalDeviceSink(document_path)
    share = NodeDeviceResources(
        resources=resource_sink,
        labels=label_sink if settings.node_labels else None,
        publisher=settings.publisher,
        koord_manager_evidence=koord_manager_evidence,
    )
    return DevicePublisher(
        node_name=node_name,
        sink=sink,
        gpus=partial(store_gpus, store) if settings.enabled else tuple,
        driver_version=partial(store_driver_version, store),
        rdma=partial(discover_rdma, roots) if settings.rdma else None,
        node_uid=partial(_node_uid, store),
        node_resources=share,
        interval_s=settings.interval_s,
        document_path=document_path,
        ready=ready,
    )


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
