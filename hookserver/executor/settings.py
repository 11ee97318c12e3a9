"""The `cgroup:` settings: where the hierarchies are and how they are named. A leaf pydantic module, so the
executor takes its settings without importing the config (which sits above every area)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CgroupSettings"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CgroupSettings(_Frozen):
    root: str = "/sys/fs/cgroup"
    # auto: detect from the tree (kubepods.slice vs kubepods), fall back to systemd.
    driver: Literal["auto", "cgroupfs", "systemd"] = "auto"
    # auto: detect v1 / v2 / hybrid from the mounts under `root`.
    version: Literal["auto", "v1", "v2"] = "auto"
    runtime: Literal["containerd", "docker", "cri-o", "pouch"] = "containerd"
    force_update_seconds: float = Field(default=60.0, ge=0)
    # systemd driver: keep written values in the units' properties through this socket (systemd's private
    # socket as root; the system bus socket works too); "" turns that off (the reconciler restores resets).
    systemd_socket: str = "/run/systemd/private"
    # The longest one attempt of a call to systemd may take (never on a hook's path: a worker thread sends). Right
    # after a daemon-reload systemd can take seconds to answer (seen on the VM tier's emulated guest).
    systemd_timeout_s: float = Field(default=5.0, gt=0, le=30)
