"""Typed identifiers, so a pod UID is never passed where a container ID is expected."""

from __future__ import annotations

from typing import NewType

__all__ = ["ContainerID", "PodUID", "SandboxID"]

PodUID = NewType("PodUID", str)
ContainerID = NewType("ContainerID", str)
SandboxID = NewType("SandboxID", str)
