"""The node's `Device` object (`scheduling.koordinator.sh/v1alpha1`, cluster-scoped, named after the node), in
the shape koordlet writes it (`pkg/koordlet/statesinformer/impl/states_device_linux.go`, the types in
`apis/scheduling/v1alpha1/device_types.go`, the names in `apis/extension/device_share.go`).

koord-scheduler's DeviceShare plugin reads it to place GPU and RDMA pods, and koord-manager's
`gpudeviceresource` plugin turns it into the Node's GPU capacity and labels, so every detail is koordlet's:

* one entry per GPU: `type: gpu`, `id` (the UUID), `minor`, `health`, resources `koordinator.sh/gpu-core`
  "100", `koordinator.sh/gpu-memory` (the total bytes as a binary quantity: "80Gi"), `gpu-memory-ratio` "100";
  `topology` {socketID -1, nodeID, pcieID, busID} only when the NUMA node, the PCIe root and the bus id are all
  known; an unhealthy GPU carries the `Healthy` condition (status False, reason `Xid<N>` or the reason given,
  its message), a healthy one none (koordlet sets conditions only from an unhealthy record);
* one entry per RDMA PF: `type: rdma`, `id` and `busID` the PCI address, resources `koordinator.sh/rdma` "100",
  and with SR-IOV on one `vfGroups` entry whose VFs (minor -1) are sorted by bus id;
* devices sorted by type, then minor; the Device's labels `node.koordinator.sh/gpu-vendor` (nvidia),
  `gpu-model` (the common model name without "NVIDIA ", spaces as dashes; left out, with the driver version,
  when the GPUs differ) and `gpu-driver-version`, only when there are GPUs;
* an ownerReference to the Node (controller, blockOwnerDeletion) so the Device goes with its Node.

Fields are in Go's struct order and maps sorted, serialised compactly, so unchanged inputs give identical text
and the publisher writes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from hookserver.devices.rdma import RdmaDevice
from hookserver.gpu_inventory import GpuInfo, sysfs_bus_id
from hookserver.kubewire import memory_quantity, node_owner_references

__all__ = [
    "DEVICE_API_VERSION", "DEVICE_KIND", "GPU_LABEL_KEYS", "LABEL_GPU_DRIVER_VERSION", "LABEL_GPU_MODEL",
    "LABEL_GPU_VENDOR", "RESOURCE_GPU_CORE", "RESOURCE_GPU_MEMORY", "RESOURCE_GPU_MEMORY_RATIO", "RESOURCE_RDMA",
    "GpuInfo", "build_device", "canonical", "gpu_labels", "gpu_model_label", "sysfs_bus_id",
]

DEVICE_API_VERSION = "scheduling.koordinator.sh/v1alpha1"
DEVICE_KIND = "Device"
RESOURCE_GPU_CORE = "koordinator.sh/gpu-core"
RESOURCE_GPU_MEMORY = "koordinator.sh/gpu-memory"
RESOURCE_GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
RESOURCE_RDMA = "koordinator.sh/rdma"
LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
LABEL_GPU_DRIVER_VERSION = "node.koordinator.sh/gpu-driver-version"
GPU_LABEL_KEYS = (LABEL_GPU_VENDOR, LABEL_GPU_MODEL, LABEL_GPU_DRIVER_VERSION)
GPU_VENDOR_NVIDIA = "nvidia"
CONDITION_HEALTHY = "Healthy"

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_REASON = re.compile(r"^(Xid\d+|DeviceHealthCheckNotSupported)\b[:\s]*(.*)$", re.S)


def canonical(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def gpu_model_label(names: Iterable[str]) -> str:
    """koordlet's `getGPUDriverAndModel`: one model for all GPUs, "NVIDIA " trimmed, spaces as dashes
    ("NVIDIA A100 SXM4 80GB" -> "A100-SXM4-80GB"); "" when there is none, one is empty or they differ."""
    models = list(names)
    if not models or any(not m for m in models) or len(set(models)) != 1:
        return ""
    model = models[0]
    if model.startswith("NVIDIA "):
        model = model[len("NVIDIA "):]
    return model.replace(" ", "-")


def _condition(device: GpuInfo, since: str) -> dict[str, Any]:
    match = _REASON.match(device.unhealthy_reason.strip())
    if match is not None:
        reason, message = match.group(1), match.group(2).strip() or device.unhealthy_reason.strip()
    else:
        reason, message = "Unknown", device.unhealthy_reason.strip() or "device is unhealthy"
    return {"type": CONDITION_HEALTHY, "status": "False", "lastTransitionTime": since, "reason": reason,
            "message": message}


def _gpu_entry(device: GpuInfo, since: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "gpu",
        "id": device.uuid,
        "minor": device.minor,
        "health": device.healthy,
        "resources": {
            RESOURCE_GPU_CORE: "100",
            RESOURCE_GPU_MEMORY: memory_quantity(device.memory_total_bytes),
            RESOURCE_GPU_MEMORY_RATIO: "100",
        },
    }
    bus_id = sysfs_bus_id(device.bus_id)
    if device.numa_node is not None and device.numa_node >= 0 and device.pcie_root and bus_id:
        entry["topology"] = {"socketID": -1, "nodeID": device.numa_node, "pcieID": device.pcie_root,
                             "busID": bus_id}
    if not device.healthy:
        entry["conditions"] = [_condition(device, since)]
    return entry


def _rdma_entry(device: RdmaDevice) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "rdma",
        "id": device.bus_id,
        "minor": device.minor,
        "health": device.healthy,
        "resources": {RESOURCE_RDMA: "100"},
        "topology": {"socketID": -1, "nodeID": device.numa_node, "pcieID": device.pcie_root,
                     "busID": device.bus_id},
    }
    if device.vf_enabled:
        group: dict[str, Any] = {}
        if device.vfs:
            group["vfs"] = [{"minor": -1, "busID": bus} for bus in sorted(device.vfs)]
        entry["vfGroups"] = [group]
    return entry


def gpu_labels(gpus: Iterable[GpuInfo], driver_version: str) -> dict[str, str]:
    """The Device's (and, through koord-manager, the Node's) GPU labels; {} without GPUs. A value that is
    not a valid label value (over 63 characters, odd characters) is left out rather than failing the write."""
    devices = list(gpus)
    if not devices:
        return {}
    labels = {LABEL_GPU_VENDOR: GPU_VENDOR_NVIDIA}
    model = gpu_model_label(d.name for d in devices)
    if model:  # koordlet reports neither model nor driver version when the models disagree
        labels[LABEL_GPU_MODEL] = model
        if driver_version:
            labels[LABEL_GPU_DRIVER_VERSION] = driver_version
    return {k: v for k, v in sorted(labels.items()) if len(v) <= 63 and _LABEL_VALUE.match(v)}


def build_device(
    *,
    node_name: str,
    node_uid: str = "",
    gpus: Iterable[GpuInfo] = (),
    driver_version: str = "",
    rdma: Iterable[RdmaDevice] = (),
    unhealthy_since: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The whole object, ready for a server-side apply and for `state_dir/device.json`.

    `unhealthy_since`: GPU UUID -> the RFC 3339 time it was first seen unhealthy (the condition's
    lastTransitionTime, kept by the publisher so an unchanged state gives unchanged text)."""
    since = unhealthy_since or {}
    gpu_list = list(gpus)
    entries = [_gpu_entry(g, since.get(g.uuid, "")) for g in gpu_list]
    entries += [_rdma_entry(r) for r in rdma]
    entries.sort(key=lambda e: (str(e["type"]), int(e["minor"])))
    metadata: dict[str, Any] = {"name": node_name}
    labels = gpu_labels(gpu_list, driver_version)
    if labels:
        metadata["labels"] = labels
    owners = node_owner_references(node_name, node_uid)
    if owners:
        metadata["ownerReferences"] = owners
    spec: dict[str, Any] = {"devices": entries} if entries else {}
    return {"apiVersion": DEVICE_API_VERSION, "kind": DEVICE_KIND, "metadata": metadata, "spec": spec}
