"""A TCP proxy between the agent and the fake apiserver that answers with faults: 500 or 429 to every new
request, a response held past every client timeout ("slow"), every open stream cut mid-event ("cut").

Why a proxy and not the fake's own switches: the fake (tests/informer/fake_apiserver.py) belongs to the
informer's tests; the proxy adds faults to any HTTP server without changing it. 410 Gone and the black hole
are the fake's own (`compact` + `expire_watches`, `black_hole`).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

__all__ = ["FaultProxy"]

_STATUS = {"500": b"500 Internal Server Error", "429": b"429 Too Many Requests"}


class FaultProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.mode = ""
        self.hold_s = 0.0
        self.injected = 0
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        threading.Thread(target=self._accept, name="soak-apiproxy", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set(self, mode: str, *, hold_s: float = 0.0) -> None:
        """"" relays; "500"/"429" answer every request with that status; "slow" holds each answer `hold_s`.
        Open connections are cut when the mode changes, so the next request meets the new mode."""
        self.mode, self.hold_s = mode, hold_s
        self.cut()

    def cut(self) -> None:
        with self._lock:
            conns = list(self._conns)
            self._conns.clear()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, *socks: socket.socket) -> None:
        with self._lock:
            self._conns.update(socks)

    def _serve(self, client: socket.socket) -> None:
        self._track(client)
        mode = self.mode
        if mode in _STATUS:
            with contextlib.suppress(OSError):
                client.recv(65536)
                body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":%s}' % mode.encode()
                client.sendall(b"HTTP/1.1 " + _STATUS[mode] + b"\r\nContent-Type: application/json\r\n"
                               b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                self.injected += 1
            client.close()
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        self._track(upstream)
        if mode == "slow":
            self.injected += 1
        threading.Thread(target=self._pipe, args=(client, upstream, 0.0), daemon=True).start()
        self._pipe(upstream, client, self.hold_s if mode == "slow" else 0.0)

    def _pipe(self, src: socket.socket, dst: socket.socket, hold_s: float) -> None:
        first = True
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if first and hold_s:
                    time.sleep(hold_s)
                first = False
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
