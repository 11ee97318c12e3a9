"""`/metrics`, `/healthz` and `/readyz` over plain HTTP, on a background thread (and, when the daemon hands
them in, the debug API's read-only views as JSON under `/debug/v1/`).

Exposition is `prometheus_client.generate_latest` over hookserver's own registry, passed in (the
global default registry is never read). The server is a small `ThreadingHTTPServer` so a slow scrape
never blocks a probe, and it runs on its own thread so it keeps answering (and `/healthz` can report)
even when the daemon's event loop is stuck.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Callable, Mapping
from typing import cast
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from hookserver.errors import ConfigError
from hookserver.observability.health import HealthState

__all__ = ["DebugViews", "MetricsHttpServer", "parse_addr"]

log = logging.getLogger(__name__)

_TEXT = "text/plain; charset=utf-8"
_JSON = "application/json"
# `GET /debug/v1/<Rpc>?arg=value`: the debug API's read-only views as JSON (hookserver.debug.server.http_view),
# for `kubectl hookserver` through the apiserver's pods/proxy subresource.
_DEBUG_PREFIX = "/debug/v1/"
DebugViews = Callable[[str, Mapping[str, str]], tuple[int, str]]


def parse_addr(addr: str) -> tuple[str, int]:
    """`127.0.0.1:9316`, `[::1]:0`, `:9316` (all interfaces) -> (host, port). Errors name the value."""
    host, sep, port_text = addr.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ConfigError(f"metrics.addr: {addr!r} is not HOST:PORT")
    port = int(port_text)
    if port > 65535:
        raise ConfigError(f"metrics.addr: port {port} in {addr!r} is out of range (0-65535, 0 picks a free one)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ConfigError(f"metrics.addr: {addr!r} has an invalid IPv6 address") from None
    elif ":" in host:
        raise ConfigError(f"metrics.addr: {addr!r}: write an IPv6 host in brackets, e.g. [::1]:9316")
    return host or "0.0.0.0", port


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], registry: CollectorRegistry, health: HealthState,
                 debug_views: DebugViews | None = None) -> None:
        self.registry = registry
        self.health = health
        self.debug_views = debug_views
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host's FQDN, a DNS round trip that can stall startup
        # for seconds on a node with broken DNS; the name is only used in CGI environments.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _Handler(BaseHTTPRequestHandler):
    server_version = "hookserver"

    def do_GET(self) -> None:  # noqa: N802 - http.server's method name
        self._serve(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(body=False)

    def _serve(self, *, body: bool) -> None:
        server = cast(_Server, self.server)
        path = urlsplit(self.path).path
        if path == "/metrics":
            try:
                payload = generate_latest(server.registry)
            except Exception as exc:  # noqa: BLE001 - a failing collector is a 500 for this scrape only
                log.exception("metrics exposition failed")
                self._reply(500, f"metrics exposition failed: {type(exc).__name__}: {exc}\n".encode(), _TEXT, body)
                return
            self._reply(200, payload, CONTENT_TYPE_LATEST, body)
        elif path == "/healthz":
            alive, reason = server.health.liveness()
            self._reply(200 if alive else 503, f"{'ok' if alive else 'not alive: ' + reason}\n".encode(), _TEXT, body)
        elif path == "/readyz":
            ready, checks = server.health.readiness()
            lines = [("ready" if ready else "not ready")]
            lines += [f"{c.name}: {'ok' if c.ready else 'not ready' + (': ' + c.reason if c.reason else '')}" for c in checks]
            self._reply(200 if ready else 503, ("\n".join(lines) + "\n").encode(), _TEXT, body)
        elif path.startswith(_DEBUG_PREFIX) and server.debug_views is not None:
            query = {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}
            status, text = server.debug_views(path[len(_DEBUG_PREFIX):], query)
            self._reply(status, text.encode(), _JSON, body)
        else:
            self._reply(404, f"not found: {path} (try /metrics, /healthz, /readyz)\n".encode(), _TEXT, body)

    def _reply(self, status: int, payload: bytes, content_type: str, body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's signature
        # Probes hit this every few seconds; keep them out of the log unless debugging.
        log.debug("%s %s", self.address_string(), format % args)


class MetricsHttpServer:
    """Serve /metrics, /healthz and /readyz on `addr` (port 0 picks a free port; see `.port`).

    `poll_interval_s` bounds how long `stop()` waits for the serving thread to notice.
    """

    def __init__(
        self, addr: str, registry: CollectorRegistry, health: HealthState, *, poll_interval_s: float = 0.2,
        debug_views: DebugViews | None = None,
    ) -> None:
        self._debug_views = debug_views
        self._host, self._requested_port = parse_addr(addr)
        self._poll_interval_s = poll_interval_s
        self._addr = addr
        self._registry = registry
        self._health = health
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port once started (the requested one before, 0 meaning "to be picked")."""
        if self._server is not None:
            return int(self._server.server_address[1])
        return self._requested_port

    @property
    def host(self) -> str:
        return self._host

    def start(self) -> None:
        """Bind and serve on a background thread; returns once the port is bound."""
        if self._server is not None:
            raise ConfigError(f"metrics server on {self._addr}: already started")
        try:
            server = _Server((self._host, self._requested_port), self._registry, self._health, self._debug_views)
        except OSError as exc:
            raise ConfigError(f"metrics.addr: cannot listen on {self._addr}: {exc.strerror or exc}") from exc
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": self._poll_interval_s}, name="hookserver-metrics-http", daemon=True
        )
        self._thread.start()
        log.info("metrics on http://%s:%d/metrics", self._host, self.port)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop serving and close the socket. Safe to call twice or before start."""
        server, thread = self._server, self._thread
        self._server, self._thread = None, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout_s)
