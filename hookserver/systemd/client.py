"""A small blocking D-Bus client for systemd's Manager: connect, authenticate, call, read the reply or the error.

Why our own: one method (`SetUnitProperties`) does not justify a dependency, and the kubelet's own driver talks
to the same API. Root talks to systemd peer to peer on `/run/systemd/private` (what `systemctl` uses as root: no
bus daemon, no `Hello`); the system bus socket works too (`bus=True`: `Hello` first, then calls addressed to
`org.freedesktop.systemd1`). Authentication is SASL EXTERNAL with our uid in hex-encoded decimal (the spec's
"Authentication Protocol"). Every attempt is bounded by `timeout_s`: a systemd that hangs costs the caller at
most that, and the connection is dropped (a half-read reply would desynchronise the stream). A broken pipe or reset is
retried once on a fresh connection (systemd restarts, daemon-reexec). Everything that goes wrong raises one of
`SystemdUnavailable` (no systemd to talk to) or `SystemdCallError` (systemd said no, with its error name).
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

from hookserver.errors import SystemdCallError, SystemdUnavailable
from hookserver.systemd.wire import (
    HEADER_FIXED_BYTES,
    Message,
    MessageType,
    Variant,
    WireFormatError,
    decode,
    encode,
    message_length,
)

__all__ = ["PRIVATE_SOCKET", "SYSTEM_BUS_SOCKET", "SystemdClient"]

PRIVATE_SOCKET = "/run/systemd/private"
SYSTEM_BUS_SOCKET = "/run/dbus/system_bus_socket"
_SYSTEMD = ("org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager")
_RETRY_ERRNOS = {errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.EBADF}


class SystemdClient:
    """Thread-safe (one call at a time). `timeout_s` bounds each attempt, connecting and authenticating included;
    a call makes at most two (the second only after the connection broke), so it ends within 2 × `timeout_s`."""

    def __init__(self, socket_path: str = PRIVATE_SOCKET, *, timeout_s: float = 5.0, bus: bool = False) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s
        self.bus = bus
        self._sock: socket.socket | None = None
        self._serial = 0
        self._lock = threading.Lock()

    # -- public ----------------------------------------------------------------------------------
    def set_unit_properties(self, unit: str, properties: Sequence[tuple[str, Variant]], *,
                            runtime: bool = True) -> None:
        """`Manager.SetUnitProperties(s unit, b runtime, a(sv) properties)`: systemd applies them to the unit's
        cgroup and keeps them (runtime: in /run, gone at reboot) for its next reload or re-realisation."""
        self.call("SetUnitProperties", "sba(sv)", (unit, runtime, list(properties)))

    def call(self, member: str, signature: str, body: tuple[Any, ...]) -> tuple[Any, ...]:
        """One Manager method call; its reply's body."""
        with self._lock:
            for attempt in (1, 2):
                deadline = time.monotonic() + self.timeout_s  # a retry on a fresh connection gets its own
                try:
                    return self._call_once(member, signature, body, deadline)
                except OSError as exc:
                    self._drop()
                    if attempt == 2 or exc.errno not in _RETRY_ERRNOS:
                        raise self._unavailable(exc) from exc
            raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            self._drop()

    # -- internals -------------------------------------------------------------------------------
    def _unavailable(self, exc: BaseException) -> SystemdUnavailable:
        if isinstance(exc, (socket.timeout, TimeoutError)):
            return SystemdUnavailable(f"{self.socket_path}: no answer within {self.timeout_s:g} s")
        if isinstance(exc, OSError) and exc.errno:
            return SystemdUnavailable(f"{self.socket_path}: {errno.errorcode.get(exc.errno, exc.errno)}: "
                                      f"{exc.strerror}")
        return SystemdUnavailable(f"{self.socket_path}: {exc}")

    def _call_once(self, member: str, signature: str, body: tuple[Any, ...], deadline: float) -> tuple[Any, ...]:
        sock = self._connected(deadline)
        destination, path, interface = _SYSTEMD
        reply = self._exchange(sock, Message(
            MessageType.METHOD_CALL, self._next_serial(), path=path, interface=interface, member=member,
            destination=destination if self.bus else "", signature=signature, body=body), deadline)
        return reply.body

    def _exchange(self, sock: socket.socket, message: Message, deadline: float) -> Message:
        """Send one call and read until its reply (signals and other traffic on a bus are skipped)."""
        try:
            wire = encode(message)
        except WireFormatError as exc:
            raise SystemdCallError("hookserver.InvalidArguments", str(exc)) from exc
        _settimeout(sock, deadline)
        sock.sendall(wire)
        while True:
            try:
                reply = _read_message(sock, deadline)
            except WireFormatError as exc:
                self._drop()
                raise SystemdUnavailable(f"{self.socket_path}: not a D-Bus peer ({exc})") from exc
            if reply.reply_serial != message.serial:
                continue
            if reply.type is MessageType.ERROR:
                text = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
                raise SystemdCallError(reply.error_name or "org.freedesktop.DBus.Error.Failed", text)
            if reply.type is MessageType.METHOD_RETURN:
                return reply

    def _connected(self, deadline: float) -> socket.socket:
        if self._sock is not None:
            return self._sock
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            _settimeout(sock, deadline)
            sock.connect(self.socket_path)
            _authenticate(sock, deadline)
            self._sock = sock
            if self.bus:
                self._exchange(sock, Message(MessageType.METHOD_CALL, self._next_serial(), path="/org/freedesktop/DBus",
                                             interface="org.freedesktop.DBus", member="Hello",
                                             destination="org.freedesktop.DBus"), deadline)
        except BaseException:
            self._sock = None
            sock.close()
            raise
        return sock

    def _next_serial(self) -> int:
        self._serial = self._serial % 0xFFFFFFFF + 1
        return self._serial

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _settimeout(sock: socket.socket, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    sock.settimeout(left)


def _recv_exact(sock: socket.socket, n: int, deadline: float) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        _settimeout(sock, deadline)
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise OSError(errno.ECONNRESET, "systemd closed the connection")
        chunks += chunk
    return bytes(chunks)


def _read_message(sock: socket.socket, deadline: float) -> Message:
    fixed = _recv_exact(sock, HEADER_FIXED_BYTES, deadline)
    rest = _recv_exact(sock, message_length(fixed) - HEADER_FIXED_BYTES, deadline)
    return decode(fixed + rest)


def _authenticate(sock: socket.socket, deadline: float) -> None:
    """SASL EXTERNAL: a NUL byte, `AUTH EXTERNAL <hex(uid)>`, expect `OK <guid>`, then `BEGIN`."""
    uid = str(os.geteuid()).encode().hex()
    sock.sendall(b"\0AUTH EXTERNAL " + uid.encode() + b"\r\n")
    line = bytearray()
    while not line.endswith(b"\r\n"):
        if len(line) > 512:
            raise OSError(errno.EPROTO, "an overlong authentication line")
        line += _recv_exact(sock, 1, deadline)
    if not line.startswith(b"OK "):
        raise SystemdCallError("hookserver.AuthRejected", line.decode(errors="replace").strip())
    sock.sendall(b"BEGIN\r\n")
