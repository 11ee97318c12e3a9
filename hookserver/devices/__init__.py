"""The node's devices as koordinator sees them: the `Device` object koordlet publishes (GPUs from the GPU
collector's NVML inventory, RDMA PFs from sysfs).

Layer: an area. No `kubernetes` import and no apiserver I/O: the apiserver writers are the informer's
(`hookserver.informer.device`), handed in as sinks.
"""

from hookserver.devices.rdma import RdmaDevice, RdmaDiscovery, discover_rdma
from hookserver.devices.report import DEVICE_API_VERSION, DEVICE_KIND, GpuInfo, build_device

__all__ = ["DEVICE_API_VERSION", "DEVICE_KIND", "GpuInfo", "RdmaDevice", "RdmaDiscovery", "build_device",
           "discover_rdma"]
