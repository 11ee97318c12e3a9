"""How the daemon builds the device publisher: one call, so hookserver/daemon.py only hands over what it owns
(the store, the roots, the informer's writers) and this area decides the rest."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial

from hookserver.devices.node_resources import NodeDeviceResources, NodeLabelSink, NodeResourceSink
from hookserver.devices.publisher import DevicePublisher, DeviceSink, LocalDeviceSink
from hookserver.devices.rdma import discover_rdma
from hookserver.devices.report import GpuInfo
from hookserver.devices.settings import DeviceSettings
from hookserver.store.state import StateStore
from hookserver.system.roots import SystemRoots

__all__ = ["DEVICE_DOCUMENT", "GPU_DEVICES_STATIC", "GPU_DRIVER_VERSION_STATIC", "build_device_publisher"]

DEVICE_DOCUMENT = "device.json"
# The store statics the GPU collector keeps (collectors.gpu.GPU_DEVICES_KEY); the driver version is the key
# the collector is asked to add (NVML's nvmlSystemGetDriverVersion), "" until it does.
GPU_DEVICES_STATIC = "gpu_devices"
GPU_DRIVER_VERSION_STATIC = "gpu_driver_version"


def _store_gpus(store: StateStore) -> Sequence[GpuInfo]:
    devices = store.series.get_static(GPU_DEVICES_STATIC)
    return tuple(devices) if isinstance(devices, (tuple, list)) else ()


def _store_driver(store: StateStore) -> str:
    value = store.series.get_static(GPU_DRIVER_VERSION_STATIC, "")
    return value if isinstance(value, str) else ""


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
        gpus=partial(_store_gpus, store) if settings.enabled else tuple,
        driver_version=partial(_store_driver, store),
        rdma=partial(discover_rdma, roots) if settings.rdma else None,
        node_uid=partial(_node_uid, store),
        node_resources=share,
        interval_s=settings.interval_s,
        document_path=document_path,
        ready=ready,
    )
