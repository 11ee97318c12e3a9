"""A small D-Bus peer on a real unix socket that answers like systemd's private socket, for the client's tests.

It speaks SASL EXTERNAL and D-Bus messages over the socket (the bytes the client would send to systemd), and
can answer each call with a return, an error, garbage, a close or nothing at all (`behaviour`).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookserver.systemd.wire import HEADER_FIXED_BYTES, Message, MessageType, decode, encode, message_length

__all__ = ["Call", "FakeSystemd"]


@dataclass
class Call:
    member: str
    body: tuple[Any, ...]
    raw: bytes


@dataclass
class FakeSystemd:
    """`behaviour(call) -> str`: "ok", "error:<name>:<message>", "garbage", "close", "hang"."""

    path: Path
    behaviour: Callable[[Call], str] = lambda call: "ok"
    calls: list[Call] = field(default_factory=list)
    connections: int = 0
    auth_lines: list[bytes] = field(default_factory=list)
    reject_auth: bool = False

    def __post_init__(self) -> None:
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(self.path))
        self._listener.listen(8)
        self._listener.settimeout(0.05)  # accept() wakes to see close() (closing alone does not wake it)
        self._stop = threading.Event()
        self._open: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._listener.close()
        for conn in self._open:
            conn.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            self.connections += 1
            self._open.append(conn)
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        try:
            if not self._auth(conn):
                return
            while not self._stop.is_set():
                fixed = _recv(conn, HEADER_FIXED_BYTES)
                raw = fixed + _recv(conn, message_length(fixed) - HEADER_FIXED_BYTES)
                message = decode(raw)
                call = Call(message.member, message.body, raw)
                self.calls.append(call)
                action = self.behaviour(call)
                if action == "hang":
                    self._stop.wait(30)
                    return
                if action == "close":
                    conn.close()
                    return
                if action == "garbage":
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" + b"\xff" * 32)
                    continue
                if action.startswith("error:"):
                    _, name, text = action.split(":", 2)
                    reply = Message(MessageType.ERROR, 1000 + len(self.calls), error_name=name,
                                    reply_serial=message.serial, signature="s", body=(text,))
                else:
                    # A signal first, as a bus would interleave: the client must skip it.
                    conn.sendall(encode(Message(MessageType.SIGNAL, 999, path="/org/freedesktop/systemd1",
                                                interface="org.freedesktop.systemd1.Manager", member="Reloading",
                                                signature="b", body=(True,))))
                    reply = Message(MessageType.METHOD_RETURN, 1000 + len(self.calls), reply_serial=message.serial)
                conn.sendall(encode(reply))
        except (OSError, ValueError):
            return
        finally:
            conn.close()

    def _auth(self, conn: socket.socket) -> bool:
        if _recv(conn, 1) != b"\0":
            return False
        line = _line(conn)
        self.auth_lines.append(line)
        if self.reject_auth or not line.startswith(b"AUTH EXTERNAL "):
            conn.sendall(b"REJECTED EXTERNAL\r\n")
            return False
        conn.sendall(b"OK 0123456789abcdef0123456789abcdef\r\n")
        return _line(conn) == b"BEGIN\r\n"


def _recv(conn: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = conn.recv(n - len(out))
        if not chunk:
            raise OSError("closed")
        out += chunk
    return out


def _line(conn: socket.socket) -> bytes:
    out = b""
    while not out.endswith(b"\r\n"):
        out += _recv(conn, 1)
    return out

