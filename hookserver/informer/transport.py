"""How the informer reaches the apiserver: a two-call Protocol and its `kubernetes`-client implementation.

The kubernetes client gives us what is hard to get right (kubeconfig and in-cluster loading, exec and
token-refresh auth, client certificates, CA bundles, proxies); we use its configured ApiClient for raw
GETs and read list and watch bodies as JSON ourselves. Typed models would cost more than the event
itself, and raw streaming lets `close()` interrupt a blocked watch read from another thread at once.

Only this package imports `kubernetes`.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from hookserver import __version__
from hookserver.errors import ConfigError, InformerError

__all__ = [
    "ApiClientTransport", "ConnectionStats", "KubeTransport", "WatchIdleTimeout", "WatchStream",
    "keepalive_socket_options", "load_client_configuration", "retry_after_s",
]

log = logging.getLogger(__name__)

_ERROR_BODY_BYTES = 64 << 10
_READ_BYTES = 64 << 10
# The most a Retry-After is trusted for: an apiserver asks for 1 s (max-in-flight) to a few seconds; a larger
# value from a misbehaving proxy must not park the informer for an hour.
_RETRY_AFTER_MAX_S = 60.0
# Sent on every request. kube-apiserver gzips a response only above 128 KiB (its APIResponseCompression
# threshold), so this shrinks large lists and costs nothing on the small per-node objects; urllib3 decodes.
_ACCEPT_ENCODING = "gzip"


class WatchIdleTimeout(InformerError):
    """No byte arrived on a watch within its idle timeout. Not an outage by itself: a quiet watch on
    kube-apiserver 1.20 carries nothing for minutes, so the reflector re-watches; a dead connection shows
    when that re-watch fails to connect."""


class WatchStream(Protocol):
    def lines(self) -> Iterator[bytes]:
        """Yield complete event lines until the server ends the stream or `close()` is called.
        Raises WatchIdleTimeout when the idle timeout passes without a byte, InformerError on other failures."""
        ...

    def close(self) -> None:
        """Interrupt a blocked `lines()` from any thread. Idempotent."""
        ...


class KubeTransport(Protocol):
    def get_json(self, path: str, params: Mapping[str, str], *, timeout_s: float) -> Any:
        """GET and decode JSON. Raises InformerError with `status` set on an HTTP error."""
        ...

    def open_watch(
        self, path: str, params: Mapping[str, str], *, timeout_s: float, idle_timeout_s: float | None = None
    ) -> WatchStream:
        """Open a watch. `timeout_s` bounds the wait for the response headers; `idle_timeout_s` (None: same
        as `timeout_s`) bounds every wait for the next byte of the stream."""
        ...

    def send_json(self, method: str, path: str, body: Any, *, content_type: str, timeout_s: float) -> Any:
        """PATCH/PUT/POST JSON (the NodeMetric status writer). Raises InformerError with `status` set."""
        ...

    def confirm_alive(self, fresh_s: float, timeout_s: float) -> bool:
        """True when the apiserver answered anything within the last `fresh_s` seconds, else after a cheap
        probe (GET /version) answered within `timeout_s`. Concurrent callers share one probe."""
        ...

    def close(self) -> None: ...


def retry_after_s(value: str | None) -> float:
    """Seconds from a Retry-After header (delta-seconds; an HTTP date or junk counts as absent: 0),
    clamped to [0, 60]."""
    try:
        seconds = float((value or "").strip())
    except ValueError:
        return 0.0
    return min(max(seconds, 0.0), _RETRY_AFTER_MAX_S) if seconds == seconds else 0.0


def load_client_configuration(kubeconfig: str = "") -> k8s_client.Configuration:
    """From `kubeconfig` if given, else in-cluster (service account). ConfigError names what failed."""
    configuration = k8s_client.Configuration()
    try:
        if kubeconfig:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, client_configuration=configuration, persist_config=False
            )
        else:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster config"
        raise ConfigError(f"{where}: {exc}") from exc
    return configuration


def keepalive_socket_options(idle_s: int, interval_s: int, count: int) -> list[tuple[int, int, int]]:
    """urllib3 socket options: its defaults (TCP_NODELAY; urllib3 replaces, not merges) plus TCP keepalive,
    so a peer that stops ACKing fails the socket after about idle_s + interval_s * count seconds."""
    options: list[tuple[int, int, int]] = list(urllib3.connection.HTTPConnection.default_socket_options)
    options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    for name, value in (("TCP_KEEPIDLE", idle_s), ("TCP_KEEPINTVL", interval_s), ("TCP_KEEPCNT", count)):
        if hasattr(socket, name):  # Linux; other platforms keep the system's timings
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    return options


def _describe_failure(exc: BaseException, connect_timeout_s: float, read_timeout_s: float) -> str:
    """urllib3 wraps a timeout in "Max retries exceeded with url: <the whole query> (Caused by ...)"; say
    which wait ran out instead (a black-holed apiserver shows as one of these), else urllib3's text."""
    reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
    if isinstance(reason, urllib3.exceptions.NewConnectionError):  # a ConnectTimeoutError subclass in urllib3
        return str(exc)
    if isinstance(reason, urllib3.exceptions.ConnectTimeoutError):
        return f"TCP connect timed out after {connect_timeout_s:g} s"
    if isinstance(reason, urllib3.exceptions.ReadTimeoutError):
        # urllib3 says "read" for a TLS handshake that timed out too; its own text names the wait that ran out
        return f"timed out waiting for the apiserver (TLS handshake within {connect_timeout_s:g} s, response " \
               f"within {read_timeout_s:g} s): {reason}"
    return str(exc)


def _status_error(method_path: str, response: urllib3.BaseHTTPResponse) -> InformerError:
    body = b""
    try:
        body = response.read(_ERROR_BODY_BYTES)
    except (urllib3.exceptions.HTTPError, OSError):
        body = b""
    finally:
        response.release_conn()
    reason = response.reason or ""
    message = ""
    try:
        status = json.loads(body)
        if isinstance(status, Mapping):
            reason = str(status.get("reason") or reason)
            message = str(status.get("message") or "")
    except ValueError:
        message = body[:200].decode("utf-8", "replace")
    return InformerError(
        f"{method_path}: HTTP {response.status} {reason}{': ' + message if message else ''}",
        status=response.status,
        reason=reason,
        retry_after_s=retry_after_s(response.headers.get("Retry-After")),
    )


class _ResponseLines:
    """Lines of a streaming HTTP body. `close()` shuts the socket so a blocked read returns now.

    A stream the server ended (timeoutSeconds ran out: the chunked body's last chunk arrived) hands its
    connection back to the pool, so the next watch reuses it: no new TCP connection, no TLS handshake. Only
    a stream we abort mid-body (stop, resync, an error) must close its socket, because HTTP/1.1 cannot
    reuse a connection whose response was not read to the end."""

    def __init__(
        self, response: urllib3.BaseHTTPResponse, *, what: str, max_line_bytes: int, idle_timeout_s: float = 0.0,
        on_bytes: Callable[[], None] | None = None,
    ) -> None:
        self._response = response
        self._what = what
        self._idle_timeout_s = idle_timeout_s
        self._max = max_line_bytes
        self._on_bytes = on_bytes
        self._closed = threading.Event()
        self._lock = threading.Lock()

    def lines(self) -> Iterator[bytes]:
        buffer = b""
        try:
            while not self._closed.is_set():
                chunk = self._response.read1(_READ_BYTES)
                if not chunk:
                    break
                if self._on_bytes is not None:
                    self._on_bytes()
                buffer += chunk
                start = 0
                while True:
                    end = buffer.find(b"\n", start)
                    if end < 0:
                        break
                    line = buffer[start:end]
                    start = end + 1
                    if line.strip():
                        yield line
                buffer = buffer[start:]
                if len(buffer) > self._max:
                    raise InformerError(f"{self._what}: event line longer than {self._max} bytes")
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError) as exc:
            if self._closed.is_set():
                return
            raise WatchIdleTimeout(
                f"{self._what}: no byte for {self._idle_timeout_s:g} s (idle timeout)"
            ) from exc
        except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError) as exc:
            if self._closed.is_set():
                return
            raise InformerError(f"{self._what}: stream broken: {exc}") from exc
        if buffer.strip() and not self._closed.is_set():
            yield buffer
        self._release()

    def _release(self) -> None:
        """The server ended the body: give the connection back to the pool instead of closing it."""
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
        try:
            self._response.release_conn()
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            log.debug("%s: release: %s", self._what, exc)

    def close(self) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
        response = self._response
        try:
            response.shutdown()  # wakes a reader blocked in recv() on another thread
        except (ValueError, RuntimeError, OSError, NotImplementedError):
            pass  # already released or never connected: nothing is blocked on it
        try:
            response.close()
            response.release_conn()
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            log.debug("%s: close: %s", self._what, exc)


def _is_json_type(content_type: str) -> bool:
    """application/json and its +json patch types, which the client's REST layer serializes itself."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


@dataclass(frozen=True, slots=True)
class ConnectionStats:
    """What the connection pool did: connections opened (each a TCP connect, and a TLS handshake on https),
    requests sent over them, and connections idle in the pool now. Read from urllib3's own counters."""

    opened: int
    requests: int
    idle: int


class ApiClientTransport:
    """KubeTransport over a configured `kubernetes.client.ApiClient`.

    Connections: urllib3 keeps up to `pool_maxsize` idle keep-alive connections per apiserver; each open
    watch holds one, and a request finds a free one or opens another. A pool smaller than the agent's
    concurrent watches plus writers would discard a connection whenever one comes back to a full pool, and
    open a new one (a TLS handshake) for the next request: hence the floor, not the client's cpu_count*5."""

    def __init__(
        self,
        configuration: k8s_client.Configuration,
        *,
        connect_timeout_s: float = 5.0,
        max_event_bytes: int = 16 << 20,
        keepalive: tuple[int, int, int] | None = None,
        pool_maxsize: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`keepalive` is (idle_s, interval_s, count) for TCP keepalive on every apiserver socket, unless
        the configuration already carries socket options of its own."""
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, pool_maxsize)
        if configuration.retries is None:
            # Our reflector retries with jittered backoff; urllib3's own immediate retries would only
            # triple the connection attempts (and warnings) against an apiserver that is down.
            configuration.retries = 0
        if keepalive is not None and configuration.socket_options is None:
            configuration.socket_options = keepalive_socket_options(*keepalive)
        self._api = k8s_client.ApiClient(configuration)
        # The apiserver names an Update's field manager, and its audit log the client, after the User-Agent up to
        # the first "/": "hookserver", not the generated client's "OpenAPI-Generator".
        self._api.user_agent = f"hookserver/{__version__} (python)"
        self._connect_timeout_s = connect_timeout_s
        self._max_event_bytes = max_event_bytes
        self._clock = clock
        self._connects = 0  # TCP connections made (each a TLS handshake on https), counted as they are made
        self._connects_lock = threading.Lock()
        self._count_connects()
        self._last_answer = 0.0  # clock() of the last byte the apiserver sent on any request or watch
        self._probe_lock = threading.Lock()
        self._last_probe_failed = 0.0
        self.probes = 0
        self.last_probe_error = ""

    @property
    def host(self) -> str:
        return str(self._api.configuration.host)

    def _get(self, path: str, params: Mapping[str, str], read_timeout_s: float) -> urllib3.BaseHTTPResponse:
        what = f"GET {path}"
        try:
            method, url, headers, _body, _post = self._api.param_serialize(
                "GET",
                path,
                query_params=list(params.items()),
                header_params={"Accept": "application/json", "Accept-Encoding": _ACCEPT_ENCODING},
                auth_settings=["BearerToken"],
            )
            rest = self._api.call_api(
                method, url, header_params=headers, _request_timeout=(self._connect_timeout_s, read_timeout_s)
            )
        except (urllib3.exceptions.HTTPError, OSError, k8s_client.ApiException) as exc:
            raise InformerError(f"{what}: {_describe_failure(exc, self._connect_timeout_s, read_timeout_s)}") from exc
        response: urllib3.BaseHTTPResponse = rest.response
        self._answered()
        if not 200 <= response.status < 300:
            raise _status_error(what, response)
        return response

    def get_json(self, path: str, params: Mapping[str, str], *, timeout_s: float) -> Any:
        response = self._get(path, params, timeout_s)
        try:
            body = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise InformerError(f"GET {path}: body: {exc}") from exc
        finally:
            response.release_conn()
        try:
            return json.loads(body)
        except ValueError as exc:
            raise InformerError(f"GET {path}: response is not JSON: {exc}") from exc

    def _send(
        self, method: str, path: str, body: Any, *, content_type: str, timeout_s: float,
        params: Mapping[str, str] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": "application/json", "Accept-Encoding": _ACCEPT_ENCODING}
        if body is not None:
            headers["Content-Type"] = content_type
            if not _is_json_type(content_type):
                # Server-side apply (application/apply-patch+yaml) takes JSON, which is YAML. Sent as
                # bytes, because the client's REST layer serializes a dict only for the content types
                # it knows (before v31 it refused a dict for any YAML type) but passes bytes as they are.
                body = json.dumps(body).encode()
        try:
            http_method, url, header_params, serialized, _post = self._api.param_serialize(
                method, path, body=body, header_params=headers, auth_settings=["BearerToken"],
                query_params=list(params.items()) if params else None,
            )
            rest = self._api.call_api(
                http_method, url, header_params=header_params, body=serialized,
                _request_timeout=(self._connect_timeout_s, timeout_s),
            )
        except (urllib3.exceptions.HTTPError, OSError, k8s_client.ApiException, ValueError) as exc:
            raise InformerError(f"{method} {path}: {_describe_failure(exc, self._connect_timeout_s, timeout_s)}") from exc
        response: urllib3.BaseHTTPResponse = rest.response
        self._answered()
        return response

    def send_json(self, method: str, path: str, body: Any, *, content_type: str, timeout_s: float) -> Any:
        """PATCH/PUT/POST a JSON body and decode the JSON answer. InformerError with `status` on HTTP errors."""
        what = f"{method} {path}"
        response = self._send(method, path, body, content_type=content_type, timeout_s=timeout_s)
        if not 200 <= response.status < 300:
            raise _status_error(what, response)
        try:
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise InformerError(f"{what}: body: {exc}") from exc
        finally:
            response.release_conn()
        try:
            return json.loads(data) if data else None
        except ValueError as exc:
            raise InformerError(f"{what}: response is not JSON: {exc}") from exc

    def request_json(
        self, method: str, path: str, body: Any = None, *, timeout_s: float,
        content_type: str = "application/json", params: Mapping[str, str] | None = None,
    ) -> tuple[int, Any]:
        """`request_json_with_headers` without the headers (what most writers need)."""
        status, decoded, _headers = self.request_json_with_headers(
            method, path, body, timeout_s=timeout_s, content_type=content_type, params=params)
        return status, decoded

    def request_json_with_headers(
        self, method: str, path: str, body: Any = None, *, timeout_s: float,
        content_type: str = "application/json", params: Mapping[str, str] | None = None,
    ) -> tuple[int, Any, Mapping[str, str]]:
        """Send a request (POST, PATCH, PUT, DELETE, GET) with a JSON body and return (HTTP status, decoded
        body or None). `content_type` may be a patch type (`application/merge-patch+json`,
        `application/apply-patch+yaml`: the body is still JSON); `params` is the query.

        Unlike `get_json` and `send_json`, an HTTP error status is returned, not raised: writers (the
        evictor, the server-side apply writers) act on 403, 404, 409 and 429 themselves; an error body
        that is not JSON ("404 page not found" for a resource nobody serves) comes back as its text.
        A transport failure raises InformerError. The headers come back with lower-case names: the evictor
        reads `retry-after` from a 429, which a proxy in front of the apiserver may send without a Status body."""
        what = f"{method} {path}"
        response = self._send(method, path, body, content_type=content_type, timeout_s=timeout_s, params=params)
        try:
            raw = response.read(_ERROR_BODY_BYTES if response.status >= 300 else None)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise InformerError(f"{what}: body: {exc}") from exc
        finally:
            response.release_conn()
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw[:200].decode("utf-8", "replace") if response.status >= 300 else None
        headers = {str(k).lower(): str(v) for k, v in response.headers.items()}
        return response.status, decoded, MappingProxyType(headers)

    def open_watch(
        self, path: str, params: Mapping[str, str], *, timeout_s: float, idle_timeout_s: float | None = None
    ) -> WatchStream:
        response = self._get(path, params, timeout_s)
        idle = timeout_s if idle_timeout_s is None else idle_timeout_s
        if idle != timeout_s:
            # urllib3 read the headers under `timeout_s`; the body is read from the same socket, whose
            # timeout is what each recv() of the stream waits at most.
            connection = getattr(response, "connection", None)
            sock = getattr(connection, "sock", None)
            if sock is None:
                response.release_conn()
                raise InformerError(f"WATCH {path}: response has no socket to set the idle timeout on")
            sock.settimeout(idle)
        return _ResponseLines(
            response, what=f"WATCH {path}", max_line_bytes=self._max_event_bytes, idle_timeout_s=idle,
            on_bytes=self._answered,
        )

    def _answered(self) -> None:
        self._last_answer = self._clock()

    def confirm_alive(self, fresh_s: float, timeout_s: float) -> bool:
        """See KubeTransport. /version is readable by every authenticated client (system:public-info-viewer)
        and answered from memory; it goes over a pooled connection like any request."""
        with self._probe_lock:
            now = self._clock()
            if self._last_answer and now - self._last_answer < fresh_s:
                return True
            if self._last_probe_failed and now - self._last_probe_failed < timeout_s:
                return False  # another watch's probe just failed: the same answer, without waiting again
            self.probes += 1
            try:
                self.get_json("/version", {}, timeout_s=timeout_s)
            except InformerError as exc:
                if exc.status:  # it answered, if only with an error: the route and the server are alive
                    return True
                self.last_probe_error = str(exc)
                self._last_probe_failed = self._clock()
                log.info("apiserver probe failed: %s", exc)
                return False
            return True

    def _count_connects(self) -> None:
        """Count every TCP connect of this client's pools. urllib3's own `num_connections` counts connection
        objects, not connects: a pooled connection whose socket was closed reconnects under the same object,
        which is exactly the waste to see. The pools' connection classes are subclassed per transport (urllib3's
        `pool_classes_by_scheme` and `ConnectionCls` hooks); nothing global is patched."""
        manager = getattr(self._api.rest_client, "pool_manager", None)
        classes = getattr(manager, "pool_classes_by_scheme", None)
        if manager is None or not isinstance(classes, Mapping):
            return
        transport = self

        def counted(base: Any) -> Any:
            def _new_conn(conn: Any) -> Any:
                sock = base._new_conn(conn)
                with transport._connects_lock:
                    transport._connects += 1
                return sock
            return type(f"Counted{base.__name__}", (base,), {"_new_conn": _new_conn})

        manager.pool_classes_by_scheme = {
            scheme: type(f"Counted{pool.__name__}", (pool,), {"ConnectionCls": counted(pool.ConnectionCls)})
            for scheme, pool in classes.items()
        }

    def connection_stats(self) -> ConnectionStats:
        """Summed over the client's connection pools (one per apiserver host)."""
        requests = idle = 0
        manager = getattr(self._api.rest_client, "pool_manager", None)
        pools = getattr(manager, "pools", None)
        if pools is not None:
            for key in list(pools.keys()):
                pool = pools.get(key)
                if pool is None:
                    continue
                requests += int(getattr(pool, "num_requests", 0))
                queue = getattr(pool, "pool", None)
                idle += sum(1 for conn in list(getattr(queue, "queue", ())) if conn is not None)
        with self._connects_lock:
            opened = self._connects
        return ConnectionStats(opened, requests, idle)

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]
