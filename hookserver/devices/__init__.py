"""The node's devices as koordinator sees them: the `Device` object koordlet publishes (GPUs from the GPU
collector's NVML inventory, RDMA PFs from sysfs), and the GPU/RDMA capacity and labels koord-manager derives
from it onto the Node, published by this agent where no koord-manager runs.

Layer: an area. No `kubernetes` import and no apiserver I/O: the apiserver writers are the informer's
(`hookserver.informer.device`, and `hookserver.informer.node_capacity` for the Node share), handed in as sinks.
"""

from hookserver.devices.node_resources import NodeDeviceResources, node_labels, node_resources
from hookserver.devices.publisher import DevicePublisher, LocalDeviceSink
from hookserver.devices.rdma import RdmaDevice, RdmaDiscovery, discover_rdma
from hookserver.devices.report import DEVICE_API_VERSION, DEVICE_KIND, GpuInfo, build_device
from hookserver.devices.settings import DeviceSettings

__all__ = [
    "DEVICE_API_VERSION",
    "DEVICE_KIND",
    "DevicePublisher",
    "DeviceSettings",
    "GpuInfo",
    "LocalDeviceSink",
    "NodeDeviceResources",
    "RdmaDevice",
    "RdmaDiscovery",
    "build_device",
    "discover_rdma",
    "node_labels",
    "node_resources",
]
