"""Settings of the Device report (koordlet's `Accelerators` and `RDMADevices` gates) and of the GPU/RDMA share
of the Node. Hangs at `Settings.devices` (hookserver/config.py), YAML key `devices:`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["DeviceSettings"]


class DeviceSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # koordlet's Accelerators gate (on in koordinator's chart): report GPUs in the node's Device object.
    enabled: bool = False
    # koordlet's RDMADevices gate: report RDMA PFs (and their SR-IOV VFs) from /sys/class/infiniband.
    rdma: bool = False
    # koordlet reports the Device every NodeTopologySyncInterval (3 s); an unchanged document is not sent.
    interval_s: float = Field(default=3.0, gt=0, le=3600)
    # Who puts koordinator.sh/gpu-core, gpu-memory, gpu-memory-ratio, gpu and rdma on the Node: koord-manager's
    # gpudeviceresource/rdmadevicereource plugins, or this agent where none runs (the capacity rule).
    publisher: Literal["auto", "agent", "koord-manager"] = "auto"
    # The GPU labels on the Node need `patch nodes` (deploy/hookserver.yaml grants only nodes/status): off
    # unless the operator grants it.
    node_labels: bool = False
    # Field manager of the Node share: never the batch capacity publisher's (one manager's apply drops every
    # field of its the apply leaves out).
    field_manager_suffix: str = Field(default="-devices", min_length=1, max_length=32)
