"""The debug API client hookctl uses: one method per rpc, JSON text back, one-line errors.

gRPC's own failures are long and multi-line ("failed to connect to all addresses; last error: ...").
They are translated here, once, into `DebugCallError` with the status code and a message a person
can act on, so hookctl prints one line and exits non-zero.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any

import grpc

from hookserver.api import debug_pb2, debug_pb2_grpc
from hookserver.errors import HookServerError

__all__ = ["DEFAULT_SOCKET", "DEFAULT_TIMEOUT_S", "DebugCallError", "DebugClient"]

DEFAULT_SOCKET = "/var/run/hookserver/debug.sock"
DEFAULT_TIMEOUT_S = 5.0
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class DebugCallError(HookServerError):
    """A debug call failed. `code` is the gRPC status name (NOT_FOUND, UNAVAILABLE, ...)."""

    def __init__(self, message: str, *, code: str = "UNKNOWN") -> None:
        super().__init__(message)
        self.code = code


def _one_line(text: str) -> str:
    return " ".join(text.split())


class DebugClient:
    """A channel to the debug socket. Use as a context manager, or call `close()`."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.socket_path = os.path.abspath(socket_path)
        self.timeout_s = timeout_s
        self._channel: Any = None
        self._stub: Any = None

    def __enter__(self) -> DebugClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
            self._stub = None

    # -- one method per rpc; each returns the reply's JSON text -------------------------------------
    def status(self) -> str:
        return self._call("Status", debug_pb2.StatusRequest())

    def pods(self) -> str:
        return self._call("Pods", debug_pb2.PodsRequest())

    def explain(self, namespace: str, name: str) -> str:
        return self._call("Explain", debug_pb2.ExplainRequest(namespace=namespace, name=name))

    def events(self, *, limit: int = 0) -> str:
        return self._call("Events", debug_pb2.EventsRequest(limit=limit))

    def writes(self, *, limit: int = 0, path_contains: str = "") -> str:
        return self._call("Writes", debug_pb2.WritesRequest(limit=limit, path_contains=path_contains))

    def slo(self) -> str:
        return self._call("Slo", debug_pb2.SloRequest())

    def top(self, *, window_seconds: int = 0) -> str:
        return self._call("Top", debug_pb2.TopRequest(window_seconds=window_seconds))

    def metrics(self, query: str) -> str:
        return self._call("Metrics", debug_pb2.MetricsRequest(query=query))

    def nri(self) -> str:
        return self._call("Nri", debug_pb2.NriRequest())

    def predict(
        self, *, namespace: str = "", name: str = "", priority: str = "", node: bool = False, system: bool = False
    ) -> str:
        request = debug_pb2.PredictRequest(
            namespace=namespace, name=name, priority=priority, node=node, system=system
        )
        return self._call("Predict", request)

    def reclaimable(self) -> str:
        return self._call("Reclaimable", debug_pb2.ReclaimableRequest())

    def nodemetric(self) -> str:
        return self._call("NodeMetric", debug_pb2.NodeMetricRequest())

    def capacity(self) -> str:
        return self._call("Capacity", debug_pb2.CapacityRequest())

    def topology(self) -> str:
        return self._call("Topology", debug_pb2.TopologyRequest())

    def devices(self) -> str:
        return self._call("Devices", debug_pb2.DevicesRequest())

    def qos(self) -> str:
        return self._call("Qos", debug_pb2.QosRequest())

    def qos_plan(self, name: str, *, slo_document: str = "", slo_source: str = "") -> str:
        request = debug_pb2.QosPlanRequest(name=name, slo_document=slo_document, slo_source=slo_source)
        return self._call("QosPlan", request)

    def version(self) -> str:
        return self._call("Version", debug_pb2.VersionRequest())

    # -- internals -----------------------------------------------------------------------------------
    def _connect(self) -> Any:
        if self._stub is not None:
            return self._stub
        try:
            mode = os.stat(self.socket_path).st_mode
        except FileNotFoundError:
            raise DebugCallError(
                f"debug socket {self.socket_path} does not exist (is hookserver running? "
                "use --socket or HOOKCTL_SOCKET to point elsewhere)",
                code="UNAVAILABLE",
            ) from None
        except OSError as exc:
            raise DebugCallError(f"debug socket {self.socket_path}: {exc.strerror}", code="UNAVAILABLE") from exc
        if not stat.S_ISSOCK(mode):
            raise DebugCallError(f"{self.socket_path} is not a socket", code="UNAVAILABLE")
        self._channel = grpc.insecure_channel(
            f"unix:{self.socket_path}",
            options=[("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES), ("grpc.enable_retries", 0)],
        )
        make_stub: Callable[[Any], Any] = debug_pb2_grpc.DebugStub  # generated code is untyped
        self._stub = make_stub(self._channel)
        return self._stub

    def _call(self, rpc: str, request: Any) -> str:
        stub = self._connect()
        try:
            reply = getattr(stub, rpc)(request, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise self._translate(rpc, exc) from None
        return str(reply.json)

    def _translate(self, rpc: str, exc: grpc.RpcError) -> DebugCallError:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        details = exc.details() if callable(getattr(exc, "details", None)) else ""
        name = code.name if code is not None else "UNKNOWN"
        text = _one_line(str(details or ""))
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            text = f"no reply from {self.socket_path} within {self.timeout_s:g}s"
        elif code is grpc.StatusCode.UNAVAILABLE and ("connect" in text.lower() or not text):
            # gRPC's own transport failure (nothing is listening), not the server's UNAVAILABLE reply.
            lowered = text.lower()
            why = "connection refused" if "refused" in lowered else (text or "unavailable")
            text = f"cannot reach hookserver at {self.socket_path}: {why}"
        return DebugCallError(text or f"{rpc} failed ({name})", code=name)
