"""The debug API server: `hookserver.debug.v1.Debug` on its own unix socket, read by `hookctl`.

A front door like the proxy and NRI, but read-only: Status, Pods, Explain, Events and Writes come from
the store and its audit; Slo, Top, Metrics and Nri ask the provider another area registered under that
name. Errors are translated here, once, into gRPC status codes with a one-line message: a malformed
request is INVALID_ARGUMENT, an unknown pod NOT_FOUND, a missing provider UNAVAILABLE. The server runs
on gRPC's own threads, so a slow debug call never holds up the daemon's event loop or a hook.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from hookserver import __version__
from hookserver.api import debug_pb2, debug_pb2_grpc
from hookserver.debug.encoding import dumps, to_jsonable
from hookserver.debug.podref import validate_pod_ref
from hookserver.debug.render_status import status_units
from hookserver.system.socketfiles import prepare_socket_path, remove_own_socket
from hookserver.debug.views import (
    NotFoundError,
    events_view,
    explain_view,
    pods_view,
    status_view,
    writes_view,
)
from hookserver.errors import ConfigError, HookServerError, InputError
from hookserver.store.state import StateStore

__all__ = ["DEFAULT_TOP_WINDOW_S", "HTTP_RPCS", "PROVIDER_NAMES", "DebugServer", "Provider", "ProviderUnavailable"]

log = logging.getLogger(__name__)

Provider = Callable[[dict[str, Any]], Any]

DEFAULT_TOP_WINDOW_S = 300
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

# What a user is told when the area behind a provider-backed command is not running.
_MISSING: Mapping[str, str] = {
    "slo": "no NodeSLO source is running (no 'slo' provider is registered)",
    "top": "the collectors are not running (no 'top' provider is registered)",
    "metrics": "the time-series store is not running (no 'metrics' provider is registered)",
    "nri": "the nri front door is not running",
    "predict": "the predictor is not running (no 'predict' provider is registered)",
    "reclaimable": "the predictor is not running (no 'reclaimable' provider is registered)",
    "nodemetric": "NodeMetric reporting is not running (no 'nodemetric' provider is registered)",
    "qos": "the QoS reconcilers are not running (no 'qos' provider is registered)",
    "qos_plan": "the QoS reconcilers are not running (no 'qos_plan' provider is registered)",
    "version": "no 'version' provider is registered",
    "capacity": "the capacity publisher is not running (capacity.enabled: false)",
    "topology": "the NodeResourceTopology report is not running (topology.enabled: false)",
    "devices": "the Device report is not running (the Accelerators and RDMADevices gates are off, and devices.enabled and devices.rdma are false)",
}
PROVIDER_NAMES = frozenset(_MISSING)


class ProviderUnavailable(HookServerError):
    """The area that answers this command is not running in this process (gRPC UNAVAILABLE)."""


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _Servicer:
    """The rpc methods gRPC calls; each builds a JSON-ready value and `_answer` encodes or aborts."""

    def __init__(
        self,
        store: StateStore,
        providers: Mapping[str, Provider],
        info: Callable[[], dict[str, Any]] | None,
        started_at: float,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._providers = providers
        self._info = info
        self._started_at = started_at
        self._clock = clock

    # -- rpcs (names are the wire names) -----------------------------------------------------------
    def Status(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC method name
        return self._answer(context, "Status", self._status)

    def Pods(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "Pods", lambda: pods_view(self._store))

    def Explain(self, request: Any, context: Any) -> Any:  # noqa: N802
        def build() -> Any:
            namespace, name = validate_pod_ref(request.namespace, request.name)
            return explain_view(self._store, namespace, name)

        return self._answer(context, "Explain", build)

    def Events(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "Events", lambda: events_view(self._store, limit=int(request.limit)))

    def Writes(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(
            context,
            "Writes",
            lambda: writes_view(self._store, limit=int(request.limit), path_contains=str(request.path_contains)),
        )

    def Slo(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "Slo", lambda: self._provide("slo", {}))

    def Top(self, request: Any, context: Any) -> Any:  # noqa: N802
        window = int(request.window_seconds) or DEFAULT_TOP_WINDOW_S
        return self._answer(context, "Top", lambda: self._provide("top", {"window_seconds": window}))

    def Metrics(self, request: Any, context: Any) -> Any:  # noqa: N802
        def build() -> Any:
            query = str(request.query).strip()
            if not query:
                raise InputError("is empty: give a time-series query", field="query")
            return self._provide("metrics", {"query": query})

        return self._answer(context, "Metrics", build)

    def Nri(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "Nri", lambda: self._provide("nri", {}))

    def Predict(self, request: Any, context: Any) -> Any:  # noqa: N802
        def build() -> Any:
            args: dict[str, Any] = {
                "namespace": str(request.namespace),
                "name": str(request.name),
                "priority": str(request.priority),
                "node": bool(request.node),
                "system": bool(request.system),
            }
            if args["namespace"] or args["name"]:
                args["namespace"], args["name"] = validate_pod_ref(args["namespace"], args["name"])
            chosen = sum(1 for k in ("name", "priority", "node", "system") if args[k])
            if chosen > 1:
                raise InputError("give at most one of a pod, a priority class, node or system", field="selector")
            return self._provide("predict", args)

        return self._answer(context, "Predict", build)

    def Reclaimable(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "Reclaimable", lambda: self._provide("reclaimable", {}))

    def NodeMetric(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "NodeMetric", lambda: self._provide("nodemetric", {}))

    def Capacity(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "Capacity", lambda: self._provide("capacity", {}))

    def Topology(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "Topology", lambda: self._provide("topology", {}))

    def Devices(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "Devices", lambda: self._provide("devices", {}))

    def Qos(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "Qos", lambda: self._provide("qos", {}))

    def QosPlan(self, request: Any, context: Any) -> Any:  # noqa: N802
        def build() -> Any:
            name = str(request.name).strip()
            if not name:
                raise InputError("is empty: name a QoS reconciler (see `hookctl qos`)", field="name")
            return self._provide(
                "qos_plan",
                {"name": name, "slo_document": str(request.slo_document), "slo_source": str(request.slo_source)},
            )

        return self._answer(context, "QosPlan", build)

    def Version(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._answer(context, "Version", lambda: self._provide("version", {}))

    # -- helpers -----------------------------------------------------------------------------------
    def _provide(self, name: str, args: dict[str, Any]) -> Any:
        provider = self._providers.get(name)
        if provider is None:
            raise ProviderUnavailable(_MISSING[name])
        return provider(args)

    def _status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": __version__,
            "debug_uptime_s": round(self._clock() - self._started_at, 3),
        }
        out.update(status_view(self._store))
        if self._info is not None:
            try:
                out.update(to_jsonable(self._info()))
            except Exception as exc:  # noqa: BLE001 - status must still answer; the failure is shown
                log.warning("debug status: info() failed: %s", exc, exc_info=True)
                out["info_error"] = _one_line(f"{type(exc).__name__}: {exc}")
        if "nri" not in out and "nri" in self._providers:
            try:
                out["nri"] = to_jsonable(self._providers["nri"]({}))
            except Exception as exc:  # noqa: BLE001 - shown in the status, not fatal to it
                log.warning("debug status: nri provider failed: %s", exc, exc_info=True)
                out["nri"] = {"error": _one_line(f"{type(exc).__name__}: {exc}")}
        units: dict[str, Any] = status_units(out)
        return units  # ISO times and millisecond durations, whichever area reported them

    def _answer(self, context: Any, rpc: str, build: Callable[[], Any]) -> Any:
        try:
            body = dumps(build())
        except NotFoundError as exc:
            code, message = grpc.StatusCode.NOT_FOUND, str(exc)
        except InputError as exc:
            code, message = grpc.StatusCode.INVALID_ARGUMENT, str(exc)
        except ProviderUnavailable as exc:
            code, message = grpc.StatusCode.UNAVAILABLE, str(exc)
        except HookServerError as exc:
            code, message = grpc.StatusCode.FAILED_PRECONDITION, str(exc)
        except Exception as exc:  # noqa: BLE001 - translated once here; logged with its traceback
            log.exception("debug %s failed", rpc)
            code, message = grpc.StatusCode.INTERNAL, f"{rpc} failed inside hookserver: {type(exc).__name__}: {exc}"
        else:
            return debug_pb2.DebugReply(json=body)
        context.abort(code, _one_line(message) or code.name)
        raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises


# The rpcs also served as `GET /debug/v1/<Rpc>?field=value` (the metrics port): every read-only view that takes
# its arguments as scalars. QosPlan (an uploaded NodeSLO document) stays on the socket.
HTTP_RPCS = frozenset({"Status", "Pods", "Explain", "Events", "Writes", "Slo", "Top", "Metrics", "Nri", "Predict",
                       "Reclaimable", "NodeMetric", "Qos", "Version", "Capacity"})
_HTTP_STATUS = {grpc.StatusCode.NOT_FOUND: 404, grpc.StatusCode.INVALID_ARGUMENT: 400,
                grpc.StatusCode.UNAVAILABLE: 503, grpc.StatusCode.FAILED_PRECONDITION: 409,
                grpc.StatusCode.INTERNAL: 500}


class _Aborted(Exception):
    def __init__(self, code: Any, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _HttpContext:
    """What `_Servicer._answer` needs of a gRPC context: `abort` raises."""

    def abort(self, code: Any, message: str) -> None:
        raise _Aborted(code, message)


def _request_from_query(rpc: str, query: Mapping[str, str]) -> Any:
    """The rpc's request message with its scalar fields from the query; a bad value is InputError."""
    request = getattr(debug_pb2, f"{rpc}Request")()
    for field in request.DESCRIPTOR.fields:
        if field.name not in query:
            continue
        text = query[field.name]
        if field.type == field.TYPE_BOOL:
            value: Any = text.lower() in ("1", "true", "yes")
        elif field.type in (field.TYPE_INT32, field.TYPE_INT64, field.TYPE_UINT32, field.TYPE_UINT64):
            try:
                value = int(text)
            except ValueError:
                raise InputError(f"not an integer: {text!r}", field=field.name) from None
            if value < 0 or value > 2**32 - 1:
                raise InputError(f"must be between 0 and {2**32 - 1}, got {value}", field=field.name)
        else:
            value = text
        setattr(request, field.name, value)
    return request


class DebugServer:
    """`hookserver.debug.v1.Debug` on a unix socket (mode 0660; a stale socket file is replaced).

    `providers` maps "slo", "top", "metrics" and "nri" to callables taking the request's arguments as
    a dict and returning anything JSON-like (dataclasses, mappings and pydantic models are converted).
    `info()` adds process fields to `status` (version, uptime, settings summary, executor layout, ...).
    """

    def __init__(
        self,
        socket_path: str,
        *,
        store: StateStore,
        providers: Mapping[str, Provider] | None = None,
        info: Callable[[], dict[str, Any]] | None = None,
        socket_mode: int = 0o660,
        max_workers: int = 4,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not socket_path:
            raise ConfigError("debug.socket: is empty")
        unknown = set(providers or {}) - PROVIDER_NAMES
        if unknown:
            raise ConfigError(
                f"debug providers: unknown name(s) {', '.join(sorted(unknown))} "
                f"(known: {', '.join(sorted(PROVIDER_NAMES))})"
            )
        self._path = os.path.abspath(socket_path)
        self._store = store
        self._providers: dict[str, Provider] = dict(providers or {})
        self._info = info
        self._mode = socket_mode
        self._max_workers = max_workers
        self._clock = clock
        self._server: Any = None
        self._servicer: _Servicer | None = None
        self._inode: int | None = None

    @property
    def socket_path(self) -> str:
        return self._path

    @property
    def address(self) -> str:
        """The gRPC target, `unix:/abs/path`."""
        return f"unix:{self._path}"

    def register_provider(self, name: str, provider: Provider) -> None:
        """Add or replace a provider; areas that start after the debug server register late."""
        if name not in PROVIDER_NAMES:
            raise ConfigError(f"debug providers: unknown name {name!r} (known: {', '.join(sorted(PROVIDER_NAMES))})")
        self._providers[name] = provider

    def start(self) -> None:
        """Listen and serve on gRPC's threads; returns at once. A failed start leaves nothing behind."""
        if self._server is not None:
            raise ConfigError(f"debug server on {self._path}: already started")
        prepare_socket_path(self._path, setting="debug.socket")
        server = grpc.server(
            ThreadPoolExecutor(max_workers=self._max_workers, thread_name_prefix="hookserver-debug"),
            maximum_concurrent_rpcs=self._max_workers * 4,
            options=[("grpc.max_send_message_length", _MAX_MESSAGE_BYTES)],
        )
        servicer = _Servicer(self._store, self._providers, self._info, self._clock(), self._clock)
        self._servicer = servicer
        register: Callable[[Any, Any], None] = debug_pb2_grpc.add_DebugServicer_to_server  # untyped, generated
        register(servicer, server)
        try:
            bound = server.add_insecure_port(self.address)
        except RuntimeError as exc:
            server.stop(None)
            raise ConfigError(f"debug socket {self._path}: cannot listen: {exc}") from exc
        if bound == 0:
            server.stop(None)
            raise ConfigError(f"debug socket {self._path}: cannot listen")
        server.start()
        try:
            os.chmod(self._path, self._mode)
            self._inode = os.stat(self._path).st_ino
        except OSError as exc:
            server.stop(None)
            raise ConfigError(f"debug socket {self._path}: cannot set mode {self._mode:o}: {exc.strerror}") from exc
        self._server = server
        log.info("debug API listening on %s", self.address)

    def http_view(self, rpc: str, query: Mapping[str, str]) -> tuple[int, str]:
        """`GET /debug/v1/<rpc>`: (HTTP status, JSON body) of the same view hookctl gets over the socket; an
        error is the status for its gRPC code and `{"error": message}`. Read-only, like the socket."""
        servicer = self._servicer
        if rpc not in HTTP_RPCS:
            return 404, dumps({"error": f"no view {rpc!r} (known: {', '.join(sorted(HTTP_RPCS))})"})
        if servicer is None:
            return 503, dumps({"error": "the debug API is not started"})
        try:
            reply = getattr(servicer, rpc)(_request_from_query(rpc, query), _HttpContext())
        except InputError as exc:
            return 400, dumps({"error": str(exc)})
        except _Aborted as exc:
            return _HTTP_STATUS.get(exc.code, 500), dumps({"error": exc.message})
        return 200, str(reply.json)

    def stop(self, grace_s: float = 1.0) -> None:
        """Stop serving (in-flight calls get `grace_s`) and remove our socket file."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stop(grace_s).wait()
        remove_own_socket(self._path, self._inode)
        self._inode = None
        log.info("debug API on %s stopped", self.address)
