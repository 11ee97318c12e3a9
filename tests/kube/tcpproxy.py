"""A TCP proxy a test can cut: the way to give a client an apiserver outage without stopping an
apiserver that other people share. `cut()` resets every open connection and every new one until
`restore()`; `freeze()` holds every byte until `thaw()`; otherwise bytes pass through untouched (TLS goes
end to end)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

__all__ = ["CuttableProxy"]


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0), as a dead peer or a dropped conntrack entry looks to the client."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # close() alone does not wake a thread blocked in recv() on the same socket (the connection would
    # live on until it returned); shutdown() does, and the pump's own close then sends the RST.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


class CuttableProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._frozen = threading.Event()
        self._closed = False
        self.accepted = 0
        self.refused = 0
        self._thread = threading.Thread(target=self._accept_loop, name="cuttable-proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            victims, self._open = self._open, set()
        for sock in victims:
            _reset(sock)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def freeze(self) -> None:
        """A black hole: connections stay open and new ones are accepted, but no byte moves either way
        (a dropped route or a dead load balancer, which a client notices only by its own timeouts)."""
        self._frozen.set()

    def thaw(self) -> None:
        self._frozen.clear()

    def close(self) -> None:
        self._closed = True
        self.cut()
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                cut = self._cut
            if cut:
                self.refused += 1
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                if self._cut:
                    _reset(client)
                    _reset(upstream)
                    continue
                self._open.update((client, upstream))
            self.accepted += 1
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                while self._frozen.is_set() and not self._closed:
                    time.sleep(0.05)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
            _reset(src)
            _reset(dst)
