"""Debug API (front-door layer): `hookserver.debug.v1.Debug` on a unix socket, and its client.

Read-only. It serves the store's pods and audit (status, pods, explain, events, writes) and asks
providers registered by other areas for NodeSLO, top, metrics and NRI information. `hookctl`
(hookserver.cli.hookctl) is its command-line client.
"""

from hookserver.debug.client import DEFAULT_SOCKET, DebugCallError, DebugClient
from hookserver.debug.podref import parse_pod_key, validate_pod_ref
from hookserver.debug.render import render
from hookserver.debug.server import PROVIDER_NAMES, DebugServer, Provider, ProviderUnavailable

__all__ = [
    "DEFAULT_SOCKET",
    "PROVIDER_NAMES",
    "DebugCallError",
    "DebugClient",
    "DebugServer",
    "Provider",
    "ProviderUnavailable",
    "parse_pod_key",
    "render",
    "validate_pod_ref",
]
