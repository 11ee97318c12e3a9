"""The NRI connection multiplexer: two logical byte streams over one unix socket.

Mux frame = `[conn id u32][payload length u32][payload]`, big-endian (reference §2). Conn 1 carries
the Plugin service (the runtime calls us), conn 2 the Runtime service (we call the runtime).

Receiving reads the socket in chunks and cuts mux frames out of a buffer: one await per chunk, not two
per frame. Sending: a Go peer reads each logical connection through a 4096-byte buffer and fails with ENOMEM
(dropping us, and creating the container without our adjustments) if one queued frame is larger,
so every outgoing message is cut into pieces of at most 4096 bytes and written in one go, which
keeps one message's pieces together. Receiving: payloads are appended to the logical connection's
byte stream; a mux frame is never assumed to be one ttrpc message.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable

from hookserver.errors import WireError

__all__ = [
    "MAX_RECV_FRAME_BYTES",
    "MAX_SEND_CHUNK_BYTES",
    "MUX_HEADER",
    "PLUGIN_SERVICE_CONN",
    "RUNTIME_SERVICE_CONN",
    "Multiplexer",
    "encode_mux",
]

log = logging.getLogger(__name__)

MUX_HEADER = struct.Struct(">II")
PLUGIN_SERVICE_CONN = 1
RUNTIME_SERVICE_CONN = 2
MAX_SEND_CHUNK_BYTES = 4096
# Go writers send at most one ttrpc frame (10 + 4 MiB) per mux frame, and nri <= v0.6 refuses writes
# over 16 MiB. Anything longer is not a frame a runtime sends: the stream is broken.
MAX_RECV_FRAME_BYTES = 16 << 20
_READ_CHUNK = 1 << 16

Sink = Callable[[bytes], None]


def encode_mux(conn_id: int, data: bytes, *, chunk: int = MAX_SEND_CHUNK_BYTES) -> bytes:
    """`data` as consecutive mux frames of at most `chunk` payload bytes each."""
    if len(data) <= chunk:
        return MUX_HEADER.pack(conn_id, len(data)) + data
    view = memoryview(data)
    parts: list[bytes] = []
    for start in range(0, len(data), chunk):
        piece = view[start:start + chunk]
        parts.append(MUX_HEADER.pack(conn_id, len(piece)))
        parts.append(bytes(piece))
    return b"".join(parts)


class Multiplexer:
    """Owns the socket: one reader loop feeding per-connection sinks, and whole-message writes.

    Writes need no lock: `send` hands one message's frames to the transport in a single `write`
    call, which cannot interleave with another task's inside one event loop.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_frame: int = MAX_RECV_FRAME_BYTES,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._max_frame = max_frame
        self._sinks: dict[int, Sink] = {}
        self._closed = False
        self.frames_in = 0
        self.frames_out = 0

    def open(self, conn_id: int, sink: Sink) -> None:
        """Route conn `conn_id`'s payloads to `sink`. Opening sends nothing on the wire."""
        if conn_id == 0:
            raise ValueError("mux connection id 0 is reserved")
        self._sinks[conn_id] = sink

    @property
    def closed(self) -> bool:
        return self._closed or self._writer.is_closing()

    async def send(self, conn_id: int, data: bytes) -> None:
        self.send_nowait(conn_id, data)
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            raise WireError(f"nri mux: write failed: {exc}") from exc

    def send_nowait(self, conn_id: int, data: bytes) -> None:
        """Queue one whole message now, without waiting for the transport to drain (replies sent inline,
        from a sink: they are small, and the transport buffers what the socket does not take at once)."""
        if self.closed:
            raise WireError("nri mux: connection is closed")
        frames = encode_mux(conn_id, data)
        self.frames_out += (len(data) + MAX_SEND_CHUNK_BYTES - 1) // MAX_SEND_CHUNK_BYTES or 1
        try:
            self._writer.write(frames)
        except (ConnectionError, OSError) as exc:
            raise WireError(f"nri mux: write failed: {exc}") from exc

    async def run(self) -> None:
        """Read until EOF (returns) or a broken stream (raises WireError). A sink's WireError ends it too."""
        reader = self._reader
        header = MUX_HEADER
        hsize = header.size
        limit = self._max_frame
        sinks = self._sinks
        buf = bytearray()
        while True:
            try:
                chunk = await reader.read(_READ_CHUNK)
            except (ConnectionError, OSError) as exc:
                raise WireError(f"nri mux: read failed: {exc}") from exc
            if not chunk:
                if not buf:
                    return
                if len(buf) < hsize:
                    raise WireError(f"nri mux: connection closed inside a frame header ({len(buf)} of 8 bytes)")
                _conn, length = header.unpack_from(buf, 0)
                raise WireError(
                    f"nri mux: connection closed inside a frame ({len(buf) - hsize} of {length} bytes)"
                )
            buf += chunk
            pos, size = 0, len(buf)
            while size - pos >= hsize:
                conn_id, length = header.unpack_from(buf, pos)
                if length > limit:
                    raise WireError(
                        f"nri mux: frame for conn {conn_id} declares {length} bytes, over the {limit} limit"
                    )
                end = pos + hsize + length
                if end > size:
                    break
                payload = bytes(buf[pos + hsize:end])
                pos = end
                self.frames_in += 1
                sink = sinks.get(conn_id)
                if sink is None:
                    log.debug("nri mux: dropping %d bytes for unopened conn %d", length, conn_id)
                    continue
                sink(payload)
            if pos:
                del buf[:pos]

    async def close(self) -> None:
        """Close the socket and wait until it is gone, so nothing of this connection outlives us."""
        self._closed = True
        if not self._writer.is_closing():
            self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError) as exc:
            log.debug("nri mux: close: %s", exc)
