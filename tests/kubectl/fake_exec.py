"""Pod `exec` for the fake apiserver: the websocket upgrade and the v4 channel protocol, as the apiserver
serves `kubectl exec` and the kubernetes client's `stream()`.

`serve_exec` answers `GET .../pods/<name>/exec?command=...&container=...` on the fake's handler: it completes
the RFC 6455 handshake (subprotocol v4.channel.k8s.io), calls `run(namespace, pod, container, command)`, sends
stdout on channel 1 and stderr on channel 2 (unmasked binary frames, as a server sends them), the exit status
as a Status on channel 3 (`NonZeroExitCode` with an `ExitCode` cause, as the kubelet reports it), then closes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

ExecRun = Callable[[str, str, str, list[str]], tuple[bytes, bytes, int]]

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTOCOL = "v4.channel.k8s.io"


def _frame(payload: bytes, opcode: int = 0x2) -> bytes:
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + struct.pack("!H", n)
    else:
        head += bytes([127]) + struct.pack("!Q", n)
    return head + payload


def exec_path(path: str) -> tuple[str, str] | None:
    """(namespace, pod) for `/api/v1/namespaces/<ns>/pods/<pod>/exec`, else None."""
    parts = path.split("/")
    if len(parts) == 8 and parts[1:4] == ["api", "v1", "namespaces"] and parts[5] == "pods" and parts[7] == "exec":
        return parts[4], parts[6]
    return None


def proxy_path(path: str) -> tuple[str, str, int, str] | None:
    """(namespace, pod, port, path) for `/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/<path>`, else None."""
    parts = path.split("/", 8)
    if len(parts) >= 8 and parts[1:4] == ["api", "v1", "namespaces"] and parts[5] == "pods" and parts[7] == "proxy":
        name, _, port = parts[6].partition(":")
        return parts[4], name, int(port or 80), "/" + (parts[8] if len(parts) > 8 else "")
    return None


def _send(handler: BaseHTTPRequestHandler, status: int, body: str, content_type: str = "application/json") -> None:
    data = body.encode()
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def serve_proxy(handler: BaseHTTPRequestHandler, namespace: str, pod: str, port: int, path: str,
                query: dict[str, str], run: Callable[[str, str, int, str, dict[str, str]], tuple[int, str]]) -> None:
    status, body = run(namespace, pod, port, path, query)
    _send(handler, status, body)


def serve_exec(handler: BaseHTTPRequestHandler, namespace: str, pod: str, query: dict[str, list[str]],
               run: ExecRun | None) -> None:
    if run is None:  # as kube-apiserver answers when it cannot dial the kubelet (the kube-e2e harness)
        _send(handler, 500, json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": "error dialing backend: dial tcp: lookup node-a: no such host",
                                        "code": 500}))
        return
    key = handler.headers.get("Sec-WebSocket-Key", "")
    offered = [p.strip() for p in handler.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    if handler.headers.get("Upgrade", "").lower() != "websocket" or not key or PROTOCOL not in offered:
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
                           "reason": "BadRequest", "message": "exec needs a websocket upgrade (v4.channel.k8s.io)"})
        handler.send_response(400)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body.encode())
        return
    accept = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
    handler.send_response(101, "Switching Protocols")
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept)
    handler.send_header("Sec-WebSocket-Protocol", PROTOCOL)
    handler.end_headers()
    handler.close_connection = True
    out, err, rc = run(namespace, pod, (query.get("container") or [""])[-1], list(query.get("command") or []))
    wfile: Any = handler.wfile
    for channel in (1, 2, 3):  # kubelet opens each channel with an empty frame
        wfile.write(_frame(bytes([channel])))
    for start in range(0, len(out), 16384):
        wfile.write(_frame(b"\x01" + out[start:start + 16384]))
    if err:
        wfile.write(_frame(b"\x02" + err))
    status: dict[str, Any] = {"metadata": {}, "status": "Success"}
    if rc:
        status = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                  "message": f"command terminated with non-zero exit code: error executing command, exit status {rc}",
                  "details": {"causes": [{"reason": "ExitCode", "message": str(rc)}]}}
    wfile.write(_frame(b"\x03" + json.dumps(status).encode()))
    wfile.write(_frame(struct.pack("!H", 1000), opcode=0x8))
    wfile.flush()
