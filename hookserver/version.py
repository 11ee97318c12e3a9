"""What this build is and which protocols it speaks: `hookserver --version`, `hookctl version` and the
debug API's `version` provider all print this one document, so an operator comparing a node agent with
the proxy or runtime in front of it reads the same names everywhere.

The protocol names come from the generated descriptors (the `package` of each .proto we compiled), not
from hand-kept strings, so they cannot drift from what is actually on the wire.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from typing import Any

import grpc
from google.protobuf import __version__ as protobuf_version

from hookserver import __version__
from hookserver.api import debug_pb2, nri_pb2, runtime_hook_pb2

__all__ = ["DEBUG_API", "HOOK_API", "NRI_API", "build_info", "server_version", "version_text"]

HOOK_API: str = runtime_hook_pb2.DESCRIPTOR.package
NRI_API: str = nri_pb2.DESCRIPTOR.package
DEBUG_API: str = debug_pb2.DESCRIPTOR.package


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def build_info() -> dict[str, Any]:
    """The build: its version, the APIs it serves or dials, and the runtime libraries under them."""
    return {
        "name": "hookserver",
        "version": __version__,
        "hook_api": HOOK_API,
        "hook_api_service": f"{HOOK_API}.RuntimeHookService (koord-runtime-proxy, gRPC)",
        "nri_api": NRI_API,
        "nri_api_transport": "ttrpc on the runtime's NRI socket, as a containerd/CRI-O NRI plugin",
        "debug_api": DEBUG_API,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "grpcio": grpc.__version__,
        "protobuf": protobuf_version,
        "kubernetes_client": _dist_version("kubernetes"),
        "platform": f"{sys.platform}/{platform.machine()}",
    }


def version_text(info: dict[str, Any] | None = None) -> str:
    """The human form, first line `hookserver X.Y.Z` as tools that parse `--version` expect."""
    i = info or build_info()
    return "\n".join([
        f"hookserver {i['version']}",
        f"  hook API:  {i['hook_api_service']}",
        f"  NRI API:   {i['nri_api']} ({i['nri_api_transport']})",
        f"  debug API: {i['debug_api']}",
        f"  {i['python']}, grpcio {i['grpcio']}, protobuf {i['protobuf']}, kubernetes client {i['kubernetes_client']}",
        f"  platform:  {i['platform']}",
    ])


def server_version(*, node: str, started_at: float, nri_status: dict[str, Any] | None) -> dict[str, Any]:
    """The daemon's `version` provider: the build, plus what it is talking to right now (the runtime's
    name, version and NRI version as the runtime announced them when NRI is connected)."""
    out = build_info()
    out["node"] = node
    out["started_at"] = started_at
    if nri_status is None:
        out["nri_runtime"] = {"state": "disabled"}
    else:
        runtime = nri_status.get("runtime") or {}
        out["nri_runtime"] = {
            "state": nri_status.get("state", "unknown"),
            "name": runtime.get("name", ""),
            "version": runtime.get("version", ""),
            "nri_version": runtime.get("nri_version", ""),
        }
    return out
