"""Front door (top layer): the koord-runtime-proxy `RuntimeHookService` gRPC server on a unix socket.

Thin over `hookserver.dispatch.HookDispatcher`: translate the wire request, dispatch, echo then adjust.
Protobuf types stop here. `ProxyServer` is the entry point the daemon wires.
"""

from hookserver.proxy.registration import Registration, render_registration
from hookserver.proxy.server import DEFAULT_MAX_MESSAGE_BYTES, ProxyServer, ServerState, proxy_stage_names
from hookserver.proxy.service import RPCS, SERVICE_NAME, HookService

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "RPCS",
    "SERVICE_NAME",
    "HookService",
    "ProxyServer",
    "Registration",
    "ServerState",
    "proxy_stage_names",
    "render_registration",
]
